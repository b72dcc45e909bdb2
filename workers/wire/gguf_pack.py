"""Where the ComfyUI-GGUF pack (city96/ComfyUI-GGUF) is, found the way ComfyUI finds it, for GGUF files.

The ranks load GGUF weights with that pack's own loader and dequantizing ops (workers/engine/comfy/
gguf.py): found in the custom_nodes/ folder of the ComfyUI the workers run (any folder name: ComfyUI
loads every package there), or the folder named by LTX2_MGPU_COMFYUI_GGUF. The UI side and every rank
find it with the same rule. Pure standard library.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

GGUF_PACK_ENV = "LTX2_MGPU_COMFYUI_GGUF"
PACK_NAME = "ComfyUI-GGUF (city96/ComfyUI-GGUF)"
# What makes a folder that pack: its modules and the names we call in them.
PACK_FILES = {
    "loader.py": "def gguf_sd_loader",
    "ops.py": "class GGMLOps",
    "nodes.py": "class GGUFModelPatcher",
}
INSTALL_HINT = (
    "install it from ComfyUI-Manager (search 'ComfyUI-GGUF') or with `git clone "
    "https://github.com/city96/ComfyUI-GGUF` in ComfyUI's custom_nodes folder and `pip install gguf`, then "
    f"restart ComfyUI (or set {GGUF_PACK_ENV} to the pack's folder)"
)


def is_gguf_pack(folder: Path) -> bool:
    """Whether `folder` holds the ComfyUI-GGUF pack (its loader, ops and model patcher)."""
    try:
        return all(
            marker in (folder / name).read_text(errors="replace") for name, marker in PACK_FILES.items()
        )
    except OSError:
        return False


def find_gguf_pack(comfyui_root: str | Path | None) -> Path | None:
    """The pack's folder: LTX2_MGPU_COMFYUI_GGUF when set (ValueError if it is not the pack), else the first
    folder of `comfyui_root`/custom_nodes holding it (by name order), else None."""
    named = os.environ.get(GGUF_PACK_ENV, "")
    if named:
        folder = Path(named).expanduser().resolve()
        if not is_gguf_pack(folder):
            raise ValueError(
                f"{GGUF_PACK_ENV} points at {folder}, which is not the {PACK_NAME} pack (no loader.py with "
                f"gguf_sd_loader, ops.py with GGMLOps, nodes.py with GGUFModelPatcher); point it at that pack's folder"
            )
        return folder
    if not comfyui_root:
        return None
    custom_nodes = Path(comfyui_root) / "custom_nodes"
    if not custom_nodes.is_dir():
        return None
    for folder in sorted(
        p for p in custom_nodes.iterdir() if p.is_dir() and not p.name.endswith(".disabled")
    ):
        if is_gguf_pack(folder):
            return folder.resolve()
    return None


def require_gguf_pack(file_name: str, comfyui_root: str | Path | None) -> Path:
    """The pack's folder for loading `file_name`; ValueError naming the pack and how to install it when it
    is missing, or when the `gguf` package it needs is not installed in this Python."""
    folder = find_gguf_pack(comfyui_root)
    where = f"{Path(comfyui_root) / 'custom_nodes'}" if comfyui_root else "ComfyUI's custom_nodes folder"
    if folder is None:
        raise ValueError(
            f"{file_name} is a GGUF file: loading it needs the {PACK_NAME} pack, which is not in {where}; "
            f"{INSTALL_HINT}. Or pick the release's .safetensors file (bf16, fp8 or int8)"
        )
    if importlib.util.find_spec("gguf") is None:
        raise ValueError(
            f"{file_name} is a GGUF file: the {PACK_NAME} pack at {folder} needs the `gguf` Python package "
            "(gguf>=0.13), which is not installed in this Python; run `pip install gguf` and restart ComfyUI"
        )
    return folder
