"""Stopping a real ComfyUI server while our workers run (opt-in: COMFYUI_PATH). Issue 20 items 1, 2, 5.

A user stops ComfyUI with Ctrl+C (once, or twice when it seems slow), a service manager with SIGTERM
(systemd, docker stop), and the OOM killer or `kill -9` with SIGKILL. Whatever the job was doing,
ComfyUI must be gone within EXIT_LIMIT_S and leave no worker process and no /dev/shm segment. Mid-run
means inside the SP Sampler's job: a prompt of LONG_STEPS steps on the tiny model (a minute or more of
sampling), caught once its input tensors are in shared memory (more segments than the group's control
block). The console lines of the pack (start, load, reuse, stop, with their times) are read from the
server's log. Each case starts its own server: every case ends it.

Run: COMFYUI_PATH=/path/to/ComfyUI <ComfyUI's python> -m pytest tests/test_comfyui_stop.py -s
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psutil
import pytest
from comfyui_harness import (
    ComfyUIServer,
    comfyui_root,
    is_live_worker,
    make_layout,
    wait_until,
    worker_processes,
)
from test_comfyui_server import PROMPT_TIMEOUT_S, TEST_PACK_FOLDER, TEST_PACK_SOURCE, WORKERS, t2v_prompt

from ltx2_mgpu.workers.group.console import CONSOLE_PREFIX
from ltx2_mgpu.workers.wire import shm

pytestmark = pytest.mark.comfyui

# Issue 20: ComfyUI must have exited within 5 s of Ctrl+C or SIGTERM, the job cancelled, nothing left.
EXIT_LIMIT_S = 5.0
# After SIGKILL the workers notice (their stdin closes) and remove the owner's segments.
ORPHAN_CLEANUP_S = 5.0
# Far longer than any limit here (tens of ms per step on 2 CPU ranks).
LONG_STEPS = 3000
# Once the sampler's inputs are in shared memory: let it run a few steps before the signal.
MID_RUN_S = 1.0
# ComfyUI's own line when Ctrl+C reached its main loop (main.py), before atexit runs.
STOPPED_SERVER = "Stopped server"
# A user who sees no exit presses Ctrl+C again; at the latest this long after the first.
SECOND_CTRL_C_AFTER_S = 1.0


@dataclass
class Case:
    server: ComfyUIServer
    workers: list[psutil.Process] = field(default_factory=list)  # recorded before the signal


@pytest.fixture
def case(tiny, tmp_path) -> Iterator[Case]:
    """A fresh server per case; whatever a failing case left (ComfyUI, workers, segments) is removed."""
    layout = make_layout(
        tmp_path / "base",
        models={"checkpoints": [tiny.checkpoint]},
        extra_packs={TEST_PACK_FOLDER: TEST_PACK_SOURCE},
    )
    server = ComfyUIServer(comfyui_root(), layout).start()
    case = Case(server)
    yield case
    if server.proc is not None and server.is_running:
        server.proc.kill()
        server.proc.wait()
    server.stop()
    for process in case.workers:
        if is_live_worker(process):
            process.kill()
    shm.unlink_owner_segments(server.pid)


def start_long_run(case: Case, tiny) -> int:
    """Queue the long prompt and return once the sampler runs (case.workers filled): segments in use."""
    server = case.server
    server.queue_prompt(t2v_prompt(tiny.checkpoint.name, 7, "ltx2_mgpu/long", LONG_STEPS))
    mid_run = wait_until(lambda: len(shm.list_segments(server.pid)) >= 2, PROMPT_TIMEOUT_S)
    assert mid_run, f"the sampler never started\n{server.log_tail()}"
    time.sleep(MID_RUN_S)
    case.workers[:] = worker_processes(server.pid)
    assert len(case.workers) == WORKERS
    return len(shm.list_segments(server.pid))


def time_to_exit(server: ComfyUIServer, since: float) -> float:
    """Seconds from `since` until ComfyUI exited; inf if it still runs EXIT_LIMIT_S after `since`
    (server.stuck then says what its threads were doing)."""
    assert server.proc is not None
    try:
        server.proc.wait(timeout=max(0.0, since + EXIT_LIMIT_S - time.monotonic()))
    except subprocess.TimeoutExpired:
        server.stuck = server.signal_report()
        return float("inf")
    return time.monotonic() - since


def live(workers: list[psutil.Process]) -> list[int]:
    return [p.pid for p in workers if is_live_worker(p)]


def assert_nothing_left(server: ComfyUIServer, workers: list[psutil.Process], case: str) -> None:
    assert live(workers) == [], f"{case}: workers outlived ComfyUI"
    assert shm.list_segments(server.pid) == [], f"{case}: left {shm.list_segments(server.pid)} in /dev/shm"


def pack_lines(server: ComfyUIServer) -> list[str]:
    """The pack's console lines, from the prefix on (ComfyUI colours the level tag before it)."""
    log = server.log_tail(10**7).splitlines()
    return [line[line.index(CONSOLE_PREFIX) :].strip() for line in log if CONSOLE_PREFIX in line]


@pytest.mark.parametrize("how", ["ctrl_c", "second_ctrl_c", "sigterm"])
def test_stopping_comfyui_mid_run_is_quick_and_leaves_nothing(case, tiny, how):
    server = case.server
    segments = start_long_run(case, tiny)
    t0 = time.monotonic()
    os.kill(server.pid, signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    if how == "second_ctrl_c":  # pressed again as ComfyUI says it stopped (its exit then runs atexit)
        wait_until(lambda: STOPPED_SERVER in server.log_tail(), SECOND_CTRL_C_AFTER_S)
        if server.is_running:
            os.kill(server.pid, signal.SIGINT)
    exit_s = time_to_exit(server, t0)
    stuck = f"{how}: ComfyUI still ran {EXIT_LIMIT_S} s later\n{server.stuck}\n{server.log_tail()}"
    assert exit_s <= EXIT_LIMIT_S, stuck
    assert_nothing_left(server, case.workers, how)
    # A job thread that raised into ComfyUI while the interpreter finalized aborted the process.
    assert "Fatal Python error" not in server.log_tail(10**7), server.log_tail()
    if how != "second_ctrl_c":  # a second KeyboardInterrupt may end it with a traceback (code 1)
        assert server.proc.returncode == (-signal.SIGTERM if how == "sigterm" else 0), server.log_tail()
    stopped = [line for line in pack_lines(server) if f"stopped {WORKERS} workers" in line]
    print(f"\n[stop] {how} mid-run: ComfyUI exited in {exit_s:.2f} s; {segments} segments before, 0 after")
    print("\n".join(stopped))


def test_sigkill_mid_run_workers_remove_comfyuis_segments(case, tiny):
    server, workers = case.server, case.workers
    segments = start_long_run(case, tiny)
    t0 = time.monotonic()
    os.kill(server.pid, signal.SIGKILL)
    assert server.proc is not None
    server.proc.wait()
    # The workers remove the segments before they exit: look the moment the last one is gone (any
    # other group started on this machine would sweep them later, and hide a worker that did not).
    while live(workers) and time.monotonic() - t0 < ORPHAN_CLEANUP_S:
        time.sleep(0.01)
    left = shm.list_segments(server.pid)
    cleaned_s = time.monotonic() - t0
    assert live(workers) == [], f"SIGKILL: workers {live(workers)} outlived ComfyUI by {ORPHAN_CLEANUP_S} s"
    assert left == [], f"SIGKILL: the workers exited and left {len(left)} of ComfyUI's segments"
    print(f"\n[stop] SIGKILL mid-run: workers gone, {segments} segments removed within {cleaned_s:.2f} s")


def test_sigterm_idle_leaves_nothing_and_the_console_shows_each_step(case, tiny):
    server = case.server
    server.run_prompt(t2v_prompt(tiny.checkpoint.name, 1, "ltx2_mgpu/first"), PROMPT_TIMEOUT_S)
    server.run_prompt(t2v_prompt(tiny.checkpoint.name, 2, "ltx2_mgpu/second"), PROMPT_TIMEOUT_S)
    case.workers[:] = workers = worker_processes(server.pid)
    segments = len(shm.list_segments(server.pid))
    assert len(workers) == WORKERS and segments == 1  # idle: only the group's control block
    t0 = time.monotonic()
    os.kill(server.pid, signal.SIGTERM)
    exit_s = time_to_exit(server, t0)
    assert exit_s <= EXIT_LIMIT_S, f"SIGTERM idle: ComfyUI still ran {EXIT_LIMIT_S} s later\n{server.stuck}"
    assert_nothing_left(server, workers, "SIGTERM idle")
    # Prompt 1: the loader starts the group and loads, its sampler reuses; prompt 2 (the loader's output
    # cached): the sampler reuses again; then SIGTERM stops the group.
    started = f"{CONSOLE_PREFIX} started {WORKERS} workers (cpu, cpu) in "
    loaded = f"{CONSOLE_PREFIX} loaded {tiny.checkpoint.name} (float32) into {WORKERS} workers in "
    reused = f"{CONSOLE_PREFIX} reusing {tiny.checkpoint.name} (float32), already loaded in {WORKERS} workers: no reload"
    stopped = f"{CONSOLE_PREFIX} SIGTERM: stopped {WORKERS} workers in "
    # The loader's pre-flight (what each worker needs; a block whose first line carries the prefix) and
    # the file's LTX release and weight format, before anything starts.
    preflight = (
        f"{CONSOLE_PREFIX} pre-flight: weights replicated, max_video_tokens 32,768, {WORKERS} CPU workers"
    )
    family = f"{CONSOLE_PREFIX} {tiny.checkpoint.name}: LTX-2, weights bf16"
    lines = pack_lines(server)
    expected = [preflight, family, started, loaded, reused, reused, stopped]
    assert len(lines) == len(expected) and all(map(str.startswith, lines, expected)), lines
    print(f"\n[stop] SIGTERM idle: ComfyUI exited in {exit_s:.2f} s; 1 segment before, 0 after")
    print("\n".join(lines))
