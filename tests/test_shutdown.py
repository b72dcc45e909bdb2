"""The UI process ending: nothing waits for a job, nothing is left (workers/group/shutdown.py NOTE [exit]).

Each case runs a small owner process (a script that starts a group and a long job) and ends it the way
a user or a service manager would: the end of the program with a job running in another thread (what
Ctrl+C does to ComfyUI), SIGTERM, SIGKILL. Checked: how long the owner takes to end, its segments in
/dev/shm, its worker processes. The same cases against a real ComfyUI: test_comfyui_stop.py.
Also the console lines a user reads to see that a model was not reloaded.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from ltx2_mgpu.workers.wire import shm

# The owner's exit must not wait for the job (issue 20: ComfyUI must be gone within 5 s of Ctrl+C).
EXIT_LIMIT_S = 5.0
# Workers of a SIGKILLed owner notice at once (stdin EOF); this bounds their clean-up.
ORPHAN_CLEANUP_S = 5.0
# Start-up of a 2-rank group (~6 s on the 2-core CI box) plus the longest exit a failing case may take.
OWNER_TIMEOUT_S = 90.0
# The owner script: a 2-rank CPU group, then a job of ~1000 s (far longer than any limit here) with a
# shared input tensor, in a daemon thread as ComfyUI's prompt worker runs it. Prints its pid and the
# workers' pids once the job is running, then does what `ending` says.
OWNER = """
import os, signal, sys, threading, time
import torch
from ltx2_mgpu.workers.wire import shm
from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import parse_devices

ending = sys.argv[1]
if ending == "sigterm_chained":
    def previous(signum, frame):
        print("previous handler ran", flush=True)
        os._exit(3)
    signal.signal(signal.SIGTERM, previous)
if ending.startswith("sigterm"):  # as the pack does inside ComfyUI (nodes/__init__.py)
    from ltx2_mgpu.workers.group.shutdown import install_sigterm_handler
    install_sigterm_handler()
group = WorkerGroup(parse_devices("cpu:2")).start()
if not ending.endswith("_idle"):
    def job():
        try:
            group.run("steps", {"n": 100000, "step_s": 0.01, "x": torch.ones(1000)})
        except BaseException as exc:  # inside ComfyUI its error report would run while it finalizes
            print("the job raised", type(exc).__name__, flush=True)
    threading.Thread(target=job, daemon=True).start()
    while len(shm.list_segments(os.getpid())) < 2:  # the control block and the job's input
        time.sleep(0.01)
    time.sleep(0.5)
print(os.getpid(), *group.pids, len(shm.list_segments(os.getpid())), group._workdir, flush=True)
if ending == "exit":
    sys.exit(0)  # what ComfyUI's main.py does after Ctrl+C: return with the job still running
os.kill(os.getpid(), signal.SIGKILL if ending.startswith("sigkill") else signal.SIGTERM)
time.sleep(60)
"""


workdirs: dict[int, Path] = {}


def live(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def end_owner(ending: str) -> tuple[subprocess.CompletedProcess, int, list[int], int, float]:
    """Run the owner script; returns (its result, its pid, the worker pids, segments it had, seconds
    from its first line to the end of its stdout, which its workers share: so until all have exited).
    The group's folder is in `workdirs[owner pid]`."""
    with tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(OWNER), ending],
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
        )
        assert proc.stdout is not None
        watchdog = threading.Timer(OWNER_TIMEOUT_S, proc.kill)
        watchdog.start()
        try:
            line = proc.stdout.readline()
            t0 = time.monotonic()
            out = proc.stdout.read()
            ended_s = time.monotonic() - t0
            proc.wait()
        finally:
            watchdog.cancel()
        err_file.seek(0)
        err = err_file.read()
    *numbers, workdir = line.split() or [""]
    assert len(numbers) == 4 and all(x.isdigit() for x in numbers), f"the owner script failed:\n{line}{err}"
    owner, *workers, segments = map(int, numbers)
    workdirs[owner] = Path(workdir)
    return (
        subprocess.CompletedProcess(proc.args, proc.returncode, line + out, err),
        owner,
        workers,
        segments,
        ended_s,
    )


def test_exit_with_a_job_running_ends_within_seconds_and_leaves_nothing():
    result, owner, workers, segments, ended_s = end_owner("exit")
    assert segments >= 2
    assert ended_s <= EXIT_LIMIT_S, f"the owner took {ended_s:.1f} s to exit with a job running"
    assert result.returncode == 0, result.stderr
    # The workers end under the job: its thread must block until the process is gone, not raise (a
    # ComfyUI whose job thread raised then ran gc.collect() while it finalized, and crashed).
    assert "the job raised" not in result.stdout, result.stdout
    assert live(workers) == [], "workers outlived the owner"
    assert shm.list_segments(owner) == [], "the owner left segments in /dev/shm"
    print(f"\n[exit] job running: ended in {ended_s:.2f} s, {segments} segments before, 0 after")


@pytest.mark.parametrize("ending", ["sigterm_job", "sigterm_idle"])
def test_sigterm_stops_the_workers_then_ends_by_the_default_action(ending):
    result, owner, workers, segments, ended_s = end_owner(ending)
    assert ended_s <= EXIT_LIMIT_S, f"SIGTERM took {ended_s:.1f} s"
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stderr)
    assert "the job raised" not in result.stdout, result.stdout
    assert live(workers) == []
    assert shm.list_segments(owner) == [], f"{ending}: segments left in /dev/shm"
    print(f"\n[exit] {ending}: ended in {ended_s:.2f} s, {segments} segments before, 0 after")


def test_sigterm_hands_on_to_the_previous_handler():
    result, owner, workers, _, _ = end_owner("sigterm_chained")
    assert "previous handler ran" in result.stdout
    assert result.returncode == 3
    assert live(workers) == [] and shm.list_segments(owner) == []


def test_workers_of_a_killed_owner_remove_its_segments():
    result, owner, workers, segments, ended_s = end_owner("sigkill")
    assert result.returncode == -signal.SIGKILL
    assert segments >= 2
    # end_owner returns when the last worker closed the owner's stdout, at its exit: the segments must
    # be gone by then (looking later could see another group's start-up sweep remove them instead).
    left = shm.list_segments(owner)
    assert left == [], f"the killed owner's workers exited and left {len(left)} segments in /dev/shm"
    t0 = time.monotonic()
    while live(workers) and time.monotonic() - t0 < ORPHAN_CLEANUP_S:
        time.sleep(0.01)
    assert live(workers) == [], "workers outlived the killed owner"
    assert not workdirs[owner].exists(), (
        f"the killed owner's group folder is left: {list(workdirs[owner].iterdir())}"
    )
    print(f"\n[exit] SIGKILL mid-job: workers gone {ended_s:.2f} s after; {segments} segments, 0 left")


IDLE_KILLS = 3  # the clean-up raced the workers' exit: 7 of 12 idle owners killed left their folder


def test_workers_of_an_idle_killed_owner_remove_its_segments_and_folder():
    """The OOM killer or kill -9 between two jobs: the workers, waiting for the next command, see the
    connection close and must clean up before they exit (they used to exit at once, and the clean-up
    on their other thread then ran or not), each time."""
    for _ in range(IDLE_KILLS):
        result, owner, workers, segments, _ = end_owner("sigkill_idle")
        assert result.returncode == -signal.SIGKILL and segments == 1  # the group's control block
        assert shm.list_segments(owner) == [], "the idle killed owner's workers left its control block"
        assert not workdirs[owner].exists(), f"its group folder is left: {list(workdirs[owner].iterdir())}"
        t0 = time.monotonic()
        while live(workers) and time.monotonic() - t0 < ORPHAN_CLEANUP_S:
            time.sleep(0.01)
        assert live(workers) == [], "workers outlived the killed owner"


def test_console_says_start_load_reuse_and_stop(manager, tiny_path, caplog):
    from ltx2_mgpu.workers.group.console import CONSOLE_PREFIX
    from ltx2_mgpu.workers.group.manager import MGPUModel

    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with caplog.at_level(logging.INFO, logger="ltx2_mgpu"):
        manager.acquire(model)
        manager.acquire(model)
        manager.unload()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(CONSOLE_PREFIX)]
    assert len(lines) == 4, lines
    started, loaded, reused, stopped = lines
    assert started.startswith(f"{CONSOLE_PREFIX} started 2 workers (cpu, cpu) in ")
    assert loaded.startswith(f"{CONSOLE_PREFIX} loaded {tiny_path.name} (float32) into 2 workers in ")
    assert reused.startswith(
        f"{CONSOLE_PREFIX} reusing {tiny_path.name} (float32), already loaded in 2 workers"
    )
    assert "no reload" in reused
    assert stopped.startswith(f"{CONSOLE_PREFIX} stopped 2 workers in ") and stopped.endswith(
        "(unload requested)"
    )
    print("\n" + "\n".join(lines))
