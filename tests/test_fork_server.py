"""CPU workers forked from the fork server (workers/group/forked_workers.py NOTE [fork server]).

What a spawned worker gives the group stays true of a forked one: it is this process's own child (so
its exit code and the parent-death check work as before), it runs jobs with shared-memory inputs, it
dies and is reported by signal like a spawned one, and it imports ComfyUI only when the group was
started for a ComfyUI root. `LTX2_MGPU_FORK_SERVER=0` spawns every worker as before. Start times of
a spawned and a forked group are printed side by side (a figure for the closing note, not asserted).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest
import torch
from comfyui_harness import WORKER_MARKER, WORKER_NAME, comfyui_root

from ltx2_mgpu.workers.group import forked_workers
from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import parse_devices
from ltx2_mgpu.workers.wire.errors import WorkerDied


def started(monkeypatch, fork: bool, **kwargs) -> tuple[WorkerGroup, float]:
    monkeypatch.setenv(forked_workers.FORK_SERVER_ENV, "1" if fork else "0")
    t0 = time.monotonic()
    group = WorkerGroup(parse_devices("cpu:2"), **kwargs).start()
    return group, time.monotonic() - t0


def test_forked_workers_are_our_children_and_run_jobs(monkeypatch):
    spawned, spawn_s = started(monkeypatch, fork=False)
    try:
        assert all(isinstance(p, subprocess.Popen) for p in spawned._procs)
        assert all(WORKER_MARKER in " ".join(psutil.Process(pid).cmdline()) for pid in spawned.pids)
    finally:
        spawned.stop()
    group, fork_s = started(monkeypatch, fork=True)
    try:
        assert all(isinstance(p, forked_workers.ForkedWorker) for p in group._procs)
        for pid in group.pids:
            worker = psutil.Process(pid)
            assert worker.ppid() == os.getpid() and worker.name() == WORKER_NAME
            assert os.getsid(pid) == pid  # its own session, as start_new_session gives a spawned one
        replies = group.run("sum_input", {"x": torch.arange(1000, dtype=torch.float32)})
        assert [r["sum"] for r in replies] == [float(sum(range(1000)))] * 2
        pings = group.run("ping", {})
        assert all(p["comfyui_modules"] == [] and p["ltx_core_modules"] == [] for p in pings)
    finally:
        procs = list(group._procs)
        group.stop()
    assert [p.returncode for p in procs] == [0, 0]
    print(f"\n[fork server] 2 CPU workers started in {spawn_s:.2f} s spawned, {fork_s:.2f} s forked")


def test_a_killed_forked_worker_is_reported_by_its_signal(monkeypatch):
    group, _ = started(monkeypatch, fork=True)
    try:
        victim = group.pids[1]
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(WorkerDied, match=r"worker rank 1 \(cpu\) died .*SIGKILL"):
            group.run("steps", {"n": 1000, "step_s": 0.01})
    finally:
        group.stop()


@pytest.mark.comfyui
def test_a_group_for_a_comfyui_root_has_its_model_side_imported_before_the_load(monkeypatch):
    root = str(comfyui_root())
    group, _ = started(monkeypatch, fork=True, comfyui_root=root)
    try:
        pings = group.run("ping", {})
        assert all("comfy.model_management" in p["comfyui_modules"] for p in pings), pings[0]
        # Only ComfyUI's model side, never its server or nodes, and never ltx-core (NOTE [engine seam]).
        assert all(not {"server", "nodes", "execution"} & set(p["comfyui_modules"]) for p in pings)
        assert all(p["ltx_core_modules"] == [] for p in pings)
    finally:
        group.stop()
