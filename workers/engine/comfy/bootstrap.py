"""ComfyUI's model side imported into a rank: comfy.* only, never its server, nodes or executor.

ComfyUI parses no command line unless comfy.options.enable_args_parsing() was called, so importing
comfy.cli_args gives its defaults; we set only what a rank's device needs before
comfy.model_management reads them (it picks its device and attention once, at import).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import torch

from ...wire.comfyui_root import ComfyUIRoot, ComfyUIUnusable, check_comfyui_root

# Modules a rank must never import: they start ComfyUI's server or executor (DESIGN.md).
FORBIDDEN_MODULES = ("server", "execution", "main", "nodes")
_imported: ComfyUIRoot | None = None


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
    except Exception as exc:  # any import failure is the user's ComfyUI install: say which and why
        raise ComfyUIUnusable(
            f"the ComfyUI at {root.path} (version {root.version}) failed to import in the worker: "
            f"{type(exc).__name__}: {exc}. Check that ComfyUI starts on its own and that its "
            "requirements.txt is installed in this Python"
        ) from exc
    _imported = root
    return model_management
