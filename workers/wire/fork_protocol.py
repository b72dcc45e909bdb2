"""What the UI process and its fork server say to each other (workers/group/forked_workers.py NOTE
[fork server]): length-prefixed JSON messages on a Unix socket, file descriptors beside a request; and
the process names a worker and the server give themselves."""

from __future__ import annotations

import ctypes
import json
import socket
import struct

# PR_SET_NAME (prctl(2)): the name `ps`, `top` and the tests see for a forked worker, whose command line
# is the server's.
_PR_SET_NAME = 15
WORKER_NAME = "ltx2-worker"
SERVER_NAME = "ltx2-forkserver"
_MAX_REQUEST = 1 << 20


def set_process_name(name: str) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def send_message(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    header = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [header + data], fds)
    else:
        sock.sendall(header + data)


def recv_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One length-prefixed JSON message and the descriptors sent with it; (None, []) at EOF."""
    if max_fds:
        first, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST + 4, max_fds)
    else:
        first, fds = sock.recv(4), []
    if not first:
        return None, fds
    buffer = bytes(first)
    while len(buffer) < 4:
        more = sock.recv(4 - len(buffer))
        if not more:
            return None, fds
        buffer += more
    (length,) = struct.unpack("!I", buffer[:4])
    body = buffer[4:]
    while len(body) < length:
        more = sock.recv(length - len(body))
        if not more:
            return None, fds
        body += more
    return json.loads(body[:length]), fds
