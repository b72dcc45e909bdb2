"""What the TDP tests share: the tiny model's stage in this process, node inputs, a stand-in ComfyUI."""

from __future__ import annotations

import types

import torch
from sp_reference import load_in_process

from conftest import NestedStandIn, tiny_conditioning
from ltx2_mgpu.workers.engine.ltxcore import tdp_job, tdp_upsample
from ltx2_mgpu.workers.engine.ltxcore.conditioning import context_from_features
from ltx2_mgpu.workers.strategies import tiled
from ltx2_mgpu.workers.strategies.tdp_preview import PreviewRegion

CAPTION = 64  # the tiny model's caption channels
DEFAULT_SIGMAS = (0.625, 0.4, 0.0)  # the node's default stage-2 schedule
ONE_STEP = (0.625, 0.0)


def make_stage(
    tiny, stage1_shape: tuple[int, ...], seed: int = 11, cfg: float = 3.0
) -> types.SimpleNamespace:
    """The tiny model loaded here (0.2 s), a random stage-1 latent upsampled by the tiny upsampler,
    stage-1 audio, text contexts and the job's settings."""
    cpu = torch.device("cpu")
    model = load_in_process(tiny.checkpoint)
    g = torch.Generator().manual_seed(seed)
    stage1 = torch.randn(stage1_shape, generator=g)
    upsampler = tdp_upsample.spatial_upsampler(model, str(tiny.spatial_upscaler), cpu)
    statistics = tdp_upsample.video_statistics(model, cpu)
    video = tdp_upsample.upsample_video(stage1, upsampler, statistics, torch.float32)
    contexts = [
        context_from_features(c[0][0], model.processor, cpu, torch.float32)
        for c in (tiny_conditioning(9, CAPTION, seed=1), tiny_conditioning(6, CAPTION, seed=2))
    ]
    audio = torch.randn(1, 8, 7, 16, generator=g)
    job = {"cfg": cfg, "frame_rate": 24.0, "seed": 5, "sampler": "euler_ancestral", "sigmas": torch.tensor(DEFAULT_SIGMAS)}  # fmt: skip
    return types.SimpleNamespace(
        model=model, stage1=stage1, video=video, audio=audio, contexts=contexts, job=job
    )


def run_tiled(
    stage, grid: tiled.TileGrid, audio: torch.Tensor | None, region: PreviewRegion | None = None, **job
) -> torch.Tensor:
    """The TDP stage on one rank in this process (`job` overrides the stage's settings)."""
    return tdp_job.denoise_upscaled(
        stage.model, stage.video, audio, *stage.contexts, grid, {**stage.job, **job},
        rank=0, world_size=1, device=torch.device("cpu"), region=region,
    )  # fmt: skip


def node_inputs(stage, tiny) -> tuple[dict, torch.Tensor]:
    """TDP Upscaler keyword inputs for the stage (audio+video latent, 2x2 tiles, overlap 2) and the
    audio tensor inside the latent."""
    audio = stage.audio.clone()
    frames = stage.stage1.shape[2]
    latent = {
        "samples": NestedStandIn([stage.stage1.clone(), audio]),
        "noise_mask": NestedStandIn([torch.ones(1, 1, frames, 1, 1), torch.ones_like(audio)]),
        "downscale_ratio_spacial": 32,
    }
    kwargs = dict(
        positive=tiny_conditioning(9, CAPTION, seed=1, frame_rate=24.0),
        negative=tiny_conditioning(6, CAPTION, seed=2, frame_rate=24.0),
        latent=latent,
        upscale_model=str(tiny.spatial_upscaler),
        sampler_name="euler_ancestral",
        cfg=3.0,
        seed=5,
        tiles="2x2",
        overlap=2,
        sigmas=torch.tensor(DEFAULT_SIGMAS),
    )
    return kwargs, audio
