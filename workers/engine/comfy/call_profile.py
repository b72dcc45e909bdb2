"""Optional torch.profiler tables of chosen model calls inside a rank (bench/e2e_trace.py's worker half).

LTX2_MGPU_PROFILE_CALLS="FOLDER:3,4,12" profiles this rank's model calls 3, 4 and 12 (counted from the
rank's first model call, from 0) and writes FOLDER/rank<r>-call<i>.txt, the operator table by device
time. Unset (always, outside benchmarks): nothing is profiled and nothing is written.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch

ENV = "LTX2_MGPU_PROFILE_CALLS"
_count = 0


def parse_setting(value: str) -> tuple[Path, set[int]] | None:
    """ "FOLDER:3,4,12" -> (FOLDER, {3, 4, 12}); the benchmark's --profile-calls takes the same form."""
    value = value.strip()
    if not value or ":" not in value:
        return None
    folder, _, calls = value.rpartition(":")
    return Path(folder), {int(c) for c in calls.split(",") if c.strip()}


def _setting() -> tuple[Path, set[int]] | None:
    return parse_setting(os.environ.get(ENV, ""))


@contextlib.contextmanager
def profiled_call(rank: int, device: torch.device):
    """Profile this call when LTX2_MGPU_PROFILE_CALLS names its index; else run it as it is."""
    global _count
    index, _count = _count, _count + 1
    setting = _setting()
    if setting is None or index not in setting[1]:
        yield
        return
    folder, _ = setting
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        yield
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    folder.mkdir(parents=True, exist_ok=True)
    sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    (folder / f"rank{rank}-call{index}.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=45))
