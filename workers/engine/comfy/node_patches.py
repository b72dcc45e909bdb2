"""The group MODEL's weight patches on a rank (NOTE [node patches] in nodes/group_model/patches.py):
the patch set a ComfyUI LoRA loader made in the UI process, added to a clone of this rank's patcher
and made live with ComfyUI's own loading. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import uuid
from typing import Any

import torch

from ...wire import model_call as wire
from ..protocol import InputRejected
from .model import ComfyModel

# Patch sets kept at once, by token: two MODEL outputs of one graph with different LoRAs (stage 1
# and stage 2) alternate without resending. Each holds a copy of its LoRA tensors in host memory,
# as the UI process does (the distilled LoRA of the 22B: ~1 GB in bf16).
SETS_KEPT = 2
_SWITCH = "node_patches_switch"  # model.extras: the last switch, until a reply carries it
_LIVE_KEY = "node_patches_live_key"  # model.extras: the set key make_live last made live


class PatchSets:
    """Decoded patch sets by token, most recently used last; every rank holds the same."""

    def __init__(self) -> None:
        self._by_token: dict[str, dict[str, list[tuple]]] = {}

    def get(self, token: str, encoded: list | None) -> dict[str, list[tuple]]:
        """The set `token` names, stored from `encoded` when given. ValueError starting with
        wire.CACHE_MISS when neither is here (the UI then sends the set again)."""
        if encoded is not None:
            patches = decode_patch_set(encoded)
        else:
            patches = self._by_token.pop(token, None)
            if patches is None:
                raise ValueError(f"{wire.CACHE_MISS} weight patch set {token} is not held here")
        self._by_token.pop(token, None)
        while len(self._by_token) >= SETS_KEPT:
            self._by_token.pop(next(iter(self._by_token)))
        self._by_token[token] = patches
        return patches


def decode_patch_set(encoded: list) -> dict[str, list[tuple]]:
    """The wire form back into ComfyUI's ModelPatcher.patches entries; tensors copied out of the
    request's shared memory (unlinked after the job). ValueError for an adapter ComfyUI lacks here."""
    return {
        key: [(sp, _adapter(adapter), sm, _tuple(offset), None) for sp, adapter, sm, offset in entries]
        for key, entries in encoded
    }


def _adapter(value: Any) -> Any:
    import comfy.weight_adapter

    if isinstance(value, dict) and wire.TAG_ADAPTER in value:
        cls = getattr(comfy.weight_adapter, value[wire.TAG_ADAPTER], None)
        if not (isinstance(cls, type) and issubclass(cls, comfy.weight_adapter.WeightAdapterBase)):
            raise ValueError(
                f"the workers' ComfyUI has no weight adapter {value[wire.TAG_ADAPTER]!r}; run the workers "
                "with the ComfyUI that made the patch"
            )
        return cls(set(value["loaded_keys"]), _tuple(value["weights"]))
    return _tuple(value)


def _tuple(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(_tuple(item) for item in value)
    return value


def patched_patcher(model: ComfyModel, token: str, patches: dict[str, list[tuple]]) -> Any:
    """A clone of the rank's patcher (the loader's LoRAs fused) with `patches` after its own, as a
    LoRA node after the loader's LoRA makes it; kept per (token, patcher) in model.extras."""
    if not token:
        return model.patcher
    kept = model.extras.get("node_patches")
    if kept is not None and kept[0] == token and kept[1] is model.patcher:
        return kept[2]
    clone = model.patcher.clone()
    for key, entries in patches.items():
        clone.patches[key] = [*clone.patches.get(key, []), *entries]
    clone.patches_uuid = uuid.uuid4()
    model.extras["node_patches"] = (token, model.patcher, clone)
    return clone


def make_live(model: ComfyModel, patcher: Any, token: str = "") -> Any:
    """Make `patcher`'s patch set the one in the shared weights (`token`: the node patches it adds to
    the rank's own set): a set kept on the device is swapped in, else ComfyUI restores the previous
    set's weights from its backup and patches this one (weight_sets.make_live). Returns the patcher
    to sample with (another one when the set runs unfused)."""
    from .lora import set_key
    from .weight_sets import make_live as make_set_live

    key = set_key(model.loras)
    key = ("node", key, token) if token else key
    model.extras.pop(_SWITCH, None)  # only this call's switch is reported
    switch = make_set_live(model, patcher, key)
    before = model.extras.get(_LIVE_KEY)
    model.extras[_LIVE_KEY] = key
    # The base made live with no set live before it (a fresh load) is no switch to speak of.
    if switch.how != "live" and (switch.how != "base" or before not in (None, key)):
        model.extras[_SWITCH] = switch
    return switch.patcher


def switch_reply(model: ComfyModel) -> dict:
    """{"lora_switch": SwitchReport dict} for the reply of the job whose make_live switched the set
    (the UI process prints its line, as the MGPU LoRA's switches print theirs), else {}."""
    switch = model.extras.pop(_SWITCH, None)
    if switch is None:
        return {}
    return {"lora_switch": switch.report().as_dict()}


def live_patcher(sets: PatchSets, model: ComfyModel, request: Any) -> Any:
    """The rank's patcher with the weight patches a request names by `patch_token` / `patches`
    (ComfyModelCall, ComfyTextEmbeds, GuiderSpec), made live. InputRejected (alike on every rank: all
    hold the same sets) when the set is neither sent nor held."""
    patches = {}
    if request.patch_token:
        try:
            patches = sets.get(request.patch_token, request.patches)
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
    patcher = patched_patcher(model, request.patch_token, patches)
    patcher = make_live(model, patcher, request.patch_token)
    return patcher
