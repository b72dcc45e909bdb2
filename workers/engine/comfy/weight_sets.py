"""LoRA sets kept on the device beside the base: switching between them costs no re-fusing.

NOTE [kept weight sets]: ComfyUI switches a model's LoRA set by writing the base weights back from
its backup (host memory on a GPU rank) and patching the new set into every weight it touches. For
the 22B's distilled LoRA that is every Linear of the blocks dequantized, patched and quantized again:
seconds per switch, paid twice per job when stage 1 samples the base and stage 2 the LoRA.

Here a set, the first time it is made live, is computed by ComfyUI's own patching
(ModelPatcher.patch_weight_to_device with return_weight: the same function, rounding seed and
re-quantization as its load, so the weights are bit for bit what it fuses) into tensors of their
own, and kept. The base tensors stay as they were. Switching then puts each touched module's
weight Parameter back to the base's or the set's (no copy, no arithmetic) and tells ComfyUI the set
is live (`current_weight_patches_uuid`; its `backup` holds the base tensors), so the load ComfyUI
runs before sampling finds nothing to do, and its own unpatching, if anything triggers it, writes
the base back.

When: weights replicated on the device by ComfyUI's plain ModelPatcher (offloaded, sharded, layers
and GGUF patch as ComfyUI does), and while the set fits: its touched tensors again (the distilled
LoRA: about the blocks' bytes) with KEEP_FREE of the device left for sampling after older kept sets
are let go (LTX2_MGPU_LORA_KEEP_FREE sets another fraction). At most SETS_KEPT sets besides the base.
A set that does not fit runs unfused when its patches are plain LoRAs and they fit: a clone of the
patcher without weight patches carries ComfyUI's own bypass injection (its LoraLoaderBypass code),
which adds the LoRA in each layer's forward; the base stays live. Otherwise, or with
LTX2_MGPU_LORA_SETS=fused, the set is fused as ComfyUI fuses it (native's memory and time).

Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import collections
import logging
import os
import time
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import torch

from ...wire.lora_files import SwitchReport
from .model import ComfyModel
from .quantized_shards import stored_bytes

log = logging.getLogger(__name__)

ENV = "LTX2_MGPU_LORA_SETS"  # auto (default), kept, unfused or fused (ComfyUI's patching at each switch)
MODES = ("auto", "kept", "unfused", "fused")
_INJECTIONS = "ltx2_mgpu_unfused_lora"
SETS_KEPT = 2  # a template's stage-2 LoRA and one more (an IC-LoRA, a style LoRA toggled between runs)
KEEP_FREE = 0.25  # of the device's memory, left for sampling after a set is kept
ENV_KEEP_FREE = "LTX2_MGPU_LORA_KEEP_FREE"  # another fraction (a job that needs more room, or less)
_EXTRAS_KEY = "kept_weight_sets"


@dataclass
class KeptSet:
    patcher: Any  # the ModelPatcher whose patch set this is (ComfyUI loads it before sampling)
    tensors: dict[str, torch.nn.Parameter]  # weight key -> that set's patched weight
    nbytes: int


@dataclass(frozen=True)
class Switch:
    """How a set was made live: "kept" (swapped in), "built" (computed and kept), "unfused" (its
    LoRAs beside the base in each forward), "fused" (ComfyUI's patching), "base", "live" (already);
    `kept_bytes` the device bytes all kept sets hold; `reason` why the set was not kept."""

    how: str
    seconds: float
    kept_bytes: int = 0
    reason: str = ""
    patcher: Any = None  # the patcher sampling loads (an unfused set's: a clone with its LoRAs injected)

    def report(self, **counts: int) -> SwitchReport:
        """The wire's SwitchReport of this switch (`counts`: restored / fused / fused_bytes /
        unused_keys where the caller knows them)."""
        return SwitchReport(
            changed=True,
            seconds=self.seconds,
            how=self.how,
            kept_bytes=self.kept_bytes,
            reason=self.reason,
            **counts,
        )


class WeightSets:
    """The kept sets of one model on one rank, and which one its modules hold."""

    def __init__(self) -> None:
        self.base: dict[str, torch.nn.Parameter] = {}  # key -> base weight, for every key a kept set patches
        self.sets: collections.OrderedDict[Hashable, KeptSet] = collections.OrderedDict()
        self.unfused: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()  # key -> patcher
        self.live: Hashable | None = None  # the kept set the modules hold; None: the base
        self.live_uuid: Any = None  # current_weight_patches_uuid as this object last left it

    @property
    def kept_bytes(self) -> int:
        return sum(s.nbytes for s in self.sets.values())

    def holds_our_state(self, model: Any) -> bool:
        """Whether the modules hold what this object put there (nobody else loaded a set since)."""
        if model.current_weight_patches_uuid not in (None, self.live_uuid):
            return False
        expected = self.sets[self.live].tensors if self.live is not None else {}
        return all(_get(model, key) is expected.get(key, base) for key, base in self.base.items())

    def put(self, patcher: Any, target: Hashable | None, live: bool = True) -> None:
        """Make the modules hold kept set `target` (None: the base) and tell ComfyUI `patcher`'s set is
        live; `live` False: a mark no patcher has, so ComfyUI's next load patches its own set."""
        model = patcher.model
        tensors = self.sets[target].tensors if target is not None else {}
        for key, base in self.base.items():
            _set(model, key, tensors.get(key, base))
        for key in tensors:  # ComfyUI's load patches a module without this mark (after its unpatching)
            _get(model, key.rsplit(".", 1)[0]).comfy_patched_weights = True
        patcher.backup.clear()  # shared by every clone of the base: what ComfyUI's unpatching restores
        backup = collections.namedtuple("Dimension", ["weight", "inplace_update"])
        patcher.backup.update({key: backup(self.base[key], False) for key in tensors})
        self.live, self.live_uuid = target, patcher.patches_uuid if live else uuid.uuid4()
        model.current_weight_patches_uuid = self.live_uuid

    def drop(self, patcher: Any) -> None:
        """Give every kept set back; the modules hold the base again."""
        if self.base and self.holds_our_state(patcher.model):
            # Not None: with None ComfyUI's next load would take the weights as loaded, patching nothing.
            self.put(patcher, None, live=False)
            patcher.backup.clear()
        self.base.clear()
        self.sets.clear()
        self.live = self.live_uuid = None


def make_live(model: ComfyModel, patcher: Any, key: Hashable) -> Switch:
    """Make `patcher`'s patch set live in `model` on this rank: a kept set swapped in, else computed
    and kept when it fits, else its LoRAs run unfused beside the base when they fit, else fused as
    ComfyUI does. `key` names the set's content (its files and strengths, or the node's patch token)
    so a later switch finds it without the patcher it was built from. Sampling must load the
    returned Switch.patcher. An error leaves the weights unknown: the caller drops the model."""
    from .weights import make_resident

    start = time.perf_counter()
    sets: WeightSets = model.extras.setdefault(_EXTRAS_KEY, WeightSets())

    def done(how: str, live: Any, reason: str = "") -> Switch:
        return Switch(how, time.perf_counter() - start, sets.kept_bytes, reason, live)

    ours = not sets.base or sets.holds_our_state(patcher.model)
    if ours and patcher.model.current_weight_patches_uuid == patcher.patches_uuid:
        return done("live", patcher)  # this set is the live one
    mode = _mode()
    unfused = sets.unfused.get(key) if ours and mode != "kept" else None
    if unfused is not None and patcher.model.current_weight_patches_uuid == unfused.patches_uuid:
        return done("live", unfused)  # its LoRAs already run beside the base (each model call asks again)
    if not ours:
        sets.drop(patcher)  # another load changed the weights: nothing kept is known to match
    reason = f"{ENV}=fused" if mode == "fused" else _not_kept_because(patcher)
    if reason:
        sets.drop(patcher)
        make_resident(patcher)
        return done("fused" if patcher.patches else "base", patcher, reason)
    if patcher.model.current_weight_patches_uuid not in (None, sets.live_uuid):
        make_resident(model.base_patcher)  # a set ComfyUI fused is live: it writes the base back first
    if key in sets.unfused and mode != "kept":
        sets.unfused.move_to_end(key)
        return done(_base(sets, sets.unfused[key], "unfused"), sets.unfused[key])
    if not patcher.patches:
        return done(_base(sets, patcher), patcher)
    if key in sets.sets and mode != "unfused":
        return done(_swap(sets, patcher, key, "kept"), patcher)
    reason = "" if mode != "unfused" else f"{ENV}=unfused"
    if mode in ("auto", "kept"):
        reason = _make_room(patcher, sets)
        if not reason:
            sets.put(patcher, None, live=False)  # the set is computed from the base
            _build(patcher, key, sets)
            return done(_swap(sets, patcher, key, "built"), patcher)
    if mode in ("auto", "unfused"):
        unfused, why = _unfused(patcher)
        if unfused is not None:
            sets.unfused[key] = unfused
            while len(sets.unfused) > SETS_KEPT:
                sets.unfused.popitem(last=False)
            return done(_base(sets, unfused, "unfused"), unfused, reason)
        reason = f"{reason}; unfused: {why}" if reason else why
    sets.drop(patcher)
    make_resident(patcher)
    return done("fused", patcher, reason)


def _base(sets: WeightSets, patcher: Any, how: str = "base") -> str:
    from .weights import make_resident

    sets.put(patcher, None)
    make_resident(patcher)  # ComfyUI's own bookkeeping (and an unfused set's forwards); no weight changes
    return how


def _swap(sets: WeightSets, patcher: Any, key: Hashable, how: str) -> str:
    from .weights import make_resident

    sets.sets.move_to_end(key)
    sets.sets[key].patcher = patcher  # the newest patcher of this content is the one sampling loads
    sets.put(patcher, key)
    make_resident(patcher)
    return how


def _unfused(patcher: Any) -> tuple[Any, str]:
    """A clone of `patcher` without weight patches whose LoRAs run beside the base weights in each
    layer's forward, by ComfyUI's own bypass injection (comfy.weight_adapter.BypassInjectionManager,
    what its LoraLoaderBypassModelOnly uses): (clone, "") or (None, why not)."""
    import comfy.weight_adapter
    from comfy.weight_adapter.lora import LoRAAdapter

    layers: list[Any] = []  # one manager per position in a key's patch list (stacked LoRAs)
    need = 0
    for key, entries in patcher.patches.items():
        for index, (strength, adapter, strength_model, offset, function) in enumerate(entries):
            plain = (
                type(adapter) is LoRAAdapter
                and key.endswith(".weight")
                and strength_model == 1.0
                and offset is None
                and function is None
                and all(part is None for part in adapter.weights[3:6])  # no mid, DoRA, reshape
            )
            if not plain:
                return None, f"{key} carries a patch other than a plain LoRA"
            while len(layers) <= index:
                layers.append(comfy.weight_adapter.BypassInjectionManager())
            own = LoRAAdapter(adapter.loaded_keys, adapter.weights)  # the hook sets its multiplier on it
            layers[index].add_adapter(key, own, strength=strength)
            need += sum(t.numel() * t.element_size() for t in adapter.weights[:2])
    free, total = _memory(patcher.load_device)
    keep_free = _keep_free()
    if free - need < keep_free * total:
        return None, f"its LoRAs need {need / 2**30:.2f} GiB, {free / 2**30:.2f} GiB is free"
    clone = patcher.clone()
    clone.patches = {}
    clone.patches_uuid = uuid.uuid4()
    name = f"{_INJECTIONS}.{len(clone.injections)}"  # a clone of an unfused set keeps that set's injections
    clone.set_injections(name, [i for manager in layers for i in manager.create_injections(clone.model)])
    return clone, ""


def _mode() -> str:
    mode = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(
            f"{ENV}={mode!r}: use auto (kept beside the base, else unfused, else fused), kept, unfused or fused"
        )
    return mode


def kept_patcher(model: ComfyModel, key: Hashable) -> Any | None:
    """The patcher of kept or unfused set `key` (no file read or mapped again), else None."""
    sets: WeightSets | None = model.extras.get(_EXTRAS_KEY)
    if sets is not None and key in sets.sets:
        return sets.sets[key].patcher
    return None if sets is None else sets.unfused.get(key)


def drop_kept(model: ComfyModel) -> None:
    """Give the kept sets' memory back (the base stays live)."""
    sets: WeightSets | None = model.extras.get(_EXTRAS_KEY)
    if sets is not None:
        sets.drop(model.base_patcher)


def _not_kept_because(patcher: Any) -> str:
    import comfy.model_patcher

    from .weights import WEIGHTS_REPLICATED, residency

    if (
        type(patcher) is not comfy.model_patcher.ModelPatcher
    ):  # GGUF's and dynamic patchers load their own way
        return f"{type(patcher).__name__} patches its own way"
    weights = residency(patcher).weights
    if weights != WEIGHTS_REPLICATED:
        return f"weights {weights}: only replicated weights keep sets"
    if getattr(patcher.model, "model_lowvram", False):
        return "ComfyUI loaded the model partially"
    return ""


def _make_room(patcher: Any, sets: WeightSets) -> str:
    """Let the least recently used kept sets go until the new one fits; why it cannot, else ""."""
    need = sum(stored_bytes(_get(patcher.model, key)) for key in patcher.patches)
    keep_free = _keep_free()
    while True:
        free, total = _memory(patcher.load_device)
        if len(sets.sets) < SETS_KEPT and free - need >= keep_free * total:
            return ""
        if not sets.sets:
            return (
                f"keeping it needs {need / 2**30:.2f} GiB and {keep_free:.0%} of {total / 2**30:.1f} GiB "
                f"left free ({ENV_KEEP_FREE}); {free / 2**30:.2f} GiB is free"
            )
        oldest = next(iter(sets.sets))
        if oldest == sets.live:
            sets.put(patcher, None, live=False)
        del sets.sets[oldest]
        for name in [k for k in sets.base if not any(k in s.tensors for s in sets.sets.values())]:
            del sets.base[name]


def _keep_free() -> float:
    text = os.environ.get(ENV_KEEP_FREE, "").strip()
    try:
        value = float(text) if text else KEEP_FREE
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{ENV_KEEP_FREE}={text!r}: give the fraction of the device's memory to leave free, 0 to 1"
        )
    return value


def _build(patcher: Any, key: Hashable, sets: WeightSets) -> None:
    model = patcher.model
    device = patcher.load_device
    tensors = {}
    for name in patcher.patches:
        sets.base.setdefault(name, _get(model, name))
        weight = patcher.patch_weight_to_device(name, device_to=device, return_weight=True)
        tensors[name] = torch.nn.Parameter(weight, requires_grad=False)
    sets.sets[key] = KeptSet(patcher, tensors, sum(stored_bytes(t) for t in tensors.values()))


def _memory(device: torch.device) -> tuple[int, int]:
    """(free, total) bytes where the weights live: the GPU's (torch's cache counted free), else host RAM."""
    if device.type == "cuda":
        import comfy.model_management as mm

        return int(mm.get_free_memory(device)), int(torch.cuda.get_device_properties(device).total_memory)
    import psutil

    memory = psutil.virtual_memory()
    return int(memory.available), int(memory.total)


def _get(model: Any, key: str) -> Any:
    import comfy.utils

    return comfy.utils.get_attr(model, key)


def _set(model: Any, key: str, value: torch.nn.Parameter) -> None:
    import comfy.utils

    comfy.utils.set_attr(model, key, value)
