"""Benchmark of the SP head exchange: the CUDA-IPC kernel against torch.distributed.

    python bench/bench_all2all.py --out all2all.json [--ranks 1 2 4 8] [--tokens 6144 24576 32640]

For each rank count, one process per rank. With at least that many GPUs, rank r uses GPU r and the
baselines run over NCCL: `all_to_all_single` on a contiguous buffer of the same size (the collective
alone) and the full torch.distributed fallback (with its packing). With fewer GPUs, the ranks share
GPU 0: NCCL cannot run there, and the driver time-slices the processes, so those kernel figures show
that it works, not how fast NVLink is; the JSON labels them "shared-gpu". With one rank the kernel
and NCCL both degenerate to a local copy; a plain device copy of the same bytes is given as ceiling.

Figures per rank (the slowest rank): time per call, algbw = input bytes of the call / time, and
busbw = algbw * (N - 1) / N (the share that leaves the rank; the nccl-tests convention for all-to-all).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HEADS = 32  # LTX-2 video self-attention
HEAD_DIM = 128
DEFAULT_TOKENS = (6144, 24576, 32640)  # LTX-2 stage-1/stage-2 video token counts per sample


def _time_ms(fn, iters: int, warmup: int, group: dist.ProcessGroup | None) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier(group)  # all ranks start the timed loop together
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def _row(op: str, backend: str, tokens: int, ms: float, nbytes: int, world_size: int) -> dict:
    algbw = nbytes / (ms * 1e-3) / 1e9
    return {
        "op": op,
        "backend": backend,
        "tokens": tokens,
        "heads": HEADS,
        "head_dim": HEAD_DIM,
        "dtype": "bfloat16",
        "ranks": world_size,
        "ms": round(ms, 4),
        "bytes_per_rank": nbytes,
        "algbw_GBps": round(algbw, 2),
        "busbw_GBps": round(algbw * (world_size - 1) / world_size, 2),
    }


def _bench_size(ex, nccl_group, tokens_total: int, rank: int, world_size: int, args) -> list[dict]:
    from ltx2_mgpu.kernels import TorchDistHeadExchange, even_split, head_split

    tokens, heads = even_split(tokens_total, world_size), head_split(HEADS, world_size)
    x = torch.randn(1, tokens[rank], HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    y = ex.send_recv_heads(x, tokens, heads)
    rows = []
    timed = {
        ("send_recv_heads", ex.name): (lambda: ex.send_recv_heads(x, tokens, heads), x),
        ("gather_heads", ex.name): (lambda: ex.gather_heads(y, tokens, heads), y),
    }
    if nccl_group is not None:
        fb = TorchDistHeadExchange(nccl_group)
        flat_in = torch.empty(x.numel() // world_size * world_size, device="cuda", dtype=x.dtype)
        flat_out = torch.empty_like(flat_in)
        timed[("send_recv_heads", "torch.distributed fallback")] = (
            lambda: fb.send_recv_heads(x, tokens, heads),
            x,
        )
        timed[("gather_heads", "torch.distributed fallback")] = (lambda: fb.gather_heads(y, tokens, heads), y)
        timed[("all_to_all_single", "nccl")] = (
            lambda: dist.all_to_all_single(flat_out, flat_in, group=nccl_group),
            flat_in,
        )
    if world_size == 1:
        timed[("device_copy", "torch clone (ceiling)")] = (lambda: x.clone(), x)
    for (op, backend), (fn, inp) in timed.items():
        ms = _time_ms(fn, args.iters, args.warmup, None)
        slowest: list = [None] * world_size
        dist.all_gather_object(slowest, ms)
        rows.append(
            _row(op, backend, tokens_total, max(slowest), inp.numel() * inp.element_size(), world_size)
        )
    ex_check = getattr(ex, "check", None)
    if ex_check is not None:
        ex_check()
    return rows


def _worker(rank: int, world_size: int, init_file: str, args, result_file: str) -> None:
    os.environ["LTX2_MGPU_ALL2ALL"] = "kernel"
    shared = torch.cuda.device_count() < world_size
    device = torch.device("cuda", 0 if shared else rank)
    torch.cuda.set_device(device)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    nccl_group = None if shared else dist.new_group(backend="nccl")
    from ltx2_mgpu.kernels import make_head_exchange

    ex = make_head_exchange(None, device, max_tokens=max(args.tokens), timeout_s=120.0)
    rows = []
    for tokens_total in args.tokens:
        rows.extend(_bench_size(ex, nccl_group, tokens_total, rank, world_size, args))
    if world_size == 1:  # the grid-size choice: every resident block instead of one per SM
        os.environ["LTX2_MGPU_ALL2ALL_BLOCKS"] = str(1 << 20)  # clamped to what stays resident
        all_resident = make_head_exchange(None, device, max_tokens=max(args.tokens), timeout_s=120.0)
        del os.environ["LTX2_MGPU_ALL2ALL_BLOCKS"]
        for tokens_total in args.tokens:
            for row in _bench_size(all_resident, None, tokens_total, rank, world_size, args):
                if row["backend"] == all_resident.name:
                    rows.append({**row, "backend": f"{all_resident.name} ({all_resident.blocks} blocks)"})
        all_resident.close()
    if rank == 0:
        run = {
            "ranks": world_size,
            "devices": [0] * world_size if shared else list(range(world_size)),
            "placement": "shared-gpu" if shared and world_size > 1 else "one-gpu-per-rank",
            "kernel_blocks": ex.blocks,
            "results": rows,
        }
        Path(result_file).write_text(json.dumps(run))
    ex.close()
    dist.destroy_process_group()


def _meta() -> dict:
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    single = len(gpus) < 2
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "machine": "single-GPU" if single else f"{len(gpus)}-GPU",
        "note": (
            "single GPU: only the 1-rank figures (local copy through the kernel vs NCCL vs a plain copy) are "
            "meaningful; shared-gpu runs are time-sliced between processes and measure no interconnect"
            if single
            else "one GPU per rank; kernel vs NCCL all_to_all_single over the GPUs' interconnect"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="JSON file to write")
    parser.add_argument("--ranks", type=int, nargs="+", help="rank counts (default: 1, 2 and each GPU count)")
    parser.add_argument("--tokens", type=int, nargs="+", default=list(DEFAULT_TOKENS))
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to benchmark", file=sys.stderr)
        return 1
    gpus = torch.cuda.device_count()
    ranks = args.ranks or sorted({1, 2, *[n for n in (4, 8) if n <= gpus], gpus})
    from ltx2_mgpu.kernels.build import build_kernels

    build_kernels()  # once, before the ranks start
    report = {"meta": _meta(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for world_size in ranks:
            result_file = os.path.join(tmp, f"run{world_size}.json")
            init_file = os.path.join(tmp, f"rdzv{world_size}")
            mp.spawn(_worker, args=(world_size, init_file, args, result_file), nprocs=world_size)
            run = json.loads(Path(result_file).read_text())
            report["runs"].append(run)
            for row in run["results"]:
                print(
                    f"{world_size} rank(s) {run['placement']:>16} {row['op']:>17} {row['backend']:>27} "
                    f"T={row['tokens']:>5} {row['ms']:8.3f} ms {row['algbw_GBps']:8.1f} GB/s algbw "
                    f"{row['busbw_GBps']:7.1f} GB/s busbw"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
