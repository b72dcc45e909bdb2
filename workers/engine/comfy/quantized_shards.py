"""NOTE [sharded quantized]: how FSDP2 shards ComfyUI's quantized Linear weights (weights sharded).

ComfyUI keeps an fp8 / int8 layer's weight as comfy_kitchen's QuantizedTensor: raw data (`_qdata`,
rows along dim 0) plus layout params (the scale: one per tensor for fp8 scaled and int8 tensorwise,
one per row for int8 convrot). FSDP2 cannot shard that tensor as it is: its init splits, pads and
copies the parameter (aten.split / new_zeros / slice / copy_) and rebuilds the gathered one with
as_strided, and QuantizedTensor answers every op it has no handler for by dequantizing, so FSDP2
would shard and gather float weights. torch's extension point for this is a parameter tensor
subclass with `fsdp_pre_all_gather` / `fsdp_post_all_gather` (as torchao's float8 training wraps its
weights): before fully_shard each quantized weight becomes a `QuantizedRows` holding its raw data and
its params; FSDP2 shards the rows, all-gathers only the raw data (as bytes, which gloo and NCCL both gather), and
the post-gather hook rebuilds a QuantizedTensor of the whole weight with the layer's own params, so
ComfyUI's ops (and its LoRA patches, applied at the cast to the dequantized weight) see the layer as
loaded. The params stay whole on every rank: a per-row scale is 4 bytes a row against in_features
bytes of int8 data (1/1000 of a 4,096-wide layer), and keeping it whole lets FSDP2 pad rows unevenly
(3 ranks on 4,096 rows), which it allows only for the all-gather inputs of the parameter's own shape.

nvfp4 packs two values a byte, so its raw data is not the parameter's shape: FSDP2 takes that for
even shards only (it pads uneven ones only for all-gather inputs of the parameter's shape), and its
fp8 block scales (1/8 of the data) stay whole like every scale. Layouts not tested here (mxfp8,
w4a4, w4a8, transposed or row-padded storage) are refused by `unshardable`.

Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from typing import Any

import torch
from comfy.quant_ops import QuantizedTensor

# The comfy_kitchen layouts sharded takes, each with one row of raw data per weight row (tested: the
# tiny fp8 scaled, nvfp4 and int8 convrot files, tests/test_comfy_weights.py, test_comfy_ltx25_nodes.py).
SHARDABLE_LAYOUTS = (
    "TensorCoreFP8Layout",
    "TensorCoreFP8E4M3Layout",
    "TensorCoreFP8E5M2Layout",
    "TensorWiseINT8Layout",
    "TensorCoreNVFP4Layout",
)

_aten = torch.ops.aten


def unshardable(weight: Any, world_size: int) -> str | None:
    """Why FSDP2 cannot shard this quantized weight over `world_size` ranks (None: it can)."""
    layout = weight._layout_cls
    if layout not in SHARDABLE_LAYOUTS:
        return f"layout {layout}"
    params, stored = weight._params, tuple(weight._qdata.shape)
    rows = params.orig_shape[0]
    if getattr(params, "transposed", False) or stored[0] != rows:
        return f"layout {layout} stored as {stored} for shape {tuple(params.orig_shape)}"
    if stored[1:] != tuple(params.orig_shape[1:]) and rows % world_size:
        # Packed data (nvfp4: two values a byte) is not the parameter's shape, and FSDP2 pads uneven
        # shards only for all-gather inputs of that shape.
        return f"layout {layout} packs its data, and its {rows} rows do not split evenly over {world_size} workers"
    return None


def wrap_for_sharding(module: torch.nn.Module, device: torch.device) -> bool:
    """Replace `module`'s QuantizedTensor weight by a QuantizedRows on `device` (FSDP2 expects its
    parameters there and cannot move this one itself). False: no quantized weight."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, QuantizedTensor):
        return False
    qdata = weight._qdata.to(device)
    params = weight._params.to_device(device)
    rows = QuantizedRows(qdata, weight._layout_cls, params)
    module.weight = torch.nn.Parameter(rows, requires_grad=False)
    return True


def stored_bytes(tensor: torch.Tensor) -> int:
    """Bytes a weight occupies: a quantized one's raw data and scales (its logical dtype is the compute
    dtype), the elements of any other."""
    qdata = getattr(tensor, "_qdata", None)
    if qdata is None:
        return tensor.numel() * tensor.element_size()
    params = tensor._params
    scales = (getattr(params, name) for name in params._tensor_fields())
    return qdata.numel() * qdata.element_size() + sum(t.numel() * t.element_size() for t in scales)


class QuantizedRows(torch.Tensor):
    """FSDP2's parameter for one quantized weight: a run of its rows of raw data and the layer's whole
    params. Logical shape: those rows of the weight, in its compute dtype (what FSDP2 sizes shards by).
    Implements only the ops FSDP2 runs on a parameter to shard it."""

    @staticmethod
    def __new__(cls, qdata: torch.Tensor, layout: str, params: Any):
        shape = (qdata.shape[0], *params.orig_shape[1:])
        return torch.Tensor._make_wrapper_subclass(
            cls, shape, dtype=params.orig_dtype, device=qdata.device, requires_grad=False
        )

    def __init__(self, qdata: torch.Tensor, layout: str, params: Any):
        self._qdata = qdata
        self._layout_cls = layout
        self._params = params
        # The padded run this one is a prefix of (FSDP2 narrows its padded shard): what it all-gathers.
        self._padded: torch.Tensor | None = None

    def __repr__(self) -> str:
        return f"QuantizedRows(rows={self._qdata.shape[0]}, layout={self._layout_cls})"

    def _with(self, qdata: torch.Tensor) -> QuantizedRows:
        # Outside inference mode: FSDP2 views the shard inside the sampler's inference_mode, and a view
        # op's result must be able to share its base's version counter (a normal tensor, not an
        # inference one).
        with torch.inference_mode(False):
            return QuantizedRows(qdata, self._layout_cls, self._params)

    def __tensor_flatten__(self):
        return ["_qdata"], (self._layout_cls, self._params)

    @staticmethod
    def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
        return QuantizedRows(inner["_qdata"], *ctx)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self = args[0]
        if func in (_aten.detach.default, _aten.alias.default):
            return self._with(self._qdata.detach())
        if func is _aten.split.Tensor or func is _aten.split_with_sizes.default:
            dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
            _rows_only(func, dim)
            return [self._with(q) for q in func(self._qdata, args[1], 0)]
        if func is _aten.slice.Tensor:
            dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            start = args[2] if len(args) > 2 else kwargs.get("start")
            end = args[3] if len(args) > 3 else kwargs.get("end")
            step = args[4] if len(args) > 4 else kwargs.get("step", 1)
            _rows_only(func, dim)
            out = self._with(_aten.slice.Tensor(self._qdata, 0, start, end, step))
            if not start and step == 1:
                out._padded = self._qdata
            return out
        if func is _aten.narrow.default:
            dim, start, length = args[1:4]
            return cls.__torch_dispatch__(_aten.slice.Tensor, types, (self, dim, start, start + length, 1))
        if func in (_aten.new_zeros.default, _aten.new_empty.default):
            size = tuple(args[1])
            rows = size[0] if len(size) == self._qdata.dim() else 0
            made = torch.zeros if func is _aten.new_zeros.default else torch.empty
            qdata = made((rows, *self._qdata.shape[1:]), dtype=self._qdata.dtype, device=self._qdata.device)
            return self._with(qdata)
        if func is _aten.copy_.default:
            src = args[1]
            if not isinstance(src, QuantizedRows) or src._layout_cls != self._layout_cls:
                raise NotImplementedError(f"copy_ into QuantizedRows from {type(src).__name__}")
            self._qdata.copy_(src._qdata)
            return self
        if func is _aten.view.default and list(args[1]) in ([-1], list(self.shape)):
            # view_as itself (DTensor.to_local), or the flat view FSDP2 keeps of the shard for its default
            # all-gather, which the hooks replace: an alias either way.
            return self._with(self._qdata)
        if func is _aten._to_copy.default:
            device = kwargs.get("device", self._qdata.device)
            return QuantizedRows(self._qdata.to(device), self._layout_cls, self._params.to_device(device))
        raise NotImplementedError(f"{func} on a sharded quantized weight (QuantizedRows)")

    def fsdp_pre_all_gather(self, mesh, outer_size, outer_stride, module, mp_policy):
        rows = -(-outer_size[0] // mesh.size())  # the padded shard's rows
        data = self._qdata
        if data.shape[0] != rows:
            padded = self._padded
            if padded is not None and padded.shape[0] == rows:
                data = padded
            else:
                data = torch.cat([data, data.new_zeros((rows - data.shape[0], *data.shape[1:]))])
        return (data.view(torch.uint8),), None

    def fsdp_post_all_gather(self, all_gather_outputs, metadata, param_dtype, *, out=None):
        if out is not None:
            # The gathered weight's raw data is a view of the all-gather output FSDP2 refills in place.
            return None
        (data,) = all_gather_outputs
        qdata = data.view(self._qdata.dtype)[: self._params.orig_shape[0]]
        return GatheredQuantized(qdata, self._layout_cls, self._params), ()


def _rows_only(func: Any, dim: int) -> None:
    if dim != 0:
        raise NotImplementedError(f"{func} along dim {dim} on a sharded quantized weight (rows only)")


class GatheredQuantized(QuantizedTensor):
    """The whole quantized weight FSDP2 sets on the module for a forward: ComfyUI's QuantizedTensor, plus
    the two ops FSDP2 applies to a gathered parameter (as_strided to its own shape, detach by
    nn.Parameter, which needs the same type back)."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _aten.as_strided.default:
            self, size, stride = args[0], tuple(args[1]), tuple(args[2])
            offset = args[3] if len(args) > 3 else kwargs.get("storage_offset", 0)
            if size == tuple(self.shape) and stride == tuple(self.stride()) and not offset:
                return self
            raise NotImplementedError(f"as_strided{size, stride, offset} on a gathered quantized weight")
        if func is _aten.detach.default:
            self = args[0]
            return GatheredQuantized(self._qdata.detach(), self._layout_cls, self._params)
        return super().__torch_dispatch__(func, types, args, kwargs)
