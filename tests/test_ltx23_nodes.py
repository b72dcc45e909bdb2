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
from comfyui_harness import comfyui_root
from ltx23_fixtures import FPS, FRAMES, HEIGHT, WIDTH, comfy23  # noqa: F401

from conftest import assert_no_leaks, rank_threads, tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_ltx23 import AUDIO_DIM, VIDEO_DIM
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5
SEED = 42
# The template's stage-2 distilled sigmas (three steps).
SIGMAS = "0.909375, 0.725, 0.421875, 0.0"
RANKS = (1, 2)
# tests/test_tdp_seams.py's bounds: the borders change like the rest of the frame (measured 1.003), and the
# tiles' departure from the one-tile run does not step at them (0.889).
SEAM_BOUND = 1.10
ERROR_SEAM_BOUND = 1.25


def relative(ours: torch.Tensor, native: torch.Tensor) -> tuple[float, float]:
    assert ours.shape == native.shape, (ours.shape, native.shape)
    diff = float((ours.float() - native.float()).abs().max())
    return diff, diff / float(native.float().abs().max())


def streams(samples) -> list[torch.Tensor]:
    return [t.clone() for t in (samples.unbind() if samples.is_nested else [samples])]


def start_group(files, ranks: int, dtype: str) -> Iterator[MGPUModel]:
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        files.checkpoint,
        devices=f"cpu:{ranks}",
        dtype=dtype,
        backend="comfy",
        comfyui_root=root.path,
        comfyui_version=root.version,
    )
    yield model
    get_manager().unload()
    assert_no_leaks()


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}ranks")
def group23(request, comfy23) -> Iterator[MGPUModel]:  # noqa: F811
    yield from start_group(comfy23.files, request.param, "float32")


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
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

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
    (out,) = sample_latent(group23, positive, negative, latent, sigmas, "euler_ancestral", 3.0, 3.0, SEED)
    found = [relative(a, b) for a, b in zip(streams(out["samples"]), native)]
    report("SP Sampler (CFG 3)", group23.world_size, found, time.perf_counter() - t0)
    assert len(found) == 2 and all(r <= RELATIVE_TOLERANCE for _, r in found), found


PROMPT = "A red fox runs through fresh snow at dawn, \\(slow motion\\), the camera follows low."


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}ranks-bf16")
def group23_bf16(request, comfy23) -> Iterator[MGPUModel]:  # noqa: F811
    yield from start_group(comfy23.files, request.param, "bfloat16")


def check_text_encode(comfy23, group: MGPUModel, label: str) -> None:  # noqa: F811
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    with torch.inference_mode():
        (native,) = comfy23.nodes.CLIPTextEncode().encode(comfy23.clip, PROMPT)
    t0 = time.perf_counter()
    (ours,) = encode_prompt(group, comfy23.gemma.name, PROMPT, "auto")
    found = relative(ours[0][0], native[0][0])
    report(f"Text Encode ({label} loader)", group.world_size, [found], time.perf_counter() - t0)
    assert ours[0][0].shape[-1] == VIDEO_DIM + AUDIO_DIM
    assert ours[0][1].get("unprocessed_ltxav_embeds") == native[0][1].get("unprocessed_ltxav_embeds")
    assert found[1] <= RELATIVE_TOLERANCE, found


def test_text_encode_matches_clip_text_encode(comfy23, group23_bf16):  # noqa: F811
    """MGPU Text Encode = LTXAVTextEncoderLoader + CLIPTextEncode on the same Gemma file and checkpoint
    (the 2.3 dual projection: video and audio widths concatenated), with a bfloat16 loader."""
    check_text_encode(comfy23, group23_bf16, "bfloat16")


def test_text_encode_with_a_float32_loader_matches_clip_text_encode(comfy23, group23):  # noqa: F811
    """ComfyUI holds Gemma and its projection in the Gemma file's dtype (bf16 here) whatever the flags
    (llama_detect); the comfy backend does too, whatever the MGPU Loader's weight_dtype (float32 here;
    before, Gemma ran in float32 and the CONDITIONING was 6.4e-2 off native's)."""
    check_text_encode(comfy23, group23, "float32")


def test_text_encode_with_the_gemma_lora_matches_lora_loader(comfy23, group23_bf16):  # noqa: F811
    """The templates' Gemma LoRA: MGPU Text Encode's lora_name = LoraLoader (clip strength 1) then
    CLIPTextEncode; the LoRA moves the conditioning well beyond the bound (so it is not left out)."""
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    c = comfy23
    _model, clip = c.nodes.LoraLoader().load_lora(c.model, c.clip, c.text_lora.name, 0.0, 1.0)
    with torch.inference_mode():
        (native,) = c.nodes.CLIPTextEncode().encode(clip, PROMPT)
        (plain,) = c.nodes.CLIPTextEncode().encode(c.clip, PROMPT)
    t0 = time.perf_counter()
    (ours,) = encode_prompt(group23_bf16, c.gemma.name, PROMPT, "auto", c.text_lora.name, 1.0)
    found = relative(ours[0][0], native[0][0])
    report("Text Encode + Gemma LoRA", group23_bf16.world_size, [found], time.perf_counter() - t0)
    assert found[1] <= RELATIVE_TOLERANCE, found
    assert relative(plain[0][0], native[0][0])[1] > 1e-3
    # Back without the LoRA: the resident encoder is reloaded clean.
    (again,) = encode_prompt(group23_bf16, c.gemma.name, PROMPT, "auto")
    assert relative(again[0][0], plain[0][0])[1] <= RELATIVE_TOLERANCE


@pytest.mark.parametrize("scale", [2.0, 1.5], ids=["x2-1.1", "x1.5"])
def test_tdp_upscaler_one_tile_matches_native_stage2(comfy23, group23, scale):  # noqa: F811
    """TDP Upscaler with one tile = LTXVLatentUpsampler (the template's x2 1.1, and the x1.5 one)
    then stage-2 sampling with CFGGuider; the audio passes through unchanged, as in the template."""
    c = comfy23
    path = c.files.spatial_upscaler_x2 if scale == 2.0 else c.files.spatial_upscaler_x15
    assert_tdp_one_tile_matches_native(c, group23, path, c.upscalers[scale], f"x{scale:g}", seed=5)


def assert_tdp_one_tile_matches_native(c, group, path, upscaler, label: str, seed: int) -> torch.Size:
    """Native: LTXVLatentUpsampler with `upscaler` then SamplerCustomAdvanced (CFGGuider 3, euler_ancestral);
    ours: the TDP Upscaler with `path` and one tile from a [1, 128, 3, 4, 6] video latent. Video within
    RELATIVE_TOLERANCE, audio unchanged. Returns the upscaled video's shape."""
    import folder_paths
    from comfy_extras import nodes_lt_upsampler

    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale

    folder_paths.add_model_folder_path("latent_upscale_models", str(path.parent))
    positive, negative, _, sigmas = av_inputs(c)
    generator = torch.Generator().manual_seed(seed)
    video = torch.randn(1, 128, 3, 4, 6, generator=generator)
    audio = torch.randn(1, 8, 18, 16, generator=generator)
    with torch.inference_mode():
        (upscaled,) = nodes_lt_upsampler.LTXVLatentUpsampler.execute({"samples": video}, upscaler, c.vae)
    (latent,) = c.lt.LTXVConcatAVLatent.execute(
        upscaled, {"samples": audio, "noise_mask": torch.zeros(audio.shape)}
    )
    (guider,) = c.cs.CFGGuider.execute(c.model, positive, negative, 3.0)
    (noise,) = c.cs.RandomNoise.execute(SEED)
    (sampler,) = c.cs.KSamplerSelect.execute("euler_ancestral")
    with torch.inference_mode():
        native = streams(
            c.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]["samples"]
        )
    t0 = time.perf_counter()
    stage1 = {"samples": c.NestedTensor((video, audio))}
    (out,) = tdp_upscale(
        group, positive, negative, stage1, path.name, "euler_ancestral", 3.0, SEED, "1x1", 0, sigmas=sigmas
    )
    ours = streams(out["samples"])
    assert ours[0].shape == native[0].shape
    found = relative(ours[0], native[0])
    report(f"TDP Upscaler {label} one tile", group.world_size, [found], time.perf_counter() - t0)
    assert found[1] <= RELATIVE_TOLERANCE, found
    assert torch.equal(ours[1], audio)
    return ours[0].shape


def test_tdp_upscaler_2x2_tiles_leave_no_seam(comfy23, group23):  # noqa: F811
    """2x2 tiles with the node's default overlap on the tiny LTX-2.3 (x2 1.1, stage 1 of 8 x 8 cells ->
    16 x 16): the seam ratio at the tiles' borders (NOTE [seam ratio] in workers/strategies/tile_seams.py)
    within tests/test_tdp_seams.py's bound, next to the one-tile run measured at the same edges."""
    import folder_paths

    from ltx2_mgpu.nodes.tdp_upscaler import DEFAULT_OVERLAP_CELLS, tdp_upscale
    from ltx2_mgpu.workers.strategies import tiled
    from ltx2_mgpu.workers.strategies.tile_seams import seam_report

    c = comfy23
    path = c.files.spatial_upscaler_x2
    folder_paths.add_model_folder_path("latent_upscale_models", str(path.parent))
    positive, negative, _, sigmas = av_inputs(c)
    generator = torch.Generator().manual_seed(11)
    stage1 = {"samples": torch.randn(1, 128, 2, 8, 8, generator=generator)}
    runs = {}
    for tiles, overlap in (("2x2", DEFAULT_OVERLAP_CELLS), ("1x1", 0)):
        (out,) = tdp_upscale(
            group23, positive, negative, stage1, path.name, "euler_ancestral", 1.0, SEED, tiles, overlap, sigmas=sigmas
        )  # fmt: skip
        runs[tiles] = out["samples"]
    grid = tiled.make_grid((16, 16), (2, 2), DEFAULT_OVERLAP_CELLS)
    ratio = seam_report(runs["2x2"], grid).ratio
    untiled = seam_report(runs["1x1"], grid).ratio
    error = seam_report(runs["2x2"] - runs["1x1"], grid).ratio
    print(f"\n[LTX-2.3] 2x2 tiles, overlap {DEFAULT_OVERLAP_CELLS}: seam ratio {ratio:.3f} (one tile at the same "
          f"edges {untiled:.3f}; on the tiling error {error:.3f})")  # fmt: skip
    assert ratio <= SEAM_BOUND and error <= ERROR_SEAM_BOUND


def test_tdp_upscaler_spans_of_frames_leave_no_seam_in_time(comfy23, group23):  # noqa: F811
    """A long clip cut into spans of frames by the node's time_tiles (NOTE [time tiles]), with audio: the
    seam ratio along time at the spans' shared frames within test_tdp_seams.py's bounds, beside the
    one-span run at the same edges; the stage-1 audio comes back whole, and a hard cut (overlap 0) does
    show (the metric can fail)."""
    import folder_paths

    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale
    from ltx2_mgpu.workers.strategies import tiled
    from ltx2_mgpu.workers.strategies.tile_seams import seam_report

    c = comfy23
    path = c.files.spatial_upscaler_x2
    folder_paths.add_model_folder_path("latent_upscale_models", str(path.parent))
    positive, negative, _, sigmas = av_inputs(c)
    generator = torch.Generator().manual_seed(12)
    video = torch.randn(1, 128, 12, 2, 2, generator=generator)  # 89 frames -> 12 x 4 x 4 upscaled
    audio = torch.randn(1, 8, 93, 16, generator=generator)
    stage1 = {"samples": c.NestedTensor((video, audio))}
    runs = {}
    for spans, overlap in ((2, 3), (1, 0), (2, 0)):
        (out,) = tdp_upscale(
            group23, positive, negative, stage1, path.name, "euler_ancestral", 1.0, SEED, "1x1", overlap,
            sigmas=sigmas, time_tiles=spans,
        )  # fmt: skip
        runs[spans, overlap] = streams(out["samples"])
        assert torch.equal(runs[spans, overlap][1], audio)
    grid = tiled.make_grid((4, 4), (1, 1), 3, frames=12, time_tiles=2)  # frames [0, 8) and [5, 12)
    blended, whole = runs[2, 3][0], runs[1, 0][0]
    ratio, untiled = seam_report(blended, grid).ratio, seam_report(whole, grid).ratio
    error = seam_report(blended - whole, grid).ratio
    hard = tiled.make_grid((4, 4), (1, 1), 0, frames=12, time_tiles=2)
    hard_error = seam_report(runs[2, 0][0] - whole, hard).ratio
    print(f"\n[LTX-2.3] 2 spans of frames, overlap 3: seam ratio along time {ratio:.3f} (one span at the same "
          f"edges {untiled:.3f}; on the tiling error {error:.3f}; hard cut's error {hard_error:.3f})")  # fmt: skip
    assert ratio <= SEAM_BOUND and error <= ERROR_SEAM_BOUND < hard_error


def test_vae_decode_exact_and_audio_decode_match_native(comfy23, group23):  # noqa: F811
    """Distributed VAE Decode, exact mode = VAEDecode; its audio output = LTXVAudioVAEDecode (the 2.3
    vocoder with bandwidth extension, 48 kHz), run by the last rank with ComfyUI's audio VAE: bit-exact
    at the same thread count."""
    from ltx2_mgpu.nodes.vae_decode import decode_latent

    c = comfy23
    generator = torch.Generator().manual_seed(3)
    video = torch.randn(1, 128, 3, 4, 6, generator=generator)
    audio = torch.randn(1, 8, 18, 16, generator=generator)
    with torch.inference_mode(), rank_threads(group23.world_size):  # the audio is decoded on one rank
        (native_image,) = c.nodes.VAEDecode().decode(c.vae, {"samples": video})
        (native_audio,) = c.lt_audio.LTXVAudioVAEDecode.execute({"samples": audio}, c.audio_vae)
    (latent,) = c.lt.LTXVConcatAVLatent.execute({"samples": video}, {"samples": audio})
    t0 = time.perf_counter()
    image, ours_audio = decode_latent(group23, latent, mode="exact")
    found = [relative(image, native_image), relative(ours_audio["waveform"], native_audio["waveform"])]
    report("VAE Decode exact | audio", group23.world_size, found, time.perf_counter() - t0)
    assert ours_audio["sample_rate"] == native_audio["sample_rate"] == 48000
    assert all(r <= RELATIVE_TOLERANCE for _, r in found), found
    assert torch.equal(ours_audio["waveform"], native_audio["waveform"])


def test_vae_encode_matches_native(comfy23, group23):  # noqa: F811
    from ltx2_mgpu.nodes.vae_encode import encode_pixels

    c = comfy23
    pixels = torch.rand(17, 128, 96, 3, generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        (native,) = c.nodes.VAEEncode().encode(c.vae, pixels)
    t0 = time.perf_counter()
    (ours,) = encode_pixels(group23, pixels)
    found = relative(ours["samples"], native["samples"])
    report("VAE Encode", group23.world_size, [found], time.perf_counter() - t0)
    assert found[1] <= RELATIVE_TOLERANCE, found


def test_sp_sampler_with_the_distilled_lora_matches_lora_loader(comfy23):  # noqa: F811
    """The template's distilled LoRA at 0.5: MGPU Loader's lora_name (fused in the ranks through ComfyUI's
    ModelPatcher) = LoraLoaderModelOnly on the native model; 2 CPU ranks, CFG 1 as the template."""
    from ltx2_mgpu.nodes.mgpu_lora import lora_entry
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    c = comfy23
    (patched,) = c.nodes.LoraLoaderModelOnly().load_lora_model_only(c.model, c.lora.name, 0.5)
    positive, negative, latent, sigmas = av_inputs(c)
    (guider,) = c.cs.CFGGuider.execute(patched, positive, negative, 1.0)
    (noise,) = c.cs.RandomNoise.execute(SEED)
    (sampler,) = c.cs.KSamplerSelect.execute("euler")
    with torch.inference_mode():
        native = streams(
            c.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]["samples"]
        )
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        c.files.checkpoint, devices="cpu:2", dtype="float32", backend="comfy",
        loras=lora_entry(str(c.files.checkpoint), c.lora.name, 0.5),
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    try:
        t0 = time.perf_counter()
        (out,) = sample_latent(model, positive, negative, latent, sigmas, "euler", 1.0, 1.0, SEED)
    finally:
        get_manager().unload()
        assert_no_leaks()
    found = [relative(a, b) for a, b in zip(streams(out["samples"]), native)]
    report("SP Sampler + distilled LoRA 0.5", model.world_size, found, time.perf_counter() - t0)
    assert all(r <= RELATIVE_TOLERANCE for _, r in found), found
    # The LoRA changes the result: the comparison would catch a LoRA left out.
    with torch.inference_mode():
        (plain_guider,) = c.cs.CFGGuider.execute(c.model, positive, negative, 1.0)
        plain = streams(
            c.cs.SamplerCustomAdvanced.execute(noise, plain_guider, sampler, sigmas, latent)[0]["samples"]
        )
    assert relative(plain[0], native[0])[1] > 1e-3


def test_tdp_upscaler_with_a_temporal_upscaler_matches_native_stage2(comfy23, group23, tmp_path):  # noqa: F811
    """A temporal x2 latent upscaler (ComfyUI's LatentUpsampler with temporal_upsample): the TDP stage
    doubles the frames (F latent frames -> 2F - 1) as LTXVLatentUpsampler does and samples them like the
    native stage 2; the audio passes through unchanged."""
    import folder_paths
    from comfy_extras import nodes_hunyuan

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import write_tiny_temporal_upsampler

    c = comfy23
    path = write_tiny_temporal_upsampler(tmp_path / "tiny-temporal-upscaler-x2.safetensors")
    folder_paths.add_model_folder_path("latent_upscale_models", str(path.parent))
    (upscaler,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(path.name)
    shape = assert_tdp_one_tile_matches_native(c, group23, path, upscaler, "temporal x2", seed=6)
    assert tuple(shape[2:]) == (2 * 3 - 1, 4, 6)  # frames doubled less the first, size kept


def write_upscaler_variant(source, path, variant: str):
    """The x1.5 upscaler written another way than make-tiny writes it, as ComfyUI still reads it:
    "minimal config": only the config keys that differ from LatentUpsampler.from_config's defaults
    (the reader must fill in the same defaults), float32 weights, no other metadata; "extra keys":
    the config's keys in reverse order with keys ComfyUI ignores, more metadata entries, bf16."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(source), framework="pt") as f:
        tensors = {key: f.get_tensor(key) for key in f.keys()}
        config = json.loads(f.metadata()["config"])
    defaults = {"in_channels": 4, "mid_channels": 128, "num_blocks_per_stage": 4, "dims": 2,
                "spatial_upsample": True, "temporal_upsample": False, "spatial_scale": 2.0,
                "rational_resampler": False}  # fmt: skip
    if variant == "minimal config":
        config = {k: v for k, v in config.items() if k in defaults and defaults[k] != v}
        tensors, metadata = {k: v.float() for k, v in tensors.items()}, {}
    else:
        config = {"_class_name": "LatentUpsampler", "_diffusers_version": "0.33.1",
                  **dict(reversed(list(config.items())))}  # fmt: skip
        tensors = {k: v.to(torch.bfloat16) for k, v in tensors.items()}
        metadata = {"format": "pt", "model_version": "2.3.0", "note": "written another way"}
    save_file(tensors, str(path), metadata={**metadata, "config": json.dumps(config)})
    return path


@pytest.mark.parametrize("variant", ["minimal config", "extra keys"])
def test_tdp_upscaler_on_an_upscaler_file_written_another_way(comfy23, group23, tmp_path, variant):  # noqa: F811
    """A file LatentUpscaleModelLoader accepts gives the TDP Upscaler native's result (one tile), however
    its config and metadata are written."""
    import folder_paths
    from comfy_extras import nodes_hunyuan

    c = comfy23
    path = write_upscaler_variant(
        c.files.spatial_upscaler_x15, tmp_path / f"x15-{variant.replace(' ', '-')}.safetensors", variant
    )
    folder_paths.add_model_folder_path("latent_upscale_models", str(path.parent))
    (upscaler,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(path.name)
    shape = assert_tdp_one_tile_matches_native(c, group23, path, upscaler, f"x1.5 {variant}", seed=7)
    assert tuple(shape[2:]) == (3, 6, 9)  # ceil(1.5 x 4), ceil(1.5 x 6)
