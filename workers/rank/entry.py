"""Worker process entry point. Never imports ComfyUI.

Started by launcher.py with `python -c <bootstrap> <pack root>`; the bootstrap makes the pack
importable as `ltx2_mgpu` and calls `main()`. The first line on stdin is the boot record (JSON); the
rest of stdin stays open as the parent-death signal: when it reaches EOF the UI process is gone and
the worker exits at once, whatever it was doing. A UI process that was killed (SIGKILL, OOM killer)
could not unlink its shared-memory segments, so the workers do it before they exit.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from multiprocessing.connection import Client
from pathlib import Path

from ..wire import protocol, shm
from ..wire.config import HEARTBEAT_INTERVAL_S, OWNER_EXIT_WAIT_S
from ..wire.fork_protocol import WORKER_NAME, set_process_name
from ..wire.pack_folder import keep_pack_folder_off_sys_path


def _exit_when_parent_dies(stream, owner_pid: int, workdir: str) -> None:
    # Blocks until the UI process closes our stdin (normally or by dying).
    try:
        while stream.read(4096):
            pass
        if _owner_is_gone(owner_pid):
            # Every rank does this; unlink and rmtree are idempotent.
            shm.unlink_owner_segments(owner_pid)
            shutil.rmtree(workdir, ignore_errors=True)
    finally:
        os._exit(0)


def _owner_is_gone(owner_pid: int) -> bool:
    """Whether the UI process has died (we were reparented), rather than closed our stdin on purpose.

    The kernel closes a dying process's files before it reparents its children, so our stdin's EOF can
    come a moment before getppid() changes: wait up to OWNER_EXIT_WAIT_S for it.
    """
    deadline = time.monotonic() + OWNER_EXIT_WAIT_S
    while os.getppid() == owner_pid and _running(owner_pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _running(pid: int) -> bool:
    """False once `pid` has exited, zombie included (a dying owner with many threads or much memory can
    take a while to hand its children over to another parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _heartbeat(control: protocol.ControlBlock, rank: int) -> None:
    while True:
        control.beat(rank, time.monotonic())
        time.sleep(HEARTBEAT_INTERVAL_S)


def main() -> None:
    keep_pack_folder_off_sys_path()  # before the engines import transformers: NOTE [pack folder]
    set_process_name(WORKER_NAME)  # forked or spawned, `ps` and the tests see the same name
    boot = json.loads(sys.stdin.buffer.readline().decode())
    threading.Thread(
        target=_exit_when_parent_dies,
        args=(sys.stdin.buffer, int(boot["owner_pid"]), boot["workdir"]),
        daemon=True,
    ).start()

    rank = int(boot["rank"])
    control = protocol.ControlBlock.attach(protocol.shm.TensorSpec.from_wire(boot["control"]))
    control.beat(rank, time.monotonic())
    threading.Thread(target=_heartbeat, args=(control, rank), daemon=True).start()

    conn = Client(boot["address"], family="AF_UNIX", authkey=bytes.fromhex(boot["authkey"]))
    conn.send_bytes(
        protocol.encode({"kind": "hello", "rank": rank, "pid": os.getpid(), "device": boot["device"]})
    )

    from .runtime import Runtime  # heavy imports (torch.distributed) after the hello

    runtime = Runtime.from_boot(boot, conn, control, Path(boot["workdir"]))
    try:
        stopped = runtime.serve()
    except (EOFError, OSError):  # the connection went away mid-job
        stopped = False
    if not stopped and _owner_is_gone(int(boot["owner_pid"])):
        # The owner was killed (between jobs or in one). The stdin watchdog cleans up too, but this
        # thread's exit below would end the process under it: remove what the owner left here first
        # (an idle group's workers used to exit at once and leave its control block and folder).
        shm.unlink_owner_segments(int(boot["owner_pid"]))
        shutil.rmtree(boot["workdir"], ignore_errors=True)
    os._exit(0)  # skip interpreter teardown: NCCL/gloo destructors can block at exit
