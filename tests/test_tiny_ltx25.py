"""The tiny LTX-2.5 split files (`ltx2-mgpu make-tiny --family 2.5`) read by ComfyUI's own loaders
and run by its native nodes, in this process on CPU (opt-in: COMFYUI_PATH).

The nodes and files are those of the official video_ltx2_5_t2v template: UNETLoader (bf16 and the
int8 convrot transformer), VAELoader (video VAE with the diffusion decoder; audio VAE),
LatentUpscaleModelLoader; the Gemma 4 text encoder through ComfyUI's own LTX text-encoder class
(CLIPLoader builds Gemma from the fixed 12B config, so the tiny widths go through
tiny_gemma4.comfy_text_encoder_target; ComfyUI's detection still names the file Gemma 4 12B).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root

pytestmark = pytest.mark.comfyui

WIDTH, HEIGHT, FRAMES, FPS = 96, 96, 17, 24.0  # video latent [1, 128, 3, 3, 3], audio [1, 8, 18, 16]
SEED = 42
ONE_STEP = "0.85, 0.0"  # the template's stage-2 first sigma, straight to clean


def load_text_encoder(comfy_sd, path):
    """CLIP for the tiny Gemma 4 file, as CLIPLoader(type ltxv) builds it for Gemma 4 12B."""
    import comfy.supported_models_base
    import comfy.utils

    from ltx2_mgpu.workers.embedded.tiny_gemma4 import TOKENIZER_KEY, comfy_text_encoder_target

    sd = comfy.utils.load_torch_file(str(path))
    clip_cls, tokenizer_cls = comfy_text_encoder_target(sd)
    target = comfy.supported_models_base.ClipTarget(tokenizer_cls, clip_cls)
    return comfy_sd.CLIP(target, state_dict=[sd], tokenizer_data={TOKENIZER_KEY: sd[TOKENIZER_KEY]}), sd


@pytest.fixture(scope="module")
def native25(tiny25) -> Iterator[SimpleNamespace]:
    """ComfyUI in this process with every tiny LTX-2.5 file loaded by its own loader nodes.

    Loaders and nodes run in inference mode, as ComfyUI's executor runs them (ComfyUI's int8
    layers cannot be moved between devices otherwise)."""
    with comfyui_in_process(comfyui_root()), torch.inference_mode():
        import comfy.nested_tensor
        import comfy.sd
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_hunyuan, nodes_lt_upsampler
        from comfy_extras import nodes_lt as lt
        from comfy_extras import nodes_lt_audio as lt_audio

        import nodes

        for path in tiny25.all():
            folder_paths.add_model_folder_path(path.parent.name, str(path.parent))
        (model,) = nodes.UNETLoader().load_unet(tiny25.transformer.name, "default")
        (model_int8,) = nodes.UNETLoader().load_unet(tiny25.transformer_int8.name, "default")
        (video_vae,) = nodes.VAELoader().load_vae(tiny25.video_vae.name)
        (conv_video_vae,) = nodes.VAELoader().load_vae(tiny25.conv_video_vae.name)
        (audio_vae,) = nodes.VAELoader().load_vae(tiny25.audio_vae.name)
        (upscaler,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(tiny25.spatial_upscaler.name)
        clip, text_sd = load_text_encoder(comfy.sd, tiny25.text_encoder)
        yield SimpleNamespace(
            sd=comfy.sd, nodes=nodes, cs=cs, lt=lt, lt_audio=lt_audio, upsampler=nodes_lt_upsampler,
            model=model, model_int8=model_int8, video_vae=video_vae, conv_video_vae=conv_video_vae, audio_vae=audio_vae,
            upscaler=upscaler, clip=clip, text_sd=text_sd, NestedTensor=comfy.nested_tensor.NestedTensor,
        )  # fmt: skip


def test_make_tiny_25_writes_the_same_bytes_again(native25, tiny25, tmp_path):
    """The session's files came from `make-tiny --family 2.5` in a subprocess; the same seed written
    again here, in this process's ComfyUI, gives the same bytes."""
    from ltx2_mgpu.workers.embedded.tiny_ltx25 import make_tiny_ltx25

    make_tiny_ltx25(tmp_path, seed=0)
    for path in tiny25.all():
        again = tmp_path / path.parent.name / path.name
        digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (path, again)]
        assert digest[0] == digest[1], path.name


def test_make_tiny_25_without_a_comfyui_says_what_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COMFYUI_PATH"}
    cmd = [sys.executable, "-m", "ltx2_mgpu.cli", "make-tiny", "--family", "2.5", str(tmp_path / "m")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert "COMFYUI_PATH" in done.stderr and "ComfyUI" in done.stderr
    assert not (tmp_path / "m" / "diffusion_models").exists()


def test_comfyui_loaders_detect_ltx25(native25):
    for patcher in (native25.model, native25.model_int8):
        dm = patcher.model.diffusion_model
        assert type(patcher.model).__name__ == "LTXAV"
        assert dm.keyframes_abs_pos_embedding is not None  # LTX-2.5's keyframe position embedding
        assert dm.transformer_blocks[0].ff.net[0].proj.bias is None  # video FF without bias
        assert dm.transformer_blocks[0].audio_ff.net[0].proj.bias is not None
        assert dm.apply_gated_attention and dm.cross_attention_adaln and dm.caption_proj_before_connector
    q_int8 = native25.model_int8.model.diffusion_model.transformer_blocks[0].attn1.to_q.weight
    assert type(q_int8).__name__ == "QuantizedTensor" and q_int8._params.convrot
    assert type(native25.video_vae.first_stage_model).__name__ == "CausalDiffusionVAE"
    assert type(native25.audio_vae.first_stage_model).__name__ == "AudioVAE"
    assert type(native25.conv_video_vae.first_stage_model).__name__ == "VideoVAE"
    assert type(native25.upscaler.model).__name__ == "LatentUpsampler"
    assert native25.sd.detect_te_model(native25.text_sd).name == "GEMMA_4_12B"


def sample_once(native25, model) -> tuple[torch.Tensor, torch.Tensor]:
    """One euler_ancestral step with LTXVDualCFGGuider from the tiny Gemma 4 CONDITIONING."""
    nodes, lt, cs = native25.nodes, native25.lt, native25.cs
    with torch.inference_mode():
        (positive,) = nodes.CLIPTextEncode().encode(native25.clip, "a red fox runs through snow")
        (negative,) = nodes.CLIPTextEncode().encode(native25.clip, "blurry")
        positive, negative = lt.LTXVConditioning.execute(positive, negative, FPS)[:2]
        (video,) = lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
        (audio,) = native25.lt_audio.LTXVEmptyLatentAudio.execute(FRAMES, FPS, 1, native25.audio_vae)
        (latent,) = lt.LTXVConcatAVLatent.execute(video, audio)
        (guider,) = lt.LTXVDualCFGGuider.execute(model, positive, negative, 3.0, 7.0)
        (sigmas,) = cs.ManualSigmas.execute(ONE_STEP)
        (noise,) = cs.RandomNoise.execute(SEED)
        (sampler,) = cs.KSamplerSelect.execute("euler_ancestral")
        out = cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]
    video_out, audio_out = out["samples"].unbind()
    return video_out, audio_out


def test_native_one_step_sample_and_decode(native25):
    assert native25.clip is not None
    video, audio = sample_once(native25, native25.model)
    video8, _ = sample_once(native25, native25.model_int8)
    assert video.shape == (1, 128, 3, 3, 3) and audio.shape == (1, 8, 18, 16)
    assert torch.isfinite(video).all() and torch.isfinite(audio).all()
    # int8 convrot runs its own weights: close to bf16, not equal.
    rel = ((video8 - video).abs().max() / video.abs().max()).item()
    assert 0 < rel < 0.1, rel
    with torch.inference_mode():
        (frames,) = native25.nodes.VAEDecode().decode(native25.video_vae, {"samples": video})
        sound = native25.lt_audio.LTXVAudioVAEDecode.execute(
            {"samples": audio, "type": "audio"}, native25.audio_vae
        )
        up = native25.upsampler.LTXVLatentUpsampler().upsample_latent(
            {"samples": video}, native25.upscaler, native25.video_vae
        )[0]
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert 0.3 < frames.mean().item() < 0.7  # not saturated: decoded pixels mostly inside [-1, 1]
    assert sound[0]["waveform"].shape[:2] == (1, 2) and sound[0]["sample_rate"] == 24000
    assert up["samples"].shape == (1, 128, 3, 6, 6)


def test_comfyui_applies_the_tiny_lora_to_every_target(native25, tiny25):
    import comfy.utils

    from ltx2_mgpu.workers.embedded.tiny_ltx25 import LORA_TARGETS, NUM_LAYERS

    lora = comfy.utils.load_torch_file(str(tiny25.lora))
    with torch.inference_mode():
        patched, _clip = native25.sd.load_lora_for_models(native25.model, None, lora, 1.0, 0.0)
    assert len(patched.patches) == NUM_LAYERS * len(LORA_TARGETS)
