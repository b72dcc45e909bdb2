"""One denoising step of the LTX audio+video transformer, random weights, on three paths in one run:

  (a) comfy backend, worker path: ComfyUI's LTXAVModel and sampler in a worker process, the model
      call patched for sequence parallelism (on one rank: ComfyUI's forward unchanged);
  (b) ltx-core backend, worker path: today's engine (bench_forward of workers/engine/ltxcore/bench.py);
      LTX-2 in bf16 only (ltx-core 1.0.0 cannot build LTX-2.3 / 2.5, and its fp8 is another code path);
  (c) native ComfyUI in this process: the same ComfyUI model classes, weights and sampler, no workers.

--family 2 is the released LTX-2 19B configuration; 2.3 and 2.5 the 22B ones as ComfyUI builds them
(workers/engine/comfy/random_model.FAMILY_CHANGES: gated attention, cross-attention and prompt AdaLN,
8-layer text connectors at the streams' widths; 2.5 adds the keyframe position embedding and the video
feed-forward without bias). ComfyUI's diffusion model of 2.3 / 2.5 holds 21.0B parameters; the text
projection (1.16B, Gemma's 49 x 3840 states to 4096 + 2048) lives in the text encoder, together 22.2B.
--weights bf16 | fp8 (fp8 scaled, the LTX-2.3 template's ltx-2.3-22b-dev-fp8) | int8 (int8 convrot, the
LTX-2.5 comfy-int8-convrot file), several in one run: the random model is held in the format's layout
and run by ComfyUI's mixed-precision ops, as ComfyUI runs a released file (random_model.py says which
layers).

Cond+uncond batch with audio (121 frames at 24 fps), 6,144 and 24,576 video tokens (--tokens picks).
(a) and (c) time the interval between ComfyUI's step callbacks (one CFG model call plus the sampler's
update), (b) the engine's CFG model call. Reported per path: step times, peak GPU memory
(torch.cuda.max_memory_allocated over the timed steps, per GPU for worker groups), the FLOPs of one step
(bench/av_flops.py, formula in its docstring) and MFU against the H200's dense peak of the weight
format (bf16 989, fp8 / int8 1979 TFLOP/s). --accuracy also compares (a)'s denoised prediction with
(c)'s and measures (c)'s own difference between two batchings of the same step (cond and uncond in one
batch, and each alone): the yardstick our difference from native is held to. With --sp-devices, (a)
and (b) also run sequence-parallel on those GPUs. Writes JSON (--out).

On one H200. Each call should stay well inside 10 minutes: the 22B blocks are the 19B's (18.56B against
18.53B parameters), so a bf16 step should take about the 19B's 0.8 s at 6,144 tokens and 5 s at 24,576,
4 steps per path, size and format; random init and quantization take seconds on the GPU, a worker
start and ComfyUI's import some more. If a call nears the limit, split it with --tokens 6144 / 24576:

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_comfy_step.py --family 2.3 --weights bf16 fp8 --out ltx23-step.json
    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_comfy_step.py --family 2.5 --weights bf16 int8 --out ltx25-step.json
    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_comfy_step.py --out comfy-step.json --sp-devices cuda:0,cuda:1

`--tiny` runs a small configuration on the CPU in float32 (a smoke test of the whole script; fp8 runs
ComfyUI's emulated path there: no fp8 compute on a CPU, the weight is dequantized for each product):

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_comfy_step.py --tiny --family 2.5 --weights bf16 fp8 int8 --out x.json
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import platform
import tempfile
from pathlib import Path

import torch
from av_flops import H200_PEAK_FLOPS, av_step_flops, mfu
from bench_report import add_comfyui_argument, comfyui_root, finish
from step_sizes import AUDIO_FRAMES, SHAPES, TINY, TINY_SHAPES, matmul_tflops, median

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import Placement
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER
from ltx2_mgpu.workers.wire.requests import BENCH_WEIGHT_FORMATS

FAMILIES = ("2", "2.3", "2.5")
GIB = 2**30


def native_in_process(
    root,
    config: dict,
    shapes: dict,
    device,
    dtype,
    repeats: int,
    weights: str,
    cfg: float = 4.0,
    attention: str = "",
    accuracy: bool = False,
) -> dict[int, dict]:
    """(c): ComfyUI imported here, the random model built and sampled in this process:
    {tokens: {"ms": [...], "peak_memory_gib": ...}}; with `attention` (a registered attention function)
    also the steps with it, as ComfyUI's ModelAttentionBackend sets it ("attention_ms"), and the error of
    its denoised prediction against the default attention's ("attention_error": per stream, of the
    largest magnitude); with `accuracy` the denoised prediction itself ("denoised", kept out of the
    JSON) and native's own difference between two batchings ("native_batching_error")."""
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui

    import_comfyui(root, device)
    if device.type == "cuda":  # native means ComfyUI's own SDPA order, not the workers' cuDNN-first one
        import comfy.ops

        from ltx2_mgpu.workers.engine.comfy import bootstrap

        comfy.ops.SDPA_BACKEND_PRIORITY[:] = list(bootstrap.comfyui_sdpa_order)
        from ltx2_mgpu.workers.engine.comfy import int8_kernels

        int8_kernels.uninstall()  # and comfy_kitchen's own int8 kernels
    from ltx2_mgpu.workers.engine.comfy.bench import random_job_inputs, time_steps
    from ltx2_mgpu.workers.engine.comfy.random_model import comfy_random_model, context_width

    patcher = comfy_random_model(config, device, dtype, seed=0, weights=weights)
    out = {}
    for tokens, shape in shapes.items():
        width = context_width(config)
        inputs = random_job_inputs(list(shape), AUDIO_FRAMES, config["caption_channels"], 0, width)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        times = time_steps(patcher, inputs, repeats, device, cfg=cfg)
        peak = torch.cuda.max_memory_allocated(device) / GIB if device.type == "cuda" else 0.0
        out[tokens] = {"ms": times, "peak_memory_gib": peak}
        if attention:
            out[tokens].update(attention_run(patcher, inputs, repeats, device, cfg, attention))
        if accuracy:
            out[tokens].update(batching_run(patcher, inputs, cfg))
        print(
            json.dumps(
                {
                    "path": "native_comfyui_in_process",
                    "weights": weights,
                    "video_tokens": tokens,
                    **{k: v for k, v in out[tokens].items() if k != "denoised"},
                }
            ),
            flush=True,
        )
    del patcher
    gc.collect()
    import comfy.model_management

    comfy.model_management.cleanup_models()  # it holds weak references only: free the weights now
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def relative_errors(reference: list, other: list) -> list[float]:
    """Per stream: the largest difference over the reference's largest magnitude."""
    return [float((a - b).abs().max() / a.abs().max()) for a, b in zip(reference, other)]


def batching_run(patcher, inputs: tuple, cfg: float) -> dict:
    """Native's denoised prediction as ComfyUI batches it (cond and uncond in one batch where memory
    allows) and its difference from the same prediction with each pass run alone: how far two batchings
    of the same job drift apart natively, the yardstick for our path's difference from native."""
    import comfy.model_patcher

    from ltx2_mgpu.workers.engine.comfy.bench import denoised

    batched = denoised(patcher, inputs, cfg)
    if cfg == 1.0:  # one pass: there is no second batching to compare with
        return {"denoised": batched}
    free = comfy.model_patcher.ModelPatcher.get_free_memory
    # ComfyUI batches the passes only when its memory estimate fits the free memory it is told of
    comfy.model_patcher.ModelPatcher.get_free_memory = lambda self, device: 0
    try:
        alone = denoised(patcher, inputs, cfg)
    finally:
        comfy.model_patcher.ModelPatcher.get_free_memory = free
    return {"denoised": batched, "native_batching_error": relative_errors(batched, alone)}


def attention_run(patcher, inputs: tuple, repeats: int, device, cfg: float, name: str) -> dict:
    """Native steps with attention function `name` (ModelAttentionBackend's way) and its error."""
    import comfy.ldm.modules.attention as attention

    from ltx2_mgpu.workers.engine.comfy.bench import denoised, time_steps

    function = attention.get_attention_function(name, None)
    if function is None:
        raise SystemExit(
            f"--attention {name}: this ComfyUI has no such attention function "
            f"(it has {sorted(attention.REGISTERED_ATTENTION_FUNCTIONS)})"
        )
    patched = patcher.clone()
    patched.set_model_optimized_attention(function)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = time_steps(patched, inputs, repeats, device, cfg=cfg)
    peak = torch.cuda.max_memory_allocated(device) / GIB if device.type == "cuda" else 0.0
    reference, chosen = denoised(patcher, inputs, cfg), denoised(patched, inputs, cfg)
    errors = relative_errors(reference, chosen)
    return {"attention_ms": times, "attention_peak_memory_gib": peak, "attention_error": errors}


def worker_paths(
    devices: str,
    root,
    config: dict,
    shapes: dict,
    dtype: str,
    repeats: int,
    weights: str,
    with_ltxcore: bool,
    cfg: float = 4.0,
    cuda_graphs: bool = False,
    attention: str = "",
    compile_blocks: bool = False,
    denoised_dir: Path | None = None,
) -> dict:
    """(a), and (b) when `with_ltxcore`, on groups of `devices` (one per engine): {tokens: {"comfy_worker_ms",
    ...}}; with `cuda_graphs` (a) also with the blocks replayed from CUDA graphs ("comfy_worker_graphs_ms");
    with `attention` (a) also with that attention function, as a ModelAttentionBackend MODEL's calls
    name it ("comfy_worker_attention_ms", graphs as `cuda_graphs` says); with `compile_blocks` (a) also
    with the blocks torch.compile'd ("comfy_worker_compiled_ms", and with graphs too
    "comfy_worker_compiled_graphs_ms"; the warm-up step compiles); with `denoised_dir` the default run's
    denoised prediction too ("denoised", loaded from the file rank 0 saves there)."""
    # comfyui_root: CPU workers are forked with ComfyUI already imported (NOTE [fork server])
    group = WorkerGroup(Placement(tuple(devices.split(","))), comfyui_root=root.path).start()
    out: dict[int, dict] = {tokens: {} for tokens in shapes}
    try:
        loaded = group.run(
            "comfy_load_random_model",
            {"comfyui_root": root.path, "dtype": dtype, "config": config, "weights": weights},
        )
        for tokens, shape in shapes.items():
            args = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": repeats, "cfg": cfg}
            if cuda_graphs:  # the same steps with the blocks replayed from CUDA graphs, side by side
                graphed = group.run("comfy_bench_step", {**args, "cuda_graphs": True})
                out[tokens].update(
                    comfy_worker_graphs_ms=graphed[0]["times_ms"], comfy_cuda_graphs=graphed[0]["cuda_graphs"]
                )
            if compile_blocks:  # NOTE [compiled blocks]; the compiled steps first, eager ones after
                compiled = group.run("comfy_bench_step", {**args, "compile": True})
                out[tokens].update(comfy_worker_compiled_ms=compiled[0]["times_ms"])
                if cuda_graphs:
                    both = group.run("comfy_bench_step", {**args, "compile": True, "cuda_graphs": True})
                    out[tokens].update(
                        comfy_worker_compiled_graphs_ms=both[0]["times_ms"],
                        comfy_compiled_cuda_graphs=both[0]["cuda_graphs"],
                    )
            if attention:
                chosen = group.run(
                    "comfy_bench_step", {**args, "cuda_graphs": cuda_graphs, "attention": attention}
                )
                out[tokens].update(
                    comfy_worker_attention_ms=chosen[0]["times_ms"],
                    comfy_attention_backend_calls=chosen[0]["attention_backend_calls"],
                )
            saved = "" if denoised_dir is None else str(denoised_dir / f"denoised_{tokens}.pt")
            replies = group.run("comfy_bench_step", {**args, "denoised_path": saved})
            if saved:
                out[tokens]["denoised"] = torch.load(saved)
            out[tokens].update(
                comfy_worker_ms=replies[0]["times_ms"],
                comfy_exchange=loaded[0]["exchange"],
                comfy_split_forwards=replies[0]["split_forwards"],
                comfy_weights_gib_per_gpu=[r["weights_bytes"] / GIB for r in loaded],
                comfy_peak_memory_gib_per_gpu=[r["peak_memory_bytes"] / GIB for r in replies],
            )
            print(
                json.dumps(
                    {
                        "path": "comfy_worker",
                        "devices": devices,
                        "weights": weights,
                        "video_tokens": tokens,
                        **{k: v for k, v in out[tokens].items() if k != "denoised"},
                    }
                ),
                flush=True,
            )
        if not with_ltxcore:
            return out
        group.stop()  # a group runs one engine for its life (NOTE [engine seam]): ltx-core gets its own
        group = WorkerGroup(Placement(tuple(devices.split(",")))).start()
        group.run("load_random_model", {"dtype": dtype, "config": config})
        for tokens, shape in shapes.items():
            args = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": repeats, "warmup": 1}
            replies = group.run("bench_forward", {**args, "compare_plain": False})
            out[tokens].update(
                ltxcore_worker_ms=replies[0]["times_ms"],
                ltxcore_peak_memory_gib_per_gpu=[r["peak_memory_bytes"] / GIB for r in replies],
            )
            print(
                json.dumps(
                    {"path": "ltxcore_worker", "devices": devices, "video_tokens": tokens, **out[tokens]}
                ),
                flush=True,
            )
    finally:
        group.stop()
    return out


def one_format(args, root, config: dict, shapes: dict, device, dtype, weights: str) -> dict:
    """Every path at every size for one weight format: the report's entry for `weights`."""
    dtype_name = str(dtype).removeprefix("torch.")
    # ltx-core's bench forward always runs cond+uncond: only at the default cfg.
    with_ltxcore = args.family == "2" and weights == "bf16" and args.cfg != 1.0
    native = native_in_process(
        root, config, shapes, device, dtype, args.repeats, weights, args.cfg, args.attention, args.accuracy
    )
    scratch = tempfile.TemporaryDirectory(prefix="ltx2-step-") if args.accuracy else None
    one = worker_paths(
        str(device),
        root,
        config,
        shapes,
        dtype_name,
        args.repeats,
        weights,
        with_ltxcore,
        args.cfg,
        args.cuda_graphs,
        args.attention,
        args.compile,
        None if scratch is None else Path(scratch.name),
    )
    if scratch is not None:
        scratch.cleanup()
    cases = []
    for tokens in shapes:
        # av_step_flops counts cond+uncond; cfg 1 runs the cond pass only.
        flops = av_step_flops(config, tokens, AUDIO_FRAMES) / (2 if args.cfg == 1.0 else 1)
        row = {
            "video_tokens": tokens,
            "step_tflop": flops / 1e12,
            "native_comfyui_in_process_ms": native[tokens]["ms"],
            "native_peak_memory_gib": native[tokens]["peak_memory_gib"],
            **{f"native_{k}": v for k, v in native[tokens].items() if k.startswith("attention")},
            **{k: v for k, v in one[tokens].items() if k != "denoised"},
        }
        if args.accuracy:  # our prediction against native's, beside native's own batching drift
            row["comfy_worker_error"] = relative_errors(native[tokens]["denoised"], one[tokens]["denoised"])
            if "native_batching_error" in native[tokens]:
                row["native_batching_error"] = native[tokens]["native_batching_error"]
        base = median(native[tokens]["ms"])
        row["comfy_worker_over_native"] = median(row["comfy_worker_ms"]) / base
        row["mfu_native"] = mfu(flops, base, weights)
        row["mfu_comfy_worker"] = mfu(flops, median(row["comfy_worker_ms"]), weights)
        for key in ("comfy_worker_compiled_ms", "comfy_worker_compiled_graphs_ms"):
            if key in row:
                name = key.removeprefix("comfy_worker_").removesuffix("_ms")
                row[f"comfy_worker_{name}_over_native"] = median(row[key]) / base
                row[f"native_over_comfy_worker_{name}"] = base / median(row[key])  # the speed-up
                row[f"mfu_comfy_worker_{name}"] = mfu(flops, median(row[key]), weights)
                if args.measured_tflops:
                    row[f"of_measured_matrix_rate_{name}"] = (
                        flops / (median(row[key]) / 1e3) / (args.measured_tflops * 1e12)
                    )
        if "comfy_worker_graphs_ms" in row:
            row["comfy_worker_graphs_over_eager"] = median(row["comfy_worker_graphs_ms"]) / median(
                row["comfy_worker_ms"]
            )
            row["comfy_worker_graphs_over_native"] = median(row["comfy_worker_graphs_ms"]) / base
        if "comfy_worker_attention_ms" in row:
            # against the worker with the default attention and the same graphs setting
            default = row["comfy_worker_graphs_ms" if args.cuda_graphs else "comfy_worker_ms"]
            row["comfy_worker_attention_speedup"] = median(default) / median(row["comfy_worker_attention_ms"])
            row["native_attention_speedup"] = base / median(row["native_attention_ms"])
        if with_ltxcore:
            row["comfy_worker_over_ltxcore_worker"] = median(row["comfy_worker_ms"]) / median(
                row["ltxcore_worker_ms"]
            )
            row["mfu_ltxcore_worker"] = mfu(flops, median(row["ltxcore_worker_ms"]), weights)
        cases.append(row)
    for devices in args.sp_devices:
        sp = worker_paths(
            devices, root, config, shapes, dtype_name, args.repeats, weights, with_ltxcore, args.cfg
        )
        for row in cases:
            tokens = row["video_tokens"]
            entry = {"devices": devices, **sp[tokens]}
            entry["comfy_speedup_vs_1_gpu"] = median(row["comfy_worker_ms"]) / median(
                entry["comfy_worker_ms"]
            )
            if with_ltxcore:
                entry["ltxcore_speedup_vs_1_gpu"] = median(row["ltxcore_worker_ms"]) / median(
                    entry["ltxcore_worker_ms"]
                )
            row.setdefault("sequence_parallel", []).append(entry)
    return {"weights": weights, "peak_tflops": H200_PEAK_FLOPS[weights] / 1e12, "cases": cases}


def parameter_report(config: dict, family: str) -> dict:
    """Parameters of ComfyUI's diffusion model of `config` (counted on the meta device) and, for the
    releases whose text projection moved into the text encoder, that projection's size."""
    from ltx2_mgpu.workers.engine.comfy.random_model import parameter_shapes

    shapes = parameter_shapes(config)
    report = {
        "diffusion_model": sum(s.numel() for s in shapes.values()),
        "transformer_blocks": sum(
            s.numel() for k, s in shapes.items() if k.startswith("transformer_blocks.")
        ),
        "text_connectors": sum(s.numel() for k, s in shapes.items() if "embeddings_connector" in k),
    }
    if family != "2":
        # Gemma's 49 hidden states (caption_channels wide) -> video (cross_attention_dim) and audio widths, with biases.
        gemma_features = 49 * config["caption_channels"]
        widths = config["cross_attention_dim"] + config["audio_cross_attention_dim"]
        report["text_projection_in_text_encoder"] = (gemma_features + 1) * widths
        report["with_text_projection"] = report["diffusion_model"] + report["text_projection_in_text_encoder"]
    print(json.dumps({"family": family, "parameters": report}), flush=True)
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run with a small configuration")
    parser.add_argument(
        "--family", choices=FAMILIES, default="2", help="LTX release: 2 (19B), 2.3 or 2.5 (22B)"
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        choices=BENCH_WEIGHT_FORMATS,
        default=["bf16"],
        help="weight formats, in order",
    )
    parser.add_argument("--tokens", type=int, nargs="+", help="video token counts to run (default: all)")
    parser.add_argument(
        "--cuda-graphs", action="store_true", help="also time (a) with the blocks replayed from CUDA graphs"
    )
    parser.add_argument(
        "--attention",
        default="",
        help="also time (a) and (c) with this ComfyUI attention function (e.g. comfy_kitchen_int8, as "
        "ModelAttentionBackend sets it) and measure its error against the default",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time (a) with compile_blocks (NOTE [compiled blocks]; with --cuda-graphs, both together)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per path and size")
    parser.add_argument(
        "--accuracy",
        action="store_true",
        help="also compare our denoised prediction with native's, beside native's own difference "
        "between batching cond and uncond together and alone (per stream, of the largest magnitude)",
    )
    parser.add_argument(
        "--cfg",
        type=float,
        default=4.0,
        help="guidance scale; 1 times the cond pass alone (one guidance pass)",
    )
    parser.add_argument("--sp-devices", nargs="*", default=[], help="also time SP groups, e.g. cuda:0,cuda:1")
    add_comfyui_argument(parser)
    args = parser.parse_args(argv)
    root = comfyui_root(parser, args)
    device = torch.device("cpu" if args.tiny else "cuda:0")
    # 3,520: the LTX-2.3 t2v template's stage 1 (1280x704 halved, 121 frames), chosen with --tokens only.
    all_shapes = TINY_SHAPES if args.tiny else {**SHAPES, 3520: (1, 128, 16, 11, 20)}
    unknown = sorted(set(args.tokens or ()) - set(all_shapes))
    if unknown:
        parser.error(f"--tokens {unknown} not among the sizes {sorted(all_shapes)}")
    wanted = args.tokens or list(all_shapes if args.tiny else SHAPES)
    shapes = {t: s for t, s in all_shapes.items() if t in wanted}
    dtype = torch.float32 if args.tiny else torch.bfloat16
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.engine.comfy.random_model import family_config

    import_comfyui(root, device)
    config = family_config({**LTX2_19B_TRANSFORMER, **(TINY if args.tiny else {})}, args.family)
    report: dict = {
        "machine": platform.node(),
        "device": str(device),
        "comfyui": {"version": root.version},  # its path is the machine's
        "comfy_kitchen_installed": importlib.util.find_spec("comfy_kitchen") is not None,
        "family": args.family,
        "config": "tiny"
        if args.tiny
        else {"2": "ltx-2-19b", "2.3": "ltx-2.3-22b", "2.5": "ltx-2.5-22b"}[args.family],
        "transformer_config": config,
        "parameters": parameter_report(config, args.family),
        "repeats": args.repeats,
    }
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    report["cfg"] = args.cfg
    # The bf16 matrix rate this GPU reaches (8192^3 products): the ceiling the steps are held against.
    args.measured_tflops = matmul_tflops(device) if device.type == "cuda" else 0.0
    report["measured_bf16_tflops"] = args.measured_tflops
    report["attention"] = args.attention or "default"
    report["formats"] = [one_format(args, root, config, shapes, device, dtype, w) for w in args.weights]
    return finish(report, args.out, argv)


if __name__ == "__main__":
    main()
