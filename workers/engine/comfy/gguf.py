"""GGUF transformers on the comfy backend, loaded with the ComfyUI-GGUF pack's own code.

What UnetLoaderGGUF does, in the rank: the pack's `gguf_sd_loader` reads the file into its GGMLTensor
state dict (memory-mapped, still quantized), `comfy.sd.load_diffusion_model_state_dict` builds ComfyUI's
model with the pack's `GGMLOps` (layers that dequantize their weights per call, with LoRA patches
applied at that point), and the patcher becomes the pack's `GGUFModelPatcher`. Only the device and the
dtype are ours (the loader's weight_dtype; UnetLoaderGGUF lets ComfyUI pick it) and the metadata: the
file's fields, which the pack's releases since January 2026 pass to ComfyUI themselves, are passed here
when the installed pack's loader does not (NOTE [gguf layout] in workers/wire/gguf_files.py), so an
LTX-2.3 or 2.5 GGUF is built as its release.

NOTE [gguf pack import]: the pack is imported as ComfyUI imports a custom node (its folder as a package,
its __init__ run), under one name of ours. Its nodes.py, where GGUFModelPatcher lives, does `import nodes`
(ComfyUI's nodes.py, used only inside its text-encoder loaders' INPUT_TYPES): a rank never imports
ComfyUI's server side, so an empty stand-in module answers that import while the pack loads and is taken
out of sys.modules afterwards. Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ...wire.gguf_checks import gguf_model_header
from ...wire.gguf_pack import PACK_NAME, require_gguf_pack

PACK_MODULE = "ltx2_mgpu_comfyui_gguf"


def import_gguf_pack(folder: Path) -> ModuleType:
    """The pack at `folder`, imported once per process as PACK_MODULE (NOTE [gguf pack import])."""
    loaded = sys.modules.get(PACK_MODULE)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        PACK_MODULE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACK_MODULE] = module
    stand_in = "nodes" not in sys.modules
    if stand_in:
        sys.modules["nodes"] = ModuleType("nodes", "stand-in while ComfyUI-GGUF loads in a worker")
    try:
        spec.loader.exec_module(module)
        for name in ("loader", "ops", "nodes", "dequant"):
            importlib.import_module(f"{PACK_MODULE}.{name}")
    except Exception as exc:  # the user's install of the pack: say which and why
        sys.modules.pop(PACK_MODULE, None)
        raise ValueError(
            f"the {PACK_NAME} pack at {folder} failed to import in the worker: {type(exc).__name__}: {exc}. "
            "Check that it loads in ComfyUI and that `gguf` is installed in this Python"
        ) from exc
    finally:
        if stand_in:
            sys.modules.pop("nodes", None)
    return module


def load_gguf_model(path: Path, comfyui_root: str, device: torch.device, dtype: torch.dtype | None) -> Any:
    """The pack's GGUFModelPatcher of the GGUF transformer at `path` (its weights still on the host, as
    UnetLoaderGGUF leaves them), for `device` in `dtype`. ValueError naming the file and the pack."""
    import comfy.sd

    pack = import_gguf_pack(require_gguf_pack(path.name, comfyui_root))
    ops = pack.ops.GGMLOps()
    ops.Linear.dequant_dtype = None  # UnetLoaderGGUF's defaults
    ops.Linear.patch_dtype = None
    loaded = pack.loader.gguf_sd_loader(str(path))
    state_dict, extra = loaded if isinstance(loaded, tuple) else (loaded, {})
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    if not metadata:
        metadata = dict(gguf_model_header(path).metadata)
    options: dict[str, Any] = {"custom_operations": ops, "load_device": device}
    if dtype is not None:
        options["dtype"] = dtype
    patcher = comfy.sd.load_diffusion_model_state_dict(
        state_dict, model_options=options, metadata=metadata, disable_dynamic=True
    )
    if patcher is None:
        raise ValueError(f"ComfyUI does not recognise a diffusion model in {path.name}")
    patcher = pack.nodes.GGUFModelPatcher.clone(patcher)
    patcher.patch_on_device = None
    return patcher
