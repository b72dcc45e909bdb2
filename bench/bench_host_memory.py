"""Host memory of N workers loading one model file: peak during the load and what stays after it.

Starts N workers (CPU, or all on the GPU `--gpus` names; LTX2_MGPU_GPU_MEMORY_GIB caps each), loads
`--file` with `--weights`, and samples every 0.1 s: the workers' summed RSS (a page shared by several counts once per
worker), summed PSS (a shared page split between its users: the host's real cost, from /proc/PID/smaps_rollup)
and the host's MemAvailable (page cache of a memory-mapped file counts as available). Writes a run
per worker count to `--out` (JSON).

    python bench/bench_host_memory.py --file model.gguf --workers 1 2 4 --out bench/results/host_memory.json

Needs a ComfyUI (COMFYUI_PATH) and, for .gguf files, the ComfyUI-GGUF pack (LTX2_MGPU_COMFYUI_GGUF).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from pathlib import Path

import psutil
from bench_report import finish

from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root
from ltx2_mgpu.workers.wire.comfyui_root import find_comfyui_root as _find
from ltx2_mgpu.workers.wire.fork_protocol import WORKER_NAME

GIB = 2**30
SAMPLE_S = 0.1


def pss_bytes(process: psutil.Process) -> int:
    try:
        with open(f"/proc/{process.pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def available_bytes() -> int:
    return psutil.virtual_memory().available


class Sampler(threading.Thread):
    """Samples the workers' RSS / PSS sums and MemAvailable until stopped; keeps the peaks."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak_rss = self.peak_pss = 0
        self.min_available = available_bytes()

    def workers(self) -> list[psutil.Process]:
        # Spawned workers carry the entry in their command line; forked CPU workers only their name.
        marker = "ltx2_mgpu.workers.rank.entry"
        out = []
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.name() == WORKER_NAME or marker in " ".join(p.cmdline()):
                    out.append(p)
        return out

    def sample(self) -> tuple[int, int]:
        procs = self.workers()
        rss = sum(p.memory_info().rss for p in procs if p.is_running())
        pss = sum(pss_bytes(p) for p in procs)
        return rss, pss

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                rss, pss = self.sample()
            except psutil.Error:
                continue
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.min_available = min(self.min_available, available_bytes())
            time.sleep(SAMPLE_S)


def measure(file: Path, devices: str, weights: str, dtype: str, root) -> dict:
    before = available_bytes()
    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    model = MGPUModel.create(
        file, devices=devices, dtype=dtype, backend="comfy", comfyui_root=root.path,
        comfyui_version=root.version, weights=weights,
    )  # fmt: skip
    get_manager().acquire(model)
    load_s = time.perf_counter() - started
    time.sleep(1.0)
    rss_after, pss_after = sampler.sample()
    sampler.stop.set()
    sampler.join()
    get_manager().unload()
    return {
        "devices": devices,
        "weights": weights,
        "file_bytes": file.stat().st_size,
        "load_s": round(load_s, 2),
        "peak_rss_sum_gib": round(sampler.peak_rss / GIB, 3),
        "peak_pss_sum_gib": round(sampler.peak_pss / GIB, 3),
        "after_rss_sum_gib": round(rss_after / GIB, 3),
        "after_pss_sum_gib": round(pss_after / GIB, 3),
        "available_drop_peak_gib": round((before - sampler.min_available) / GIB, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", required=True, type=Path)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument(
        "--gpus", default="", help="GPU ids per worker count, e.g. '0' runs every worker on cuda:0"
    )
    p.add_argument("--weights", default="replicated")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    root = _find(Path(__file__).resolve().parents[1]) or check_comfyui_root(".")
    results = []
    for n in args.workers:
        devices = f"cpu:{n}" if not args.gpus else ",".join([args.gpus] * n)
        results.append(measure(args.file, devices, args.weights, args.dtype, root))
        print(json.dumps(results[-1]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "file": args.file.name,
        "dtype": args.dtype,
        "comfyui": {"version": root.version},
        "runs": results,
    }
    finish(report, args.out, None)  # the file and the command by name, not the machine's paths


if __name__ == "__main__":
    main()
