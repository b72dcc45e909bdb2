"""Every int8 product of one LTX-2.5 22B int8-convrot step, timed on its own: comfy_kitchen's path (what
ComfyUI runs for the released file) against bf16 and the pack's Triton int8 kernel (kernels/int8_linear.py).

The products and their shapes are recorded from one real step of a 2-block model at the 22B's widths
(ComfyUI's LTXAVModel, random weights in the int8 convrot layout, cond+uncond with audio): every block of
the 22B makes the same calls, so a step is 48 times a block. Per product (M, K, N, bias), on the GPU:
  ck        comfy_kitchen's int8_linear as ComfyUI calls it (rotation + row-wise quantization, the int8
            product, dequantization); `ck_backend` says whether CUTLASS or the cuBLAS fallback ran;
  quant     comfy_kitchen's fused rotate + quantize kernel alone;
  bf16      torch's bf16 linear of the same shape (cuBLAS);
  ours_quant  our fused rotate + quantize kernel alone;
  triton    our int8 product with the dequantization fused, alone (quantized input from ours_quant);
  ours      our whole linear (kernels/int8_linear.py: ours_quant + triton) as the workers run it, its
            quantized-input reuse off (each call quantizes);
the share of quantized values that differ from comfy_kitchen's (q_mismatch) and by how much at most,
the error of ours against ck (of ck's largest magnitude), and whether our product replayed from a
CUDA graph equals the eager one bit for bit. Writes JSON (--out).

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_int8_linear.py --tokens 6144 24576 --out int8.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_report import finish  # noqa: E402
from step_sizes import AUDIO_FRAMES, SHAPES  # noqa: E402

from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV, check_comfyui_root  # noqa: E402
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER  # noqa: E402

BLOCKS_22B = 48


def record_products(config: dict, tokens: int, device) -> Counter:
    """{(M, K, N, has_bias, convrot_group): calls per block} from one CFG step of a 2-block model."""
    from comfy_kitchen import registry as ck_registry

    from ltx2_mgpu.workers.engine.comfy.bench import random_job_inputs, time_steps
    from ltx2_mgpu.workers.engine.comfy.random_model import comfy_random_model, context_width

    calls: Counter = Counter()
    original = ck_registry.get_implementation

    def recording(func_name, backend=None, kwargs=None):
        if func_name == "int8_linear" and kwargs:
            x, w = kwargs["x"], kwargs["weight"]
            m = x.numel() // x.shape[-1]
            group = kwargs["convrot_groupsize"] if kwargs["convrot"] else 0
            calls[(m, x.shape[-1], w.shape[0], kwargs["bias"] is not None, group)] += 1
        return original(func_name, backend=backend, kwargs=kwargs)

    patcher = comfy_random_model({**config, "num_layers": 2}, device, torch.bfloat16, seed=0, weights="int8")
    inputs = random_job_inputs(
        list(SHAPES[tokens]), AUDIO_FRAMES, config["caption_channels"], 0, context_width(config)
    )
    ck_registry.get_implementation = recording
    try:
        time_steps(patcher, inputs, 0, device)  # one sampler step (the warm-up one)
    finally:
        ck_registry.get_implementation = original
    del patcher
    torch.cuda.empty_cache()
    return Counter({key: count // 2 for key, count in calls.items()})  # two blocks


def cuda_ms(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def time_product(m: int, k: int, n: int, has_bias: bool, group: int, device, repeats: int) -> dict:
    import comfy_kitchen.backends.cuda as ck_cuda

    from ltx2_mgpu.kernels import int8_linear as ours

    g = torch.Generator(device=device).manual_seed(m * 7 + n)
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=g)
    w = torch.randint(-127, 128, (n, k), device=device, dtype=torch.int8, generator=g)
    w_scale = torch.rand(n, device=device, generator=g) * 1e-3
    bias = torch.randn(n, device=device, dtype=torch.bfloat16, generator=g) if has_bias else None
    w_bf16 = (w.float() * w_scale[:, None]).to(torch.bfloat16)

    used = {"cublas": 0}
    original_cublas = ck_cuda._C.cublas_gemm_int8

    def counting(*args):
        used["cublas"] += 1
        return original_cublas(*args)

    ck_cuda._C.cublas_gemm_int8 = counting
    try:
        ref = ck_cuda.int8_linear(x, w, w_scale, bias, torch.bfloat16, group > 0, group or 256)
    finally:
        ck_cuda._C.cublas_gemm_int8 = original_cublas

    def ck():
        return ck_cuda.int8_linear(x, w, w_scale, bias, torch.bfloat16, group > 0, group or 256)

    def quant():
        return ck_cuda.quantize_int8_rowwise_convrot(x, group) if group else ck_cuda.quantize_int8_rowwise(x)

    def ours_quant():
        return ours.quantize_rows(x, group > 0)

    xq, x_scale = ours_quant()
    ck_q, _ = quant()

    def whole():
        ours._recent.clear()
        return ours.int8_linear(x, w, w_scale, bias, torch.bfloat16, group > 0, group or 256)

    def bf16():
        return torch.nn.functional.linear(x, w_bf16, bias)

    def triton():
        return ours.int8_gemm_dequant(xq, x_scale, w, w_scale, bias, torch.bfloat16)

    out = triton()
    error = ((whole().float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    result = {
        "m": m, "k": k, "n": n, "bias": has_bias, "convrot_group": group,
        "ck_backend": "cublas" if used["cublas"] else "cutlass",
        "ck_ms": cuda_ms(ck, repeats), "quant_ms": cuda_ms(quant, repeats),
        "bf16_ms": cuda_ms(bf16, repeats), "triton_ms": cuda_ms(triton, repeats),
        "ours_quant_ms": cuda_ms(ours_quant, repeats), "ours_ms": cuda_ms(whole, repeats),
        "ours_vs_ck_error": error,
        "q_mismatch": (xq != ck_q).float().mean().item(),
        "q_max_diff": (xq.int() - ck_q.int()).abs().max().item(),

    }  # fmt: skip
    flops = 2 * m * k * n
    for key in ("ck", "bf16", "triton", "ours"):
        result[f"{key}_tflops"] = flops / result[f"{key}_ms"] / 1e9
    # Capture-safety: the Triton product replayed from a CUDA graph equals the eager one bit for bit.
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        triton()
        with torch.cuda.graph(graph, stream=stream):
            captured = triton()
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    result["triton_graph_bitwise"] = bool(torch.equal(captured, out))
    print(json.dumps(result), flush=True)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576], choices=sorted(SHAPES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import os

    root = check_comfyui_root(os.environ.get(COMFYUI_PATH_ENV, ""))
    device = torch.device("cuda:0")
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui

    import_comfyui(root, device)
    from ltx2_mgpu.workers.engine.comfy.random_model import family_config

    config = family_config(LTX2_19B_TRANSFORMER, "2.5")
    report: dict = {"device": torch.cuda.get_device_name(device), "blocks": BLOCKS_22B, "tokens": {}}
    for tokens in args.tokens:
        calls = record_products(config, tokens, device)
        rows = []
        for (m, k, n, has_bias, group), per_block in sorted(calls.items()):
            row = time_product(m, k, n, has_bias, group, device, args.repeats)
            row["calls_per_block"] = per_block
            rows.append(row)
        totals = {
            key: sum(r[f"{key}_ms"] * r["calls_per_block"] for r in rows) * BLOCKS_22B
            for key in ("ck", "quant", "bf16", "triton", "ours_quant", "ours")
        }
        report["tokens"][str(tokens)] = {"products": rows, "step_totals_ms": totals}
        print(json.dumps({"video_tokens": tokens, "step_totals_ms": totals}), flush=True)
    finish(report, args.out, argv)
    return report


if __name__ == "__main__":
    main()
