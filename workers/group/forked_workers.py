"""CPU workers forked from a fork server instead of each starting its own Python.

NOTE [fork server]: a worker's start is nearly all imports (torch, then ComfyUI's model side: about
6 s of CPU each on a 2-core machine, where a group of CPU workers is started every few seconds by the
tests and the demo). For groups whose every rank is a CPU, the UI process keeps one fork server per
(ComfyUI root, environment) that has imported all of that once (workers/rank/fork_server.py) and asks
it for each worker. What a spawned worker relies on stays true of a forked one:
- it is the UI process's own child: the UI process is made a child subreaper (prctl(2)) and the
  server forks twice, so the worker is reparented to it; `poll`, `wait` and exit codes work as for
  subprocess.Popen, and the worker's parent-death check (getppid() against the owner) is unchanged;
- its stdin is a pipe from the UI process (the boot line, then EOF as the parent-death signal), its
  stdout and stderr are the UI process's at that moment, its environment, working directory and
  session are the ones `WorkerGroup` asks for; OMP_NUM_THREADS, read by torch at import, is not part
  of the server's key: the rank sets its thread count itself (runtime.py);
- nothing is running in the server but its one thread when it forks (no pool threads to lose).
Being a subreaper also makes the UI process the parent of any other orphaned descendant (left as a
zombie until it exits); it is set only where CPU workers are forked, never on a machine with a GPU.
GPU ranks are always spawned, and so are CPU ranks on a machine where torch sees a GPU: the CUDA
runtime cannot be used in a child forked after the parent touched it. `LTX2_MGPU_FORK_SERVER=0`
spawns every worker. A server that fails to start or preload is not asked again for its key; its
workers are spawned, and report the failure as spawned ones do.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict

from ..wire.config import START_TIMEOUT_S
from ..wire.fork_protocol import recv_message, send_message

FORK_SERVER_ENV = "LTX2_MGPU_FORK_SERVER"
# Not part of a server's key: torch reads OMP_NUM_THREADS at import, but the rank sets its thread
# count after the fork (runtime.py); pytest changes PYTEST_CURRENT_TEST at every test. A forked worker
# still gets both as asked.
_PER_RANK_ENV = ("OMP_NUM_THREADS", "PYTEST_CURRENT_TEST")
# Servers kept at once (each holds torch and ComfyUI's model side: 0.86 GB resident, 0.11 GB of it its
# own, the rest shared with its workers).
MAX_SERVERS = 3
_PR_SET_CHILD_SUBREAPER = 36
# A fork takes milliseconds; this bounds a server stuck in one (then dropped, its workers spawned).
FORK_TIMEOUT_S = 30.0


class ForkedWorker:
    """The part of subprocess.Popen that WorkerGroup uses, for a worker reparented to this process."""

    def __init__(self, pid: int, stdin) -> None:
        self.pid = pid
        self.stdin = stdin
        self.returncode: int | None = None
        self.args = f"forked worker {pid}"
        self._lock = threading.RLock()  # poll may run in a signal handler on a thread inside poll

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # reaped elsewhere: as subprocess.Popen says then
                    self.returncode = 0
                else:
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


class ForkServer:
    def __init__(self, command: list[str], env: dict[str, str], comfyui_root: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen(
                [*command, str(theirs.fileno()), comfyui_root],
                stdin=subprocess.PIPE, env=env, pass_fds=(theirs.fileno(),), start_new_session=True,
            )  # fmt: skip
        finally:
            theirs.close()
        self.sock = ours
        self._lock = threading.Lock()
        self.sock.settimeout(START_TIMEOUT_S)
        try:
            ready, _ = recv_message(self.sock)
        except OSError:
            ready = None
        if ready is None or ready.get("kind") != "ready":
            self.close()
            raise OSError(f"the fork server did not start: {ready}")
        self.sock.settimeout(FORK_TIMEOUT_S)  # a server that hangs is dropped; its workers are spawned

    def fork(self, env: dict[str, str], cwd: str) -> ForkedWorker:
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                sys.stdout.flush()
                sys.stderr.flush()
                send_message(self.sock, {"env": env, "cwd": cwd}, [read_end, 1, 2])
                reply, _ = recv_message(self.sock)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        if reply is None or reply.get("kind") != "forked":
            os.close(write_end)
            raise OSError(f"the fork server could not fork a worker: {reply}")
        return ForkedWorker(int(reply["pid"]), os.fdopen(write_end, "wb"))

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # its EOF ends the server
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_servers: OrderedDict[tuple, ForkServer] = OrderedDict()
_refused: set[tuple] = set()
_servers_lock = threading.Lock()
_subreaper: bool | None = None


def enabled(devices: tuple[str, ...]) -> bool:
    """Whether workers for `devices` are forked: every rank a CPU, the option not turned off, and this
    process able to become their subreaper (Linux)."""
    cpu = all(d.split(":")[0] == "cpu" for d in devices)  # "cpu" or "cpu:N"
    if os.environ.get(FORK_SERVER_ENV, "1") == "0" or not devices or not cpu:
        return False
    # Where torch sees a GPU, importing ComfyUI's model side may touch CUDA in the server, and a child
    # forked after that cannot use it: CPU workers on such a machine are spawned, as GPU ones are.
    return not _cuda_visible() and _become_subreaper()


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


def _become_subreaper() -> bool:
    global _subreaper
    if _subreaper is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper = (
                sys.platform.startswith("linux") and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            )
        except (OSError, AttributeError):
            _subreaper = False
    return _subreaper


def start_worker(env: dict[str, str], cwd: str, comfyui_root: str) -> ForkedWorker | None:
    """A worker forked from the server for (`comfyui_root`, `env`); None when there is none to ask
    (the caller spawns the worker)."""
    key = (comfyui_root, tuple(sorted((k, v) for k, v in env.items() if k not in _PER_RANK_ENV)))
    with _servers_lock:
        if key in _refused:
            return None
        server = _servers.get(key)
        if server is not None and not server.alive:
            _servers.pop(key).close()
            server = None
        if server is None:
            try:
                server = ForkServer(_server_command(), env, comfyui_root)
            except OSError:
                _refused.add(key)
                return None
            _servers[key] = server
            while len(_servers) > MAX_SERVERS:
                _servers.popitem(last=False)[1].close()
        _servers.move_to_end(key)
    try:
        return server.fork(env, cwd)
    except OSError:
        with _servers_lock:
            if _servers.get(key) is server:
                _servers.pop(key).close()
        return None


def _server_command() -> list[str]:
    from .launcher import PACK_ROOT, bootstrap

    return [sys.executable, "-c", bootstrap("ltx2_mgpu.workers.rank.fork_server"), str(PACK_ROOT)]
