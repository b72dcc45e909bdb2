"""NOTE [pack folder]: the pack's own folder is never an entry of sys.path.

The checkout's root is the package `ltx2_mgpu` (ComfyUI imports it from custom_nodes/<folder>/), so its
subfolders carry plain names: kernels/, nodes/, workers/, bench/, tests/. With the folder itself on
sys.path those names shadow installed packages: transformers >= 5.25 imports Hugging Face's `kernels`
and fails with "cannot import name 'CUDAProperties' from 'kernels'". Python puts the folder there
without asking: `python -m ltx2_mgpu.cli` run from the checkout root adds the current directory,
pytest adds a checkout whose folder name is no identifier, PYTHONPATH=. adds it too. Our code is
imported as `ltx2_mgpu` only, so every entry point (the CLI, the worker entry, the test session)
drops the folder before anything else is imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACK_ROOT = Path(__file__).resolve().parents[2]


def keep_pack_folder_off_sys_path() -> None:
    """Remove every sys.path entry that is the pack's folder ("" counts as the current directory)."""
    sys.path[:] = [entry for entry in sys.path if not is_pack_folder(entry)]


def is_pack_folder(entry: str) -> bool:
    try:
        return Path(entry).resolve() == PACK_ROOT
    except OSError:  # an entry that cannot be resolved (a removed folder) is not ours
        return False
