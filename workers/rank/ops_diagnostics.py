"""Commands for health checks, tests and fault drills. Cheap, and harmless on a production group."""

from __future__ import annotations

import os
import signal
import sys
import time

import torch

from .ops import InputRejected, op


@op("ping")
def ping(job, args: dict) -> dict:
    foreign = sorted(
        m for m in sys.modules if m.split(".")[0] in ("comfy", "folder_paths", "nodes", "server", "execution")
    )
    # A group on ComfyUI's engine never imports ltx-core (NOTE [engine seam]; tests/test_engine_seam.py).
    ltx_core = sorted(m for m in sys.modules if m.split(".")[0] == "ltx_core")
    return {
        "rank": job.rank,
        "pid": os.getpid(),
        "echo": args.get("echo"),
        "comfyui_modules": foreign,
        "ltx_core_modules": ltx_core,
        "sys_path": [os.path.abspath(entry) for entry in sys.path],  # "" is the worker's cwd, its workdir
    }


def pattern(start: int, count: int, seed: int) -> torch.Tensor:
    """Integer pattern p[i] = (i * 2654435761 + seed) mod 2**31 for i in [start, start + count), int64."""
    i = torch.arange(start, start + count, dtype=torch.int64)
    return (i * 2654435761 + seed) % (1 << 31)


@op("fill_pattern")
def fill_pattern(job, args: dict) -> dict:
    """Rank `writer` fills the output slot with `pattern` (cast to its dtype)."""
    out: torch.Tensor = args["out"]
    if job.rank == int(args.get("writer", 0)):
        flat = out.view(-1)
        chunk = 1 << 24
        for start in range(0, flat.numel(), chunk):
            n = min(chunk, flat.numel() - start)
            flat[start : start + n] = pattern(start, n, int(args["seed"])).to(out.dtype)
    return {"numel": out.numel()}


@op("sum_input")
def sum_input(job, args: dict) -> dict:
    """Each rank sums the shared input tensor: proves every rank sees the same bytes."""
    x: torch.Tensor = args["x"]
    return {"sum": float(x.double().sum().item()), "shape": list(x.shape)}


@op("steps")
def steps(job, args: dict) -> dict:
    """Run `n` fake steps of `step_s` seconds with progress and collective cancel checks."""
    n, step_s = int(args["n"]), float(args.get("step_s", 0.01))
    for i in range(n):
        job.check_cancel()
        time.sleep(step_s)
        job.progress(i + 1, n)
    return {"steps": n}


@op("fault")
def fault(job, args: dict) -> dict:
    """Fault drills for tests: `kind` in raise_all, raise_one, exit_one, stop_one, oom_one, reject."""
    kind, victim = str(args["kind"]), int(args.get("rank", 0))
    if kind == "reject":
        raise InputRejected("rejected on purpose")
    if kind == "raise_all":
        raise RuntimeError("raised on purpose on every rank")
    if job.rank != victim:
        # The other ranks wait in a collective, as they would mid-step.
        job.check_cancel()
        return {}
    if kind == "raise_one":
        raise RuntimeError(f"raised on purpose on rank {victim}")
    if kind == "oom_one":
        raise torch.OutOfMemoryError(f"simulated out of memory on rank {victim}")
    if kind == "exit_one":
        os._exit(3)
    if kind == "stop_one":
        os.kill(os.getpid(), signal.SIGSTOP)
    raise InputRejected(f"unknown fault kind {kind!r}")


@op("units")
def units(job, args: dict) -> dict:
    """Unit boundaries drill (engine/units.py): the first `active` ranks run `n` units of `unit_s` seconds
    each, the others idle; rank `fail_rank` fails its unit `fail_at` (1-based; 0: none)."""
    from ..engine.units import UnitSteps

    n, active, unit_s = (
        int(args["n"]),
        int(args.get("active", job.world_size)),
        float(args.get("unit_s", 0.0)),
    )
    fail_rank, fail_at = int(args.get("fail_rank", -1)), int(args.get("fail_at", 0))
    steps = UnitSteps(job)
    if job.rank >= active:
        steps.idle()
        return {"units": steps.units}
    for unit in range(1, n + 1):
        time.sleep(unit_s)
        if job.rank == fail_rank and unit == fail_at:
            steps.fail(f"unit {unit} failed on purpose on rank {job.rank}")
        job.progress(unit, n)
        steps.step()
    steps.finish()
    return {"units": steps.units}
