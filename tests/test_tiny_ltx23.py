"""The tiny LTX-2.3 (`ltx2-mgpu make-tiny --family 2.3`) read by ComfyUI's own loaders (opt-in: COMFYUI_PATH).

What the official LTX-2.3 templates load, the tiny files must load the same way: CheckpointLoaderSimple
detects an LTX-2.3 transformer (gated attention, cross-attention AdaLN with the prompt AdaLN, the
caption projection outside the transformer) and takes every weight of the file; the VAE, the audio VAE
with its 48 kHz BWE vocoder, the text encoder with the dual projection, both spatial upscalers and both
LoRAs load; a native sampling step runs. Files are the same bytes for the same seed.
"""

from __future__ import annotations

import hashlib

import pytest
import torch
from ltx23_fixtures import FPS, FRAMES, HEIGHT, WIDTH, comfy23  # noqa: F401
from safetensors.torch import load_file

from conftest import tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_ltx23 import AUDIO_DIM, OUTPUT_RATE_HZ, VIDEO_DIM, make_tiny_ltx23

pytestmark = pytest.mark.comfyui


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_bytes(comfy23, tmp_path):  # noqa: F811
    again = make_tiny_ltx23(tmp_path / "again", seed=0)
    other = make_tiny_ltx23(tmp_path / "other", seed=1)
    assert sha256(again.checkpoint) == sha256(comfy23.files.checkpoint)
    assert sha256(again.spatial_upscaler_x15) == sha256(comfy23.files.spatial_upscaler_x15)
    assert sha256(other.checkpoint) != sha256(again.checkpoint)


def test_checkpoint_loader_detects_ltx23_and_takes_every_weight(comfy23):  # noqa: F811
    net = comfy23.model.model.diffusion_model
    assert type(net).__name__ == "LTXAVModel"
    assert net.apply_gated_attention and net.cross_attention_adaln and net.caption_proj_before_connector
    assert net.prompt_adaln_single is not None and net.audio_prompt_adaln_single is not None
    assert net.transformer_blocks[0].attn1.to_gate_logits is not None
    stored = {
        k[len("model.diffusion_model.") :]: v
        for k, v in load_file(str(comfy23.files.checkpoint)).items()
        if k.startswith("model.diffusion_model.")
    }
    loaded = net.state_dict()
    assert set(stored) == set(loaded)
    for key, value in stored.items():
        assert torch.equal(loaded[key].float(), value.float()), key


def test_vae_audio_vae_and_text_encoder_load(comfy23):  # noqa: F811
    stored = load_file(str(comfy23.files.checkpoint))
    vae = comfy23.vae.first_stage_model
    assert type(vae).__name__ == "VideoVAE"
    assert {f"vae.{k}" for k in vae.state_dict()} == {k for k in stored if k.startswith("vae.")}
    audio = comfy23.audio_vae.first_stage_model
    assert type(audio.vocoder).__name__ == "VocoderWithBWE"
    assert audio.vocoder.output_sample_rate == OUTPUT_RATE_HZ
    basis = audio.vocoder.mel_stft.stft_fn.forward_basis
    assert torch.equal(basis.float(), stored["vocoder.mel_stft.stft_fn.forward_basis"].float())
    te = comfy23.clip.cond_stage_model
    assert te.text_projection_type == "dual_linear"
    projection = te.text_embedding_projection
    assert (projection.video_aggregate_embed.out_features, projection.audio_aggregate_embed.out_features) == (
        VIDEO_DIM,
        AUDIO_DIM,
    )
    assert torch.equal(
        projection.video_aggregate_embed.weight.float(),
        stored["text_embedding_projection.video_aggregate_embed.weight"].float(),
    )


def test_upscalers_load(comfy23):  # noqa: F811
    x2, x15 = comfy23.upscalers[2.0].model, comfy23.upscalers[1.5].model
    assert not x2.rational_resampler and x2.spatial_scale == 2.0
    assert x15.rational_resampler and x15.spatial_scale == 1.5
    latent = torch.randn(1, 128, 2, 4, 4)
    with torch.inference_mode():
        assert tuple(x15(latent.to(next(x15.parameters()).dtype)).shape) == (1, 128, 2, 6, 6)


def test_lora_loader_patches_every_lora_weight(comfy23):  # noqa: F811
    """LoraLoader as the templates use it: the transformer LoRA on the model, the Gemma LoRA on the
    text encoder (each file's every pair becomes one patch; nothing left over)."""
    import folder_paths

    folder_paths.add_model_folder_path("loras", str(comfy23.text_lora.parent))
    for lora, side in ((comfy23.lora, "model"), (comfy23.text_lora, "clip")):
        pairs = sum(1 for k in load_file(str(lora)) if k.endswith(".lora_A.weight"))
        model, clip = comfy23.nodes.LoraLoader().load_lora(comfy23.model, comfy23.clip, lora.name, 1.0, 1.0)
        patched = model if side == "model" else clip.patcher
        unpatched = comfy23.model if side == "model" else comfy23.clip.patcher
        assert len(patched.patches) - len(unpatched.patches) == pairs, (lora.name, side)


def test_native_sampling_step_runs(comfy23):  # noqa: F811
    """One CFG step as the template's stage 1 wires it: the model's prompt AdaLN and gated attention
    run in ComfyUI's forward on the 2.3 text layout (video + audio widths concatenated)."""
    c = comfy23
    positive = tiny_conditioning(11, VIDEO_DIM + AUDIO_DIM, seed=1)
    negative = tiny_conditioning(6, VIDEO_DIM + AUDIO_DIM, seed=2)
    (video,) = c.lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
    (audio,) = c.lt_audio.LTXVEmptyLatentAudio.execute(FRAMES, FPS, 1, c.audio_vae)
    (latent,) = c.lt.LTXVConcatAVLatent.execute(video, audio)
    (guider,) = c.cs.CFGGuider.execute(c.model, positive, negative, 3.0)
    (noise,) = c.cs.RandomNoise.execute(42)
    (sampler,) = c.cs.KSamplerSelect.execute("euler")
    (sigmas,) = c.cs.ManualSigmas.execute("1.0, 0.5")
    with torch.inference_mode():
        out = c.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]["samples"]
    for stream in out.unbind():
        assert torch.isfinite(stream).all() and float(stream.abs().max()) > 0.1


def test_mgpu_loader_detection_names_it_ltx23(comfy23):  # noqa: F811
    from ltx2_mgpu.workers.wire.model_family import LTX23, detect_model_family
    from ltx2_mgpu.workers.wire.model_files import read_safetensors_header

    header = read_safetensors_header(comfy23.files.checkpoint)
    found = detect_model_family(header.shapes, header.dtypes, header.metadata)
    assert found.describe() == f"{LTX23}, weights bf16, with its VAE"
