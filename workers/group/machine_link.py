"""The UI machine's side of workers on other machines (NOTE [machines] in wire/machines.py).

`join_listener()` listens where LTX2_MGPU_LISTEN says, once a group names another machine. A machine
agent that proves the join token and runs the same versions waits in the lobby until a group claims
it by name. `MachineLink` then stands in for that machine's ranks in `WorkerGroup`: each rank gets a
local pipe (the client reads and writes it as it does a local rank's socket) and a `RemoteRank` (the
client polls, waits and kills it as it does a local process). One thread pumps between the pipes and
the join connection and serves the ranks' store calls on the group's FileStore; the agent's heartbeats
land in the group's control block and a cancel there goes to the agent. A command's input tensors go
to the machine once per job; what its ranks wrote into output tensors comes back before their replies,
as the parts of each output that are not zero (outputs start as zeros: `zero_outputs`).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener, Pipe, wait
from typing import Any

import torch

from ..wire import protocol, shm
from ..wire.errors import JobInputError
from ..wire.machines import (
    DEFAULT_JOIN_WAIT_S,
    JOIN_WAIT_ENV,
    Fingerprint,
    fingerprint,
    listen_address,
    read_token,
    version_mismatch,
)
from . import console

HELLO_TIMEOUT_S = 10.0  # a machine agent says who it is this soon after the token check
OUT = "__out__"  # marks an output slot's TensorSpec on the wire: its contents travel back, not out


class MachineGone(ConnectionError):
    pass


# ----- the listener and its lobby ----------------------------------------------------------------
class JoinListener:
    """Accepts machine agents that prove the token; they wait in the lobby until a group claims them."""

    def __init__(self, host: str, port: int, token: bytes) -> None:
        self.address = (host, port)
        family = "AF_INET6" if ":" in host else "AF_INET"
        try:
            self._listener = Listener(address=(host, port), family=family, authkey=token)
        except OSError as exc:
            raise ValueError(
                f"cannot listen on {host}:{port} for other machines ({exc.strerror or exc}); set "
                "LTX2_MGPU_LISTEN to this machine's address on the network they share and a free port"
            ) from None
        self._lobby: dict[str, Connection] = {}
        self._info: dict[str, dict] = {}
        self._changed = threading.Condition()
        threading.Thread(target=self._accept_forever, name="ltx2-mgpu-join", daemon=True).start()
        console.info(f"listening for other machines' workers on {host}:{port}")

    @property
    def interface(self) -> str:
        return interface_of(self.address[0])

    def _accept_forever(self) -> None:
        while True:
            try:
                conn = self._listener.accept()  # the token is proved both ways here, before any read
            except (AuthenticationError, EOFError, ConnectionError) as exc:
                peer = getattr(self._listener, "last_accepted", None)
                console.warning(f"refused a machine at {_peer(peer)}: {_auth_text(exc)}")
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._greet, args=(conn,), daemon=True).start()

    def _greet(self, conn: Connection) -> None:
        try:
            if not conn.poll(HELLO_TIMEOUT_S):
                raise MachineGone("it sent nothing after the token check")
            hello = protocol.decode(conn.recv_bytes())
            name = str(hello.get("name", ""))
            problem = version_mismatch(hello.get("versions") or {})
            if hello.get("kind") != "machine_hello" or not name:
                problem = "it did not introduce itself as a machine agent"
            if problem is not None:
                _send(conn, {"kind": "refused", "message": f"machine {name or '?'} was refused: {problem}"})
                console.warning(f"refused machine {name or '?'}: {problem}")
                conn.close()
                return
        except (EOFError, OSError, ValueError) as exc:
            console.warning(f"a machine agent hung up before it joined ({exc})")
            conn.close()
            return
        with self._changed:
            old = self._lobby.pop(name, None)
            if old is not None:
                old.close()  # the same machine again (restarted): the newer connection wins
            self._lobby[name] = conn
            self._info[name] = hello
            self._changed.notify_all()
        console.info(f"machine {name} joined with {hello.get('summary', 'its devices')}")

    def claim(self, name: str, timeout_s: float) -> tuple[Connection, dict] | None:
        """The lobby's connection of machine `name`, waiting up to `timeout_s` for it; None if it never came."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                conn = self._lobby.pop(name, None)
                if conn is not None:
                    if _still_open(conn):
                        return conn, self._info.pop(name)
                    conn.close()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(min(left, 0.5))

    def close(self) -> None:
        # close() alone leaves the port listening while our thread waits in accept(): shut it down first
        # (multiprocessing's Listener keeps its socket in _listener._socket).
        sock = getattr(getattr(self._listener, "_listener", None), "_socket", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._changed:
            for conn in self._lobby.values():
                conn.close()
            self._lobby.clear()


_listener: JoinListener | None = None
_listener_lock = threading.Lock()


def join_listener() -> JoinListener:
    """The process's listener, started on first use where LTX2_MGPU_LISTEN says (ValueError if unset)."""
    global _listener
    host, port = listen_address()
    with _listener_lock:
        if _listener is not None and _listener.address != (host, port):
            _listener.close()
            _listener = None
        if _listener is None:
            _listener = JoinListener(host, port, read_token(create=True))
        return _listener


def close_join_listener() -> None:
    global _listener
    with _listener_lock:
        if _listener is not None:
            _listener.close()
            _listener = None


def join_wait_s() -> float:
    raw = os.environ.get(JOIN_WAIT_ENV, "")
    try:
        return float(raw) if raw else DEFAULT_JOIN_WAIT_S
    except ValueError:
        raise ValueError(f"{JOIN_WAIT_ENV}={raw!r} is not a number of seconds") from None


# ----- one machine in a group ---------------------------------------------------------------------
class RemoteRank:
    """What the client knows of a rank on another machine, shaped as a local process (poll, wait, kill)."""

    def __init__(self, link: MachineLink, rank: int) -> None:
        self.link, self.rank = link, rank
        self.pid = 0  # not a process of this machine
        self.stdin = None
        self.code: int | None = None

    @property
    def exit_reason(self) -> str:
        return self.link.gone_reason or f"its process ended with code {self.code}"

    def poll(self) -> int | None:
        if self.code is None and self.link.gone_reason:
            self.code = -1
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                import subprocess

                raise subprocess.TimeoutExpired(f"rank {self.rank} on {self.link.name}", timeout)
            time.sleep(0.02)
        return self.code  # type: ignore[return-value]

    def terminate(self) -> None:
        self.link.kill(self.rank)

    def kill(self) -> None:
        self.link.kill(self.rank)


class MachineLink:
    """One machine agent serving `ranks` of a group (NOTE [machines])."""

    def __init__(self, name: str, conn: Connection, info: dict) -> None:
        self.name, self.info = name, info
        self._conn = conn
        self._send_lock = threading.Lock()
        self._pipes: dict[
            int, Connection
        ] = {}  # rank -> our end of the pipe whose other end the client holds
        self._workers: dict[int, RemoteRank] = {}
        self._shipped: set[int] = set()  # job ids whose inputs went to the machine
        self._files: dict[
            str, str
        ] = {}  # paths of this machine checked on that machine -> their fingerprint key
        self._replies: dict[int, dict] = {}
        self._reply_ready = threading.Condition()
        self._ids = iter(range(1, 1 << 62))
        self._store: Any = None
        self._store_lock = threading.Lock()
        self._store_path = ""
        self._world_size = 0
        self._control: protocol.ControlBlock | None = None
        self._cancel_seen = -1
        self.gone_reason = ""
        self._thread: threading.Thread | None = None

    # -- start
    def start(
        self, ranks: dict[int, str], *, world_size: int, backend: str, control: protocol.ControlBlock,
        store_path: str, env: dict[str, str],
    ) -> dict[int, tuple[RemoteRank, Connection]]:  # fmt: skip
        """Ask the agent to start `ranks` (rank -> its device on that machine). Returns, per rank, the
        stand-in process and the client's end of its pipe; the ranks' hellos arrive on those pipes."""
        self._world_size, self._control, self._store_path = world_size, control, store_path
        out = {}
        for rank in ranks:
            client_end, our_end = Pipe(duplex=True)
            self._pipes[rank] = our_end
            self._workers[rank] = RemoteRank(self, rank)
            out[rank] = (self._workers[rank], client_end)
            control.beat(rank, time.monotonic())  # until the agent's first heartbeat message
        self._send(
            {"kind": "start", "world_size": world_size, "backend": backend,
             "ranks": [[rank, device] for rank, device in ranks.items()], "env": env}
        )  # fmt: skip
        self._thread = threading.Thread(target=self._pump, name=f"ltx2-mgpu-{self.name}", daemon=True)
        self._thread.start()
        return out

    # -- what the client asks
    def check_files(self, paths: list[str]) -> None:
        """Before a command that reads `paths` goes to any rank: that machine must hold the same files
        (size and SHA-256), found by name in its models folders. JobInputError naming the file otherwise."""
        todo = {p: fingerprint(p) for p in paths}
        todo = {p: f for p, f in todo.items() if self._files.get(p) != _key(f)}
        if not todo:
            return
        reply = self._ask({"kind": "files", "files": {p: {"name": os.path.basename(p), **f.to_wire()}
                                                       for p, f in todo.items()}})  # fmt: skip
        if reply.get("error"):
            raise JobInputError(f"machine {self.name}: {reply['error']}")
        for path, found in todo.items():
            self._files[path] = _key(found)

    def zero_outputs(self, args: Any) -> None:
        """Output slots start as zeros, so what each machine's ranks wrote can be merged back exactly."""
        for spec in _specs(args):
            if spec.get(OUT):
                shm.attach(shm.TensorSpec.from_wire(spec)).zero_()

    def kill(self, rank: int) -> None:
        with contextlib.suppress(OSError, ValueError, MachineGone):
            self._send({"kind": "kill", "rank": rank})

    def close(self) -> None:
        """The group is over: the agent stops its ranks and frees what it holds (then it may join again)."""
        with contextlib.suppress(OSError, ValueError, MachineGone):
            self._send({"kind": "end"})
        self.gone_reason = self.gone_reason or "the group was stopped"
        self._conn.close()
        for pipe in self._pipes.values():
            pipe.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._store = None

    # -- the pump
    def _pump(self) -> None:
        try:
            while not self.gone_reason:
                ready = wait([self._conn, *self._pipes.values()], timeout=0.05)
                for conn in ready:
                    if conn is self._conn:
                        self._from_machine(protocol.decode(self._conn.recv_bytes()))
                    else:
                        rank = next(r for r, p in self._pipes.items() if p is conn)
                        try:
                            data = conn.recv_bytes()
                        except (EOFError, OSError):
                            continue  # the client closed its end: the group is being torn down
                        self._to_rank(rank, data)
                self._forward_cancel()
        except (EOFError, OSError) as exc:
            if not self.gone_reason:
                self.gone_reason = f"the connection to machine {self.name} was lost ({exc or 'closed'})"
                console.warning(f"machine {self.name} dropped out: {self.gone_reason}")
        finally:
            with self._reply_ready:
                self._reply_ready.notify_all()

    def _to_rank(self, rank: int, data: bytes) -> None:
        message = protocol.decode(data)
        if message.get("kind") == "request":
            job_id = int(message["job_id"])
            if job_id not in self._shipped:
                self._shipped.add(job_id)
                self._send(_job_message(job_id, message.get("args") or {}))
        self._send({"kind": "rank", "rank": rank, "data": data})

    def _from_machine(self, message: dict) -> None:
        kind = message.get("kind")
        if kind == "rank":
            pipe = self._pipes.get(int(message["rank"]))
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.send_bytes(message["data"])
        elif kind == "store":
            threading.Thread(target=self._serve_store, args=(message,), daemon=True).start()
        elif kind == "beats":
            now = time.monotonic()
            for rank, age in message["ages"].items():
                if self._control is not None and int(rank) in self._workers:
                    # never older than what we hold (the stamp made at start, an earlier message)
                    self._control.beat(int(rank), max(now - float(age), self._control.last_beat(int(rank))))
        elif kind == "outputs":
            for part in message["parts"]:
                _merge(part)
        elif kind == "exited":
            worker = self._workers.get(int(message["rank"]))
            if worker is not None:
                worker.code = int(message["code"])
        elif kind == "reply":
            with self._reply_ready:
                self._replies[int(message["id"])] = message
                self._reply_ready.notify_all()
        elif kind == "start_failed":
            self.gone_reason = f"machine {self.name} could not start its workers: {message.get('message')}"
            console.warning(self.gone_reason)

    def _serve_store(self, message: dict) -> None:
        from ..wire.relay_store import serve_store_call

        with self._store_lock:  # one FileStore for every call (calls come on threads of their own)
            if self._store is None:
                import torch.distributed as dist

                self._store = dist.FileStore(self._store_path, self._world_size)
        reply = serve_store_call(self._store, message["call"])
        with contextlib.suppress(OSError, ValueError, MachineGone):
            self._send({"kind": "store_reply", "channel": message["channel"], "reply": reply})

    def _forward_cancel(self) -> None:
        if self._control is None:
            return
        wanted = int(self._control.values[0].item())
        if wanted != self._cancel_seen:
            self._cancel_seen = wanted
            if wanted >= 0:
                self._send({"kind": "cancel", "job_id": wanted})

    def _ask(self, message: dict, timeout_s: float = 3600.0) -> dict:
        call_id = next(self._ids)
        self._send({**message, "id": call_id})
        deadline = time.monotonic() + timeout_s
        with self._reply_ready:
            while call_id not in self._replies:
                if self.gone_reason:
                    raise JobInputError(f"machine {self.name} is not reachable: {self.gone_reason}")
                if time.monotonic() > deadline:
                    raise JobInputError(f"machine {self.name} did not answer within {timeout_s:.0f} s")
                self._reply_ready.wait(0.1)
            return self._replies.pop(call_id)

    def _send(self, message: dict) -> None:
        if self.gone_reason and message.get("kind") not in ("end",):
            raise MachineGone(self.gone_reason)
        with self._send_lock:
            self._conn.send_bytes(protocol.encode(message))


def _send(conn: Connection, message: dict) -> None:
    conn.send_bytes(protocol.encode(message))


def _key(found: Fingerprint) -> str:
    return f"{found.size}:{found.sha256}"


def _specs(value: Any) -> Iterator[dict]:
    if protocol.is_tensor_spec(value):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _specs(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _specs(item)


def _job_message(job_id: int, args: dict) -> dict:
    """A job's tensors for another machine: the inputs' bytes, the outputs' shapes."""
    inputs, outputs = {}, {}
    for spec in _specs(args):
        name = spec["__tensor__"]
        if spec.get(OUT):
            outputs[name] = spec
        else:
            tensor_spec = shm.TensorSpec.from_wire(spec)
            with open(shm.path_of(name), "rb") as f:
                inputs[name] = {"spec": spec, "data": f.read(tensor_spec.nbytes)}
    return {"kind": "job", "job_id": job_id, "inputs": inputs, "outputs": outputs}


def _merge(part: dict) -> None:
    """Copy what another machine's ranks wrote (its non-zero values) into this machine's output slot."""
    spec = shm.TensorSpec.from_wire(part["spec"])
    target = shm.attach(spec)
    box = tuple(slice(lo, hi) for lo, hi in part["box"])
    region = target[box]
    dtype = shm.dtype_from_name(spec.dtype)
    written = torch.frombuffer(bytearray(part["data"]), dtype=torch.uint8).view(dtype).view(region.shape)
    mask = written != 0
    region[mask] = written[mask]


def nonzero_box(tensor: torch.Tensor) -> list[tuple[int, int]] | None:
    """Per dimension, the smallest [lo, hi) holding every non-zero value; None for an all-zero tensor."""
    mask = tensor != 0
    if not bool(mask.any()):
        return None
    box = []
    for dim in range(tensor.dim()):
        others = tuple(d for d in range(tensor.dim()) if d != dim)
        along = mask.any(dim=others) if others else mask
        hits = torch.nonzero(along).flatten()
        box.append((int(hits[0]), int(hits[-1]) + 1))
    return box


def interface_of(host: str) -> str:
    """The name of this machine's network interface that holds address `host` (for gloo and NCCL)."""
    try:
        address = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        raise ValueError(f"{host} is not an address of this machine") from None
    if address.is_loopback:
        return "lo"
    for _, name in socket.if_nameindex():
        if _ipv4_of(name) == str(address):
            return name
    raise ValueError(
        f"no network interface of this machine has the address {host}; give LTX2_MGPU_LISTEN one of this "
        "machine's own addresses (ip -brief address lists them)"
    )


def _ipv4_of(interface: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(
                s.fileno(), 0x8915, struct.pack("256s", interface[:15].encode())
            )  # SIOCGIFADDR
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def _still_open(conn: Connection) -> bool:
    try:
        return not conn.closed and not (conn.poll(0) and not _peek_alive(conn))
    except (OSError, EOFError):
        return False


def _peek_alive(conn: Connection) -> bool:
    # Readable before a group claimed it: either EOF (the agent left) or a message we do not expect.
    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except OSError:
        return False
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False
    finally:
        sock.close()


def _peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "an unknown address"


def _auth_text(exc: BaseException) -> str:
    if isinstance(exc, AuthenticationError):
        return "it did not prove the join token (a wrong or old token file)"
    return f"it hung up during the token check ({exc or type(exc).__name__})"
