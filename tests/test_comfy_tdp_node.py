"""The TDP Upscaler node on an MGPU_MODEL with backend "comfy" (2 CPU ranks, one tile, overlap 0)
against native ComfyUI stage 2 (tests/test_comfy_tdp.py has the native side and the rank-level cases)."""

from __future__ import annotations

import pytest
import torch
from comfyui_harness import comfyui_root
from test_comfy_tdp import AUDIO_SHAPE, CFG, SAMPLER, SEED, STAGE2_SIGMAS, relative, stage1_inputs
from test_comfyui_native_parity import comfy  # noqa: F401

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui


def test_node_one_tile_on_the_comfy_backend_is_native_stage2(comfy, tiny):  # noqa: F811
    import folder_paths
    from comfy_extras import nodes_custom_sampler as cs
    from comfy_extras import nodes_hunyuan, nodes_lt_upsampler

    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale

    folder_paths.add_model_folder_path("latent_upscale_models", str(tiny.spatial_upscaler.parent))
    inputs = stage1_inputs()
    (upscale_model,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(tiny.spatial_upscaler.name)
    (video,) = nodes_lt_upsampler.LTXVLatentUpsampler.execute(
        {"samples": inputs.video}, upscale_model, comfy.vae
    )
    audio = {"samples": inputs.audio, "noise_mask": torch.zeros(AUDIO_SHAPE)}
    (latent,) = comfy.lt.LTXVConcatAVLatent.execute(video, audio)
    (sigmas,) = cs.ManualSigmas.execute(STAGE2_SIGMAS)
    (guider,) = cs.CFGGuider.execute(comfy.model, inputs.positive, inputs.negative, CFG)
    with torch.inference_mode():
        native = cs.SamplerCustomAdvanced.execute(
            cs.RandomNoise.execute(SEED)[0], guider, cs.KSamplerSelect.execute(SAMPLER)[0], sigmas, latent
        )[0]["samples"].unbind()
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cpu:2", dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    stage1 = {"samples": comfy.NestedTensor((inputs.video, inputs.audio))}
    try:
        (out,) = tdp_upscale(
            model, inputs.positive, inputs.negative, stage1, tiny.spatial_upscaler.name, SAMPLER, CFG, SEED,
            "1x1", 0, sigmas=sigmas,
        )  # fmt: skip
    finally:
        get_manager().unload()
        assert_no_leaks()
    ours = out["samples"].tensors
    rel = relative(ours[0], native[0])
    print(f"\n[tdp node, comfy backend, 2 ranks] one tile vs native: rel {rel:.2e}")
    assert rel <= 1e-5
    assert torch.equal(ours[1], inputs.audio)


def test_node_previews_on_the_comfy_backend(comfy, tiny):  # noqa: F811
    """The preview modes through the node on ComfyUI's engine (2 ranks): the LATENT of the region only,
    the centre tile's interior the full run's after one step (the tile split over both ranks), the
    first-frames preview's audio as long as its clip; nothing left behind."""
    import folder_paths
    from test_comfy_tdp import ONE_STEP, PREVIEW_GRID

    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale
    from ltx2_mgpu.workers.strategies import tiled

    folder_paths.add_model_folder_path("latent_upscale_models", str(tiny.spatial_upscaler.parent))
    inputs = stage1_inputs()
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cpu:2", dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    stage1 = {"samples": comfy.NestedTensor((inputs.video, inputs.audio))}
    sigmas = torch.tensor([float(s) for s in ONE_STEP.split(",")])
    tiles = f"{PREVIEW_GRID[0]}x{PREVIEW_GRID[1]}"

    def upscale(preview: str, frames: int = 9):
        (out,) = tdp_upscale(
            model, inputs.positive, inputs.negative, stage1, tiny.spatial_upscaler.name, SAMPLER, CFG, SEED,
            tiles, PREVIEW_GRID[2], sigmas=sigmas, preview=preview, preview_frames=frames,
        )  # fmt: skip
        return out["samples"].tensors

    try:
        full, centre, first = upscale("off"), upscale("centre tile"), upscale("first frames", 1)
    finally:
        get_manager().unload()
        assert_no_leaks()
    tile = tiled.make_grid((4, 6), PREVIEW_GRID[:2], PREVIEW_GRID[2]).centre_tile()
    interior = tile.interior()
    assert centre[0].shape == (1, 128, 2, 3, 4) and centre[1] is stage1["samples"].tensors[1]
    rel = relative(centre[0][..., interior], tile.cut(full[0])[..., interior])
    print(f"\n[tdp node preview, comfy backend, 2 ranks] centre tile interior vs full run: rel {rel:.2e}")
    assert rel <= 1e-5
    assert first[0].shape == (1, 128, 1, 4, 6) and torch.equal(first[1], inputs.audio[:, :, :1])
