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

# The pack's menu category (loader.CATEGORY; not imported from there, since the loader imports us).
CATEGORY = "LTX-2 MultiGPU"
LORA_FOLDERS = ("loras",)
NO_LORA = "None"
# ComfyUI's LoraLoaderModelOnly allows strengths in [-100, 100] in steps of 0.01.
STRENGTH_LIMIT = 100.0
STRENGTH_STEP = 0.01


def strength_input(tooltip: str) -> tuple:
    return (
        "FLOAT",
        {
            "default": 1.0,
            "min": -STRENGTH_LIMIT,
            "max": STRENGTH_LIMIT,
            "step": STRENGTH_STEP,
            "tooltip": tooltip,
        },
    )


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


class LTX2MGPULoRA:
    DESCRIPTION = (
        "Adds a LoRA (ComfyUI's loras folder) to an MGPU_MODEL for the nodes that take this output, e.g. the "
        "distilled LoRA for stage 2 while stage 1 runs without it. The base stays loaded once: before a job "
        "with another LoRA set the workers restore the clean weights from the checkpoint and fuse the new set."
    )
    CATEGORY = CATEGORY
    RETURN_TYPES = ("MGPU_MODEL",)
    RETURN_NAMES = ("mgpu_model",)
    FUNCTION = "apply"

    @classmethod
    def INPUT_TYPES(cls) -> dict:
        return {
            "required": {
                "mgpu_model": ("MGPU_MODEL", {"tooltip": "From MGPU Loader (or another MGPU LoRA)."}),
                "lora_name": (
                    comfy.filename_list("loras"),
                    {"tooltip": "An LTX-2 LoRA, e.g. ltx-2-19b-distilled-lora-384 for stage 2."},
                ),
                "strength": strength_input("How strongly the LoRA changes the model; 0 leaves it unchanged."),
            },
        }

    def apply(self, mgpu_model: MGPUModel, lora_name: str, strength: float):
        entry = lora_entry(mgpu_model.checkpoint, lora_name, strength)
        return (replace(mgpu_model, loras=(*mgpu_model.loras, *entry)),)


NODE_CLASSES = {"LTX2MGPULoRA": (LTX2MGPULoRA, "MGPU LoRA")}
