"""Random tiny weights for modules built with ComfyUI's own classes (the LTX-2.5 tiny files).

LTX-2.5 is not in ltx-core 1.0.0, so its tiny files are drawn from ComfyUI's modules at small
widths: `comfyui_for_tiny()` imports ComfyUI's model side into this process (CPU) and
`random_state()` draws a value for every state-dict entry with the rules of tiny_model (O(1)
contributions, each tensor from its own generator seeded by (seed, file key)), plus the few
parameter kinds only ComfyUI's LTX-2.5 modules have.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from .tiny_model import NORM_WEIGHT_STD, _generator, _init_value, state_entries

PACK_ROOT = Path(__file__).resolve().parents[2]
# The keyframe marker is added to the tokens of a guide frame; O(1) like the tokens it marks.
KEYFRAME_EMBEDDING_STD = 0.5
GATE_BIAS_STD = 0.5


def comfyui_for_tiny() -> ModuleType:
    """ComfyUI's comfy.model_management, imported for the CPU from the ComfyUI the pack finds.

    Raises ValueError naming what to set when no ComfyUI is found (the LTX-2.5 tiny files are
    built with ComfyUI's classes; ltx-core 1.0.0 has no LTX-2.5).
    """
    import sys

    if "comfy.model_management" in sys.modules:  # inside ComfyUI, or a test that imported it
        return sys.modules["comfy.model_management"]
    from ..engine.comfy.bootstrap import import_comfyui
    from ..wire.comfyui_root import COMFYUI_PATH_ENV, find_comfyui_root

    root = find_comfyui_root(PACK_ROOT)
    if root is None:
        raise ValueError(
            "the LTX-2.5 tiny files are built with ComfyUI's own model classes (ltx-core 1.0.0 has no "
            f"LTX-2.5), and no ComfyUI was found: set {COMFYUI_PATH_ENV} to a ComfyUI 0.33 or newer "
            "folder (the one holding main.py), or run this from a pack installed in a ComfyUI's "
            "custom_nodes/"
        )
    return import_comfyui(root, torch.device("cpu"))


def random_state(
    module: torch.nn.Module,
    to_file_key: Callable[[str], str],
    seed: int,
    gain: float,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> dict[str, torch.Tensor]:
    """Values for every persistent entry of `module`'s state dict (which may live on "meta"), keyed
    by file key: drawn in float32 on `device` (a GPU draws real-size models in seconds; its numbers
    differ from the CPU's for the same seed), stored as `dtype`."""
    state_keys = set(module.state_dict())
    tensors: dict[str, torch.Tensor] = {}
    device = torch.device(device)
    for key, owner, local_name, value in state_entries(module):
        file_key = to_file_key(key)
        gen = _generator(seed, file_key)
        if device.type != "cpu":
            gen = torch.Generator(device).manual_seed(gen.initial_seed())
        with device:  # the init rules' factory calls draw there
            drawn = _init_value_25(owner, local_name, tuple(value.shape), gain, gen)
        tensors[file_key] = drawn.to(dtype)
    missing = state_keys - {k for k in state_keys if to_file_key(k) in tensors}
    assert not missing, f"no value drawn for {sorted(missing)}"
    return tensors


def _is_norm(module: torch.nn.Module) -> bool:
    # ComfyUI's diffusion decoder and Gemma 4 bring their own RMSNorm classes.
    return type(module).__name__.endswith(("RMSNorm", "LayerNorm", "GroupNorm"))


def _init_value_25(
    module: torch.nn.Module, name: str, shape: tuple[int, ...], gain: float, gen: torch.Generator
) -> torch.Tensor:
    if name == "weight" and _is_norm(module) and not isinstance(module, torch.nn.RMSNorm):
        # Gemma's norms multiply by (1 + w), the others by w: std-0.1 draws around 0 or 1.
        mean = 0.0 if "Gemma" in type(module).__name__ or _adds_one(module) else 1.0
        return torch.randn(shape, generator=gen) * NORM_WEIGHT_STD + mean
    if name == "layer_scalar":  # Gemma 4 scales each layer's output; around 1
        return torch.randn(shape, generator=gen) * NORM_WEIGHT_STD + 1.0
    if name == "pos_embedding":  # Gemma 4's vision position table, added to O(1) patch embeddings
        return torch.randn(shape, generator=gen) * KEYFRAME_EMBEDDING_STD
    if name == "keyframes_abs_pos_embedding":
        return torch.randn(shape, generator=gen) * KEYFRAME_EMBEDDING_STD
    if name == "weight" and isinstance(module, torch.nn.Embedding):
        return torch.randn(shape, generator=gen) / math.sqrt(shape[1])
    if name == "bias" and "gate" in type(module).__name__.lower():
        return torch.randn(shape, generator=gen) * GATE_BIAS_STD
    return _init_value(module, name, shape, gain, gen)


def _adds_one(module: torch.nn.Module) -> bool:
    return bool(getattr(module, "add", False))
