"""Switching the LoRA set fused into each rank's loaded base (see lora.py for how and what it costs).

No collectives: every rank changes its own weights from the same files, so a rejection is alike on
every rank. The group manager sends "set_loras" before a job whose LoRA set differs from the fused one.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from dataclasses import dataclass

import torch

from ..engine.comfy.model import ComfyModel
from ..engine.ltxcore.checkpoint import TRANSFORMER, embeddings_processor_spec
from ..engine.ltxcore.lora import FuseTarget, LoraFuser, SwitchReport
from ..engine.ltxcore.model import LoadedModel
from ..wire.requests import LoraState, SetLoras
from .ops import InputRejected, op

STATE_KEY = "lora_fuser"
_log = logging.getLogger(__name__)


@dataclass
class _FuserEntry:
    model: weakref.ref  # the LoadedModel the fuser belongs to (weak: unloading frees the model)
    fuser: LoraFuser


def _loaded(job) -> LoadedModel | ComfyModel:
    model = job.runtime.state.get("model")
    if model is None:
        raise InputRejected("no model is loaded in the worker group; run the MGPU Loader first")
    return model


def _fuser(job, model: LoadedModel) -> LoraFuser:
    entry = job.runtime.state.get(STATE_KEY)
    if entry is None or entry.model() is not model:  # a new base was loaded: it is clean
        entry = _FuserEntry(weakref.ref(model), LoraFuser(model.path, model.dtype, model.mode))
        job.runtime.state[STATE_KEY] = entry
    return entry.fuser


def _targets(model: LoadedModel) -> list[FuseTarget]:
    return [
        FuseTarget(model.transformer.model, TRANSFORMER),
        FuseTarget(model.processor, embeddings_processor_spec()),
    ]


@op(SetLoras)
def set_loras(job, request: SetLoras) -> dict:
    """Make the fused LoRA set request.loras (in order); () restores the base.

    Returns the SwitchReport as a dict (changed False when the set was already fused). A failure after
    the first weight changed drops the model on this rank (its weights are unknown), so the next
    load_model loads it again.
    """
    model = _loaded(job)
    loras = list(request.loras)
    if isinstance(model, ComfyModel):
        return _set_comfy_loras(job, model, loras)
    fuser = _fuser(job, model)
    try:
        plan = fuser.plan(_targets(model), loras)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    if plan is None:
        return SwitchReport(changed=False).as_dict()
    for lora, _ in plan.files:
        if lora.unused_keys and job.rank == 0:  # ComfyUI logs these as "lora key not loaded"
            _log.warning("LoRA %s: %d keys change nothing in this checkpoint, e.g. %s",
                         lora.path.name, len(lora.unused_keys), lora.unused_keys[0])  # fmt: skip
    try:
        return fuser.apply(plan).as_dict()
    except Exception as exc:
        job.runtime.state.pop(STATE_KEY, None)
        job.runtime.state.pop("model", None)
        raise RuntimeError(
            f"switching LoRAs failed part-way ({exc}); the base model was dropped and is loaded again on the next run"
        ) from exc


def _set_comfy_loras(job, model: ComfyModel, loras: list[tuple[str, float]]) -> dict:
    from ..engine.comfy.lora import apply_loras, plan_loras

    try:
        plan = plan_loras(model, loras)  # reads and maps every file before any weight changes
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    if plan is None:
        return SwitchReport(changed=False).as_dict()
    if plan.unused and job.rank == 0:  # ComfyUI logs each as "lora key not loaded"
        _log.warning("LoRA set %s: %d patches change nothing in this checkpoint", plan.key, plan.unused)
    try:
        return apply_loras(model, plan).as_dict()
    except Exception as exc:
        job.runtime.state.pop("model", None)
        raise RuntimeError(
            f"switching LoRAs failed part-way ({exc}); the base model was dropped and is loaded again on the next run"
        ) from exc


@op(LoraState)
def lora_state(job, request: LoraState) -> dict:
    """Diagnostics: the fused set and a SHA-256 over every transformer and connector parameter's bytes
    (reads every weight: seconds per GB)."""
    model = _loaded(job)
    if isinstance(model, ComfyModel):
        active, modules = model.loras, [model.diffusion_model]  # LTX-2's text connectors sit inside it
    else:
        entry = job.runtime.state.get(STATE_KEY)
        active = entry.fuser.active if entry is not None and entry.model() is model else ()
        modules = [target.module for target in _targets(model)]
    return {"active": [list(x) for x in active], "fingerprint": weights_fingerprint(modules)}


def weights_fingerprint(modules: list[torch.nn.Module]) -> str:
    """SHA-256 over the name and bytes of every parameter and buffer (fp8 weights are buffers)."""
    digest = hashlib.sha256()
    for module in modules:
        tensors = [*module.named_parameters(), *module.named_buffers()]
        for name, param in sorted(tensors, key=lambda item: item[0]):
            digest.update(name.encode())
            digest.update(param.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
