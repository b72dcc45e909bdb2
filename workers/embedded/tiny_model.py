"""An embedded tiny LTX-2: the real ltx-core architecture at small widths, random weights.

`make_tiny(out_dir, seed)` writes two files in the official released layout, so every loader,
SDOps and ComfyUI node that reads the 19B checkpoint reads these too (see `workers.checkpoint`):

- `ltx2-tiny.safetensors`: transformer with its text connectors under `model.diffusion_model.*`,
  video VAE (encoder, decoder, per-channel statistics) under `vae.*`, audio VAE (the same three)
  under `audio_vae.*`, vocoder under `vocoder.*`, text projection under `text_embedding_projection.*`;
  metadata "config" with the sections "transformer", "vae", "audio_vae", "vocoder".
- `ltx2-tiny-spatial-upscaler-x2.safetensors`: latent upsampler, its config flat in "config".

The latent interface is the real one, so latents from ComfyUI's empty-latent nodes fit: video
latents [B, 128, (F-1)/8+1, H/32, W/32]; audio latents [B, 8, T, 16] at 25 frames per second
(16 kHz, hop 160, 4x). Weights are stored in bfloat16 (as the released files are); load them as
float32 for CPU parity tests, which upcasts exactly.

Weights are not ltx-core's near-zero init: with std 0.02 a 2-layer model hides position and
normalisation mistakes (docs/COMFYUI_LTX2_PARITY.md). Matrices get std gain/sqrt(fan_in) so every
path contributes O(1), modulation tables are random, norm weights sit around 1, and the VAE
statistics are far from (0, 1). Each tensor is drawn from its own generator seeded by
(seed, file key), so a file is the same bytes on the same torch version.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from ltx_core.model.audio_vae import AudioDecoderConfigurator, AudioEncoderConfigurator, VocoderConfigurator
from ltx_core.model.transformer import LTXModelConfigurator
from ltx_core.model.upsampler import LatentUpsamplerConfigurator
from ltx_core.model.video_vae import VideoDecoderConfigurator, VideoEncoderConfigurator
from safetensors.torch import save_file

from ..engine.ltxcore.checkpoint import TEXT_PROJECTION_PREFIX, feature_extractor_resize_op

CHECKPOINT_FILE_NAME = "ltx2-tiny.safetensors"
UPSCALER_FILE_NAME = "ltx2-tiny-spatial-upscaler-x2.safetensors"
# Written by `ltx2-mgpu make-tiny` for the two-stage workflow's stage-2 LoRA (workers/lora.make_tiny_lora).
LORA_FILE_NAME = "ltx2-tiny-lora.safetensors"
# Stored dtype; the released LTX-2 files are bf16 too. Halves the files (11.5 MB in all).
STORAGE_DTYPE = torch.bfloat16

# Transformer. 19B: 48 layers; video 32 heads x 128, audio 32 x 64; caption 3840.
NUM_LAYERS = 2
# Sequence parallelism splits heads over ranks: 8 heads allow 1 to 8 ranks, as 32 do for 19B.
VIDEO_NUM_HEADS = 8
# Split rope gives each of the 3 position axes inner_dim // 6 frequencies: 128 // 6 = 21 here.
VIDEO_HEAD_DIM = 16
# Audio<->video attention runs with audio heads but its rope is laid out per head of the query's
# modality, so the two head counts must be equal (32 = 32 in the 19B model).
AUDIO_NUM_HEADS = 8
AUDIO_HEAD_DIM = 8
# The connectors run at caption width (19B: 30 heads x 128 = 3840) and the transformer projects
# it to each stream's width.
CONNECTOR_NUM_HEADS = 4
CONNECTOR_HEAD_DIM = 16
CAPTION_CHANNELS = CONNECTOR_NUM_HEADS * CONNECTOR_HEAD_DIM
# Stand-in for Gemma 3 12B's hidden states (49 = embeddings + 48 layers, 3840 wide) that the text
# projection consumes: same count, narrower.
GEMMA_HIDDEN_SIZE = 16
GEMMA_NUM_HIDDEN_STATES = 49
# Video VAE: patch 4 x three 2x stages = 32 spatial, three 2x stages = 8 temporal (the real
# factors). The decoder starts at 8 x base channels (19B: base 128); the encoder's width is fixed
# at the 128 latent channels by ltx-core.
DECODER_BASE_CHANNELS = 4
# Audio VAE: ltx-core sizes the per-channel statistics by `ch`, and they apply to the patchified
# latent (8 channels x 16 bins = 128), so ch must be 128. Three levels give the real 4x time and
# 64 -> 16 mel-bin compression; no extra res blocks.
AUDIO_VAE_CH = 128
AUDIO_VAE_CH_MULT = (1, 1, 1)
AUDIO_SAMPLE_RATE_HZ = 16000
AUDIO_HOP_LENGTH = 160
AUDIO_MEL_BINS = 64
# Vocoder: 100 mel frames/s -> 24 kHz needs x240 in all (19B: 6,5,2,2,2 from 1024 channels).
VOCODER_UPSAMPLE_RATES = (6, 5, 8)
VOCODER_UPSAMPLE_KERNELS = (12, 11, 16)  # kernel - stride even: output exactly rate x input
VOCODER_INITIAL_CHANNELS = 32
# Upsampler: GroupNorm(32, mid_channels) needs a multiple of 32 (released: 512, 4 blocks).
UPSAMPLER_MID_CHANNELS = 32
UPSAMPLER_BLOCKS_PER_STAGE = 1

# Init (see module docstring). Matrices: std = gain / sqrt(fan_in). The transformer side runs
# hotter (std 0.13 for its 128-wide linears) so attention logits, and with them positions, matter;
# the conv stacks keep gain 1 and their last layers are scaled to land decoded pixels mostly in
# [-1, 1] and the vocoder's pre-tanh output near std 0.5 (measured; tests check the ranges).
TRANSFORMER_GAIN = 1.5
CONV_GAIN = 1.0
OUTPUT_GAINS = {"vae.decoder.conv_out.conv.weight": 0.75}
_TRANSFORMER_PREFIXES = ("model.diffusion_model.", TEXT_PROJECTION_PREFIX)
BIAS_STD = 0.1
NORM_WEIGHT_STD = 0.1
MODULATION_TABLE_STD = 0.5
STATISTICS_MEAN_STD = 0.5
STATISTICS_LOG_STD_RANGE = 0.7  # std-of-means = exp(U(-0.7, 0.7)), in [0.5, 2]


def tiny_checkpoint_config() -> dict[str, Any]:
    """The metadata "config" of the tiny checkpoint: the 19B key set with small dims."""
    transformer = {
        "_class_name": "AVTransformer3DModel",
        "activation_fn": "gelu-approximate",
        "attention_bias": True,
        "attention_head_dim": VIDEO_HEAD_DIM,
        "attention_type": "default",
        "audio_attention_head_dim": AUDIO_HEAD_DIM,
        "audio_cross_attention_dim": AUDIO_NUM_HEADS * AUDIO_HEAD_DIM,
        "audio_num_attention_heads": AUDIO_NUM_HEADS,
        "audio_out_channels": 128,
        "audio_positional_embedding_max_pos": [20],
        "av_ca_timestep_scale_multiplier": 1000.0,
        "av_cross_ada_norm": True,
        "caption_channels": CAPTION_CHANNELS,
        "causal_temporal_positioning": True,
        "connector_attention_head_dim": CONNECTOR_HEAD_DIM,
        "connector_norm_output": True,
        "connector_num_attention_heads": CONNECTOR_NUM_HEADS,
        "connector_num_layers": 2,
        "connector_num_learnable_registers": 128,
        "connector_positional_embedding_max_pos": [4096],
        "cross_attention_dim": VIDEO_NUM_HEADS * VIDEO_HEAD_DIM,
        "cross_attention_norm": True,
        "double_self_attention": False,
        "dropout": 0.0,
        "frequencies_precision": "float64",
        "in_channels": 128,
        "norm_elementwise_affine": False,
        "norm_eps": 1e-06,
        "norm_num_groups": 32,
        "num_attention_heads": VIDEO_NUM_HEADS,
        "num_embeds_ada_norm": 1000,
        "num_layers": NUM_LAYERS,
        "num_vector_embeds": None,
        "only_cross_attention": False,
        "out_channels": 128,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "positional_embedding_theta": 10000.0,
        "positional_embedding_type": "rope",
        "qk_norm": "rms_norm",
        "rope_type": "split",
        "share_ff": False,
        "standardization_norm": "rms_norm",
        "timestep_scale_multiplier": 1000,
        "upcast_attention": False,
        "use_audio_video_cross_attention": True,
        "use_embeddings_connector": True,
        "use_linear_projection": False,
        "use_middle_indices_grid": True,
    }
    vae = {
        "_class_name": "CausalVideoAutoencoder",
        "dims": 3,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 128,
        "encoder_blocks": [["compress_all_res", {"multiplier": 1}]] * 3,
        # Listed pixel side first, as the released files list them; the decoder runs them reversed.
        "decoder_blocks": [["compress_all", {"residual": True, "multiplier": 2}]] * 3
        + [["res_x", {"num_layers": 1, "inject_noise": False}]],
        "decoder_base_channels": DECODER_BASE_CHANNELS,
        "patch_size": 4,
        "norm_layer": "pixel_norm",
        "latent_log_var": "uniform",
        "use_quant_conv": False,
        "scaling_factor": 1.0,
        "normalize_latent_channels": False,
        "causal_decoder": False,
        "timestep_conditioning": False,
        "encoder_spatial_padding_mode": "zeros",
        "decoder_spatial_padding_mode": "reflect",
    }
    ddconfig = {
        "ch": AUDIO_VAE_CH,
        "ch_mult": list(AUDIO_VAE_CH_MULT),
        "num_res_blocks": 0,
        "attn_resolutions": [],
        "attn_type": "vanilla",
        "mid_block_add_attention": False,
        "resolution": 256,
        "z_channels": 8,
        "double_z": True,
        "in_channels": 2,
        "out_ch": 2,
        "mel_bins": AUDIO_MEL_BINS,
        "norm_type": "pixel",
        "causality_axis": "height",
        "dropout": 0.0,
        "resamp_with_conv": True,
    }
    audio_vae = {
        "model": {"params": {"sampling_rate": AUDIO_SAMPLE_RATE_HZ, "ddconfig": ddconfig}},
        "preprocessing": {
            "stft": {"filter_length": 1024, "hop_length": AUDIO_HOP_LENGTH, "causal": True},
            "mel": {"n_mel_channels": AUDIO_MEL_BINS},
        },
    }
    vocoder = {
        "resblock": "1",
        "stereo": True,
        "resblock_kernel_sizes": [3],
        "resblock_dilation_sizes": [[1, 3, 5]],
        "upsample_rates": list(VOCODER_UPSAMPLE_RATES),
        "upsample_kernel_sizes": list(VOCODER_UPSAMPLE_KERNELS),
        "upsample_initial_channel": VOCODER_INITIAL_CHANNELS,
        "output_sampling_rate": 24000,
    }
    return {"transformer": transformer, "vae": vae, "audio_vae": audio_vae, "vocoder": vocoder}


def tiny_upsampler_config() -> dict[str, Any]:
    """The metadata "config" of the tiny spatial x2 upsampler (flat, as in the released file)."""
    return {
        "_class_name": "LatentUpsampler",
        "in_channels": 128,
        "mid_channels": UPSAMPLER_MID_CHANNELS,
        "num_blocks_per_stage": UPSAMPLER_BLOCKS_PER_STAGE,
        "dims": 3,
        "spatial_upsample": True,
        "temporal_upsample": False,
        "spatial_scale": 2.0,
        "rational_resampler": False,
    }


@dataclass(frozen=True)
class TinyModelFiles:
    """Paths written by `make_tiny`: the full checkpoint and the spatial upsampler file."""

    checkpoint: Path
    spatial_upscaler: Path
    seed: int


def make_tiny(out_dir: Path | str, seed: int = 0) -> TinyModelFiles:
    """Write the tiny checkpoint and upsampler into `out_dir` (created if needed), from `seed`.

    Same seed, same torch version: byte-identical files. Files are replaced atomically, so
    concurrent callers writing the same seed into one folder see whole files.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = tiny_checkpoint_config()
    tensors: dict[str, torch.Tensor] = {}
    for build, to_file_key in _checkpoint_components(config):
        tensors.update(_random_tensors(build(), to_file_key, seed))
    files = TinyModelFiles(out_dir / CHECKPOINT_FILE_NAME, out_dir / UPSCALER_FILE_NAME, seed)
    _save(tensors, config, files.checkpoint)
    upsampler_config = tiny_upsampler_config()
    with torch.device("meta"):
        upsampler = LatentUpsamplerConfigurator.from_config(upsampler_config)
    _save(_random_tensors(upsampler, lambda key: key, seed), upsampler_config, files.spatial_upscaler)
    return files


def _save(tensors: dict[str, torch.Tensor], config: dict[str, Any], path: Path) -> None:
    # One metadata entry only: safetensors writes several in hash-map order, which changes per process.
    stored = {key: value.to(STORAGE_DTYPE).contiguous() for key, value in tensors.items()}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    save_file(stored, str(tmp), metadata={"config": json.dumps(config)})
    os.replace(tmp, path)


def _prefixed(prefix: str, statistics_prefix: str) -> Callable[[str], str]:
    def to_file_key(key: str) -> str:
        if key.startswith("per_channel_statistics."):
            return statistics_prefix + key
        return prefix + key

    return to_file_key


def _embeddings_file_key(key: str) -> str:
    head, _, rest = key.partition(".")
    prefixes = {
        "feature_extractor": TEXT_PROJECTION_PREFIX,
        "video_connector": "model.diffusion_model.video_embeddings_connector.",
        "audio_connector": "model.diffusion_model.audio_embeddings_connector.",
    }
    return prefixes[head] + rest


def _checkpoint_components(
    config: dict[str, Any],
) -> list[tuple[Callable[[], torch.nn.Module], Callable[[str], str]]]:
    """(meta-module factory, module key -> file key) for every component of the full checkpoint."""

    def meta(configurator: Any) -> Callable[[], torch.nn.Module]:
        def build() -> torch.nn.Module:
            with torch.device("meta"):
                return configurator.from_config(config)

        return build

    def embeddings_processor() -> torch.nn.Module:
        # The text path pulls in transformers; only load it while writing the file.
        from ltx_core.text_encoders.gemma import EmbeddingsProcessorConfigurator

        with torch.device("meta"):
            processor = EmbeddingsProcessorConfigurator.from_config(config)
        shape = (CAPTION_CHANNELS, GEMMA_HIDDEN_SIZE * GEMMA_NUM_HIDDEN_STATES)
        resize = feature_extractor_resize_op({f"{TEXT_PROJECTION_PREFIX}aggregate_embed.weight": shape})
        return resize.mutator(processor)

    return [
        (meta(LTXModelConfigurator), lambda key: "model.diffusion_model." + key),
        (meta(VideoEncoderConfigurator), _prefixed("vae.encoder.", "vae.")),
        (meta(VideoDecoderConfigurator), _prefixed("vae.decoder.", "vae.")),
        (meta(AudioEncoderConfigurator), _prefixed("audio_vae.encoder.", "audio_vae.")),
        (meta(AudioDecoderConfigurator), _prefixed("audio_vae.decoder.", "audio_vae.")),
        (meta(VocoderConfigurator), lambda key: "vocoder." + key),
        (embeddings_processor, _embeddings_file_key),
    ]


def _generator(seed: int, file_key: str) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}:{file_key}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def state_entries(module: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Module, str, torch.Tensor]]:
    """(state-dict key, owning module, local name, value) of every parameter and persistent buffer: the
    walk each tiny builder draws its values along (the owner decides the init)."""
    state_keys = set(module.state_dict())
    for module_name, owner in module.named_modules():
        for local_name, value in [
            *owner.named_parameters(recurse=False),
            *owner.named_buffers(recurse=False),
        ]:
            key = f"{module_name}.{local_name}" if module_name else local_name
            if key in state_keys:  # a non-persistent buffer is not in the file
                yield key, owner, local_name, value


def _random_tensors(
    module: torch.nn.Module, to_file_key: Callable[[str], str], seed: int
) -> dict[str, torch.Tensor]:
    """Float32 values for every entry of `module`'s state dict (module on meta), keyed by file key."""
    state_keys = set(module.state_dict())
    tensors: dict[str, torch.Tensor] = {}
    for key, owner, local_name, value in state_entries(module):
        file_key = to_file_key(key)
        gain = OUTPUT_GAINS.get(
            file_key, TRANSFORMER_GAIN if file_key.startswith(_TRANSFORMER_PREFIXES) else CONV_GAIN
        )
        tensors[file_key] = _init_value(
            owner, local_name, tuple(value.shape), gain, _generator(seed, file_key)
        )
    missing = state_keys - {k for k in state_keys if to_file_key(k) in tensors}
    assert not missing, f"no value drawn for {sorted(missing)}"
    return tensors


_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_TRANSPOSED_CONVS = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def _fan_in(module: torch.nn.Module, shape: tuple[int, ...]) -> float:
    if isinstance(module, _TRANSPOSED_CONVS):
        # weight [in, out, k...]: each output sample sees in x k / stride weights.
        return shape[0] * math.prod(shape[2:]) / math.prod(module.stride)
    return math.prod(shape[1:])


def _init_value(
    module: torch.nn.Module, name: str, shape: tuple[int, ...], gain: float, gen: torch.Generator
) -> torch.Tensor:
    """The initial value of parameter/buffer `name` of `module` (see the module docstring)."""

    def normal(std: float, mean: float = 0.0) -> torch.Tensor:
        return torch.randn(shape, generator=gen) * std + mean

    def uniform(low: float, high: float) -> torch.Tensor:
        return torch.rand(shape, generator=gen) * (high - low) + low

    is_norm = isinstance(module, (torch.nn.RMSNorm, torch.nn.GroupNorm, torch.nn.LayerNorm))
    if name == "weight" and is_norm:
        return normal(NORM_WEIGHT_STD, mean=1.0)
    if name == "bias" and is_norm:
        return normal(NORM_WEIGHT_STD)
    if name == "weight" and isinstance(module, (torch.nn.Linear, *_CONVS, *_TRANSPOSED_CONVS)):
        return normal(gain / math.sqrt(_fan_in(module, shape)))
    if name == "bias":
        return normal(BIAS_STD)
    if "scale_shift_table" in name:
        return normal(MODULATION_TABLE_STD)
    if name == "learnable_registers":
        return uniform(-1.0, 1.0)  # ltx-core's own init for the text registers
    if name == "mean-of-means":
        return normal(STATISTICS_MEAN_STD)
    if name == "std-of-means":
        return uniform(-STATISTICS_LOG_STD_RANGE, STATISTICS_LOG_STD_RANGE).exp()
    raise TypeError(f"no init rule for {type(module).__name__}.{name} {list(shape)}; add one to _init_value")
