"""A tiny LTX-2.5 diffusion video VAE (ComfyUI's CausalDiffusionVAE at small widths) for the tests.

Stand-in until `make-tiny --family 2.5` lands: `make_na_checkpoint` copies the tiny LTX-2 checkpoint
with its `vae.*` weights replaced by a CausalDiffusionVAE's and the metadata's "vae" section by that
VAE's config, so ComfyUI's loaders (CheckpointLoaderSimple, and ComfyModel.checkpoint_vae in the ranks)
detect the diffusion decoder by `decoder.conv_in_x_t.weight` and build it from the file's config.

The decoder keeps the real kernels (7 and 5 in space through stages 1-4, 11 in stage 5) and upsamples,
so the band split meets the real halo geometry; widths and depths are small. Random weights: linear
layers keep torch's default init (each layer's output of the order of its input), and the parameters
the class starts at ones or zeros (norm weights, the AdaLN table) get random values around those, so
every term contributes. Import with ComfyUI importable (inside comfyui_in_process).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

LATENT_CHANNELS = 128
# conv_out's default init gives pixels of std ~0.6 in [-1, 1], many clamped by VAE.process_output;
# scaled, most land inside (1 - 2 / 255 of them in a sample), so the tests compare real values.
OUTPUT_GAIN = 0.4
TINY_NA_VAE_CONFIG = {
    "_class_name": "CausalDiffusionVAE",
    "dims": 3,
    "model_output_type": "x0",
    "encoder": {
        "dims": 3,
        "in_channels": 3,
        "out_channels": LATENT_CHANNELS,
        "blocks": [
            ["res_x", {"num_layers": 1}],
            ["compress_space_res", {"multiplier": 2}],
            ["compress_time_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 1}],
        ],
        "patch_size": 4,
        "latent_log_var": "constant",
        "norm_layer": "pixel_norm",
        "base_channels": 8,
        "spatial_padding_mode": "zeros",
    },
    "decoder": {
        "in_channels": LATENT_CHANNELS,
        "out_channels": 3,
        "patch_size": 4,
        "head_dim": 16,
        "stage_channels": [64, 32, 32, 32, 32],
        "stage_depths": [2, 2, 1, 1, 2],
        "stage_kernels": [[3, 7, 7], [3, 7, 7], [3, 5, 5], [3, 5, 5], [11, 11, 11]],
        "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 1], [[2, 2, 2], 1], [[2, 2, 2], 1]],
        "stage5_kernel": [11, 11, 11],
        "t_emb_dim": 32,
        "timestep_scale_multiplier": 1000.0,
        "default_num_inference_steps": 1,
    },
}


def tiny_na_vae_state_dict(config: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """The state dict of ComfyUI's CausalDiffusionVAE(config) with random weights (see the docstring)."""
    from comfy.ldm.lightricks.vae.na_diffusion_decoder import CausalDiffusionVAE

    torch.manual_seed(seed)
    model = CausalDiffusionVAE(config=config)
    generator = torch.Generator().manual_seed(seed + 1)
    state = {}
    for key, value in model.state_dict().items():
        value = value.detach().clone().float()
        if key.endswith("std-of-means"):
            value = 0.5 + torch.rand(value.shape, generator=generator)
        elif key.endswith("mean-of-means"):
            value = 0.2 * torch.randn(value.shape, generator=generator)
        elif key.endswith("scale_shift_table"):
            value = 0.2 * torch.randn(value.shape, generator=generator)
        elif key.endswith("norm.weight") or key.endswith("norm1.weight") or key.endswith("norm2.weight"):
            value = 1.0 + 0.2 * torch.randn(value.shape, generator=generator)
        elif key.endswith("norm_out.weight"):
            value = 1.0 + 0.2 * torch.randn(value.shape, generator=generator)
        elif key == "decoder.conv_out.weight":
            value = OUTPUT_GAIN * value
        state[key] = value.contiguous()
    return state


def make_na_checkpoint(tiny_checkpoint: Path, out: Path, config: dict | None = None, seed: int = 0) -> Path:
    """A copy of the tiny LTX-2 checkpoint whose video VAE is a tiny CausalDiffusionVAE (module docstring)."""
    config = TINY_NA_VAE_CONFIG if config is None else config
    with safe_open(str(tiny_checkpoint), framework="pt") as f:
        metadata = json.loads(f.metadata()["config"])
        tensors = {key: f.get_tensor(key) for key in f.keys() if not key.startswith("vae.")}
    tensors.update({f"vae.{key}": value for key, value in tiny_na_vae_state_dict(config, seed).items()})
    metadata["vae"] = config
    save_file(tensors, str(out), metadata={"config": json.dumps(metadata)})
    return out
