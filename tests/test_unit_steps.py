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
RANKS = 3


@pytest.fixture(scope="module")
def group():
    started = WorkerGroup(parse_devices(f"cpu:{RANKS}")).start()
    yield started
    started.stop()
    assert_no_leaks()


def pids_kept(group: WorkerGroup, before: list[int]) -> bool:
    return group.is_alive and group.pids == before


@pytest.mark.parametrize("active", [RANKS, 1])
def test_every_rank_passes_the_same_boundaries_idle_ones_too(group, active):
    results = group.run("units", {"n": 7, "active": active, "unit_s": 0.0})
    # n steps and one finish on every rank, whether it had units or idled through them.
    assert [r["units"] for r in results] == [8] * RANKS


@pytest.mark.parametrize("active", [RANKS, 2])
def test_cancel_lands_within_one_unit_and_the_group_stays(group, active):
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
        f"\n[units] cancel {active} active of {RANKS}: {latency_s:.3f} s after pressing ({time.monotonic() - t0:.2f} s job)"
    )
    # The client polls every 50 ms; then at most one unit on the slowest rank and the reports.
    assert latency_s < 1.0
    assert pids_kept(group, before)
    assert [r["units"] for r in group.run("units", {"n": 2, "active": active})] == [3] * RANKS


def test_one_ranks_failure_is_raised_alike_and_the_group_stays(group):
    before = group.pids
    t0 = time.monotonic()
    with pytest.raises(errors.JobInputError, match="unit 3 failed on purpose on rank 1"):
        group.run("units", {"n": 50, "active": 2, "fail_rank": 1, "fail_at": 3, "unit_s": 0.01})
    assert time.monotonic() - t0 < 1.0
    assert pids_kept(group, before)
    assert [r["units"] for r in group.run("units", {"n": 1})] == [2] * RANKS
