"""An embedded tiny LTX-2.3: ComfyUI's own LTX-2.3 modules at small widths, random weights.

`make_tiny_ltx23(out_dir, seed)` writes the files the official LTX-2.3 templates load, in the released
layouts, so ComfyUI's loaders read them as they read the 22B files:

- `ltx23-tiny.safetensors` (CheckpointLoaderSimple, LTXVAudioVAELoader, LTXAVTextEncoderLoader):
  the transformer under `model.diffusion_model.*` with 2.3's features on (gated attention in the
  blocks and the text connectors, cross-attention AdaLN with the prompt AdaLN tables, the caption
  projection moved out of the transformer), the text projection as 2.3 places it (a video and an
  audio linear under `text_embedding_projection.*`, read by the text encoder loader), the video VAE
  under `vae.*`, the audio VAE under `audio_vae.*` and the vocoder with bandwidth extension (16 kHz
  vocoder, 48 kHz output) under `vocoder.*`; metadata "config" with "transformer", "vae",
  "audio_vae", "vocoder", which ComfyUI's detection reads.
- `ltx23-tiny-spatial-upscaler-x2-1.1.safetensors`, `ltx23-tiny-spatial-upscaler-x1.5.safetensors`
  (LatentUpscaleModelLoader): latent upsamplers, their config flat in "config"; x1.5 through
  ComfyUI's rational resampler (up 3, blur, down 2).
- `ltx23-tiny-lora.safetensors` (LoraLoader, model side) and `ltx23-tiny-text-lora.safetensors`
  (LoraLoader, clip side: Gemma's attention and MLP linears), written by `make_tiny_ltx23_loras`.

The modules are ComfyUI's classes (comfy.ldm.lightricks, comfy.text_encoders.lt), built from the
ComfyUI named by COMFYUI_PATH, the one this process runs in, or the one holding the pack. The released
2.3 block lists of the video VAE are not public here; the tiny VAE mixes ComfyUI's separate space and
time stages with the joint ones so both paths are exercised. Weights follow tiny_model's rules (every
path contributes O(1)); fixed signal-processing buffers (anti-alias filters, the STFT and mel bases the
BWE stage loads from the file) hold their real values. bf16 storage; same seed, same torch: same bytes.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .tiny_model import (
    AUDIO_HOP_LENGTH,
    AUDIO_MEL_BINS,
    AUDIO_SAMPLE_RATE_HZ,
    GEMMA_HIDDEN_SIZE,
    GEMMA_NUM_HIDDEN_STATES,
    TRANSFORMER_GAIN,
    _generator,
    _init_value,
    _save,
    state_entries,
    tiny_checkpoint_config,
)

CHECKPOINT_FILE_NAME = "ltx23-tiny.safetensors"
UPSCALER_X2_FILE_NAME = "ltx23-tiny-spatial-upscaler-x2-1.1.safetensors"
UPSCALER_X15_FILE_NAME = "ltx23-tiny-spatial-upscaler-x1.5.safetensors"
LORA_FILE_NAME = "ltx23-tiny-lora.safetensors"
TEXT_LORA_FILE_NAME = "ltx23-tiny-text-lora.safetensors"
FAMILY = "LTX-2.3"

# Transformer widths as the tiny LTX-2 (tiny_model): 8 heads allow 1 to 8 SP ranks.
VIDEO_NUM_HEADS, VIDEO_HEAD_DIM = 8, 16
AUDIO_NUM_HEADS, AUDIO_HEAD_DIM = 8, 8
NUM_LAYERS = 2
# 2.3's connectors run at each stream's own width (22B: 32 x 128 video, 32 x 64 audio), since the
# text encoder's dual projection already maps Gemma's states to those widths.
VIDEO_DIM = VIDEO_NUM_HEADS * VIDEO_HEAD_DIM
AUDIO_DIM = AUDIO_NUM_HEADS * AUDIO_HEAD_DIM
# Video VAE: patch 4, then 2x space, 2x time, and two 2x all = 32 spatial, 8 temporal (the real factors).
VAE_ENCODER_BASE_CHANNELS = 8
VAE_DECODER_BASE_CHANNELS = 4
# Vocoder 100 mel frames/s -> 16 kHz (x160); BWE: mel of the 16 kHz wave at hop 80 (200 frames/s)
# -> 48 kHz (x240), added to the 16 kHz wave resampled x3. ComfyUI's vocoder takes 2 x 64 mel bins.
VOCODER_RATE_HZ = 16000
OUTPUT_RATE_HZ = 48000
BWE_HOP_LENGTH = 80
BWE_N_FFT = 512
VOCODER_UPSAMPLE_RATES, VOCODER_UPSAMPLE_KERNELS = (4, 5, 8), (8, 11, 16)  # kernel - stride even
BWE_UPSAMPLE_RATES, BWE_UPSAMPLE_KERNELS = (6, 5, 8), (12, 11, 16)
VOCODER_INITIAL_CHANNELS = 32
UPSAMPLER_MID_CHANNELS = 32  # GroupNorm(32, mid) in ComfyUI's upsampler
# SnakeBeta's log-scale alpha/beta: exp(N(0, 0.1)) keeps the periodic term near sin^2(x).
SNAKE_LOG_STD = 0.1
# The text encoder LoRA: ComfyUI maps `text_encoders.<key of the CLIP model's state dict>` (comfy/lora.py).
GEMMA_LORA_PREFIX = "text_encoders.gemma3_12b.transformer."
_GEMMA_LORA_TARGETS = tuple(
    f"{name}.weight" for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
)
TEXT_LORA_RANK = 4
# Buffers that are fixed filters computed by the module itself (kept as built, not drawn).
_COMPUTED_BUFFERS = ("filter", "kernel")


class ComfyUINotFound(RuntimeError):
    """make-tiny --family 2.3 builds ComfyUI's modules and no ComfyUI was found."""


def tiny_ltx23_config() -> dict[str, Any]:
    """The checkpoint's metadata "config": LTX-2's key set with 2.3's flags, widths and VAE/vocoder."""
    base = tiny_checkpoint_config()
    transformer = {
        **base["transformer"],
        "cross_attention_dim": VIDEO_DIM,
        "audio_cross_attention_dim": AUDIO_DIM,
        "caption_channels": VIDEO_DIM,
        "apply_gated_attention": True,
        "cross_attention_adaln": True,
        "use_prompt_adaln_single": True,
        "caption_proj_before_connector": True,
        "caption_projection_first_linear": False,
        "connector_apply_gated_attention": True,
        "connector_num_attention_heads": VIDEO_NUM_HEADS,
        "connector_attention_head_dim": VIDEO_HEAD_DIM,
        "audio_connector_num_attention_heads": AUDIO_NUM_HEADS,
        "audio_connector_attention_head_dim": AUDIO_HEAD_DIM,
    }
    vae = {
        **base["vae"],
        "encoder_blocks": [
            ["compress_space_res", {"multiplier": 2}],
            ["compress_time_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 1}],
        ],
        "encoder_base_channels": VAE_ENCODER_BASE_CHANNELS,
        # Pixel side first, as the released files list them; the decoder runs them reversed.
        "decoder_blocks": [
            ["compress_space", {"residual": True, "multiplier": 2}],
            ["compress_time", {"residual": True, "multiplier": 2}],
            ["compress_all", {"residual": True, "multiplier": 2}],
            ["compress_all", {"residual": True, "multiplier": 1}],
            ["res_x", {"num_layers": 1, "inject_noise": False}],
        ],
        "decoder_base_channels": VAE_DECODER_BASE_CHANNELS,
    }
    generator = {
        "resblock": "AMP1",
        "activation": "snakebeta",
        "stereo": True,
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1, 3, 5]],
        "upsample_initial_channel": VOCODER_INITIAL_CHANNELS,
        "use_tanh_at_final": False,
        "use_bias_at_final": False,
    }
    vocoder = {
        "vocoder": {
            **generator,
            "upsample_rates": list(VOCODER_UPSAMPLE_RATES),
            "upsample_kernel_sizes": list(VOCODER_UPSAMPLE_KERNELS),
        },
        "bwe": {
            **generator,
            "upsample_rates": list(BWE_UPSAMPLE_RATES),
            "upsample_kernel_sizes": list(BWE_UPSAMPLE_KERNELS),
            "input_sampling_rate": VOCODER_RATE_HZ,
            "output_sampling_rate": OUTPUT_RATE_HZ,
            "hop_length": BWE_HOP_LENGTH,
            "n_fft": BWE_N_FFT,
            "num_mels": AUDIO_MEL_BINS,
        },
    }
    return {**base, "transformer": transformer, "vae": vae, "vocoder": vocoder}


def tiny_ltx23_upsampler_config(scale: float) -> dict[str, Any]:
    """The flat "config" of a tiny spatial upsampler: x2 (the 1.1 release) or x1.5 (rational)."""
    return {
        "_class_name": "LatentUpsampler",
        "in_channels": 128,
        "mid_channels": UPSAMPLER_MID_CHANNELS,
        "num_blocks_per_stage": 1,
        "dims": 3,
        "spatial_upsample": True,
        "temporal_upsample": False,
        "spatial_scale": scale,
        "rational_resampler": scale != 2.0,
    }


@dataclass(frozen=True)
class TinyLTX23Files:
    """Paths written by `make_tiny_ltx23` (LoRAs by `make_tiny_ltx23_loras`)."""

    checkpoint: Path
    spatial_upscaler_x2: Path
    spatial_upscaler_x15: Path
    seed: int


def load_comfy_modules() -> dict[str, Any]:
    """ComfyUI's module objects the tiny 2.3 is built from; imports ComfyUI when not yet imported.

    Raises ComfyUINotFound naming the ways to point at one.
    """
    if "comfy.model_management" not in sys.modules:
        from ..engine.comfy.bootstrap import import_comfyui
        from ..wire.comfyui_root import find_comfyui_root

        pack_root = Path(__file__).resolve().parents[2]
        root = find_comfyui_root(pack_root)
        if root is None:
            raise ComfyUINotFound(
                "make-tiny --family 2.3 builds the model with ComfyUI's own LTX-2.3 classes and found no "
                "ComfyUI: set COMFYUI_PATH to the folder holding ComfyUI's main.py (0.33 or newer), or "
                "run it from the pack inside ComfyUI's custom_nodes/"
            )
        import_comfyui(root, torch.device("cpu"))
    names = {
        "ops": "comfy.ops",
        "av_model": "comfy.ldm.lightricks.av_model",
        "video_vae": "comfy.ldm.lightricks.vae.causal_video_autoencoder",
        "audio_vae": "comfy.ldm.lightricks.vae.audio_vae",
        "upsampler": "comfy.ldm.lightricks.latent_upsampler",
        "lt": "comfy.text_encoders.lt",
    }
    return {key: importlib.import_module(name) for key, name in names.items()}


def make_tiny_ltx23(out_dir: Path | str, seed: int = 0) -> TinyLTX23Files:
    """Write the tiny LTX-2.3 checkpoint and its two upsamplers into `out_dir` (created if needed)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    comfy = load_comfy_modules()
    config = tiny_ltx23_config()
    tensors: dict[str, torch.Tensor] = {}
    for module, prefix, gain in _checkpoint_modules(comfy, config):
        tensors.update(draw_state(module, prefix, gain, seed))
    files = TinyLTX23Files(
        out_dir / CHECKPOINT_FILE_NAME,
        out_dir / UPSCALER_X2_FILE_NAME,
        out_dir / UPSCALER_X15_FILE_NAME,
        seed,
    )
    _save(tensors, config, files.checkpoint)
    for scale, path in ((2.0, files.spatial_upscaler_x2), (1.5, files.spatial_upscaler_x15)):
        upsampler_config = tiny_ltx23_upsampler_config(scale)
        upsampler = comfy["upsampler"].LatentUpsampler.from_config(
            upsampler_config, operations=comfy["ops"].disable_weight_init
        )
        _save(draw_state(upsampler, "", 1.0, seed), upsampler_config, path)
    return files


def tiny_ltx23_temporal_upsampler_config() -> dict[str, Any]:
    """The flat "config" of a tiny temporal x2 latent upsampler (frames F -> 2F - 1, size unchanged)."""
    return tiny_ltx23_upsampler_config(2.0) | {"spatial_upsample": False, "temporal_upsample": True}


def write_tiny_temporal_upsampler(path: Path | str, seed: int = 0) -> Path:
    """A tiny temporal x2 upsampler in the released layout (its config in the metadata), at `path`."""
    comfy = load_comfy_modules()
    config = tiny_ltx23_temporal_upsampler_config()
    upsampler = comfy["upsampler"].LatentUpsampler.from_config(
        config, operations=comfy["ops"].disable_weight_init
    )
    path = Path(path)
    _save(draw_state(upsampler, "", 1.0, seed), config, path)
    return path


def make_tiny_ltx23_loras(files: TinyLTX23Files, gemma: Path | str, seed: int = 0) -> tuple[Path, Path]:
    """Write the two LoRAs of the 2.3 templates: one on the transformer (as the distilled LoRA, every
    attention and feed-forward linear of the blocks) and one on the text encoder (write_gemma_lora).
    Returns (transformer LoRA, text encoder LoRA)."""
    from .tiny_variants import make_tiny_lora

    folder = files.checkpoint.parent
    model_lora = make_tiny_lora(folder / LORA_FILE_NAME, files.checkpoint, seed=seed)
    return model_lora, write_gemma_lora(gemma, folder / TEXT_LORA_FILE_NAME, seed + 1)


def write_gemma_lora(gemma: Path | str, path: Path | str, seed: int = 1, rank: int = TEXT_LORA_RANK) -> Path:
    """A LoRA on the Gemma 3 file `gemma`, as the 2.3 templates apply with LoraLoader: every attention
    and MLP linear of Gemma's layers, in ComfyUI's generic `text_encoders.<clip key>` form, at any size
    (shapes from the file's header), bf16."""
    from safetensors.torch import save_file

    from ..wire.model_files import read_safetensors_header

    shapes = read_safetensors_header(gemma).shapes
    gen = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for key in sorted(shapes):
        if not (key.startswith("model.layers.") and key.endswith(_GEMMA_LORA_TARGETS)):
            continue
        out_features, in_features = shapes[key]
        stem = GEMMA_LORA_PREFIX + key[: -len(".weight")]
        # B @ A about a third of the tiny Gemma's 1/sqrt(in) weights, as the transformer LoRA.
        tensors[stem + ".lora_A.weight"] = torch.randn(rank, in_features, generator=gen) / in_features**0.5
        tensors[stem + ".lora_B.weight"] = torch.randn(out_features, rank, generator=gen) / (3 * rank**0.5)
    path = Path(path)
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}, str(path))
    return path


def _checkpoint_modules(
    comfy: dict[str, Any], config: dict[str, Any]
) -> list[tuple[torch.nn.Module, str, float]]:
    """(module, file key prefix, matrix gain) for every part of the checkpoint. The transformer and
    the projection are built on meta (every entry drawn); the VAEs on the CPU, for their filters."""
    ops = comfy["ops"].disable_weight_init
    transformer_config = dict(config["transformer"])
    with torch.device("meta"):
        transformer = comfy["av_model"].LTXAVModel(**transformer_config, operations=ops)
        projection = comfy["lt"].DualLinearProjection(
            GEMMA_HIDDEN_SIZE * GEMMA_NUM_HIDDEN_STATES, VIDEO_DIM, AUDIO_DIM, operations=ops
        )
    video_vae = comfy["video_vae"].VideoVAE(config=config["vae"])
    audio_vae = comfy["audio_vae"].AudioVAE(metadata={"config": config})
    return [
        (transformer, "model.diffusion_model.", TRANSFORMER_GAIN),
        (projection, "text_embedding_projection.", TRANSFORMER_GAIN),
        (video_vae, "vae.", 1.0),
        (audio_vae.autoencoder, "audio_vae.", 1.0),
        (audio_vae.vocoder, "vocoder.", 1.0),
    ]


def draw_state(module: torch.nn.Module, prefix: str, gain: float, seed: int) -> dict[str, torch.Tensor]:
    """Float32 values for every state-dict entry of `module`, keyed `prefix + key`.

    Parameters follow tiny_model's rules (plus SnakeBeta's log-scale alpha/beta); fixed filters keep
    the module's own value; the BWE's STFT and mel bases are computed (the file carries them)."""
    state_keys = set(module.state_dict())
    tensors: dict[str, torch.Tensor] = {}
    for key, owner, local_name, value in state_entries(module):
        file_key = prefix + key
        tensors[file_key] = _value(owner, local_name, value, gain, _generator(seed, file_key))
    missing = state_keys - {key[len(prefix) :] for key in tensors}
    assert not missing, f"no value drawn for {sorted(missing)}"
    return tensors


def _value(
    owner: torch.nn.Module, name: str, value: torch.Tensor, gain: float, gen: torch.Generator
) -> torch.Tensor:
    shape = tuple(value.shape)
    if name in _COMPUTED_BUFFERS and not value.is_meta:
        return value.detach().float().clone()
    if name in ("alpha", "beta"):
        return torch.randn(shape, generator=gen) * SNAKE_LOG_STD
    special = _SIGNAL_BASES.get(name)
    if special is not None:
        return special(shape)
    return _init_value(owner, name, shape, gain, gen)


def _stft_basis(shape: tuple[int, ...]) -> torch.Tensor:
    """[2 x n_freqs, 1, n_fft]: real rows then imaginary rows of the DFT, times a periodic Hann window."""
    n_fft = shape[-1]
    n_freqs = n_fft // 2 + 1
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(n_freqs, dtype=torch.float64)[:, None]
    angle = 2 * math.pi * k * n / n_fft
    window = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
    basis = torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window])
    return basis[:, None, :].float()


def _mel_basis(shape: tuple[int, ...]) -> torch.Tensor:
    """[n_mels, n_freqs]: Slaney mel filters up to the vocoder rate's Nyquist frequency."""
    import torchaudio

    n_mels, n_freqs = shape
    banks = torchaudio.functional.melscale_fbanks(
        n_freqs, 0.0, VOCODER_RATE_HZ / 2.0, n_mels, VOCODER_RATE_HZ, norm="slaney", mel_scale="slaney"
    )
    return banks.T.contiguous().float()


# The inverse basis is not used on the decode path; the file carries one, so it gets the forward one.
_SIGNAL_BASES: dict[str, Callable[[tuple[int, ...]], torch.Tensor]] = {
    "forward_basis": _stft_basis,
    "inverse_basis": _stft_basis,
    "mel_basis": _mel_basis,
}

# The vocoder turns 100 mel frames/s into 16 kHz; the BWE generator turns its mel frames into 48 kHz.
assert math.prod(VOCODER_UPSAMPLE_RATES) * AUDIO_SAMPLE_RATE_HZ // AUDIO_HOP_LENGTH == VOCODER_RATE_HZ
assert math.prod(BWE_UPSAMPLE_RATES) == BWE_HOP_LENGTH * OUTPUT_RATE_HZ // VOCODER_RATE_HZ
