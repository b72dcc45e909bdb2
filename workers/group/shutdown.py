"""Ending the worker groups when the UI process exits (Ctrl+C, SIGTERM, the end of a script).

NOTE [exit]: the exit path never waits for a job. A job holds its group's lock for as long as it runs
(minutes for a real video), so waiting for it would keep ComfyUI alive after "Stopped server". Instead,
without taking any lock:
1. the process's shared-memory names are unlinked and new ones refused (`shm.close_owner`), first,
   so that a second Ctrl+C arriving during the rest cannot leave any; a job thread that is still
   running cannot create one after the sweep;
2. every live group's workers get SIGTERM, and SIGKILL after EXIT_GRACE_S (at once on a second Ctrl+C);
3. the job thread, if any, waits for the end of the process (`wait_if_exiting`) rather than raise,
   wherever it would leave the job (client.py: `run`, `_fail`; the workers ending under it make it
   fail at any point of its wait, not only where it checks first):
   an error raised into ComfyUI runs its error report, which formats the node's input tensors while
   the interpreter finalizes, and that aborted the process ("Fatal Python error: Aborted", a core dump
   on some systems) in a Ctrl+C mid-run here.
If the UI process is killed outright (SIGKILL), its workers see their stdin close and remove its
segments themselves (workers/rank/entry.py).

Ctrl+C reaches us through atexit (ComfyUI turns it into KeyboardInterrupt and returns from main.py).
SIGTERM, which ends the process without atexit, gets a handler (`install_sigterm_handler`) that runs
the same path and then hands the signal on to the handler that was there before.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
import weakref
from types import FrameType
from typing import Protocol

from ..wire import shm
from ..wire.config import EXIT_GRACE_S, EXIT_JOB_WAIT_S
from ..wire.errors import WorkerDied
from . import console


class Endable(Protocol):
    world_size: int

    def end_now(self, deadline: float) -> None:
        """End the workers by `deadline` (time.monotonic), without the job lock; SIGKILL after it."""
        ...


_GROUPS: weakref.WeakSet[Endable] = weakref.WeakSet()
_ended = False


def track(group: Endable) -> None:
    """A started group: end it when the process exits."""
    _GROUPS.add(group)


def untrack(group: Endable) -> None:
    _GROUPS.discard(group)


def is_exiting() -> bool:
    return _ended


def wait_if_exiting() -> None:
    """For a job thread: if the process is exiting, block until it is gone (the interpreter ends
    without this daemon thread). Raises WorkerDied only if the process lives on EXIT_JOB_WAIT_S later
    (a chained SIGTERM handler that did not end it)."""
    if not _ended:
        return
    threading.Event().wait(EXIT_JOB_WAIT_S)
    raise WorkerDied("the worker groups were stopped because this process was told to exit")


def end_all_groups(reason: str) -> None:
    """Stop every worker group of this process and leave nothing in /dev/shm. Never waits for a job;
    returns within about EXIT_GRACE_S. Afterwards no group can run in this process."""
    global _ended
    if _ended:
        return
    _ended = True
    t0 = time.monotonic()
    deadline = t0 + EXIT_GRACE_S
    try:
        removed = shm.close_owner()
    except KeyboardInterrupt:  # a second Ctrl+C this early must not cut the exit path short
        removed, deadline = shm.close_owner(), t0
    groups = list(_GROUPS)
    for group in groups:
        try:
            group.end_now(deadline)
        except KeyboardInterrupt:  # a second Ctrl+C: no more grace for anyone
            deadline = time.monotonic()
            group.end_now(deadline)
        untrack(group)
    removed += shm.close_owner()  # anything a job thread created while the workers were ending
    workers = sum(g.world_size for g in groups)
    if workers or removed:
        console.info(
            f"{reason}: stopped {workers} workers in {console.seconds(time.monotonic() - t0)}; "
            f"shared-memory segments removed: {len(removed)}"
        )


@atexit.register
def _at_exit() -> None:
    end_all_groups("exiting")


def install_sigterm_handler() -> bool:
    """On SIGTERM (systemd, docker stop, kill), end every group first, then hand the signal to the
    handler that was installed before (by default: the process ends by SIGTERM, as without us).

    Only from the main thread (Python's rule for signal handlers). Not installed when SIGTERM is
    ignored (the host chose to survive it) or when ours is already there. Returns whether installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN or getattr(previous, "_ltx2_mgpu_exit", False):
        return False

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        end_all_groups("SIGTERM")
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL, or a handler not set from Python (None), which cannot be called: end as SIG_DFL does.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    on_sigterm._ltx2_mgpu_exit = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGTERM, on_sigterm)
    return True
