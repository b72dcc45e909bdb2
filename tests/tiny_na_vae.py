"""A tiny LTX-2.5 diffusion video VAE (ComfyUI's CausalDiffusionVAE at small widths) for the tests.

Beside `make-tiny --family 2.5` (whose decoder has 3x3x3 kernels, too small to exercise the halos):
`make_na_checkpoint` copies the tiny LTX-2 checkpoint with its `vae.*` weights replaced by a
CausalDiffusionVAE's and the metadata's "vae" section by that VAE's config, so ComfyUI's loaders (CheckpointLoaderSimple, and ComfyModel.checkpoint_vae in the ranks)
detect the diffusion decoder by `decoder.conv_in_x_t.weight` and build it from the file's config.

The decoder keeps the real kernels (7 and 5 in space through stages 1-4, 11 in stage 5) and upsamples,
so the band split meets the real halo geometry; widths and depths are small. Random weights
(random_state): every layer's output of the order of its input, and the norm weights and AdaLN table
away from the ones and zeros the class starts at, so every term contributes. Import with ComfyUI
importable (inside comfyui_in_process).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_mgpu.workers.embedded.tiny_ltx25_vae import tiny_video_vae_25_config

LATENT_CHANNELS = 128
# conv_out scaled so that most decoded values land inside VAE.process_output's clamp to [-1, 1]: the
# tests then compare real values, not two saturated ones.
OUTPUT_GAIN = 0.2
# The class, output type and encoder of make-tiny's LTX-2.5 video VAE; the decoder below is this file's own.
_MAKE_TINY_VAE = tiny_video_vae_25_config()["vae"]
TINY_NA_VAE_CONFIG = {
    **{key: value for key, value in _MAKE_TINY_VAE.items() if key != "decoder"},
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


def random_state(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Every tensor of `model`'s state dict drawn from `seed` (ComfyUI's conv layers start
    uninitialised): weights of fan-in n uniform with std 1/sqrt(n), so each layer keeps its input's
    scale; 1-d weights (norms) 1 + N(0, 0.2); biases N(0, 0.1); the AdaLN tables N(0, 0.2); the
    latent statistics std 0.5..1.5 and mean N(0, 0.2)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in model.state_dict().items():
        shape = tuple(value.shape)
        if key.endswith("std-of-means"):
            value = 0.5 + torch.rand(shape, generator=generator)
        elif key.endswith(("mean-of-means", "scale_shift_table")):
            value = 0.2 * torch.randn(shape, generator=generator)
        elif key.endswith("bias"):
            value = 0.1 * torch.randn(shape, generator=generator)
        elif len(shape) == 1:
            value = 1.0 + 0.2 * torch.randn(shape, generator=generator)
        else:
            bound = (3.0 / (value[0].numel())) ** 0.5
            value = (2.0 * torch.rand(shape, generator=generator) - 1.0) * bound
        state[key] = value.contiguous()
    return state


def tiny_na_vae_state_dict(config: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """The state dict of ComfyUI's CausalDiffusionVAE(config) with random weights (see the docstring)."""
    from comfy.ldm.lightricks.vae.na_diffusion_decoder import CausalDiffusionVAE

    state = random_state(CausalDiffusionVAE(config=config), seed)
    state["decoder.conv_out.weight"] *= OUTPUT_GAIN
    return state


def with_video_vae(tiny_checkpoint: Path, out: Path, config: dict, state: dict[str, torch.Tensor]) -> Path:
    """A copy of the tiny LTX-2 checkpoint whose `vae.*` weights are `state` and whose metadata "vae"
    section is `config`, as ComfyUI's checkpoint loader reads them."""
    with safe_open(str(tiny_checkpoint), framework="pt") as f:
        metadata = json.loads(f.metadata()["config"])
        tensors = {key: f.get_tensor(key) for key in f.keys() if not key.startswith("vae.")}
    tensors.update({f"vae.{key}": value for key, value in state.items()})
    metadata["vae"] = config
    save_file(tensors, str(out), metadata={"config": json.dumps(metadata)})
    return out


def make_na_checkpoint(tiny_checkpoint: Path, out: Path, config: dict | None = None, seed: int = 0) -> Path:
    """A copy of the tiny LTX-2 checkpoint whose video VAE is a tiny CausalDiffusionVAE (module docstring)."""
    config = TINY_NA_VAE_CONFIG if config is None else config
    return with_video_vae(tiny_checkpoint, out, config, tiny_na_vae_state_dict(config, seed))
