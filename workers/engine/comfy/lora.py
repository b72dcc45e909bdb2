"""LoRA sets on the comfy backend, applied the way ComfyUI's LoraLoader / LoraLoaderModelOnly do.

A set ((path, strength), ...) becomes a chain of ModelPatcher clones of the rank's base patcher, one
clone per LoRA with strength != 0, each made as comfy.sd.load_lora_for_models makes it (the file read
by comfy.utils.load_torch_file, keys mapped by comfy.lora.model_lora_keys_unet, converted by
comfy.lora_convert.convert_lora, patches from comfy.lora.load_lora added with add_patches). Loading
that clone with comfy.model_management.load_models_gpu is what makes its weights live: every clone of
one base shares the base's torch module and its `backup` of clean weights, so ComfyUI first restores
the weights the previous clone patched (bit for bit, from the backup) and then patches the new set.
The base is never reloaded; switching to no LoRA loads the base patcher itself (no patches). A set
that fits beside the base on the device is kept there after its first switch (weight_sets.py, NOTE
[kept weight sets]): switching back to it reads no file and patches nothing.

Memory, as in native ComfyUI: the backup holds a copy of every patched weight on the patcher's
offload device (host RAM for GPU ranks: up to the whole transformer per rank for the distilled LoRA,
which touches every block Linear); CPU ranks keep the original tensors without a copy.

Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...wire.lora_files import LoraSpec, SwitchReport, active_loras
from .model import ComfyModel
from .weight_sets import kept_patcher, make_live


def patch_lora(patcher: Any, path: str | Path, strength: float) -> tuple[Any, int, int]:
    """A clone of `patcher` with the LoRA at `path` added at `strength`, as load_lora_for_models does
    for the model side (strength_clip 0). Returns (clone, weights patched, LoRA patches that fit no
    weight of this model). Raises ValueError naming the file when it changes nothing in this model."""
    import comfy.lora
    import comfy.lora_convert
    import comfy.utils

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"LoRA {path} does not exist on this machine")
    tensors = comfy.utils.load_torch_file(str(path), safe_load=True)
    key_map = comfy.lora.model_lora_keys_unet(patcher.model, {})
    loaded = comfy.lora.load_lora(comfy.lora_convert.convert_lora(tensors), key_map)
    clone = patcher.clone()
    patched = clone.add_patches(loaded, strength)
    if not patched:
        example = next(iter(sorted(tensors)), "(no tensors)")
        raise ValueError(
            f"LoRA {path.name} changes no weight of this model: its keys look like {example!r}; an LTX-2 "
            "LoRA names weights like 'diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight'"
        )
    return clone, len(patched), len(loaded) - len(patched)


def lora_patcher(base: Any, loras: Iterable[tuple[str, float]]) -> tuple[Any, int, int]:
    """The patcher for a whole set: base, then one clone per active LoRA in order (as a chain of
    LoraLoaderModelOnly nodes builds it). Returns (patcher, weights patched, unused patches)."""
    patcher, unused = base, 0
    for path, strength in active_loras(loras):
        patcher, _, not_loaded = patch_lora(patcher, path, strength)
        unused += not_loaded
    return patcher, len(patcher.patches), unused


@dataclass(frozen=True)
class LoraPlan:
    """A checked switch: `key` the new set, `patcher` its ModelPatcher (not yet live), `patched` the
    weights it patches, `unused` LoRA patches that fit no weight of this model."""

    key: LoraSpec
    patcher: Any
    patched: int
    unused: int


def plan_loras(model: ComfyModel, loras: Iterable[tuple[str, float]]) -> LoraPlan | None:
    """Read and map every file of the set (no weight changes); a set kept on the device is taken as
    it is, its files unread. None when that set is already live. Raises ValueError naming a file
    that is missing or changes nothing in this model."""
    key: LoraSpec = active_loras(loras)
    if key == model.loras:
        return None
    kept = kept_patcher(model, set_key(key))
    if kept is not None:
        return LoraPlan(key, kept, len(kept.patches), 0)
    patcher, patched, unused = lora_patcher(model.base_patcher, key)
    return LoraPlan(key, patcher, patched, unused)


def set_key(loras: LoraSpec) -> tuple:
    """What names a set's content for weight_sets: each file's path, size and change time with its
    strength (a file written again under its name is read again)."""
    stats = []
    for path, strength in loras:
        try:
            stat = os.stat(path)
        except OSError:
            return ("files", loras, None)  # never kept: planning names the missing file
        stats.append((path, strength, stat.st_size, stat.st_mtime_ns))
    return ("files", tuple(stats))


def apply_loras(model: ComfyModel, plan: LoraPlan) -> SwitchReport:
    """Make `plan`'s patcher live on the rank's device and `model.patcher`. An error here leaves the
    weights unknown: the caller drops the model."""
    restored = len(model.patcher.patches)
    # offloaded weights: ComfyUI's patches apply as the layers are cast in
    switch = make_live(model, plan.patcher, set_key(plan.key))
    model.patcher, model.loras = switch.patcher, plan.key
    fused_bytes = sum(_numel_bytes(plan.patcher, name) for name in plan.patcher.patches)
    return switch.report(
        restored=restored, fused=plan.patched, fused_bytes=fused_bytes, unused_keys=plan.unused
    )


def switch_loras(model: ComfyModel, loras: Iterable[tuple[str, float]]) -> SwitchReport:
    """plan_loras + apply_loras (in-process use)."""
    plan = plan_loras(model, loras)
    return SwitchReport(changed=False) if plan is None else apply_loras(model, plan)


def _numel_bytes(patcher: Any, name: str) -> int:
    import comfy.utils

    weight = comfy.utils.get_attr(patcher.model, name)
    return weight.numel() * weight.element_size()
