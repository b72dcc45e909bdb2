"""What the tests' in-process ranks import first, imported once by multiprocessing's fork server that
conftest.run_ranks forks them from (a spawned rank imports torch and ComfyUI's model side again: about
6 s of CPU each on the 2-core CI machine). ComfyUI's model side is imported as the ranks import it:
configured for CPU ranks from COMFYUI_PATH."""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed

from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV, ComfyUIUnusable, check_comfyui_root

if os.environ.get(COMFYUI_PATH_ENV):
    # A ComfyUI that does not import here fails in the rank that imports it, with its own message.
    with contextlib.suppress(ComfyUIUnusable):
        from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui

        import_comfyui(check_comfyui_root(os.environ[COMFYUI_PATH_ENV]), torch.device("cpu"))
