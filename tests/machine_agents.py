"""Two "machines" on one box for the tests (NOTE [machines] in workers/wire/machines.py): this process
listens as the machine that runs ComfyUI, and `ltx2-mgpu worker --join` runs as a process tree of its own
(optionally in a network namespace of its own), with its own copies of the model files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from comfyui_harness import comfyui_root

from conftest import PACK_ROOT
from ltx2_mgpu.workers.group import machine_link
from ltx2_mgpu.workers.wire import machines, shm

TOKEN = "7f" * 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def listening(join_wait_s: float = 60) -> Iterator[str]:
    """This process listens for machine agents on 127.0.0.1 (a free port) with TOKEN; the address."""
    address = f"127.0.0.1:{free_port()}"
    saved = {k: os.environ.get(k) for k in (machines.LISTEN_ENV, machines.TOKEN_ENV, machines.JOIN_WAIT_ENV)}
    os.environ[machines.LISTEN_ENV] = address
    os.environ[machines.TOKEN_ENV] = TOKEN
    os.environ[machines.JOIN_WAIT_ENV] = str(join_wait_s)
    machine_link.join_listener()  # as the first group that names another machine starts it
    try:
        yield address
    finally:
        machine_link.close_join_listener()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Agent:
    """`ltx2-mgpu worker --join` as its own process tree; `output` is what it printed."""

    def __init__(self, listen: str, models: Path, *, token: str = TOKEN, name: str = "box2",
                 version: str | None = None, netns: str = "") -> None:  # fmt: skip
        env = {**os.environ, machines.TOKEN_ENV: token}
        env.pop(machines.LISTEN_ENV, None)
        args = [
            "worker",
            "--join",
            listen,
            "--name",
            name,
            "--models",
            str(models),
            "--comfyui",
            comfyui_root(),
        ]
        if version is None:
            command = [sys.executable, "-m", "ltx2_mgpu.cli", *args]
        else:  # an agent of another pack version
            code = ("import sys; from ltx2_mgpu.workers.wire import machines; "
                    f"machines.PACK_VERSION = {version!r}; from ltx2_mgpu.cli import main; sys.exit(main(sys.argv[1:]))")  # fmt: skip
            command = [sys.executable, "-c", code, *args]
        if netns:  # on "another machine": a network namespace of its own
            command = ["ip", "netns", "exec", netns, *command]
        self.proc = subprocess.Popen(
            command, cwd=PACK_ROOT.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # another process tree, as on another machine
        )  # fmt: skip
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.output:
            assert time.monotonic() < deadline, f"the agent never printed {text!r}:\n{self.output}"
            assert self.proc.poll() is None or text in self.output, f"the agent exited:\n{self.output}"
            time.sleep(0.05)

    def kill_tree(self) -> None:
        """SIGKILL the agent (as the OOM killer would); its ranks see their stdin close and exit."""
        with_children = [self.proc.pid] + [
            c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)
        ]
        os.kill(self.proc.pid, signal.SIGKILL)

        self.proc.wait(10)
        deadline = time.monotonic() + 15
        while any(
            psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in with_children
        ):
            assert time.monotonic() < deadline, "the agent's workers outlived it"
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, as a user stops it: its ranks stop and everything it made goes."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill_tree()
        deadline = time.monotonic() + 10  # a killed agent's ranks remove its segments as they exit
        while shm.list_segments(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert shm.list_segments(self.proc.pid) == [], "the agent left segments"
