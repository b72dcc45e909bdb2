"""The Triton kernels of the int8 linear path (kernels/int8_linear.py has the contracts and the notes).

Imports Triton at import: only kernels/int8_linear.py imports this module, on first use on a CUDA device.
"""

from __future__ import annotations

import triton
import triton.language as tl

# int8_gemm_dequant tiles: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps). Autotuned per (M bucket, N, K); the list
# is short because each config compiles once per shape bucket (seconds). Bigger tiles first: the 22B's
# products have M >= 2,000 rows at the sizes people render.
CONFIGS = (
    (128, 256, 128, 8, 3, 8),
    (128, 128, 128, 8, 4, 8),
    (128, 128, 128, 8, 3, 4),
    (64, 128, 128, 8, 4, 4),
    (64, 64, 128, 8, 4, 4),
)


GEMM_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_stages=s, num_warps=w)
    for bm, bn, bk, g, s, w in CONFIGS
]


@triton.autotune(configs=GEMM_CONFIGS, key=["M_BUCKET", "N", "K"])
@triton.jit
def int8_gemm_dequant(
    a_ptr, b_ptr, out_ptr, a_scale_ptr, b_scale_ptr, bias_ptr,
    M, N, K, M_BUCKET,
    stride_am, stride_bn, stride_om,
    HAS_BIAS: tl.constexpr, B_SCALE_PER_ROW: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: GROUP_M row blocks share each column block while it is in L2.
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % size_m
    pid_n = (pid % (GROUP_M * num_n)) // size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = tl.where(offs_m < M, offs_m, 0)
    rn = tl.where(offs_n < N, offs_n, 0)
    a_ptrs = a_ptr + rm[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + rn[None, :] * stride_bn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K

    a_scale = tl.load(a_scale_ptr + rm)
    if B_SCALE_PER_ROW:
        b_scale = tl.load(b_scale_ptr + rn)
    else:
        b_scale = tl.load(b_scale_ptr + rn * 0)
    out = acc.to(tl.float32) * a_scale[:, None] * b_scale[None, :]
    if HAS_BIAS:
        # As comfy_kitchen's epilogue: the product rounded to the output dtype, then the bias added
        # (in float32, rounded once more).
        out = out.to(out_ptr.dtype.element_ty).to(tl.float32)
        out = out + tl.load(bias_ptr + rn).to(tl.float32)[None, :]
    out = out.to(out_ptr.dtype.element_ty)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], out, mask=mask)


QUANT_CONFIGS = [
    triton.Config({"BLOCK": bm}, num_stages=s, num_warps=w)
    for bm, s, w in ((16, 2, 4), (32, 2, 4), (64, 2, 4), (64, 3, 4), (64, 3, 8), (128, 2, 8))
]


@triton.jit
def _round_half_even(v):
    # torch.round's rounding (ties to even) in float32, for the interpreter too (no libdevice there).
    r = tl.floor(v + 0.5)
    is_tie = (r - v) == 0.5
    is_odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(is_tie & is_odd, r - 1.0, r)


@triton.autotune(configs=QUANT_CONFIGS, key=["M_BUCKET", "K"])
@triton.jit
def rotate_quantize_rows(
    x_ptr, h_ptr, q_ptr, scale_ptr, M, K, M_BUCKET, stride_xm, stride_qm,
    MIN_SCALE: tl.constexpr, DOT_FP32: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    # NOTE [convrot quantization numerics] in int8_linear.py. Two passes over the row block: the row
    # maximum, then the quantized values (x read twice, q written once). The rotation is a product with
    # H on the tensor cores, [BLOCK, 256] @ [256, 256] per group of 256 features: H's entries are
    # +-1/16 (exact in bf16), so each product is exact and the sums float32. Without rotation H = I.
    # DOT_FP32 (a float32 x, and Triton's interpreter, which cannot multiply bf16 tiles) multiplies in
    # float32: the same products, summed in another order.
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_rows = rows < M
    cols = tl.arange(0, 256)
    h = tl.load(h_ptr + cols[:, None] * 256 + cols[None, :])
    x_rows = x_ptr + rows[:, None].to(tl.int64) * stride_xm
    q_rows = q_ptr + rows[:, None].to(tl.int64) * stride_qm
    amax = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, K, 256):
        x = tl.load(x_rows + start + cols[None, :], mask=in_rows[:, None], other=0.0)
        if DOT_FP32:
            y = tl.dot(x.to(tl.float32), h, out_dtype=tl.float32, input_precision="ieee")
        else:
            y = tl.dot(x, h, out_dtype=tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(y), axis=1))
    scale = tl.maximum(amax / 127.0, MIN_SCALE)
    tl.store(scale_ptr + rows, scale, mask=in_rows)
    inverse = 1.0 / scale
    for start in range(0, K, 256):
        x = tl.load(x_rows + start + cols[None, :], mask=in_rows[:, None], other=0.0)
        if DOT_FP32:
            y = tl.dot(x.to(tl.float32), h, out_dtype=tl.float32, input_precision="ieee")
        else:
            y = tl.dot(x, h, out_dtype=tl.float32)
        q = tl.minimum(tl.maximum(_round_half_even(y * inverse[:, None]), -128.0), 127.0)
        tl.store(q_rows + start + cols[None, :], q.to(tl.int8), mask=in_rows[:, None])
