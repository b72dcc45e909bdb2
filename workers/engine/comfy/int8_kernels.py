"""The pack's int8 kernels (kernels/int8_linear.py) under ComfyUI's int8 layers, in a GPU worker.

ComfyUI runs an int8 layer (TensorWiseINT8Layout: LTX-2.5's int8 "convrot" files) through
`torch.ops.comfy_kitchen.int8_linear`, which asks comfy_kitchen's backend registry for the first backend,
in priority order, whose constraints take the call. `install` registers the pack's kernels there as one
more backend, first in that order, for the calls they take (kernels.int8_linear.is_supported); every
other call goes on to comfy_kitchen's own backends as before. Nothing of ComfyUI is changed: the layer,
its weights and the op stay ComfyUI's, so LoRA patches, offloading and CUDA graphs see the same model.

Measured on an H200 (bench/bench_int8_linear.py): the LTX-2.5 22B's int8 products of one step at 24,576
video tokens take 2.24 s through comfy_kitchen against 1.81 s in bf16; see docs/PERFORMANCE.md for ours.

LTX2_MGPU_INT8=comfy_kitchen keeps comfy_kitchen's kernels (for comparisons).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import torch

log = logging.getLogger(__name__)

BACKEND_NAME = "ltx2_mgpu"
ENV_INT8 = "LTX2_MGPU_INT8"  # "comfy_kitchen": keep comfy_kitchen's int8 kernels in the workers
_installed = False


class _Backend:
    """The backend module comfy_kitchen's registry calls: `int8_linear` with its keyword contract."""

    @staticmethod
    def int8_linear(
        x: torch.Tensor,
        weight: torch.Tensor,
        weight_scale: torch.Tensor,
        bias: torch.Tensor | None = None,
        out_dtype: torch.dtype | None = None,
        convrot: bool = False,
        convrot_groupsize: int = 256,
        input_act: str | None = None,
    ) -> torch.Tensor:
        from ....kernels.int8_linear import int8_linear

        return int8_linear(x, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize)


def _takes(kwargs: Mapping[str, object]):
    """comfy_kitchen's call rule: our kernels take the call, or the registry moves to its next backend."""
    from comfy_kitchen.constraints import ValidationResult

    from ....kernels.int8_linear import is_supported

    x, weight = kwargs.get("x"), kwargs.get("weight")
    if kwargs.get("input_act") not in (None, "none"):
        return ValidationResult.fail("input_act", "fused input activations stay with comfy_kitchen")
    if not isinstance(x, torch.Tensor) or not isinstance(weight, torch.Tensor):
        return ValidationResult.fail("x", "not tensors")
    out_dtype = kwargs.get("out_dtype") or torch.bfloat16
    if not is_supported(
        x, weight, bool(kwargs.get("convrot")), int(kwargs.get("convrot_groupsize") or 256), out_dtype
    ):
        return ValidationResult.fail("x", "shape, dtype or device not taken by the pack's int8 kernels")
    return ValidationResult.ok()


def install(device: torch.device) -> str:
    """Make the pack's int8 kernels comfy_kitchen's first int8 backend in this process (a GPU worker);
    idempotent. Returns a line for the console: what runs int8 layers, and why."""
    global _installed
    if device.type != "cuda":
        return "int8 layers: comfy_kitchen (CPU)"
    if os.environ.get(ENV_INT8, "").strip().lower() == "comfy_kitchen":
        return f"int8 layers: comfy_kitchen ({ENV_INT8}=comfy_kitchen)"
    from ....kernels.int8_linear import can_run_on

    if not can_run_on(
        torch.device(device.type, torch.cuda.current_device() if device.index is None else device.index)
    ):
        return (
            "int8 layers: comfy_kitchen (the pack's kernels need Triton and a GPU of compute capability 8.0+)"
        )
    try:
        from comfy_kitchen.constraints import FunctionConstraints
        from comfy_kitchen.registry import registry
    except ImportError as exc:
        return f"int8 layers: comfy_kitchen's registry is not importable here ({exc})"
    if not _installed:
        priority = [
            name
            for name in getattr(registry, "_priority", ["cuda", "triton", "eager"])
            if name != BACKEND_NAME
        ]
        registry.register(
            BACKEND_NAME,
            _Backend,
            {"int8_linear": FunctionConstraints(default_devices=frozenset({"cuda"}), call_rules=(_takes,))},
        )
        registry.set_priority([BACKEND_NAME, *priority])
        _installed = True
    registry.enable(BACKEND_NAME)
    return "int8 layers: the pack's Triton kernels (rotation + quantization fused, int8 tensor-core product)"


def uninstall() -> None:
    """Back to comfy_kitchen's own kernels in this process (benches timing native ComfyUI)."""
    if _installed:
        from comfy_kitchen.registry import registry

        registry.disable(BACKEND_NAME)
