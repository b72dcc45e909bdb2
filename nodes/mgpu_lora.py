"""MGPU LoRA: an MGPU_MODEL with one more LoRA, for the nodes downstream of it (e.g. stage 2).

No worker is called here: the LoRA set travels in the MGPU_MODEL and the workers fuse it in place
before the next job that runs the transformer (workers/engine/ltxcore/lora.py), on the base that is already loaded.
"""

from __future__ import annotations

from dataclasses import replace

from ..workers.group.manager import MGPUModel
from ..workers.wire.lora_files import read_lora
from ..workers.wire.model_files import read_safetensors_header
from . import comfy

LORA_FOLDERS = ("loras",)
NO_LORA = "None"
# ComfyUI's LoraLoaderModelOnly allows strengths in [-100, 100] in steps of 0.01.
STRENGTH_LIMIT = 100.0
STRENGTH_STEP = 0.01


def lora_entry(checkpoint: str, lora_name: str, strength: float) -> tuple[tuple[str, float], ...]:
    """((full path, strength),) for a LoRA picked in a node, or () for "None" or strength 0.

    The file is checked against the checkpoint from headers alone (safetensors, key names, shapes), so
    a LoRA for another model fails here, at the node that picked it, with the reason.
    """
    if lora_name == NO_LORA or float(strength) == 0.0:
        return ()
    path = comfy.full_path(LORA_FOLDERS, lora_name)
    read_lora(path, read_safetensors_header(checkpoint))
    return ((str(path), float(strength)),)


def add_lora(mgpu_model: MGPUModel, lora_name: str, strength: float):
    """MGPU LoRA: (MGPU_MODEL,) with the LoRA `lora_name` at `strength` added to the set the workers
    fuse (checked against the checkpoint from headers here)."""
    entry = lora_entry(mgpu_model.checkpoint, lora_name, strength)
    return (replace(mgpu_model, loras=(*mgpu_model.loras, *entry)),)
