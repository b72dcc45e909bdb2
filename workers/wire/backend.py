"""Which engine the ranks run a recipe on: ComfyUI's own model stack ("comfy", the engine) or ltx-core
("ltxcore", the reference for LTX-2 without ComfyUI). NOTE [engine seam] in workers/engine/protocol.py.

Pure standard library, decided on the UI side, once per recipe: inside ComfyUI (or with a ComfyUI
named by COMFYUI_PATH) ComfyUI's engine serves the loader's mode "comfyui"; ltx-core serves mode
"reference" (Lightricks' block order) and runs without ComfyUI (the [ltxcore] extra installs it). What
each engine can do is in wire/capabilities.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .comfyui_root import ComfyUIRoot, find_comfyui_root

BACKEND_COMFY = "comfy"
BACKEND_LTXCORE = "ltxcore"
BACKENDS = (BACKEND_COMFY, BACKEND_LTXCORE)
# Forces a backend: "comfy" (an error without a usable ComfyUI), "ltxcore", or "auto" (default).
ENV_BACKEND = "LTX2_MGPU_BACKEND"


@dataclass(frozen=True)
class BackendChoice:
    backend: str  # BACKEND_COMFY or BACKEND_LTXCORE
    root: ComfyUIRoot | None  # the ComfyUI the ranks import (backend comfy)
    reason: str  # one line for logs and the demo

    @property
    def root_path(self) -> str:
        return "" if self.root is None else self.root.path

    @property
    def root_version(self) -> str:
        return "" if self.root is None else self.root.version


def choose_backend(pack_root: Path, *, mode: str = "comfyui") -> BackendChoice:
    """The backend for a recipe in `mode`.

    Raises ComfyUIUnusable when COMFYUI_PATH (or LTX2_MGPU_BACKEND=comfy) names a ComfyUI that cannot
    serve: nothing falls back silently from a ComfyUI the user named.
    """
    forced = os.environ.get(ENV_BACKEND, "auto").strip().lower() or "auto"
    if forced not in (*BACKENDS, "auto"):
        raise ValueError(f"{ENV_BACKEND}={forced!r} is not one of auto, {', '.join(BACKENDS)}")
    if forced == BACKEND_LTXCORE:
        return BackendChoice(BACKEND_LTXCORE, None, f"ltx-core ({ENV_BACKEND}=ltxcore)")
    root = find_comfyui_root(pack_root)
    if forced == BACKEND_COMFY and root is None:
        raise ValueError(
            f"{ENV_BACKEND}=comfy but no ComfyUI was found: set COMFYUI_PATH to the folder holding "
            "ComfyUI's main.py, or unset LTX2_MGPU_BACKEND"
        )
    if root is None:
        return BackendChoice(
            BACKEND_LTXCORE, None, "ltx-core (no ComfyUI found; set COMFYUI_PATH to use ComfyUI's)"
        )
    if mode != "comfyui":
        return BackendChoice(BACKEND_LTXCORE, None, f"ltx-core (mode {mode!r} is ltx-core's own forward)")
    return BackendChoice(BACKEND_COMFY, root, f"ComfyUI {root.version} at {root.path}")
