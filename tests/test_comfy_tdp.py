"""The TDP Upscaler's command on the comfy backend against native ComfyUI (opt-in: COMFYUI_PATH).

Native: ComfyUI's own nodes in this process on the tiny checkpoint and upscaler, as a user wires
stage 2: CheckpointLoaderSimple, LatentUpscaleModelLoader -> LTXVLatentUpsampler, the stage-1 audio
held by a zero noise mask -> LTXVConcatAVLatent, CFGGuider + RandomNoise + KSamplerSelect +
ManualSigmas (the stage-2 sigmas) -> SamplerCustomAdvanced.
Ours: the "tdp_upscale" command (workers/engine/comfy/tdp_job.py) in 1, 2 and 3 CPU ranks over gloo,
each rank loading the same file through ComfyUI's checkpoint loader (engine/comfy/model.py).

Bounds: the largest difference relative to the largest native magnitude, at most 1e-5. One tile with
overlap 0 runs the very model calls native runs and is expected to match bit for bit; several tiles
differ from native by design and must not depend on the number of ranks (only the summation order
of the all_reduce differs). The preview modes (NOTE [tdp preview]) are held against the full run of
the same grid, as tests/test_tdp_preview.py holds ltx-core's.

Run: COMFYUI_PATH=/path/to/ComfyUI python -m pytest tests/test_comfy_tdp.py -s (figures printed).
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root
from rank_job import local_job

from conftest import run_ranks, tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_model import CAPTION_CHANNELS
from ltx2_mgpu.workers.engine.comfy.tiled_cond_batch import check_conditioning
from ltx2_mgpu.workers.strategies import tiled

RELATIVE_TOLERANCE = 1e-5
# Stage-1 latents of a 9-frame 96x64 clip at 24 fps: video [1,128,2,2,3] -> upscaled [1,128,2,4,6];
# audio [1,8,9,16]. Random (not empty), so the upsampler and the held audio both matter.
VIDEO_SHAPE, AUDIO_SHAPE, FPS = (1, 128, 2, 2, 3), (1, 8, 9, 16), 24.0
UPSCALED_EXTENT = (4, 6)
POSITIVE_TOKENS, NEGATIVE_TOKENS = 11, 6
SEED, CFG, SAMPLER = 42, 3.0, "euler_ancestral"
# The official template's stage-2 sigmas.
STAGE2_SIGMAS = "0.909375, 0.725, 0.421875, 0.0"
# name: (tiles_h, tiles_w, overlap, with audio). 1x3 deals 3, 2+1 and 1+1+1 tiles to 1, 2 and 3 ranks.
CASES = {
    "one_tile": (1, 1, 0, True),
    "tiles_1x3": (1, 3, 1, True),
    "auto": (tiled.AUTO, tiled.AUTO, 1, True),
    "video_only_one_tile": (1, 1, 0, False),
}
# NOTE [tdp preview] cases, one step (where the preview's claim is exact): name -> (tiles, overlap, preview,
# preview_frames). 2x2 tiles overlapping by 2 cells on the 4 x 6 upscaled latent: the centre tile (the
# first of four that tie) keeps 2 cells no neighbour shares.
ONE_STEP = "0.909375, 0.0"
PREVIEW_GRID = (2, 2, 2, True)
PREVIEW_CASES = {
    "full_2x2": ("off", 9),
    "centre_tile": ("centre tile", 9),
    "first_frames_all": ("first frames", 9),  # 9 pixel frames: both latent frames, the whole clip
    "first_frame": ("first frames", 1),
    "centre_tile_first_frame": ("centre tile, first frames", 1),
}
# NOTE [time tiles] cases on a 17-frame clip at 24 fps: video [1,128,3,2,3] (3 latent frames), audio of
# 18 frames. name -> (tiles_h, tiles_w, overlap, with audio, tiles_t, sampler).
TIME_VIDEO_SHAPE, TIME_AUDIO_SHAPE = (1, 128, 3, 2, 3), (1, 8, 18, 16)
TIME_CASES = {
    # Spans [0, 2) and [2, 3) sharing nothing: each is stage 2 on its own frames and their audio. Euler
    # (no draws during the steps), so native on a span sees the same noise as the span in the full run.
    "time_spans": (1, 1, 0, True, 2, "euler"),
    # 2 x 2 tiles in space and time (frames [0, 2) and [1, 3)), blended: dealt 4, 2+2, 2+1+1 to the ranks.
    "time_spans_1x2": (1, 2, 1, True, 2, SAMPLER),
}
WORLD_SIZES = (1, 2, 3)
RANKS_TIMEOUT_S = 900.0


def stage1_inputs(video_shape=VIDEO_SHAPE, audio_shape=AUDIO_SHAPE) -> SimpleNamespace:
    """The same inputs in the test process and in every rank (seeded)."""
    positive = tiny_conditioning(POSITIVE_TOKENS, CAPTION_CHANNELS, seed=1, frame_rate=FPS)
    negative = tiny_conditioning(NEGATIVE_TOKENS, CAPTION_CHANNELS, seed=2, frame_rate=FPS)
    return SimpleNamespace(
        video=torch.randn(video_shape, generator=torch.Generator().manual_seed(3)),
        audio=torch.randn(audio_shape, generator=torch.Generator().manual_seed(4)),
        positive=positive,
        negative=negative,
    )


@pytest.fixture(scope="module")
def native(tiny) -> dict[bool, list[torch.Tensor]]:
    """Upsample + stage 2 with ComfyUI's own nodes: {with audio: [video, audio], without: [video]}."""
    with comfyui_in_process(comfyui_root()):
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_hunyuan, nodes_lt, nodes_lt_upsampler

        import nodes  # ComfyUI's nodes.py (its root is first on sys.path), not our nodes/ package

        folder_paths.add_model_folder_path("checkpoints", str(tiny.checkpoint.parent))
        folder_paths.add_model_folder_path("latent_upscale_models", str(tiny.spatial_upscaler.parent))
        model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(tiny.checkpoint.name)
        (upscale_model,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(tiny.spatial_upscaler.name)
        inputs = stage1_inputs()
        (video,) = nodes_lt_upsampler.LTXVLatentUpsampler.execute(
            {"samples": inputs.video}, upscale_model, vae
        )
        audio = {"samples": inputs.audio, "noise_mask": torch.zeros(AUDIO_SHAPE)}
        (av_latent,) = nodes_lt.LTXVConcatAVLatent.execute(video, audio)
        (sigmas,) = cs.ManualSigmas.execute(STAGE2_SIGMAS)
        (guider,) = cs.CFGGuider.execute(model, inputs.positive, inputs.negative, CFG)
        (noise,) = cs.RandomNoise.execute(SEED)
        (sampler,) = cs.KSamplerSelect.execute(SAMPLER)
        out = {}
        for with_audio, latent in ((True, av_latent), (False, video)):
            with torch.inference_mode():
                samples = cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0][
                    "samples"
                ]
            out[with_audio] = [t.clone() for t in (samples.unbind() if samples.is_nested else [samples])]
        return out


def tdp_args(
    inputs: SimpleNamespace,
    case: tuple,
    upscaler: Path,
    preview: str = "off",
    preview_frames: int = 9,
    sigmas: str = STAGE2_SIGMAS,
) -> dict:
    """The command's arguments as the node sends them (nodes/tdp_upscaler.py), the output slot sized by
    the command's own plan (a preview's is its region's). `case`: a CASES or TIME_CASES entry."""
    from ltx2_mgpu.workers.strategies.tdp_plan import plan_tdp
    from ltx2_mgpu.workers.wire.requests import TdpUpscale

    tiles_h, tiles_w, overlap, with_audio = case[:4]
    tiles_t, sampler = case[4:] if len(case) > 4 else (tiled.AUTO, SAMPLER)
    args = {
        "video": inputs.video, "audio": inputs.audio if with_audio else None,
        "positive": {"tensor": inputs.positive[0][0], "unprocessed": True},
        "negative": {"tensor": inputs.negative[0][0], "unprocessed": True},
        "frame_rate": FPS, "sigmas": torch.tensor([float(s) for s in sigmas.split(",")]),
        "sampler": sampler, "cfg": CFG, "seed": SEED, "tiles_t": tiles_t,
        "tiles_h": tiles_h, "tiles_w": tiles_w, "overlap": overlap, "upscaler": str(upscaler),
        "preview": preview, "preview_frames": preview_frames,
    }  # fmt: skip
    return {**args, "out_video": torch.zeros(plan_tdp(TdpUpscale.from_wire(args)).out_shape)}


def _tdp_ranks(rank: int, world_size: int, init_file: str, root: str, tiny_dir: str, out_dir: str) -> None:
    """One rank: ComfyUI's model side imported, the tiny file loaded through ComfyUI's loader, then
    the tdp_upscale command for every case; rank 0 saves each case's video and its grid."""
    import torch.distributed as dist

    from ltx2_mgpu.workers.embedded.tiny_model import CHECKPOINT_FILE_NAME, UPSCALER_FILE_NAME
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.rank.ops_tdp import tdp_upscale
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    device = torch.device("cpu")
    import_comfyui(check_comfyui_root(root), device)
    # Without its VAE, as the comfy backend's loader loads it: the statistics come from the file.
    model = ComfyModel.load(Path(tiny_dir) / CHECKPOINT_FILE_NAME, device, torch.float32, with_vae=False)
    job = local_job(rank, world_size, model)
    inputs = stage1_inputs()
    upscaler = Path(tiny_dir) / UPSCALER_FILE_NAME
    cases = {name: tdp_args(inputs, case, upscaler) for name, case in CASES.items()}
    for name, (preview, frames) in PREVIEW_CASES.items():
        cases[name] = tdp_args(inputs, PREVIEW_GRID, upscaler, preview, frames, ONE_STEP)
    long_clip = stage1_inputs(TIME_VIDEO_SHAPE, TIME_AUDIO_SHAPE)
    for name, case in TIME_CASES.items():
        cases[name] = tdp_args(long_clip, case, upscaler)
    for name, args in cases.items():
        t0 = time.perf_counter()
        result = tdp_upscale(job, args)
        if rank == 0:
            seconds = time.perf_counter() - t0
            torch.save(
                {"video": args["out_video"], "result": result, "seconds": seconds}, f"{out_dir}/{name}.pt"
            )
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tiny, tmp_path_factory) -> dict[int, dict[str, dict]]:
    """{world size: {case: what rank 0 saved}}."""
    out = {}
    for world_size in WORLD_SIZES:
        folder = tmp_path_factory.mktemp(f"tdp-comfy-{world_size}")
        root, tiny_dir = str(comfyui_root()), str(tiny.checkpoint.parent)
        run_ranks(_tdp_ranks, world_size, folder, root, tiny_dir, str(folder), timeout_s=RANKS_TIMEOUT_S)
        names = (*CASES, *PREVIEW_CASES, *TIME_CASES)
        out[world_size] = {name: torch.load(folder / f"{name}.pt") for name in names}
    return out


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) / float(b.abs().max())


@pytest.mark.comfyui
@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("case", ["one_tile", "video_only_one_tile"])
def test_one_tile_is_native_stage2(native, runs, world_size, case):
    with_audio = CASES[case][3]
    ours = runs[world_size][case]
    rel = relative(ours["video"], native[with_audio][0])
    print(f"\n[tdp comfy] {case}, {world_size} rank(s) vs native: rel {rel:.2e} ({ours['seconds']:.1f} s)")
    assert ours["result"]["tiles"] == [1, 1]
    assert ours["result"]["audio_frames"] == (AUDIO_SHAPE[2] if with_audio else None)
    assert rel <= RELATIVE_TOLERANCE


@pytest.mark.comfyui
@pytest.mark.parametrize("case", ["tiles_1x3", "auto"])
def test_tiled_result_does_not_depend_on_the_rank_count(native, runs, case):
    counts = {w: runs[w][case]["result"]["tiles"] for w in WORLD_SIZES}
    reference = runs[1][case]["video"]
    for world_size in WORLD_SIZES[1:]:
        rel = relative(runs[world_size][case]["video"], reference)
        print(f"\n[tdp comfy] {case} {counts[world_size]}: {world_size} ranks vs 1: rel {rel:.2e}")
        assert rel <= RELATIVE_TOLERANCE
    if case == "tiles_1x3":
        # The tiles really ran: several tiles are not the untiled stage (the comparison can fail).
        assert relative(reference, native[True][0]) > 100 * RELATIVE_TOLERANCE


def _preview_region(preview: str, frames: int):
    from ltx2_mgpu.workers.strategies.tdp_preview import preview_region

    b, c, f, h, w = VIDEO_SHAPE
    grid = tiled.make_grid(UPSCALED_EXTENT, PREVIEW_GRID[:2], PREVIEW_GRID[2])
    return preview_region(preview, frames, grid, (b, c, f, 2 * h, 2 * w))


@pytest.mark.comfyui
@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_centre_tile_preview_is_what_the_full_run_makes_there(runs, world_size):
    """NOTE [tdp preview] on ComfyUI's engine: the same noise and positions as the full run; after one
    step the tile's interior (cells no neighbour blends into) is the full run's, bit for bit on one rank,
    to float rounding when the group splits the tile (sequence parallel)."""
    full, centre = runs[world_size]["full_2x2"], runs[world_size]["centre_tile"]
    region = _preview_region("centre tile", 9)
    interior = region.tile.interior()
    assert interior.sum() == 2 and centre["result"]["preview_tile"] == region.tile.index == 0
    assert tuple(centre["video"].shape) == region.shape == (1, 128, 2, 3, 4)
    assert centre["result"]["audio_frames"] == AUDIO_SHAPE[2]
    mine, theirs = centre["video"][..., interior], region.cut(full["video"])[..., interior]
    rel = relative(mine, theirs)
    print(f"\n[tdp comfy] centre tile preview, {world_size} rank(s), interior vs full run: rel {rel:.2e}")
    assert torch.equal(mine, theirs) if world_size == 1 else rel <= RELATIVE_TOLERANCE
    assert not torch.equal(
        centre["video"], region.cut(full["video"])
    )  # shared cells are blended in the full run
    # One tile's tokens over the group: a rank's share of the tile, not its tiles of the grid.
    assert centre["result"]["video_tokens_on_rank"] == 2 * 3 * 4 // world_size


@pytest.mark.comfyui
@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_first_frames_previews(runs, world_size):
    """A first-frames preview over every frame is the full run itself; the centre tile of the first frame
    is the first-frame preview's there (its interior, after one step); audio as long as the clip."""
    run = runs[world_size]
    assert torch.equal(run["first_frames_all"]["video"], run["full_2x2"]["video"])
    first, corner = run["first_frame"], run["centre_tile_first_frame"]
    assert tuple(first["video"].shape) == (1, 128, 1, 4, 6)
    # One frame at 24 fps: round(1 / 24 * 25) = 1 audio latent frame (ComfyUI's rule).
    assert first["result"]["audio_frames"] == corner["result"]["audio_frames"] == 1
    region = _preview_region("centre tile, first frames", 1)
    interior = region.tile.interior()
    mine, theirs = corner["video"][..., interior], region.tile.cut(first["video"])[..., interior]
    rel = relative(mine, theirs)
    print(
        f"\n[tdp comfy] centre tile of the first frame, {world_size} rank(s), vs first frame: rel {rel:.2e}"
    )
    assert torch.equal(mine, theirs) if world_size == 1 else rel <= RELATIVE_TOLERANCE
    # Not the full run's first frame: there, frame 0 also attends to frame 1.
    assert relative(first["video"], run["full_2x2"]["video"][:, :, :1]) > 100 * RELATIVE_TOLERANCE


class SpanNoise:
    """ComfyUI's NOISE (seed, generate_noise) giving RandomNoise's noise of the whole clip cut to a span of
    frames and its audio: what that span sees in the full run."""

    def __init__(self, seed: int, whole_clip: dict, frames: slice, audio: slice) -> None:
        from comfy_extras.nodes_custom_sampler import Noise_RandomNoise

        self.seed = seed
        self.video, self.audio = Noise_RandomNoise(seed).generate_noise(whole_clip).unbind()
        self.frames, self.audio_frames = frames, audio

    def generate_noise(self, latent: dict) -> torch.Tensor:
        import comfy.nested_tensor

        cut = (self.video[:, :, self.frames], self.audio[:, :, self.audio_frames])
        return comfy.nested_tensor.NestedTensor(cut)


@pytest.fixture(scope="module")
def native_spans(tiny) -> list[tuple[tiled.AxisSpan, torch.Tensor]]:
    """For each span of the "time_spans" case: ComfyUI's own stage 2 (LTXVLatentUpsampler on the whole
    clip, then LTXVConcatAVLatent + SamplerCustomAdvanced) on just that span's frames with the audio of
    its frames (ComfyUI's context-window mapping), from the whole clip's noise."""
    _rows, _cols, overlap, _audio, tiles_t, sampler_name = TIME_CASES["time_spans"]
    with comfyui_in_process(comfyui_root()):
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_hunyuan, nodes_lt, nodes_lt_upsampler

        import nodes

        folder_paths.add_model_folder_path("checkpoints", str(tiny.checkpoint.parent))
        folder_paths.add_model_folder_path("latent_upscale_models", str(tiny.spatial_upscaler.parent))
        model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(tiny.checkpoint.name)
        (upscale_model,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(tiny.spatial_upscaler.name)
        inputs = stage1_inputs(TIME_VIDEO_SHAPE, TIME_AUDIO_SHAPE)
        (video,) = nodes_lt_upsampler.LTXVLatentUpsampler.execute(
            {"samples": inputs.video}, upscale_model, vae
        )
        whole = video["samples"]
        (whole_clip,) = nodes_lt.LTXVConcatAVLatent.execute(
            video, {"samples": inputs.audio, "noise_mask": torch.zeros(TIME_AUDIO_SHAPE)}
        )
        (sigmas,) = cs.ManualSigmas.execute(STAGE2_SIGMAS)
        (guider,) = cs.CFGGuider.execute(model, inputs.positive, inputs.negative, CFG)
        (sampler,) = cs.KSamplerSelect.execute(sampler_name)
        out = []
        for span in tiled.split_axis(whole.shape[2], tiles_t, overlap, "time"):
            heard = tiled.audio_span(span, whole.shape[2], TIME_AUDIO_SHAPE[2])
            audio = inputs.audio[:, :, heard.slice]
            (latent,) = nodes_lt.LTXVConcatAVLatent.execute(
                {"samples": whole[:, :, span.slice].clone()},
                {"samples": audio, "noise_mask": torch.zeros_like(audio)},
            )
            noise = SpanNoise(SEED, whole_clip, span.slice, heard.slice)
            with torch.inference_mode():
                samples = cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0][
                    "samples"
                ]
            out.append((span, samples.unbind()[0].clone()))
        return out


@pytest.mark.comfyui
@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_spans_of_frames_are_native_stage2_on_their_frames(native_spans, runs, world_size):
    """NOTE [time tiles]: spans that share no frame are each native stage 2 on the span's frames alone,
    hearing the audio of those frames and starting at position zero, with the noise the whole clip has
    there; the stage-1 audio comes back whole."""
    ours = runs[world_size]["time_spans"]
    assert ours["result"]["time_tiles"] == 2 and ours["result"]["tiles"] == [1, 1]
    assert ours["result"]["audio_frames"] == TIME_AUDIO_SHAPE[2]
    assert ours["result"]["largest_tile_tokens"] == 2 * 4 * 6
    for span, native_video in native_spans:
        rel = relative(ours["video"][:, :, span.slice], native_video)
        print(
            f"\n[tdp comfy] frames {span.start}-{span.end}, {world_size} rank(s) vs native on them: rel {rel:.2e}"
        )
        assert rel <= RELATIVE_TOLERANCE


@pytest.mark.comfyui
def test_spans_of_frames_blended_do_not_depend_on_the_rank_count(runs, native_spans):
    reference = runs[1]["time_spans_1x2"]["video"]
    for world_size in WORLD_SIZES[1:]:
        rel = relative(runs[world_size]["time_spans_1x2"]["video"], reference)
        print(f"\n[tdp comfy] 1x2 tiles x 2 spans of frames: {world_size} ranks vs 1: rel {rel:.2e}")
        assert rel <= RELATIVE_TOLERANCE
        assert runs[world_size]["time_spans_1x2"]["result"]["tiles_on_rank"] == len(range(0, 4, world_size))
    # Overlapping spans are blended: the shared frame is neither span's own result.
    assert relative(reference[:, :, 2:], native_spans[1][1]) > 100 * RELATIVE_TOLERANCE


@pytest.mark.parametrize("key", ["keyframe_idxs", "guide_attention_entries", "area", "mask"])
def test_conditioning_a_tile_cannot_carry_is_refused_with_what_to_do(key):
    conditioning = [[torch.zeros(1, 2, 4), {"frame_rate": FPS, key: torch.zeros(1)}]]
    with pytest.raises(ValueError, match=rf"negative conditioning carries '{key}'.*LTXVCropGuides"):
        check_conditioning(conditioning, "negative")
    check_conditioning([[torch.zeros(1, 2, 4), {"frame_rate": FPS}]], "negative")
