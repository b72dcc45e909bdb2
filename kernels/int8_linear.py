"""The int8 linear of ComfyUI's int8 layouts (LTX-2.5's int8 "convrot" files) on int8 tensor cores.

    out = dequantize(quantize_rows(rotate(x)) @ weight^T) (+ bias)

Same contract as comfy_kitchen's `int8_linear` (x [..., K] in bf16 / fp16, weight int8 [N, K], weight_scale
float32 per output row or a scalar, convrot rotation in groups of 256 on the input): the pack's two Triton
kernels (int8_triton.py) replace its three steps:

- `quantize_rows`: the rotation and row-wise quantization in one kernel, two passes per row block, the
  rotation as a fast Walsh-Hadamard transform in registers (comfy_kitchen's fused kernel, and ours
  before as a tensor-core product with the 256 x 256 matrix, spent as long on the rotation as on
  reading the rows: bench/results/int8_linear_h200.json, int8_linear_h100.json).
- `int8_gemm_dequant`: the int8 product on Hopper's int8 warpgroup MMA with the row and column scales
  and the bias applied to the int32 accumulator before it leaves the registers.

NOTE [convrot quantization numerics]: y = x @ H per group of 256 in float32 (H's entries are +-1/16, so
each product is exact; the kernel sums in the transform's four stages), scale = max(max_k |y|, 127e-30)
/ 127, q = round_half_even(y / scale) clamped to [-128, 127]: comfy_kitchen's reference (eager)
quantization of a float32 x, value for value but where float32 summation order flips a rounding.
comfy_kitchen rounds y and y / scale to a bf16 x's dtype on the way, and its CUDA kernel differs from
its reference again; for a bf16 x the three agree on the int8 value within 2 steps
(bench/results/int8_linear_h200.json: 1.3-2.9% of the values differ from the CUDA kernel's), which
moves the output within the int8 format's own rounding.

NOTE [quantized input reuse]: attention's q, k, v and gate projections take the same input tensor; the
input's quantization is kept for the next call while the caller holds that same tensor unchanged
(identity and version counter: a new or modified tensor never matches), so it is computed once.

Numbers: the int8 values and scales of comfy_kitchen (NOTE above); the output differs from its by the
product's float32-to-bf16 rounding and the bias added after it, as comfy_kitchen's own epilogue does.
Everything launches on the current stream and allocates only outputs: CUDA-graph capturable.
Needs CUDA and Triton; `is_supported` says whether a call can run here.
"""

from __future__ import annotations

import functools
import os
import weakref

import torch

CONVROT_GROUP = 256  # the rotation group the fused kernel takes (the released files')
# Fewer rows than this go to comfy_kitchen's kernels: with a few hundred rows (LTX's audio stream, the
# text context) too few programs fill the GPU and its kernels were faster on an H200 (0.07-0.13 ms
# against 0.10-0.28 ms: bench/results/int8_linear_h200.json); from 12,288 rows ours were.
MIN_ROWS = 4096
# comfy_kitchen's floor for a row scale (a row of zeros quantizes to zeros, its scale stays finite).
MIN_SCALE = 1e-30
OUT_DTYPES = (torch.bfloat16, torch.float16)


def is_supported(x: torch.Tensor, weight: torch.Tensor, convrot: bool, group: int, out_dtype) -> bool:
    """Whether `int8_linear` takes this call: CUDA (compute capability 8.0+), Triton importable, int8
    weight [N, K], at least MIN_ROWS rows, K a multiple of 256, rotation (if any) in groups of 256, a
    bf16 / fp16 output."""
    if not (x.is_cuda and weight.is_cuda and weight.dtype == torch.int8 and weight.dim() == 2):
        return False
    if x.numel() < MIN_ROWS * x.shape[-1]:
        return False
    if out_dtype not in OUT_DTYPES or x.dtype not in (*OUT_DTYPES, torch.float32):
        return False
    k = x.shape[-1]
    if k != weight.shape[1] or k % CONVROT_GROUP or (convrot and group != CONVROT_GROUP):
        return False
    return can_run_on(x.device)


@functools.cache
def can_run_on(device: torch.device) -> bool:
    """The kernels run on `device`: a CUDA GPU of compute capability 8.0+, with Triton importable."""
    if device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 8:
        return False
    try:
        from . import int8_triton  # noqa: F401
    except ImportError:
        return False
    return True


def quantize_rows(x: torch.Tensor, rotate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] (bf16 / fp16 / fp32, K-contiguous, K a multiple of 256) -> (q int8 [M, K], scale float32
    [M, 1]): x rotated by comfy_kitchen's convrot in groups of 256 when `rotate`, quantized per row
    (NOTE [convrot quantization numerics])."""
    from . import int8_triton

    m, k = x.shape
    if k % CONVROT_GROUP or x.stride(1) != 1:
        raise ValueError(f"quantize_rows: x {tuple(x.shape)} must be K-contiguous with K a multiple of 256")
    q = torch.empty((m, k), dtype=torch.int8, device=x.device)
    scale = torch.empty((m, 1), dtype=torch.float32, device=x.device)

    def grid(meta):
        return (-(-m // meta["BLOCK"]),)

    int8_triton.rotate_quantize_rows[grid](
        x, q, scale, m, k, _m_bucket(m), x.stride(0), q.stride(0),
        MIN_SCALE=MIN_SCALE, ROTATE=rotate, GATHER=os.environ.get("TRITON_INTERPRET") == "1",
    )  # fmt: skip
    return q, scale


def hadamard4() -> torch.Tensor:
    """The regular Hadamard matrix of 4 the quantization kernel applies along each axis of a group of 256
    seen as 4 x 4 x 4 x 4 (int8_triton._h4_along): comfy_kitchen's rotation of 256 is H4 (x) H4 (x) H4
    (x) H4 / 16 (tests/test_int8_kernels.py)."""
    return torch.tensor([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], dtype=torch.float64)


def int8_gemm_dequant(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    bias: torch.Tensor | None,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    """a int8 [M, K], a_scale float32 [M] or [M, 1], b int8 [N, K], b_scale float32 [N] or one value,
    bias [N] or None -> (a @ b^T) * a_scale * b_scale (+ bias) as [M, N] in out_dtype."""
    from . import int8_triton

    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k or a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError(f"int8_gemm_dequant: a {tuple(a.shape)} and b {tuple(b.shape)} must be K-contiguous")
    a_scale = a_scale.reshape(-1)
    b_scale = b_scale.reshape(-1).to(torch.float32)
    out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    if bias is not None and (bias.dtype != out_dtype or not bias.is_contiguous()):
        bias = bias.to(out_dtype).contiguous()

    def grid(meta):
        return (-(-m // meta["BLOCK_M"]) * -(-n // meta["BLOCK_N"]),)

    int8_triton.int8_gemm_dequant[grid](
        a, b, out, a_scale, b_scale, bias if bias is not None else out,
        m, n, k, _m_bucket(m),
        a.stride(0), b.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, B_SCALE_PER_ROW=b_scale.numel() == n,
    )  # fmt: skip
    return out


def _m_bucket(m: int) -> int:
    """Autotune key for M: the next power of two (a config tuned for 49,152 rows serves 40,000)."""
    return 1 << max(m - 1, 1).bit_length()


class _RecentQuantized:
    """NOTE [quantized input reuse]: the last CACHE_ENTRIES inputs quantized and their (q, scale).

    An entry matches the same tensor object with the same shape, strides and version counter.
    Inference tensors (ComfyUI samples in inference mode) keep no version counter: for them the object
    alone decides, which holds for every model ComfyUI runs through these layers: a Linear's input is
    a fresh activation that no one writes in place while the next projections read it."""

    # Self-attention: x for q, k, v, gate; cross-attention: x for q and gate, the context for k, v.
    CACHE_ENTRIES = 2

    def __init__(self) -> None:
        self.entries: list[tuple[weakref.ref, tuple, tuple[torch.Tensor, torch.Tensor]]] = []

    @staticmethod
    def _key(x: torch.Tensor, rotate: bool) -> tuple:
        try:
            version = x._version
        except RuntimeError:  # an inference tensor
            version = None
        return (version, tuple(x.shape), x.stride(), x.data_ptr(), rotate)

    def get(self, x: torch.Tensor, rotate: bool) -> tuple[torch.Tensor, torch.Tensor]:
        key = self._key(x, rotate)
        for source, entry_key, value in self.entries:
            if source() is x and entry_key == key:
                return value
        x_2d = x.reshape(-1, x.shape[-1])
        value = quantize_rows(x_2d if x_2d.stride(1) == 1 else x_2d.contiguous(), rotate)
        # The entry goes when its source tensor does: a quantized copy is held no longer than its input.
        self.entries = [(weakref.ref(x, self._drop), key, value), *self.entries[: self.CACHE_ENTRIES - 1]]
        return value

    def _drop(self, source: weakref.ref) -> None:
        self.entries = [entry for entry in self.entries if entry[0] is not source]

    def clear(self) -> None:
        self.entries = []


_recent = _RecentQuantized()


def int8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    convrot: bool = False,
    convrot_groupsize: int = CONVROT_GROUP,
) -> torch.Tensor:
    """comfy_kitchen's int8_linear contract (module docstring) on the pack's kernels. Call only where
    `is_supported` holds."""
    out_dtype = out_dtype or (x.dtype if x.dtype in OUT_DTYPES else torch.bfloat16)
    q, scale = _recent.get(x, convrot)
    out = int8_gemm_dequant(q, scale, weight, weight_scale, bias, out_dtype)
    return out.reshape(*x.shape[:-1], weight.shape[0])
