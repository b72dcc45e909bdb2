"""ComfyUI node classes. Thin: validate, map ComfyUI types, delegate to workers (see jobs.py)."""

from ..workers.manager import get_manager
from . import comfy
from .loader import LTX2MGPULoader
from .sp_sampler import LTX2SPSampler

NODE_CLASS_MAPPINGS: dict[str, type] = {
    "LTX2MGPULoader": LTX2MGPULoader,
    "LTX2SPSampler": LTX2SPSampler,
}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {
    "LTX2MGPULoader": "MGPU Loader",
    "LTX2SPSampler": "SP Sampler",
}

# Inside ComfyUI, "Unload Models" also stops the worker group (and frees its GPU memory).
comfy.install_unload_hook(get_manager().unload)
