"""Worker process entry point. Never imports ComfyUI.

Started by launcher.py with `python -c <bootstrap> <pack root>`; the bootstrap makes the pack
importable as `ltx2_mgpu` and calls `main()`. The first line on stdin is the boot record (JSON); the
rest of stdin stays open as the parent-death signal: when it reaches EOF the UI process is gone and
the worker exits at once, whatever it was doing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from multiprocessing.connection import Client
from pathlib import Path

from ..wire import protocol
from ..wire.config import HEARTBEAT_INTERVAL_S

BOOTSTRAP = (
    "import sys, importlib.util as u\n"
    "root = sys.argv[1]\n"
    "if 'ltx2_mgpu' not in sys.modules:\n"
    "    spec = u.spec_from_file_location('ltx2_mgpu', root + '/__init__.py', submodule_search_locations=[root])\n"
    "    sys.modules['ltx2_mgpu'] = u.module_from_spec(spec)\n"
    "from ltx2_mgpu.workers.rank.entry import main\n"
    "main()\n"
)


def _exit_when_parent_dies(stream) -> None:
    # Blocks until the UI process closes our stdin (normally or by dying).
    try:
        while stream.read(4096):
            pass
    finally:
        os._exit(0)


def _heartbeat(control: protocol.ControlBlock, rank: int) -> None:
    while True:
        control.beat(rank, time.monotonic())
        time.sleep(HEARTBEAT_INTERVAL_S)


def main() -> None:
    boot = json.loads(sys.stdin.buffer.readline().decode())
    threading.Thread(target=_exit_when_parent_dies, args=(sys.stdin.buffer,), daemon=True).start()

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
    runtime.serve()
    os._exit(0)  # skip interpreter teardown: NCCL/gloo destructors can block at exit
