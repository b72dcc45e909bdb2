"""Our nodes on the tiny LTX-2.3, comfy backend, CPU workers, against ComfyUI's native nodes on the same
files and seed (opt-in: COMFYUI_PATH).

Native side as the official LTX-2.3 templates wire it (tests/ltx23_fixtures.py loads the files with
ComfyUI's loaders). Ours: the MGPU nodes on an MGPU_MODEL of the same checkpoint with 1 and 2 CPU ranks
in float32. The ranks run ComfyUI's own forward (gated attention, prompt AdaLN, cross-attention AdaLN
included), so what is left is the reduction order over split heads and tokens.
Bound: max |ours - native| <= 1e-5 x max |native|, per stream.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
from ltx23_fixtures import FPS, FRAMES, HEIGHT, WIDTH, comfy23  # noqa: F401

from conftest import assert_no_leaks, tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_ltx23 import AUDIO_DIM, VIDEO_DIM
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5
SEED = 42
# The template's stage-2 distilled sigmas (three steps).
SIGMAS = "0.909375, 0.725, 0.421875, 0.0"
RANKS = (1, 2)


def relative(ours: torch.Tensor, native: torch.Tensor) -> tuple[float, float]:
    assert ours.shape == native.shape, (ours.shape, native.shape)
    diff = float((ours.float() - native.float()).abs().max())
    return diff, diff / float(native.float().abs().max())


def streams(samples) -> list[torch.Tensor]:
    return [t.clone() for t in (samples.unbind() if samples.is_nested else [samples])]


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}ranks")
def group23(request, comfy23) -> Iterator[MGPUModel]:  # noqa: F811
    from comfyui_harness import comfyui_root

    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        comfy23.files.checkpoint,
        devices=f"cpu:{request.param}",
        dtype="float32",
        backend="comfy",
        comfyui_root=root.path,
        comfyui_version=root.version,
    )
    yield model
    get_manager().unload()
    assert_no_leaks()


def av_inputs(c) -> tuple[list, list, dict, torch.Tensor]:
    positive = tiny_conditioning(11, VIDEO_DIM + AUDIO_DIM, seed=1)
    negative = tiny_conditioning(6, VIDEO_DIM + AUDIO_DIM, seed=2)
    for cond in (positive, negative):
        del cond[0][1]["frame_rate"]  # LTXVConditioning adds it, as in the template
    positive, negative = c.lt.LTXVConditioning.execute(positive, negative, FPS)[:2]
    (video,) = c.lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
    (audio,) = c.lt_audio.LTXVEmptyLatentAudio.execute(FRAMES, FPS, 1, c.audio_vae)
    (latent,) = c.lt.LTXVConcatAVLatent.execute(video, audio)
    (sigmas,) = c.cs.ManualSigmas.execute(SIGMAS)
    return positive, negative, latent, sigmas


def report(node: str, ranks: int, found: list[tuple[float, float]], seconds: float) -> None:
    text = " | ".join(f"max|d| {d:.2e} rel {r:.2e}" for d, r in found)
    print(f"\n[LTX-2.3 comfy backend] {node} {ranks} ranks: {text} ({seconds:.1f} s)")


def test_sp_sampler_with_cfg_matches_native(comfy23, group23):  # noqa: F811
    from ltx2_mgpu.nodes.sp_sampler import LTX2SPSampler

    c = comfy23
    positive, negative, latent, sigmas = av_inputs(c)
    (guider,) = c.cs.CFGGuider.execute(c.model, positive, negative, 3.0)
    (noise,) = c.cs.RandomNoise.execute(SEED)
    (sampler,) = c.cs.KSamplerSelect.execute("euler_ancestral")
    with torch.inference_mode():
        native = streams(
            c.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]["samples"]
        )
    t0 = time.perf_counter()
    (out,) = LTX2SPSampler().sample(
        group23, positive, negative, latent, sigmas, "euler_ancestral", 3.0, 3.0, SEED
    )
    found = [relative(a, b) for a, b in zip(streams(out["samples"]), native)]
    report("SP Sampler (CFG 3)", group23.world_size, found, time.perf_counter() - t0)
    assert len(found) == 2 and all(r <= RELATIVE_TOLERANCE for _, r in found), found
