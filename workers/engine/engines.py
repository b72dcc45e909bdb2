"""The engines a rank can run, made by name (NOTE [engine seam] in protocol.py).

Each engine's package is imported only when that engine is made, so a group on ComfyUI's engine never
imports ltx-core (tests/test_engine_seam.py) and one on ltx-core never imports ComfyUI.
"""

from __future__ import annotations

from ..wire.backend import BACKEND_COMFY, BACKEND_LTXCORE
from ..wire.capabilities import capabilities, check_installed
from .protocol import Engine


def make_engine(name: str) -> Engine:
    """A fresh engine `name` holding no model. ValueError for an unknown name, or an engine whose
    package is not installed (saying how to install it)."""
    check_installed(capabilities(name))
    if name == BACKEND_COMFY:
        from .comfy.engine import ComfyEngine

        return ComfyEngine()
    if name == BACKEND_LTXCORE:
        from .ltxcore.engine import LtxCoreEngine

        return LtxCoreEngine()
    raise AssertionError(f"capabilities() accepted an engine without a maker: {name}")


def preload_comfy(comfyui_root: str) -> None:
    """Import ComfyUI's model side at `comfyui_root` for CPU ranks, and our engine over it, ahead of the
    first load (the fork server's preload: workers/group/forked_workers.py NOTE [fork server]). The
    path is kept as given: the load request carries the same string and import_comfyui compares them."""
    import torch

    from ..wire.comfyui_root import ComfyUIRoot
    from .comfy.bootstrap import import_comfyui

    import_comfyui(ComfyUIRoot(comfyui_root, "unknown"), torch.device("cpu"))
    from .comfy import engine  # noqa: F401
