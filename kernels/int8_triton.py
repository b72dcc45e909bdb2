"""The Triton kernels of the int8 linear path (kernels/int8_linear.py has the contracts and the notes).

Imports Triton at import: only kernels/int8_linear.py imports this module, on first use on a CUDA device.
"""

from __future__ import annotations

import triton
import triton.language as tl
import triton.testing

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


# NOTE [int8 tuning cost]: each new (row bucket, shape) key times every config. With Triton's default
# (25 ms of warm-up and 100 ms of repeats per config) a process's first LTX-2.5 stage 2 paid 16.3 s of
# it on an H200 (0.9 s later; docs/PERFORMANCE.md). The kernels take 0.1-3 ms, so a few ms of warm-up
# and 20 ms of repeats rank the configs, and the choice is kept on disk in Triton's cache folder
# (cache_results; its key holds the kernel's source, the configs and the GPU's architecture): a user's
# later ComfyUI starts tune nothing.
TUNE_WARMUP_MS = 5
TUNE_REP_MS = 20


def _tuning_bench(kernel_call, quantiles):
    return triton.testing.do_bench(kernel_call, warmup=TUNE_WARMUP_MS, rep=TUNE_REP_MS, quantiles=quantiles)


GEMM_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_stages=s, num_warps=w)
    for bm, bn, bk, g, s, w in CONFIGS
]


@triton.autotune(configs=GEMM_CONFIGS, key=["M_BUCKET", "N", "K"], do_bench=_tuning_bench, cache_results=True)
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


# (rows per program, warps): the butterfly holds a row block's 256-feature group in registers.
QUANT_CONFIGS = [
    triton.Config({"BLOCK": rows}, num_warps=warps) for rows, warps in ((4, 2), (8, 4), (16, 8), (32, 8))
]


@triton.jit
def _round_half_even(v):
    # torch.round's rounding (ties to even) in float32, for the interpreter too (no libdevice there).
    r = tl.floor(v + 0.5)
    is_tie = (r - v) == 0.5
    is_odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(is_tie & is_odd, r - 1.0, r)


@triton.jit
def _h4_along(v, AXIS: tl.constexpr, GATHER: tl.constexpr):
    # H4 (entries +-1, -1 on the antidiagonal) applied along AXIS (of size 4): y_j = sum_i x_i - 2 x_(3-j).
    # The reversal x_(3-j) is tl.flip on the GPU (2.3x faster there than tl.gather on an H100);
    # Triton's interpreter runs flip's xor-reduction element by element in Python (seconds a tile), so
    # there (GATHER) it takes the same values with tl.gather.
    if GATHER:
        j = 3 - tl.arange(0, 4)
        if AXIS == 1:
            at = j[None, :, None, None, None]
        elif AXIS == 2:
            at = j[None, None, :, None, None]
        elif AXIS == 3:
            at = j[None, None, None, :, None]
        else:
            at = j[None, None, None, None, :]
        reversed_ = tl.gather(v, tl.broadcast_to(at, v.shape), AXIS)
    else:
        reversed_ = tl.flip(v, AXIS)
    return tl.sum(v, axis=AXIS, keep_dims=True) - 2.0 * reversed_


@triton.jit
def _rotate(x, BLOCK: tl.constexpr, GATHER: tl.constexpr):
    # comfy_kitchen's H of 256 is H4 (x) H4 (x) H4 (x) H4 / 16: a group of 256 features as a 4 x 4 x 4 x 4
    # tensor per row, H4 applied along each axis in float32 (a fast Walsh-Hadamard transform: 8 adds per
    # value where the dense product takes 256 multiply-adds), then / 16 (exact).
    v = x.to(tl.float32).reshape(BLOCK, 4, 4, 4, 4)
    v = _h4_along(_h4_along(_h4_along(_h4_along(v, 1, GATHER), 2, GATHER), 3, GATHER), 4, GATHER)
    return v.reshape(BLOCK, 256) * 0.0625


@triton.autotune(configs=QUANT_CONFIGS, key=["M_BUCKET", "K"], do_bench=_tuning_bench, cache_results=True)
@triton.jit
def rotate_quantize_rows(
    x_ptr, q_ptr, scale_ptr, M, K, M_BUCKET, stride_xm, stride_qm,
    MIN_SCALE: tl.constexpr, ROTATE: tl.constexpr, GATHER: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    # NOTE [convrot quantization numerics] in int8_linear.py. Two passes over the row block: the row
    # maximum, then the quantized values (x read twice, q written once), the rotation in registers.
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    in_rows = rows < M
    cols = tl.arange(0, 256)
    x_rows = x_ptr + rows[:, None].to(tl.int64) * stride_xm
    q_rows = q_ptr + rows[:, None].to(tl.int64) * stride_qm
    amax = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, K, 256):
        x = tl.load(x_rows + start + cols[None, :], mask=in_rows[:, None], other=0.0)
        y = _rotate(x, BLOCK, GATHER) if ROTATE else x.to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(y), axis=1))
    scale = tl.maximum(amax / 127.0, MIN_SCALE)
    tl.store(scale_ptr + rows, scale, mask=in_rows)
    inverse = 1.0 / scale
    for start in range(0, K, 256):
        x = tl.load(x_rows + start + cols[None, :], mask=in_rows[:, None], other=0.0)
        y = _rotate(x, BLOCK, GATHER) if ROTATE else x.to(tl.float32)
        q = tl.minimum(tl.maximum(_round_half_even(y * inverse[:, None]), -128.0), 127.0)
        tl.store(q_rows + start + cols[None, :], q.to(tl.int8), mask=in_rows[:, None])
