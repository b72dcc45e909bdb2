"""Which ComfyUI the ranks import their model code from, and whether it can serve LTX.

Pure standard library: the UI side decides the root (the ComfyUI it runs in, else COMFYUI_PATH,
else the ComfyUI whose custom_nodes/ holds the pack) and every rank checks it again before importing.
Nothing falls back silently: a root that is named but unusable is an error that says what to change.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

COMFYUI_PATH_ENV = "COMFYUI_PATH"
# The oldest release the pack is tested on; newer ones share the API it uses (docs/DESIGN.md).
TESTED_VERSION = "0.33.0"
# Files whose presence means the ComfyUI can run each LTX family (added in that order upstream).
LTX_FILES = {
    "LTX-2": "comfy/ldm/lightricks/av_model.py",
    "LTX-2.5 diffusion VAE": "comfy/ldm/lightricks/vae/na_diffusion_decoder.py",
}
_VERSION_RE = re.compile(r"""__version__\s*=\s*["']([^"']+)["']""")


class ComfyUIUnusable(ValueError):
    """The ComfyUI named for the workers is missing, too old or broken; the message says what to do."""


@dataclass(frozen=True)
class ComfyUIRoot:
    path: str  # the folder holding ComfyUI's main.py and comfy/
    version: str  # comfyui_version.py's __version__, "unknown" when absent


def read_version(path: Path) -> str:
    try:
        match = _VERSION_RE.search((path / "comfyui_version.py").read_text())
    except OSError:
        return "unknown"
    return match.group(1) if match else "unknown"


def check_comfyui_root(path: str | Path, *, source: str = COMFYUI_PATH_ENV) -> ComfyUIRoot:
    """The root at `path` if it is a ComfyUI with LTX-2 support, else ComfyUIUnusable.

    `source` says where the path came from, for the message (an env variable, "the running ComfyUI").
    """
    root = Path(path).expanduser().resolve()
    if not (root / "main.py").is_file() or not (root / "comfy").is_dir():
        raise ComfyUIUnusable(
            f"{source} points at {root}, which is not a ComfyUI folder (no main.py and comfy/ there); "
            "point it at the folder that holds ComfyUI's main.py"
        )
    version = read_version(root)
    if not (root / LTX_FILES["LTX-2"]).is_file():
        raise ComfyUIUnusable(
            f"the ComfyUI at {root} (version {version}) has no LTX-2 support ({LTX_FILES['LTX-2']} is "
            f"missing); update it to {TESTED_VERSION} or newer"
        )
    return ComfyUIRoot(str(root), version)


def running_comfyui_root() -> Path | None:
    """The root of the ComfyUI this process runs in (its `comfy` package is imported), else None."""
    comfy = sys.modules.get("comfy")
    places = [getattr(comfy, "__file__", None), *list(getattr(comfy, "__path__", None) or [])]
    for place in places:
        if place:
            root = (
                Path(place).resolve().parent if Path(place).is_dir() else Path(place).resolve().parent.parent
            )
            if (root / "main.py").is_file():
                return root
    return None


def find_comfyui_root(pack_root: Path) -> ComfyUIRoot | None:
    """The ComfyUI the workers should use, or None when there is none (then the ltx-core backend runs).

    In order: the ComfyUI this process runs in; COMFYUI_PATH (an error if set but unusable); the
    ComfyUI whose custom_nodes/ folder holds the pack.
    """
    running = running_comfyui_root()
    if running is not None:
        return check_comfyui_root(running, source="the running ComfyUI")
    named = os.environ.get(COMFYUI_PATH_ENV, "")
    if named:
        return check_comfyui_root(named)
    parent = pack_root.resolve().parent
    if parent.name == "custom_nodes" and (parent.parent / "main.py").is_file():
        return check_comfyui_root(parent.parent, source=f"the ComfyUI holding {pack_root.name}")
    return None
