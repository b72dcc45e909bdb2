"""ComfyUI's model side imported into a rank: comfy.* only, never its server, nodes or executor.

ComfyUI parses no command line unless comfy.options.enable_args_parsing() was called, so importing
comfy.cli_args gives its defaults; we set only what a rank's device needs before
comfy.model_management reads them (it picks its device and attention once, at import).
"""

from __future__ import annotations

import importlib
import logging
import sys
from types import ModuleType

import torch

from ...wire.comfyui_root import ComfyUIRoot, ComfyUIUnusable, check_comfyui_root
from ...wire.gpu_memory import process_limit_bytes
from . import int8_kernels

log = logging.getLogger(__name__)

# LTX2_MGPU_SDPA=comfyui keeps ComfyUI's own SDPA backend order in the workers (see prefer_cudnn_attention).
ENV_SDPA = "LTX2_MGPU_SDPA"
# Modules a rank must never import: they start ComfyUI's server or executor (DESIGN.md).
FORBIDDEN_MODULES = ("server", "execution", "main", "nodes")
_imported: ComfyUIRoot | None = None
# ComfyUI's own SDPA order as it was before prefer_cudnn_attention (for benches comparing with native).
comfyui_sdpa_order: tuple = ()


def import_comfyui(root: ComfyUIRoot, device: torch.device) -> ModuleType:
    """Make ComfyUI's model code importable in this process and configure it for `device`.

    Idempotent for the same root; another root in the same process is an error (modules are global).
    Returns comfy.model_management.
    """
    global _imported
    if _imported is not None:
        if _imported.path != root.path:
            raise ComfyUIUnusable(
                f"this worker already runs the ComfyUI at {_imported.path}; it cannot switch to {root.path}"
            )
        return sys.modules["comfy.model_management"]
    check_comfyui_root(root.path)
    if root.path not in sys.path:
        sys.path.insert(0, root.path)
    try:
        from comfy.cli_args import args

        if device.type == "cpu":
            args.cpu = True
        # SDPA, as ComfyUI runs on GPUs; on CPU it would otherwise pick sub-quadratic attention.
        args.use_pytorch_cross_attention = True
        model_management = importlib.import_module("comfy.model_management")
        for name in ("comfy.sd", "comfy.samplers", "comfy.sample", "comfy.ldm.lightricks.av_model"):
            importlib.import_module(name)
        if device.type == "cuda":
            prefer_cudnn_attention()
            log.info(int8_kernels.install(device))
            cap_model_management(model_management, device)
    except Exception as exc:  # any import failure is the user's ComfyUI install: say which and why
        raise ComfyUIUnusable(
            f"the ComfyUI at {root.path} (version {root.version}) failed to import in the worker: "
            f"{type(exc).__name__}: {exc}. Check that ComfyUI starts on its own and that its "
            "requirements.txt is installed in this Python"
        ) from exc
    use_comfyuis_attention()
    _imported = root
    return model_management


def cap_model_management(mm: ModuleType, device: torch.device) -> None:
    """NOTE [gpu memory cap] (wire/gpu_memory.py): in a worker held below its card, ComfyUI's model
    management sees the cap as the card. Its free memory on `device` never exceeds what the worker's
    memory fraction leaves (so its loads and tiled decodes size themselves as on a card that small),
    and its total is the cap. Uncapped workers keep ComfyUI's functions untouched."""
    limit = process_limit_bytes(device)
    if limit >= torch.cuda.get_device_properties(device).total_memory:
        return
    original = mm.get_free_memory

    def get_free_memory(dev=None, torch_free_too=False):
        free, torch_free = original(dev, torch_free_too=True)
        target = mm.get_torch_device() if dev is None else torch.device(dev)
        if target.type == "cuda" and (target.index is None or target.index == device.index):
            free = min(free, max(0, limit - torch.cuda.memory_allocated(device)))
        return (free, torch_free) if torch_free_too else free

    mm.get_free_memory = get_free_memory
    mm.total_vram = limit / (1024 * 1024)  # MiB, as ComfyUI keeps it


def imported_root() -> str:
    """The root of the ComfyUI this process imported (import_comfyui); "" before that."""
    return "" if _imported is None else _imported.path


def use_comfyuis_attention() -> str | None:
    """The attention function the ComfyUI process was started with (launcher.ATTENTION_ENV, e.g. sage
    from --use-sage-attention) made this rank's default, as ComfyUI's flag makes it its own; None when
    it runs with its default. ComfyUIUnusable when this rank's ComfyUI does not provide it."""
    import os

    import comfy.ldm.modules.attention as attention

    from ...wire.model_call import ATTENTION_ENV

    name = os.environ.get(ATTENTION_ENV, "")
    if not name:
        return None
    function = attention.get_attention_function(name, None)
    if function is None:
        raise ComfyUIUnusable(
            f"ComfyUI runs with the attention function {name!r} (its command line), which the worker "
            f"processes cannot use on their devices (they have: {', '.join(sorted(attention.REGISTERED_ATTENTION_FUNCTIONS))}). "
            "Start ComfyUI without that attention flag, or install what it needs for every GPU the MGPU Loader uses"
        )
    attention.optimized_attention = attention.optimized_attention_masked = function
    return name


def attention_name() -> str:
    """The registered name of this process's default attention function (what LTX's blocks call)."""
    import comfy.ldm.modules.attention as attention

    from ...wire.model_call import registered_name

    name = registered_name(attention.REGISTERED_ATTENTION_FUNCTIONS, attention.optimized_attention)
    return name or getattr(attention.optimized_attention, "__name__", "unknown")


def prefer_cudnn_attention() -> None:
    """Put cuDNN's attention first in ComfyUI's SDPA backend order, in this worker only.

    ComfyUI 0.33 orders SDPA as flash, cuDNN, efficient, math (comfy.ops.SDPA_BACKEND_PRIORITY, read
    at every call). On Hopper cuDNN's fused flash kernel is much faster at LTX's head size 128: one
    19B step at 24,576 tokens on an H200 takes 4,982 ms with ComfyUI's order and about 4,000 ms
    with cuDNN first (bench/bench_comfy_step.py). Both are exact attention; results differ at
    bf16 rounding. The user's own ComfyUI process is not touched.
    """
    import os

    if os.environ.get(ENV_SDPA, "").strip().lower() == "comfyui":
        return
    import comfy.ops

    order = getattr(comfy.ops, "SDPA_BACKEND_PRIORITY", None)
    if not order:  # older torch: ComfyUI sets no order, torch's own default applies
        return
    from torch.nn.attention import SDPBackend

    global comfyui_sdpa_order
    comfyui_sdpa_order = comfyui_sdpa_order or tuple(order)
    if SDPBackend.CUDNN_ATTENTION in order:
        order.remove(SDPBackend.CUDNN_ATTENTION)
        order.insert(0, SDPBackend.CUDNN_ATTENTION)
