"""Switching the LoRA set of each rank's loaded base, on the group's engine (ComfyUI's ModelPatcher
clones, or ltx-core weights fused in place; see the engines' lora.py for how and what it costs).

No collectives: every rank changes its own weights from the same files, so a rejection is alike on
every rank. The group manager sends "set_loras" before a job whose LoRA set differs from the live one.
"""

from __future__ import annotations

import hashlib

import torch

from ..wire.requests import LoraState, SetLoras
from .ops import op


@op(SetLoras)
def set_loras(job, request: SetLoras) -> dict:
    """Make the LoRA set request.loras (in order) the live one; () restores the base. Returns the
    SwitchReport as a dict (changed False when the set was already live). A failure after the first
    weight changed drops the model on this rank, so the next load_model loads it again."""
    return job.engine.set_loras(job, request)


@op(LoraState)
def lora_state(job, request: LoraState) -> dict:
    """Diagnostics: the live set and a SHA-256 over every transformer and connector parameter's bytes
    (reads every weight: seconds per GB)."""
    active, modules = job.engine.lora_state(job)
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
