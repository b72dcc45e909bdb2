"""Unit boundaries inside one command (workers/engine/units.py, NOTE [units]) on a real CPU group: cancel
within one unit on every rank, idle ranks released, one rank's failure raised alike everywhere (the
group kept), and the pack's checks that refuse what would fail inside a rank before any work.

One 3-rank group for the module; each test ends with the group usable (the next one reuses it).
"""

from __future__ import annotations

import time

import pytest

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import parse_devices
from ltx2_mgpu.workers.wire import errors

UNIT_S = 0.05


@pytest.fixture(
    scope="module",
    # On two GPUs the data group is NCCL and the boundaries run on the gloo control group beside it.
    params=["cpu:3", pytest.param("0,1", marks=[pytest.mark.gpu, pytest.mark.multigpu])],
)
def group(request):
    started = WorkerGroup(parse_devices(request.param)).start()
    yield started
    started.stop()
    assert_no_leaks()


def pids_kept(group: WorkerGroup, before: list[int]) -> bool:
    return group.is_alive and group.pids == before


@pytest.mark.parametrize("idle", [0, 1])
def test_every_rank_passes_the_same_boundaries_idle_ones_too(group, idle):
    ranks = group.world_size
    results = group.run("units", {"n": 7, "active": ranks - idle, "unit_s": 0.0})
    # n steps and one finish on every rank, whether it had units or idled through them.
    assert [r["units"] for r in results] == [8] * ranks


@pytest.mark.parametrize("idle", [0, 1])
def test_cancel_lands_within_one_unit_and_the_group_stays(group, idle):
    ranks, active = group.world_size, group.world_size - idle
    before = group.pids
    pressed: dict[str, float] = {}

    def on_progress(step: int, total: int, _message: dict) -> None:
        if step == 10:
            pressed.setdefault("at", time.monotonic())

    t0 = time.monotonic()
    with pytest.raises(errors.JobCancelled):
        group.run(
            "units",
            {"n": 400, "active": active, "unit_s": UNIT_S},
            on_progress=on_progress,
            should_cancel=lambda: "at" in pressed,
        )
    latency_s = time.monotonic() - pressed["at"]
    print(
        f"\n[units] cancel, {active} of {ranks} ranks busy: {latency_s:.3f} s after pressing ({time.monotonic() - t0:.2f} s job)"
    )
    # The client polls every 50 ms; then at most one unit on the slowest rank and the reports.
    assert latency_s < 1.0
    assert pids_kept(group, before)
    assert [r["units"] for r in group.run("units", {"n": 2, "active": active})] == [3] * ranks


def test_one_ranks_failure_is_raised_alike_and_the_group_stays(group):
    before = group.pids
    t0 = time.monotonic()
    with pytest.raises(errors.JobInputError, match="unit 3 failed on purpose on rank 1"):
        group.run("units", {"n": 50, "active": 2, "fail_rank": 1, "fail_at": 3, "unit_s": 0.01})
    assert time.monotonic() - t0 < 1.0
    assert pids_kept(group, before)
    assert [r["units"] for r in group.run("units", {"n": 1})] == [2] * group.world_size
