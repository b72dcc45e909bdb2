"""ComfyUI's weight patches (LoRA loaders) of the group MODEL, sent to the ranks.

NOTE [node patches]: LoraLoaderModelOnly (and LoraLoader's model side) run unchanged on the group
MODEL: comfy.sd.load_lora_for_models maps the LoRA's keys through the weightless model's weight names
(GroupBaseModel.state_dict) and adds its patches (key -> [(strength_patch, adapter, strength_model,
offset, function)]) to a clone, as for any model. The clone now sampling sends its whole patch set
with the model call; each rank adds the same patches to a clone of its own ModelPatcher and loads
it with ComfyUI's own loading (workers/engine/comfy/node_patches.py), so the weights are what native
patching makes them, and switching to another set or to none restores the base from ComfyUI's backup
bit for bit. Why the patches and not the file: the patches are what the node made (after key
mapping and conversion, maybe edited by other nodes), while a file name cannot be recovered from them.

The tensors travel once per distinct patch set (in shared memory, as every request tensor does):
a set is named by a token; while the sampling clone's set is the one last sent (same keys, same
adapter objects, same strengths) only the token travels. The adapters of the last set are held
here, so the identities compared stay valid. Adapters travel as their class name in
comfy.weight_adapter plus their weights; tuple patches ("diff", ...) as they are. Anything with a
Python function is refused, never dropped.
"""

from __future__ import annotations

import secrets
from typing import Any

import torch

from ...workers.wire import model_call as wire


class PatchSetSender:
    """What of the sampling clone's patch set a request carries: (token, wire form or None)."""

    def __init__(self) -> None:
        self._signature: tuple | None = None
        self._token = ""
        self._held: dict = {}  # the last set's entries: keeps the compared adapter ids alive

    def fields(self, patches: dict) -> tuple[str, list | None]:
        """("", None) for no patches; (token, None) for the set last sent; (new token, wire) else."""
        if not patches:
            return "", None
        signature = patch_signature(patches)
        if signature == self._signature:
            return self._token, None
        encoded = encode_patch_set(patches)
        self._signature, self._token = signature, secrets.token_hex(8)
        self._held = {key: list(entries) for key, entries in patches.items()}
        return self._token, encoded

    def forget(self) -> None:
        """The ranks may not hold the last set (a restarted group, a failed call): send it again."""
        self._signature, self._token, self._held = None, "", {}


def patch_signature(patches: dict) -> tuple:
    """Identifies a patch set while its adapters live: keys, strengths, offsets, adapter objects."""
    return tuple(
        (
            key,
            tuple(
                (sp, id(adapter), sm, offset, id(function)) for sp, adapter, sm, offset, function in entries
            ),
        )
        for key, entries in sorted(patches.items())
    )


def encode_patch_set(patches: dict) -> list:
    """[(key, [(strength_patch, adapter, strength_model, offset), ...]), ...] with adapters in wire form.
    ValueError (wire.NotCarried) for a patch with a function or an object ComfyUI does not define."""
    out = []
    for key, entries in sorted(patches.items()):
        encoded = []
        for strength_patch, adapter, strength_model, offset, function in entries:
            where = f"the weight patch of {key!r}"
            if function is not None:
                raise wire.NotCarried(f"{where} (its function)", function)
            encoded.append(
                (
                    float(strength_patch),
                    encode_adapter(adapter, where),
                    float(strength_model),
                    _plain(offset, where),
                )
            )
        out.append((key, encoded))
    return out


def encode_adapter(adapter: Any, where: str) -> Any:
    import comfy.weight_adapter

    if isinstance(adapter, comfy.weight_adapter.WeightAdapterBase):
        name = type(adapter).__name__
        if getattr(comfy.weight_adapter, name, None) is not type(adapter):
            raise wire.NotCarried(where, adapter)  # a subclass from another pack: its code cannot travel
        return {
            wire.TAG_ADAPTER: name,
            "loaded_keys": sorted(adapter.loaded_keys),
            "weights": _plain(adapter.weights, where),
        }
    return _plain(adapter, where)


def _plain(value: Any, where: str) -> Any:
    """Tensors (shared memory on the way), numbers, strings, None, and tuples / lists of those."""
    if isinstance(value, torch.Tensor) and value.is_meta:
        raise ValueError(
            f"{where} holds a weight of the MGPU Loader's MODEL itself, which lives in the worker group: "
            "a node that merges or copies model weights (ModelMerge*) cannot run on this MODEL; use "
            "CheckpointLoaderSimple's MODEL for it"
        )
    if value is None or isinstance(value, bool | int | float | str | torch.Tensor):
        return value
    if isinstance(value, list | tuple):
        return type(value)(_plain(item, f"{where}[{i}]") for i, item in enumerate(value))
    raise wire.NotCarried(where, value)
