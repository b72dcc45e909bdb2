"""Distributed VAE Encode: the latent of ltx-core's single-process encode, whatever the number of ranks.

Tolerance: max abs difference at most 1e-4 (latent values about +-4, std about 0.9) against ltx-core's
VideoEncoder on the same frames, fp32 on CPU; measured at most 6e-6 for 1, 2 and 3 ranks, with and
without chunks (convolutions over slabs of other sizes round differently). With one rank and one
chunk the latent is ltx-core's bit for bit. Against ComfyUI's native VAEEncode (opt-in): the same
shape and keys, at most 1e-4 (measured 5.5e-6; ltx-core vs native 2.7e-6).
"""

from __future__ import annotations

import itertools
import time
import types
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root
from ltx_core.model.video_vae import VideoEncoderConfigurator

from conftest import assert_no_leaks
from ltx2_mgpu.nodes.vae_encode import crop_like_native, encode_pixels
from ltx2_mgpu.workers.embedded.tiny_model import tiny_checkpoint_config
from ltx2_mgpu.workers.engine.ltxcore import checkpoint
from ltx2_mgpu.workers.engine.ltxcore.encoder_reach import EncoderReach, encoder_reach
from ltx2_mgpu.workers.engine.ltxcore.vae_slab_encode import unsupported_reason
from ltx2_mgpu.workers.group import preflight
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.rank.ops_vae_encode import latent_shape
from ltx2_mgpu.workers.strategies.vae_encode_plan import AUTO_CHUNK_PIXELS, HEIGHT, WIDTH, make_plan

TOLERANCE = 1e-4
# LTX-2's video encoder (ComfyUI's VideoVAE version 2 default, the released 19B layout).
LTX2_ENCODER_BLOCKS = [
    ["res_x", {"num_layers": 4}],
    ["compress_space_res", {"multiplier": 2}],
    ["res_x", {"num_layers": 6}],
    ["compress_time_res", {"multiplier": 2}],
    ["res_x", {"num_layers": 6}],
    ["compress_all_res", {"multiplier": 2}],
    ["res_x", {"num_layers": 2}],
    ["compress_all_res", {"multiplier": 2}],
    ["res_x", {"num_layers": 2}],
]


def frames(count: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """An IMAGE [count, height, width, 3] in 0..1."""
    return torch.rand(count, height, width, 3, generator=torch.Generator().manual_seed(seed))


def ltx_encode(encoder, image: torch.Tensor) -> torch.Tensor:
    """ltx-core's single-process encode of an IMAGE, mapped as ComfyUI's VAE.process_input does."""
    with torch.inference_mode():
        return encoder((image * 2.0 - 1.0).permute(3, 0, 1, 2).unsqueeze(0).contiguous())


# ----- the plan (pure) ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fhw", "world_size"),
    list(itertools.product([(1, 1, 1), (5, 3, 5), (16, 34, 60), (9, 7, 2)], [1, 2, 3, 8])),
)
def test_plan_partitions_cells_and_frames(fhw, world_size):
    plan = make_plan(fhw, world_size, temporal_frames=8)
    f, h, w = fhw
    assert plan.axis == (HEIGHT if h >= w else WIDTH)
    cells = h if plan.axis == HEIGHT else w
    assert plan.active_ranks == min(world_size, cells)
    assert plan.slabs[0][0] == 0 and plan.slabs[-1][1] == cells
    assert all(a[1] == b[0] for a, b in itertools.pairwise(plan.slabs))
    assert max(b - a for a, b in plan.slabs) - min(b - a for a, b in plan.slabs) <= 1
    assert plan.neighbours(0)[0] is None and plan.neighbours(plan.active_ranks - 1)[1] is None
    # chunk 0: frame 0 and 8 more; then 8 each; the latent frames they give partition [0, F).
    assert plan.chunks[0] == (0, min(9, plan.frames)) and plan.chunks[-1][1] == plan.frames
    latent = [plan.latent_frames(c) for c in plan.chunks]
    assert latent[0].start == 0 and latent[-1].stop == f
    assert all(a.stop == b.start for a, b in itertools.pairwise(latent))
    assert all((b - a) % 8 == 0 for a, b in plan.chunks[1:])


def test_auto_chunks_follow_the_slab_size():
    one = make_plan((16, 34, 60), 1)  # 1088 x 1920, 121 frames
    eight = make_plan((16, 34, 60), 8)
    assert len(one.chunks) > len(eight.chunks) >= 1
    slab_pixels = 34 * 32 * 8 * 32  # the thickest of 8 slabs of 60 columns: 8 cells
    assert eight.chunks[1][1] - eight.chunks[1][0] == AUTO_CHUNK_PIXELS // slab_pixels // 8 * 8
    assert len(make_plan((3, 4, 4), 2).chunks) == 1, "a short clip is one chunk"
    with pytest.raises(ValueError, match="temporal_size 12 is not allowed"):
        make_plan((3, 4, 4), 2, 12)


# ----- the encoder's reach (why slabs, not tiles) -------------------------------------------------
def measured_reach(encoder, cell: tuple[int, int, int], fhw_px: tuple[int, int, int]) -> EncoderReach:
    """The input pixels that change one latent cell, by its gradient (random weights: no zeros)."""
    x = torch.randn(1, 3, *fhw_px, requires_grad=True)
    t, h, w = cell
    encoder(x)[0, :, t, h, w].sum().backward()
    support = (x.grad[0].abs().sum(0) > 0).nonzero()
    first_frame = 0 if t == 0 else 8 * t - 7
    assert int(support[:, 0].max()) == 8 * t, "causal: no frame after the cell's own"
    sides = [32 * h - int(support[:, 1].min()), int(support[:, 1].max()) - 32 * h - 31]
    sides += [32 * w - int(support[:, 2].min()), int(support[:, 2].max()) - 32 * w - 31]
    assert len(set(sides)) == 1, sides
    return EncoderReach(spatial_px=sides[0], temporal_frames=first_frame - int(support[:, 0].min()))


def test_reach_read_off_the_modules_is_the_measured_one(tiny_path):
    encoder = checkpoint.load_video_encoder(tiny_path, "cpu", torch.float32)
    assert encoder_reach(encoder) == measured_reach(encoder, (5, 2, 2), (41, 160, 160))
    assert encoder_reach(encoder) == EncoderReach(64, 32)
    assert unsupported_reason(encoder) is None
    config = tiny_checkpoint_config()
    config["vae"]["encoder_blocks"] = LTX2_ENCODER_BLOCKS
    with torch.device("meta"):
        assert encoder_reach(VideoEncoderConfigurator.from_config(config)) == EncoderReach(488, 218)
        config["vae"]["norm_layer"] = "group_norm"
        grouped = VideoEncoderConfigurator.from_config(config)
    assert encoder_reach(grouped) is None and "not all local" in unsupported_reason(grouped)


# ----- cropping as native VAEEncode, and what is refused -------------------------------------------
def test_crop_like_native():
    image = frames(35, 101, 170)
    kept = crop_like_native(torch.cat([image, image[..., :1]], dim=-1))  # RGBA: alpha dropped
    assert torch.equal(kept, image[:33, 2:98, 5:165])
    assert tuple(crop_like_native(frames(1, 32, 32)).shape) == (1, 32, 32, 3)
    assert latent_shape((33, 96, 160, 3)) == (1, 128, 5, 3, 5)


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (torch.rand(64, 64, 3), r"must be an IMAGE \[frames, height, width, 3\], got \(64, 64, 3\)"),
        (torch.rand(0, 64, 64, 3), "holds no frames"),
        (torch.rand(9, 31, 64, 3), "64 x 31 px are smaller than one latent cell"),
        (torch.rand(9, 64, 64, 1), "has 1 channel.*needs RGB"),
        (torch.zeros(9, 64, 64, 3, dtype=torch.uint8), "floats in 0..1"),
        (torch.full((9, 64, 64, 3), float("nan")), r"NaN or infinite values \(first in frame 0\)"),
    ],
)
def test_bad_frames_are_refused_before_any_worker(manager, tiny_path, image, message):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with pytest.raises(ValueError, match=message):
        encode_pixels(model, image)
    assert manager.group is None


# ----- through the worker group ------------------------------------------------------------------
CASES = {
    # 35 x 100 x 164 -> 33 x 96 x 160: slabs along the width (5 cells), cropped as native.
    "landscape": (frames(35, 100, 164, seed=1), lambda im: im[:33, 2:98, 2:162]),
    # 2 x 2 cells: on 3 ranks the third has no slab.
    "small": (frames(17, 64, 64, seed=2), lambda im: im),
}


def test_encode_equals_ltx_core_for_1_2_3_ranks(manager, tiny_path):
    encoder = checkpoint.load_video_encoder(tiny_path, "cpu", torch.float32)
    references = {name: ltx_encode(encoder, crop(image)) for name, (image, crop) in CASES.items()}
    errors, seconds = {}, {}
    for ranks in (1, 2, 3):
        model = MGPUModel.create(tiny_path, devices=f"cpu:{ranks}", dtype="float32")
        for (name, (image, _)), temporal in itertools.product(CASES.items(), (0, 8)):
            start = time.perf_counter()
            (latent,) = encode_pixels(model, image, temporal)
            seconds[(ranks, name, temporal)] = time.perf_counter() - start
            samples, reference = latent["samples"], references[name]
            assert set(latent) == {"samples"}
            assert samples.shape == reference.shape and samples.dtype == torch.float32
            assert samples.device.type == "cpu" and samples.is_contiguous()
            errors[(ranks, name, temporal)] = float((samples - reference).abs().max())
            if ranks == 1 and temporal == 0:
                assert torch.equal(samples, reference), "one rank, one chunk: ltx-core's encode"
    print("max abs error vs ltx-core:", {k: f"{v:.1e}" for k, v in errors.items()})
    print("seconds (first includes the group start):", {k: f"{v:.2f}" for k, v in seconds.items()})
    assert max(errors.values()) <= TOLERANCE, errors


def test_cancel_and_small_shared_memory_keep_the_group(manager, tiny_path, fake_comfy, monkeypatch):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with monkeypatch.context() as patch:  # a small /dev/shm (Docker's default is 64 MiB)
        patch.setattr(preflight.os, "statvfs", lambda _: types.SimpleNamespace(f_bavail=1, f_frsize=2**20))
        with pytest.raises(
            ValueError, match=r"needs 0\.1 GiB of shared memory \(/dev/shm\) but 0\.0 GiB is free"
        ):
            encode_pixels(model, frames(33, 512, 512))
    assert manager.group is None
    image = frames(65, 64, 64)  # 9 chunks of 8 frames: every rank stops at a chunk boundary
    encode_pixels(model, image[:1])  # starts the group, loads the encoder
    state, interrupted = fake_comfy
    state["interrupt"] = True  # Cancel pressed: the client passes it on within one poll (50 ms)
    with pytest.raises(interrupted):
        encode_pixels(model, image, 8)
    assert manager.group is not None and manager.group.is_alive
    (latent,) = encode_pixels(model, image, 8)
    assert torch.isfinite(latent["samples"]).all()


# ----- on the device machine ---------------------------------------------------------------------
# cuDNN convolutions may run in TF32 and pick other algorithms per slab size: GPU results are close
# to the CPU reference, not equal.
GPU_TOLERANCE = 3e-2


@pytest.mark.gpu
@pytest.mark.parametrize(
    "devices",
    [
        "cuda:0,cuda:0",  # ranks sharing a GPU: gloo, edge rows through host memory
        pytest.param("cuda:0,cuda:1", marks=pytest.mark.multigpu),  # NCCL point-to-point
    ],
)
def test_gpu_encode_matches_cpu_reference(manager, tiny_path, devices):
    image, crop = CASES["landscape"]
    reference = ltx_encode(checkpoint.load_video_encoder(tiny_path, "cpu", torch.float32), crop(image))
    (one,) = encode_pixels(MGPUModel.create(tiny_path, devices="cuda:0", dtype="float32"), image, 8)
    (many,) = encode_pixels(MGPUModel.create(tiny_path, devices=devices, dtype="float32"), image, 8)
    assert many["samples"].shape == reference.shape
    assert float((many["samples"] - one["samples"]).abs().max()) <= GPU_TOLERANCE
    assert float((one["samples"] - reference).abs().max()) <= GPU_TOLERANCE


# ----- against native ComfyUI (opt-in: COMFYUI_PATH, ComfyUI's Python) ----------------------------
@pytest.fixture(scope="module")
def native_vae(tiny) -> Iterator[SimpleNamespace]:
    """ComfyUI's VAE of our tiny checkpoint, loaded by CheckpointLoaderSimple, and its VAEEncode."""
    with comfyui_in_process(comfyui_root()):
        import folder_paths

        import nodes  # ComfyUI's nodes.py (its root is first on sys.path), not our nodes/ package

        folder_paths.add_model_folder_path("checkpoints", str(tiny.checkpoint.parent))
        _model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(tiny.checkpoint.name)
        yield SimpleNamespace(vae=vae, encode=nodes.VAEEncode().encode)


@pytest.mark.comfyui
def test_encode_matches_native_vae_encode(native_vae, tiny):
    image = frames(36, 101, 170, seed=3)  # cropped to 33 x 96 x 160 by both
    with torch.inference_mode():
        (native,) = native_vae.encode(native_vae.vae, image)
    try:
        model = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32")
        (ours,) = encode_pixels(model, image, 8)
    finally:
        get_manager().unload()
        assert_no_leaks()
    assert set(ours) == set(native) and ours["samples"].shape == native["samples"].shape
    error = float((ours["samples"] - native["samples"]).abs().max())
    print(
        f"\n[parity] Distributed VAE Encode (2 CPU ranks, chunks of 8) vs native VAEEncode: max|d| {error:.1e}"
    )
    assert error <= TOLERANCE
