"""The pack's int8 kernels (kernels/int8_linear.py, int8_triton.py) against comfy_kitchen, ComfyUI's own.

CPU: the rotation identity the quantization kernel rests on; the Triton kernels themselves under Triton's
interpreter (the same kernel code, run by numpy) against comfy_kitchen's reference path; the quantized
input reuse. GPU (marked): every product shape of the LTX-2.5 22B against comfy_kitchen's CUDA kernels,
CUDA graphs on and off bit for bit, ComfyUI's int8 layer with and without the pack's backend, and the tuned
configs read back from Triton's cache folder by a later process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import pytest
import torch

from ltx2_mgpu.kernels import int8_linear

comfy_kitchen = pytest.importorskip(
    "comfy_kitchen", reason="comfy_kitchen (ComfyUI's kernels) is not installed"
)


def test_the_rotation_is_comfy_kitchens():
    """The kernel applies H4 along each axis of a group of 256 seen as 4 x 4 x 4 x 4, as y_j = sum(x) -
    2 x_(3-j), then divides by 16: that is comfy_kitchen's normalised regular Hadamard matrix of 256."""
    from comfy_kitchen.tensor.int8_utils import _build_hadamard

    h4 = int8_linear.hadamard4()
    assert torch.equal(h4, torch.ones(4, 4, dtype=h4.dtype) - 2 * torch.eye(4, dtype=h4.dtype).flip(0))
    h = torch.kron(torch.kron(h4, h4), torch.kron(h4, h4)) / 16
    assert torch.equal(h.float(), _build_hadamard(256, dtype=torch.float32))
    x = torch.randn(3, 256, dtype=torch.float64)
    v = x.reshape(3, 4, 4, 4, 4)
    for axis in (1, 2, 3, 4):
        v = v.sum(axis, keepdim=True) - 2 * v.flip(axis)
    assert torch.allclose(v.reshape(3, 256) / 16, x @ h, rtol=0, atol=1e-12)


# Runs in a child process: Triton reads TRITON_INTERPRET when it is imported.
INTERPRETED = textwrap.dedent(
    """
    import json, sys, torch
    from comfy_kitchen.backends.eager import quantization as ck
    from comfy_kitchen.tensor.int8_utils import _build_hadamard
    from ltx2_mgpu.kernels import int8_linear as ours, int8_triton

    int8_triton.int8_gemm_dequant.configs = int8_triton.int8_gemm_dequant.configs[-1:]  # one tile config
    int8_triton.rotate_quantize_rows.configs = int8_triton.rotate_quantize_rows.configs[-1:]  # fewest tiles
    g = torch.Generator().manual_seed(0)
    out = {}
    for m, k, n, bias in ((40, 512, 48, True), (1, 256, 8, False), (67, 768, 33, True)):
        x = torch.randn(m, k, generator=g) * torch.rand(m, 1, generator=g) * 4
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
        w_scale = torch.rand(n, generator=g) * 1e-2
        b = torch.randn(n, generator=g).to(torch.bfloat16) if bias else None
        for rotate in (True, False):
            for dtype in (torch.float32, torch.bfloat16):
                xd = x.to(dtype)
                q, s = ours.quantize_rows(xd, rotate)
                if rotate:
                    rq, rs = ck.quantize_and_rotate_rowwise(xd, _build_hadamard(256, dtype=dtype), 256)
                else:
                    rq, rs = ck.quantize_int8_rowwise(xd)
                out[f"{m}x{k}x{n} rotate={rotate} {dtype}"] = {
                    "q_max_diff": (q.int() - rq.int()).abs().max().item(),
                    "q_mismatch": (q != rq).float().mean().item(),
                    "scale_rel": ((s - rs.float()).abs() / rs.float()).max().item(),
                }
            y = ours.int8_gemm_dequant(q, s, w, w_scale, b, torch.bfloat16)
            exact = ((q.long() @ w.long().T).double() * s.double() * w_scale.double()[None, :])
            exact = exact.to(torch.bfloat16).double() + (b.double() if bias else 0)
            full = ours.int8_linear(x.to(torch.bfloat16), w, w_scale, b, torch.bfloat16, rotate, 256)
            ref = ck.int8_linear(x.to(torch.bfloat16), w, w_scale, b, torch.bfloat16, rotate, 256)
            out[f"{m}x{k}x{n} rotate={rotate} linear"] = {
                "gemm_vs_exact": ((y.double() - exact).abs().max() / exact.abs().max()).item(),
                "linear_vs_ck": ((full.double() - ref.double()).abs().max() / ref.double().abs().max()).item(),
            }
    print(json.dumps(out))
    """
)


def pack_env(folder: Path) -> dict[str, str]:
    """os.environ with this checkout importable as `ltx2_mgpu` in a child process (linked into `folder`)."""
    link = folder / "ltx2_mgpu"
    link.symlink_to(Path(int8_linear.__file__).resolve().parents[1], target_is_directory=True)
    return {**os.environ, "PYTHONPATH": str(folder)}


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory) -> dict:
    pytest.importorskip("triton", reason="Triton is not installed")
    env = {**pack_env(tmp_path_factory.mktemp("pack")), "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", INTERPRETED], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_interpreted_quantization_equals_comfy_kitchen(interpreted):
    """NOTE [convrot quantization numerics]: a float32 input gives comfy_kitchen's int8 values and row
    scales but where float32 summation order flips a rounding; a bf16 input (comfy_kitchen rounds the
    rotated values and quotients to bf16 on the way) within 2 int8 steps and its scales within bf16's."""
    cases = {case: r for case, r in interpreted.items() if "q_mismatch" in r}
    assert len(cases) == 12
    for case, result in cases.items():
        if "float32" in case:
            assert result["q_max_diff"] <= 1 and result["q_mismatch"] < 1e-3, case
            assert result["scale_rel"] < 1e-6, case
        else:
            assert result["q_max_diff"] <= 2 and result["q_mismatch"] < 0.15, case
            assert result["scale_rel"] < 8e-3, case


def test_interpreted_product_equals_exact_integer_math(interpreted):
    """The fused epilogue: int32 products scaled per row and column, rounded to bf16, plus the bias."""
    for case, result in ((c, r) for c, r in interpreted.items() if "gemm_vs_exact" in r):
        # Two bf16 roundings (the product, then with the bias), each within one bf16 step (2^-7) of the
        # value: Triton's interpreter truncates float32 to bf16 where the GPU rounds to nearest.
        assert result["gemm_vs_exact"] < 1.6e-2, case


def test_interpreted_linear_equals_comfy_kitchen_linear(interpreted):
    """The whole linear against comfy_kitchen's reference int8_linear (bf16 input: its rotation rounds
    to bf16 before quantizing, as ours does): within the bf16 rounding of the output."""
    for case, result in ((c, r) for c, r in interpreted.items() if "linear_vs_ck" in r):
        assert result["linear_vs_ck"] < 2e-2, case


def test_quantized_input_is_reused_for_the_same_tensor_only(monkeypatch):
    """NOTE [quantized input reuse]: q/k/v of one input quantize once; another tensor with the same
    values, an in-place change, or another rotation quantize again; entries go with their tensor."""
    calls = []

    def quantize(x, rotate):
        calls.append(rotate)
        return x.to(torch.int8), torch.ones(x.shape[0], 1)

    monkeypatch.setattr(int8_linear, "quantize_rows", quantize)
    cache = int8_linear._RecentQuantized()
    x = torch.ones(4, 256)
    first = cache.get(x, True)
    assert cache.get(x, True) is first and len(calls) == 1
    cache.get(x.clone(), True)
    assert len(calls) == 2
    cache.get(x, False)
    assert len(calls) == 3
    x.add_(1)
    cache.get(x, True)
    assert len(calls) == 4
    with torch.inference_mode():
        y = torch.ones(4, 256)
        assert cache.get(y, True) is cache.get(y, True)
    assert len(calls) == 5
    ref = weakref.ref(y)
    del y
    assert ref() is None and all(source() is not None for source, _, _ in cache.entries)


def test_install_keeps_comfy_kitchen_on_cpu():
    from ltx2_mgpu.workers.engine.comfy import int8_kernels

    assert int8_kernels.install(torch.device("cpu")) == "int8 layers: comfy_kitchen (CPU)"
    x = torch.zeros(2, 256)
    assert not int8_linear.is_supported(x, torch.zeros(8, 256, dtype=torch.int8), True, 256, torch.bfloat16)


# ----- GPU -----------------------------------------------------------------------------------------

# (M, K, N, bias) of every int8 product in one CFG step of the LTX-2.5 22B at 6,144 video tokens
# (bench/bench_int8_linear.py records them from ComfyUI's model; bench/results/int8_linear_h200.json),
# M cut to 4,096 rows where it is larger: the kernels' tiles do not depend on M beyond that.
SHAPES_22B = (
    (252, 2048, 32, True), (252, 2048, 2048, True), (252, 2048, 8192, True), (252, 8192, 2048, True),
    (2048, 2048, 2048, True), (2048, 4096, 4096, True), (4096, 2048, 4096, True), (4096, 4096, 32, True),
    (4096, 4096, 2048, True), (4096, 4096, 4096, True), (4096, 4096, 16384, False), (4096, 16384, 4096, False),
)  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES_22B, ids=lambda s: "x".join(map(str, s)))
def test_every_22b_product_against_comfy_kitchen_cuda(shape):
    import comfy_kitchen.backends.cuda as ck

    m, k, n, has_bias = shape
    g = torch.Generator(device="cuda").manual_seed(m + n)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randint(-127, 128, (n, k), device="cuda", dtype=torch.int8, generator=g)
    w_scale = torch.rand(n, device="cuda", generator=g) * 1e-3
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g) if has_bias else None
    if m < int8_linear.MIN_ROWS:  # comfy_kitchen's kernels take these calls (MIN_ROWS)
        assert not int8_linear.is_supported(x, w, True, 256, torch.bfloat16)
    else:
        assert int8_linear.is_supported(x, w, True, 256, torch.bfloat16)
    q, s = int8_linear.quantize_rows(x, True)
    # NOTE [convrot quantization numerics]: the float32 math exactly, but for summation order...
    h4 = int8_linear.hadamard4()
    h = (torch.kron(torch.kron(h4, h4), torch.kron(h4, h4)) / 16).to(x.device, torch.float32)
    y = (x.float().reshape(m, -1, 256) @ h).reshape(m, k)
    ref_scale = (y.abs().amax(-1, keepdim=True) / 127).clamp(min=1e-30)
    ref_q = torch.round(y / ref_scale).clamp(-128, 127).to(torch.int8)
    assert (q.int() - ref_q.int()).abs().max().item() <= 1
    assert (q != ref_q).float().mean().item() < 1e-4
    assert ((s - ref_scale).abs() / ref_scale).max().item() < 1e-5
    # ... and comfy_kitchen's CUDA kernel within 2 int8 steps.
    ck_q, _ = ck.quantize_int8_rowwise_convrot(x, 256)
    assert (q.int() - ck_q.int()).abs().max().item() <= 2
    ours = int8_linear.int8_linear(x, w, w_scale, bias, torch.bfloat16, True, 256)
    ref = ck.int8_linear(x, w, w_scale, bias, torch.bfloat16, True, 256)
    assert ((ours.float() - ref.float()).abs().max() / ref.float().abs().max()).item() < 2e-2

    int8_linear._recent.clear()
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        int8_linear.int8_linear(x, w, w_scale, bias, torch.bfloat16, True, 256)  # tuned before capture
        int8_linear._recent.clear()
        with torch.cuda.graph(graph, stream=stream):
            captured = int8_linear.int8_linear(x, w, w_scale, bias, torch.bfloat16, True, 256)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, ours)


@pytest.mark.gpu
def test_comfyui_int8_layer_runs_on_the_pack_backend():
    """ComfyUI's int8 convrot layer (comfy_kitchen's op and registry) reaches the pack's kernels once
    installed, and comfy_kitchen's again after uninstall; both within bf16 rounding of each other."""
    from comfy_kitchen.backends.eager.quantization import DTYPE_TO_CODE
    from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout  # noqa: F401  (registers the layout ops)

    from ltx2_mgpu.workers.engine.comfy import int8_kernels

    BF16_CODE = DTYPE_TO_CODE[torch.bfloat16]
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(int8_linear.MIN_ROWS, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randint(-127, 128, (768, 1024), device="cuda", dtype=torch.int8, generator=g)
    scale = torch.rand(768, device="cuda", generator=g) * 1e-3
    called = []
    original = int8_linear.int8_gemm_dequant
    try:
        int8_linear.int8_gemm_dequant = lambda *a: called.append(1) or original(*a)
        line = int8_kernels.install(torch.device("cuda"))
        assert "pack's Triton kernels" in line
        ours = torch.ops.comfy_kitchen.int8_linear(x, w, scale, None, BF16_CODE, True, 256)
        assert called
        int8_kernels.uninstall()
        called.clear()
        theirs = torch.ops.comfy_kitchen.int8_linear(x, w, scale, None, BF16_CODE, True, 256)
        assert not called
    finally:
        int8_linear.int8_gemm_dequant = original
        int8_kernels.uninstall()
    assert ((ours.float() - theirs.float()).abs().max() / theirs.float().abs().max()).item() < 1e-2


# A fresh process running one 22B product of each kernel: which config the tuner chose, and how many
# configs it timed (Autotuner._bench: every Triton with cache_results has it; the autotuning listener
# knob is newer than some Tritons torch ships with). Reading the choice from Triton's cache folder times none.
TUNED_PROCESS = textwrap.dedent(
    """
    import json, torch
    from triton.runtime.autotuner import Autotuner
    from ltx2_mgpu.kernels import int8_linear, int8_triton

    timed = []
    bench = Autotuner._bench
    def counted(self, *args, **kwargs):
        timed.append(self)
        return bench(self, *args, **kwargs)
    Autotuner._bench = counted
    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(-127, 128, (4096, 4096), device="cuda", dtype=torch.int8)
    int8_linear.int8_linear(x, w, torch.rand(4096, device="cuda") * 1e-3, None, torch.bfloat16, True, 256)
    torch.cuda.synchronize()
    kernels = {"int8_gemm_dequant": int8_triton.int8_gemm_dequant,
               "rotate_quantize_rows": int8_triton.rotate_quantize_rows}
    print(json.dumps([[name, str(getattr(k, "best_config", None)), sum(t is k for t in timed)]
                      for name, k in kernels.items()]))
    """
)


@pytest.mark.gpu
def test_a_later_process_reads_the_tuned_configs_from_disk(tmp_path):
    """NOTE [int8 tuning cost]: the first process times the configs, the next one on the machine reads
    the same choices from Triton's cache folder and times nothing."""
    env = {**pack_env(tmp_path), "TRITON_CACHE_DIR": str(tmp_path / "triton")}

    def run() -> list:
        done = subprocess.run([sys.executable, "-c", TUNED_PROCESS], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    print(f"\n[int8 tuning] first process {first}, second {second}")
    assert [name for name, _, _ in first] == ["int8_gemm_dequant", "rotate_quantize_rows"]
    assert all(config != "None" and timed > 1 for _, config, timed in first), first  # every config timed
    assert [timed for _, _, timed in second] == [0, 0], second
    assert [config for _, config, _ in second] == [config for _, config, _ in first]
