"""The fork server: a process that imports torch (and ComfyUI's model side) once, then forks CPU
workers on request (NOTE [fork server] in workers/group/forked_workers.py).

Started by the UI process with `python -c <bootstrap> <pack root> <socket fd> <ComfyUI root or "">`.
It stays single-threaded at every fork: one loop over its request socket and its stdin, whose EOF
(the UI process gone) ends it. A request carries the worker's environment and working directory as
JSON and its stdin, stdout and stderr as file descriptors; the server forks twice, so the worker is
reparented to the UI process (a child subreaper) and is that process's own child from then on, and
replies with the worker's pid once the middle process has exited.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import traceback

from ..wire.fork_protocol import SERVER_NAME, recv_message, send_message, set_process_name


def preload(comfyui_root: str) -> None:
    """What every worker imports before its first job: the rank runtime (torch, torch.distributed),
    and with a ComfyUI root, ComfyUI's model side configured for CPU ranks and our engine over it."""
    from . import runtime  # noqa: F401

    if comfyui_root:
        from ..engine.engines import preload_comfy

        preload_comfy(comfyui_root)


def _become_worker(request: dict, fds: list[int], server_sock: socket.socket) -> None:
    """In the forked worker: the environment, files and session a spawned worker gets, then its entry."""
    server_sock.close()
    os.setsid()
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    from .entry import main  # names the process, as in a spawned worker

    main()


def _fork(request: dict, fds: list[int], server_sock: socket.socket) -> int:
    """Fork a worker through a middle process that exits at once; returns the worker's pid."""
    try:
        return _fork_twice(request, fds, server_sock)
    finally:
        for fd in fds:  # the worker holds its own copies
            os.close(fd)


def _fork_twice(request: dict, fds: list[int], server_sock: socket.socket) -> int:
    read_pid, write_pid = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(read_pid)
            worker = os.fork()
            if worker == 0:
                os.close(write_pid)
                try:
                    _become_worker(request, fds, server_sock)
                except BaseException:
                    traceback.print_exc()
                    sys.stderr.flush()
                os._exit(1)
            os.write(write_pid, struct.pack("!i", worker))
        finally:
            os._exit(0)
    os.close(write_pid)
    data = os.read(read_pid, 4)
    os.close(read_pid)
    os.waitpid(middle, 0)  # once it is gone, the worker's parent is the UI process
    if len(data) != 4:
        raise OSError("the fork server's middle process ended without a worker")
    return struct.unpack("!i", data)[0]


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[2]))
    comfyui_root = sys.argv[3] if len(sys.argv) > 3 else ""
    set_process_name(SERVER_NAME)
    from ..wire.pack_folder import keep_pack_folder_off_sys_path

    keep_pack_folder_off_sys_path()  # before ComfyUI imports transformers: NOTE [pack folder]
    try:
        preload(comfyui_root)
    except BaseException as exc:  # the workers, spawned instead, report the same failure properly
        send_message(sock, {"kind": "failed", "error": f"{type(exc).__name__}: {exc}"})
        os._exit(1)
    send_message(sock, {"kind": "ready", "pid": os.getpid()})
    while True:
        readable, _, _ = select.select([sock, 0], [], [])
        if 0 in readable and not os.read(0, 4096):
            os._exit(0)  # the UI process is gone; its workers are its own children
        if sock in readable:
            request, fds = recv_message(sock, max_fds=3)
            if request is None:
                os._exit(0)
            try:
                send_message(sock, {"kind": "forked", "pid": _fork(request, fds, sock)})
            except OSError as exc:
                send_message(sock, {"kind": "failed", "error": f"{type(exc).__name__}: {exc}"})
