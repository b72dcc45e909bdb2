"""load_model on the comfy backend: ComfyUI's model side imported into the rank, the file loaded by
ComfyUI's own checkpoint loader (workers/engine/comfy/). Called from ops_model.load_model when the
request names backend "comfy".

args: checkpoint (path), dtype (a DTYPES name), comfyui_root (the folder the UI side decided,
wire/comfyui_root.py). The same arguments as the SP branch's ops_comfy.load_comfy, which replaces
this module when both land.
"""

from __future__ import annotations

import gc
from pathlib import Path

import torch

from ..engine.comfy.bootstrap import import_comfyui
from ..engine.comfy.model import ComfyModel
from ..engine.ltxcore.model import DTYPES
from ..wire.comfyui_root import ComfyUIUnusable, check_comfyui_root
from .ops import InputRejected


def load_comfy_model(job, args: dict) -> dict:
    """Load `checkpoint` as ComfyUI's CheckpointLoaderSimple does, on this rank's device (skipped when
    the same file and dtype are loaded). The LoRA set starts empty (ops_lora switches it)."""
    path = Path(str(args["checkpoint"]))
    dtype_name = str(args.get("dtype", "bfloat16"))
    if dtype_name not in DTYPES:
        raise InputRejected(
            f"weight dtype {dtype_name!r} is not supported; choose one of {', '.join(DTYPES)}"
        )
    if not path.is_file():
        raise InputRejected(f"checkpoint {path} does not exist on this machine")
    dtype = DTYPES[dtype_name]
    rt = job.runtime
    try:
        import_comfyui(check_comfyui_root(str(args.get("comfyui_root", ""))), rt.device)
    except ComfyUIUnusable as exc:
        raise InputRejected(str(exc)) from None
    current = rt.state.get("model")
    if isinstance(current, ComfyModel) and (current.path, current.dtype) == (path, dtype):
        return {"reused": True, "backend": "comfy"}
    rt.state.pop("model", None)
    gc.collect()
    if rt.device.type == "cuda":
        torch.cuda.empty_cache()
    try:
        model = ComfyModel.load(path, rt.device, dtype, with_vae=False)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    rt.state["model"] = model
    return {"reused": False, "backend": "comfy"}
