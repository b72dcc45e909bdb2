"""Opt-in fp8 matmuls for the transformer's block Linears (Hopper / Ada): fp8 weights kept in GPU memory.

Why: fp8.py folds the released fp8 files into bf16, so they run at bf16 speed and memory. Here the
Linears the released files quantize (fp8.QUANTIZED_LINEAR_SUFFIXES in blocks 1..N-6) keep an
float8_e4m3fn weight with one float32 scale and multiply in fp8 on the tensor cores
(`torch._scaled_mm`, twice bf16's peak rate on H100/H200). For the 19B, 16.21 of 18.88 billion
parameters are in those Linears, so the transformer's weights fall from 37.75 GB to 21.55 GB per rank
(ops_bench "load_random_model" with "fp8_matmul" reports the figure).

The quantization, and how it differs:
- weights: per tensor, scale = amax / 448 (ltx-core's quantize_weight_to_fp8_per_tensor, shared with
  fp8.make_tiny_fp8), one rounding to 3 stored mantissa bits (at most 2^-4 of a value) against bf16's 7
  (2^-8). Whatever was loaded (bf16 file, or an fp8 file folded to bf16) is quantized again; for a
  released fp8 file this gives back the file's fp8 values (its folded bf16 copy lies within 2^-9 of
  them), under a scale that differs from the file's at most by the bf16 rounding of its largest value.
- activations: quantized per row (per token) at each call, scale = amax(|row|) / 448, so one token's
  outlier does not flatten every other token. Native ComfyUI's fp8 paths quantize activations per
  tensor with a static scale: the file's `input_scale` (1.0 in the released files) in its mixed-
  precision ops, or 1.0 after clamping to +-448 in `--fast fp8_matrix_mult`; ltx-core's fp8_scaled_mm
  policy (TensorRT-LLM kernels) uses the file's `input_scale` too. Small activations then lose bits to
  fp8's subnormals. Our outputs therefore differ from native ComfyUI's fp8 run, as from bf16.
- the product: fp32 accumulation, both scales and the bias applied in the epilogue, rounded once to bf16.

Paths: SCALED_MM (CUDA, compute capability >= 8.9, bf16 activations, in/out features multiples of 16)
or EMULATED: the same quantized operands dequantized to float32 and multiplied there (CPU tests, older
GPUs, other dtypes), so CPU tests exercise the quantization the GPU runs. `matmul_path(device)` says which
one a device gets, and why (decided once per device by a real call); `Fp8Linear.path` holds it.

LoRAs (lora.py) fuse in float32 onto the clean weight re-read from the checkpoint and quantize the sum
once with `Fp8Linear.set_weight`; the quantization is deterministic, so restoring gives back bit for
bit what `quantize_linears` made.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import torch
from torch import nn

from ...wire.checks import FP8_MATMUL_DTYPE, check_fp8_dtype
from .fp8 import (
    AMAX_FLOOR,
    BLOCK_PREFIX,
    FP8_E4M3_MAX,
    block_index,
    dequantize,
    is_quantized_in_release,
    quantize_per_tensor,
    scaled_fp8_layout,
)

FP8_DTYPE = torch.float8_e4m3fn
SCALED_MM = "scaled_mm"
EMULATED = "emulated"
# fp8 tensor-core matmuls exist from Ada (8.9) on; torch._scaled_mm refuses older GPUs.
MIN_CAPABILITY = (8, 9)
# cuBLASLt's fp8 GEMM needs the reduction and output dims in multiples of 16 (torch._scaled_mm checks).
DIM_MULTIPLE = 16
# Rowwise scaling in torch._scaled_mm writes bf16 only (torch 2.14's meta checks / CUTLASS kernel).
ROWWISE_OUT_DTYPE = FP8_MATMUL_DTYPE
# The transformer's Linears sit under this prefix in a checkpoint (TRANSFORMER's SDOps strip it).
CHECKPOINT_PREFIX = BLOCK_PREFIX.removesuffix("transformer_blocks.")
# Blocks the released 19B fp8 files keep in bf16: block 0 and the last RELEASED_LAST_EXCLUDED.
RELEASED_LAST_EXCLUDED = 5

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fp8Selection:
    """Which Linears become Fp8Linear: those named by fp8.QUANTIZED_LINEAR_SUFFIXES in transformer
    blocks other than `excluded_blocks` (block indices)."""

    excluded_blocks: tuple[int, ...]

    @classmethod
    def released(cls, num_layers: int) -> Fp8Selection:
        """The released fp8 files' choice: block 0 and the last five stay bf16 (for 48 layers: 1-42 in fp8)."""
        last = range(max(num_layers - RELEASED_LAST_EXCLUDED, 1), num_layers)
        return cls(excluded_blocks=(0, *last))

    @classmethod
    def for_checkpoint(cls, header, num_layers: int) -> Fp8Selection:
        """An fp8 file's own choice (the blocks it stores scaled fp8 weights for); for any other file
        the released one."""
        layout = scaled_fp8_layout(header)
        if layout is None:
            return cls.released(num_layers)
        quantized = {block_index(key) for key in layout.scales}
        return cls(excluded_blocks=tuple(i for i in range(num_layers) if i not in quantized))

    def includes(self, module_name: str) -> bool:
        """`module_name`: a Linear's name in LTXModel ("transformer_blocks.3.attn1.to_q")."""
        return is_quantized_in_release(f"{CHECKPOINT_PREFIX}{module_name}.weight", self.excluded_blocks)


@dataclass(frozen=True)
class MatmulPath:
    """The matmul Fp8Linear runs on one device: name SCALED_MM or EMULATED; reason: why not SCALED_MM."""

    name: str
    reason: str = ""


class Fp8Linear(nn.Module):
    """y = x @ (weight * weight_scale).T + bias with x quantized per row to fp8 (module docstring).

    Buffers: weight float8_e4m3fn [out, in], weight_scale float32 [] (real weight = weight.float() *
    weight_scale). bias: the replaced Linear's own Parameter [out] (its dtype), or None. source_dtype:
    the dtype the weight had before quantization (what the checkpoint loaded as), used for LoRA restores.
    path: the weight's device's MatmulPath, set here and after every move (`_apply`), so the forward
    only checks the call (torch.compile sees a constant). forward: x [..., in] -> [..., out] in x's
    dtype, on the weight's device.
    """

    def __init__(self, weight: torch.Tensor, bias: nn.Parameter | None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.source_dtype = weight.dtype
        self.register_buffer("weight", torch.empty(weight.shape, dtype=FP8_DTYPE, device=weight.device))
        self.register_buffer("weight_scale", torch.empty((), dtype=torch.float32, device=weight.device))
        self.bias = bias
        self.set_weight(weight)
        self.path = matmul_path(weight.device)
        self._fits_scaled_mm = self.in_features % DIM_MULTIPLE == 0 and self.out_features % DIM_MULTIPLE == 0

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Fp8Linear:
        return cls(linear.weight.detach(), linear.bias)

    @torch.no_grad()
    def set_weight(self, weight: torch.Tensor) -> None:
        """Quantize `weight` [out, in] (any float dtype, any precision) per tensor into the buffers."""
        if tuple(weight.shape) != tuple(self.weight.shape):
            raise ValueError(
                f"weight of shape {list(weight.shape)} for an Fp8Linear of {list(self.weight.shape)}"
            )
        q, scale = quantize_per_tensor(weight.to(self.weight.device))
        self.weight.copy_(q)
        self.weight_scale.copy_(scale)

    def holds(self, weight: torch.Tensor) -> bool:
        """Whether set_weight(weight) would store exactly what the buffers hold."""
        q, scale = quantize_per_tensor(weight.to(self.weight.device))
        return torch.equal(q.view(torch.uint8), self.weight.view(torch.uint8)) and torch.equal(
            scale, self.weight_scale
        )

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The real weight [out, in] in `dtype`."""
        return dequantize(self.weight, self.weight_scale, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype != FP8_DTYPE:  # a module-wide .to(dtype) casts buffers too
            raise RuntimeError(
                f"Fp8Linear weight became {self.weight.dtype}; cast the model before quantize_linears"
            )
        if self.uses_scaled_mm(x):
            return scaled_mm_linear(x, self.weight, self.weight_scale, self.bias)
        return emulated_linear(x, self.weight, self.weight_scale, self.bias)

    def uses_scaled_mm(self, x: torch.Tensor) -> bool:
        """Whether forward(x) takes torch._scaled_mm: the device has it, the shapes fit, x is bf16."""
        return (
            self.path.name == SCALED_MM
            and self._fits_scaled_mm
            and x.dtype == ROWWISE_OUT_DTYPE
            and x.device == self.weight.device
            and x.numel() > 0
        )

    def _apply(self, fn, recurse=True):  # every .to / .cuda / .cpu passes here
        module = super()._apply(fn, recurse)
        self.path = matmul_path(self.weight.device)
        return module

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


def check_fp8_matmul(dtype: torch.dtype, device: torch.device | None = None) -> None:
    """Raises ValueError, saying what to change, where fp8_matmul cannot run: a compute dtype other
    than bf16 (rowwise scaled_mm writes bf16), or a GPU without fp8 tensor cores (`device`, when
    given; CPU runs the float32 emulation, for tests)."""
    check_fp8_dtype(dtype)
    if device is not None and torch.device(device).type == "cuda":
        path = matmul_path(device)
        if path.name != SCALED_MM:
            raise ValueError(
                f"fp8_matmul needs fp8 tensor cores on {device}: {path.reason}; turn fp8_matmul off"
            )


def quantize_linears(model: nn.Module, selection: Fp8Selection) -> int:
    """Replace, in place, the nn.Linears of an ltx-core LTXModel that `selection` includes by Fp8Linears
    on the same device; returns how many. One Linear at a time: its bf16 weight is freed before the next
    is quantized, so the peak is the model plus one Linear's float32 temporaries. Run it after every
    dtype cast of the model (a later `.to(dtype)` would cast the fp8 buffers) and before wrapping it."""
    names = [name for name, m in model.named_modules() if type(m) is nn.Linear and selection.includes(name)]
    device_types = set()
    for name in names:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        linear = getattr(parent, attr)
        setattr(parent, attr, Fp8Linear.from_linear(linear))
        device_types.add(linear.weight.device.type)
        del linear
    if "cuda" in device_types:
        torch.cuda.empty_cache()
    return len(names)


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (x_fp8 [M, K] float8_e4m3fn, scale [M, 1] float32), x ~ x_fp8.float() * scale.
    |x| / scale <= 448 up to float32 rounding, which e4m3fn's round-to-nearest keeps at 448: no clamp."""
    amax = x.abs().amax(dim=-1, keepdim=True).to(torch.float32).clamp_(min=AMAX_FLOOR)
    scale = amax / FP8_E4M3_MAX
    return (x / scale).to(FP8_DTYPE), scale


def scaled_mm_linear(
    x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """The fast path: torch._scaled_mm with rowwise scales (x's per row [M, 1], the weight's scalar
    expanded to [1, N]), bias fused when it is bf16. x [..., K] bf16 on CUDA; see Fp8Linear.uses_scaled_mm."""
    out_features = weight.shape[0]
    xq, x_scale = quantize_rows(x.reshape(-1, x.shape[-1]))
    w_scale = weight_scale.reshape(1, 1).expand(1, out_features).contiguous()
    fused_bias = bias if bias is not None and bias.dtype == x.dtype else None
    out = torch._scaled_mm(
        xq, weight.t(), scale_a=x_scale, scale_b=w_scale, bias=fused_bias, out_dtype=x.dtype
    )
    if bias is not None and fused_bias is None:
        out = out + bias.to(out.dtype)
    return out.reshape(*x.shape[:-1], out_features)


def emulated_linear(
    x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """The same quantized product as scaled_mm_linear, computed in float32 and rounded once to x's
    dtype (any device, any float dtype). Costs a float32 copy of the weight per call."""
    out_features = weight.shape[0]
    xq, x_scale = quantize_rows(x.reshape(-1, x.shape[-1]))
    out = torch.mm(xq.to(torch.float32) * x_scale, dequantize(weight, weight_scale, torch.float32).t())
    if bias is not None:
        out += bias.to(torch.float32)
    return out.to(x.dtype).reshape(*x.shape[:-1], out_features)


def matmul_path(device: torch.device | str) -> MatmulPath:
    """Which path Fp8Linear takes on `device` for bf16 activations, decided once per device by a real
    rowwise torch._scaled_mm call; a CUDA device without it logs one warning with the reason."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return _probe(device)


@functools.cache
def _probe(device: torch.device) -> MatmulPath:
    if device.type != "cuda":
        return MatmulPath(EMULATED, f"{device.type} has no fp8 matmul")
    capability = torch.cuda.get_device_capability(device)
    if capability < MIN_CAPABILITY:
        path = MatmulPath(EMULATED, f"compute capability {capability} is below {MIN_CAPABILITY}")
    else:
        size = DIM_MULTIPLE
        ones = torch.ones(size, size, device=device, dtype=ROWWISE_OUT_DTYPE)
        scale = torch.ones((), device=device, dtype=torch.float32)
        try:
            out = scaled_mm_linear(ones, ones.to(FP8_DTYPE), scale, ones[0])
        except RuntimeError as exc:  # e.g. "Rowwise scaling is not currently supported on your device"
            path = MatmulPath(EMULATED, f"torch._scaled_mm with rowwise scales failed: {exc}")
        else:
            # every output is 16 ones summed plus a bias of one (exact in bf16)
            ok = bool((out == size + 1).all())
            path = MatmulPath(SCALED_MM) if ok else MatmulPath(EMULATED, "torch._scaled_mm gave wrong values")
    if path.name != SCALED_MM:
        _log.warning("fp8 Linears on %s are emulated in float32 (slow): %s", device, path.reason)
    return path
