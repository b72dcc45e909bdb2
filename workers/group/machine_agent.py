"""`ltx2-mgpu worker --join HOST:PORT`: the machine agent that lends this machine's GPUs to a worker
group on another machine (NOTE [machines] in wire/machines.py).

It connects out to the UI machine (nothing here listens on a network), proves the join token, says its
versions, and waits to be claimed. For each group it starts this machine's ranks exactly as the UI
machine starts its own (workers/group/launcher.py, the same worker entry) and relays for them until
the group ends; then it stops them, removes every segment and folder it made, and joins again.
"""

from __future__ import annotations

import contextlib
import os
import platform
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener, wait
from pathlib import Path
from typing import Any

import torch

from ..wire import protocol, shm
from ..wire.config import HEARTBEAT_INTERVAL_S, STOP_GRACE_S
from ..wire.machines import check_machine_name, fingerprint, machine_versions, parse_host_port
from . import forked_workers
from .launcher import Placement, worker_command, worker_env
from .machine_link import OUT, interface_of, nonzero_box

RETRY_S = 2.0
MODEL_SUFFIXES = (".safetensors", ".sft", ".gguf", ".ckpt", ".pt", ".pth", ".bin")


class Refused(Exception):
    """The UI machine refused this agent (token or versions): no point in trying again."""


class MachineAgent:
    def __init__(
        self,
        join: str,
        token: bytes,
        *,
        name: str = "",
        models: Sequence[str | Path] = (),
        comfyui_root: str = "",
    ) -> None:
        self.address = parse_host_port(join, "--join")
        self.token = token
        self.name = check_machine_name(name or platform.node().split(".")[0] or "machine")
        self.comfyui_root = comfyui_root
        roots = [Path(m) for m in models]
        if not roots and comfyui_root:
            roots = [Path(comfyui_root) / "models"]
        self.models = [r.resolve() for r in roots]

    def run(self, *, once: bool = False) -> int:
        """Join, serve groups, join again; returns an exit code (2: refused). SIGTERM and Ctrl+C stop this
        machine's ranks and remove what they held before the agent exits."""
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _exit_cleanly)
        try:
            return self._run(once)
        except KeyboardInterrupt:
            return 130

    def _run(self, once: bool) -> int:
        while True:
            try:
                conn = self._connect()
            except Refused as exc:
                _say(str(exc))
                return 2
            try:
                served = self._serve(conn)
            except Refused as exc:
                _say(str(exc))
                return 2
            finally:
                conn.close()
            if once and served:
                return 0
            time.sleep(0.2)

    def _connect(self) -> Connection:
        host, port = self.address
        said = False
        while True:
            try:
                family = "AF_INET6" if ":" in host else "AF_INET"
                return Client((host, port), family=family, authkey=self.token)
            except AuthenticationError:
                raise Refused(
                    f"{host}:{port} did not accept the join token; use the token of the machine that runs "
                    "ComfyUI (its token file, or LTX2_MGPU_JOIN_TOKEN)"
                ) from None
            except (ConnectionError, OSError, EOFError) as exc:
                if not said:
                    _say(f"waiting for {host}:{port} ({exc})")
                    said = True
                time.sleep(RETRY_S)

    def _serve(self, conn: Connection) -> bool:
        """One connection: hello, then at most one group. True when a group was served."""
        gpus = torch.cuda.device_count()
        summary = f"{gpus} GPU{'s' * (gpus != 1)}" if gpus else "no GPU (CPU workers)"
        _send(conn, {"kind": "machine_hello", "name": self.name, "versions": machine_versions(),
                     "gpus": gpus, "summary": summary, "host": platform.node()})  # fmt: skip
        _say(f"connected to {self.address[0]}:{self.address[1]} as {self.name}, waiting for a group")
        while True:
            try:
                message = protocol.decode(conn.recv_bytes())
            except (EOFError, OSError):
                return False
            kind = message.get("kind")
            if kind == "refused":
                raise Refused(message.get("message", "refused"))
            if kind == "start":
                ranks = [int(rank) for rank, _ in message["ranks"]]
                _say(f"serving ranks {ranks} ({', '.join(d for _, d in message['ranks'])}) of a "
                     f"{message['world_size']}-rank group")  # fmt: skip
                _GroupSession(self, conn, message).run()
                _say("the group ended; its workers stopped")
                return True
            if kind == "files" and "id" in message:  # a check before a start: answer it all the same
                _send(conn, {"kind": "reply", "id": message["id"], **self.check_files(message["files"])})

    # -- files
    def check_files(self, files: dict[str, dict]) -> dict:
        """{"map": {their path: ours}} when every file is here with the same size and SHA-256, else
        {"error": what differs and what to do}."""
        found: dict[str, str] = {}
        for their_path, want in files.items():
            name = str(want["name"])
            candidates = self._find(name)
            if not candidates:
                where = (
                    ", ".join(map(str, self.models)) or "none given: start it with --models DIR or --comfyui"
                )
                return {"error": f"it has no file named {name} in its models folders ({where}); copy {name} "
                                 "there from this machine"}  # fmt: skip
            mine = None
            for path in candidates:
                if path.stat().st_size == int(want["size"]) and fingerprint(path).sha256 == want["sha256"]:
                    mine = path
                    break
            if mine is None:
                path = candidates[0]
                theirs = fingerprint(path)
                return {"error": f"its {path} is not this machine's {name}: there size {theirs.size:,} bytes, "
                                 f"SHA-256 {theirs.sha256}; here size {int(want['size']):,} bytes, SHA-256 "
                                 f"{want['sha256']}. Copy the file from this machine to it"}  # fmt: skip
            found[their_path] = str(mine)
        return {"map": found}

    def _find(self, name: str) -> list[Path]:
        hits = []
        for root in self.models:
            if not root.is_dir():
                continue
            for dirpath, _dirs, files in os.walk(root, followlinks=True):
                if name in files:
                    hits.append(Path(dirpath) / name)
        return hits


class _GroupSession:
    """This machine's ranks of one group, and the relay between them and the UI machine."""

    def __init__(self, agent: MachineAgent, conn: Connection, start: dict) -> None:
        self.agent, self.conn = agent, conn
        self.world_size = int(start["world_size"])
        self.ranks = {int(rank): str(device) for rank, device in start["ranks"]}
        self.backend = str(start["backend"])
        self.env_extra = {str(k): str(v) for k, v in (start.get("env") or {}).items()}
        self.workdir = Path(tempfile.mkdtemp(prefix="ltx2mgpu-agent-"))
        self.procs: dict[int, Any] = {}
        self.rank_conns: dict[int, Connection] = {}
        self.store_conns: dict[int, Connection] = {}  # channel -> a rank's store connection
        self._channels = iter(range(1 << 62))
        self.exited: set[int] = set()
        self.jobs: dict[
            int, dict
        ] = {}  # job id -> {"specs": their name -> our spec, "outputs", "replied", "held"}
        self.files: dict[str, str] = {}
        self.control_spec: shm.TensorSpec | None = None  # made in _start, inside run's clean-up
        self._accepted: queue.Queue[tuple[str, Connection]] = queue.Queue()

    def run(self) -> None:
        try:
            self._start()
            self._relay()
        finally:
            self._stop()

    # -- start and stop
    def _start(self) -> None:
        shm.sweep_stale_segments()  # an earlier agent here that was killed outright
        self.control_spec, self.control = protocol.ControlBlock.create(self.world_size)
        authkey = secrets.token_bytes(32)
        control_address = str(self.workdir / "control.sock")
        store_address = str(self.workdir / "store.sock")
        self._listeners = [
            Listener(address=control_address, family="AF_UNIX", authkey=authkey),
            Listener(address=store_address, family="AF_UNIX", authkey=authkey),
        ]
        for kind, listener in zip(("rank", "store"), self._listeners, strict=True):
            threading.Thread(target=self._accept, args=(kind, listener), daemon=True).start()
        devices = tuple(self.ranks.values())
        placement = Placement(devices)
        interface = interface_of(_local_address(self.conn))
        env = worker_env(placement, self.env_extra)
        env["GLOO_SOCKET_IFNAME"] = env["NCCL_SOCKET_IFNAME"] = interface
        forking = forked_workers.enabled(devices)
        for rank, device in self.ranks.items():
            boot = {
                "rank": rank, "world_size": self.world_size, "device": device, "backend": self.backend,
                "address": control_address, "authkey": authkey.hex(), "control": self.control_spec.to_wire(),
                "store_relay": {"address": store_address, "authkey": authkey.hex()},
                "workdir": str(self.workdir), "owner_pid": os.getpid(),
                "threads": placement.threads_per_rank() if device == "cpu" else 0,
            }  # fmt: skip
            proc = (
                forked_workers.start_worker(env, str(self.workdir), self.agent.comfyui_root)
                if forking
                else None
            )
            if proc is None:
                proc = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, cwd=self.workdir, env=env,
                                        start_new_session=True)  # fmt: skip
            proc.stdin.write((protocol_json(boot) + "\n").encode())
            proc.stdin.flush()
            self.procs[rank] = proc

    def _accept(self, kind: str, listener: Listener) -> None:
        while True:
            try:
                self._accepted.put((kind, listener.accept()))
            except (AuthenticationError, EOFError, ConnectionError):
                continue
            except OSError:
                return

    def _stop(self) -> None:
        # A SIGTERM or Ctrl+C now waits until the clean-up is over (then ends the agent).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP, signal.SIGINT})
        try:
            self._clean_up()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _clean_up(self) -> None:
        # Names first (mappings stay valid for ranks still stopping), then the ranks and their folder.
        for job in self.jobs.values():
            for spec in job["specs"].values():
                shm.unlink(spec.name)
        if self.control_spec is not None:
            shm.unlink(self.control_spec.name)
        for listener in getattr(self, "_listeners", []):
            with contextlib.suppress(OSError):
                listener.close()
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for conn in [*self.rank_conns.values(), *self.store_conns.values()]:
            conn.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- the relay
    def _relay(self) -> None:
        next_beat = 0.0
        while True:
            while not self._accepted.empty():
                kind, conn = self._accepted.get()
                if kind == "store":
                    self.store_conns[next(self._channels)] = conn
                else:
                    self._greet_rank(conn)
            ready = wait([self.conn, *self.rank_conns.values(), *self.store_conns.values()], timeout=0.05)
            for conn in ready:
                if conn is self.conn:
                    try:
                        message = protocol.decode(self.conn.recv_bytes())
                    except (EOFError, OSError):
                        return  # the UI machine is gone: stop everything
                    if not self._from_ui(message):
                        return
                elif conn in self.store_conns.values():
                    channel = next(c for c, s in self.store_conns.items() if s is conn)
                    try:
                        call = protocol.decode(conn.recv_bytes())
                    except (EOFError, OSError):
                        del self.store_conns[channel]
                        continue
                    self._up({"kind": "store", "channel": channel, "call": call})
                else:
                    rank = next(r for r, c in self.rank_conns.items() if c is conn)
                    try:
                        data = conn.recv_bytes()
                    except (EOFError, OSError):
                        del self.rank_conns[rank]
                        continue
                    self._from_rank(rank, data)
            now = time.monotonic()
            if now >= next_beat:
                next_beat = now + HEARTBEAT_INTERVAL_S
                beats = {r: self.control.last_beat(r) for r in self.ranks if r not in self.exited}
                ages = {
                    r: max(0.0, now - beat) for r, beat in beats.items() if beat > 0
                }  # 0: not started yet
                self._up({"kind": "beats", "ages": ages})
            for rank, proc in self.procs.items():
                code = proc.poll()
                if code is not None and rank not in self.exited:
                    self.exited.add(rank)
                    self._up({"kind": "exited", "rank": rank, "code": code})

    def _greet_rank(self, conn: Connection) -> None:
        if not conn.poll(30):
            conn.close()
            return
        data = conn.recv_bytes()
        hello = protocol.decode(data)
        self.rank_conns[int(hello["rank"])] = conn
        self._up({"kind": "rank", "rank": int(hello["rank"]), "data": data})

    def _from_ui(self, message: dict) -> bool:
        kind = message.get("kind")
        if kind == "rank":
            rank = int(message["rank"])
            conn = self.rank_conns.get(rank)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.send_bytes(self._rewrite(message["data"]))
        elif kind == "job":
            self._new_job(message)
        elif kind == "cancel":
            self.control.request_cancel(int(message["job_id"]))
        elif kind == "files":
            reply = self.agent.check_files(message["files"])
            self.files.update(reply.get("map", {}))
            self._up({"kind": "reply", "id": message["id"], **reply})
        elif kind == "store_reply":
            conn = self.store_conns.get(int(message["channel"]))
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.send_bytes(protocol.encode(message["reply"]))
        elif kind == "kill":
            proc = self.procs.get(int(message["rank"]))
            if proc is not None and proc.poll() is None:
                proc.kill()
        elif kind == "end":
            return False
        return True

    def _new_job(self, message: dict) -> None:
        specs: dict[str, shm.TensorSpec] = {}
        try:
            for name, item in message["inputs"].items():
                spec = shm.TensorSpec.from_wire(item["spec"])
                ours, tensor = shm.create(spec.shape, shm.dtype_from_name(spec.dtype))
                specs[name] = ours
                if spec.nbytes:
                    tensor.view(-1).view(torch.uint8).copy_(
                        torch.frombuffer(bytearray(item["data"]), dtype=torch.uint8)
                    )
            for name, wire_spec in message["outputs"].items():
                spec = shm.TensorSpec.from_wire(wire_spec)
                specs[name], _ = shm.create(spec.shape, shm.dtype_from_name(spec.dtype))  # zeros
        except BaseException:
            for spec in specs.values():
                shm.unlink(spec.name)
            raise
        self.jobs[int(message["job_id"])] = {
            "specs": specs, "outputs": message["outputs"], "replied": set(), "held": [], "failed": False,
        }  # fmt: skip

    def _rewrite(self, data: bytes) -> bytes:
        """A request as this machine's ranks read it: our segments, our copies of the files, our ComfyUI."""
        message = protocol.decode(data)
        if message.get("kind") != "request":
            return data
        job = self.jobs.get(int(message["job_id"]))
        specs = job["specs"] if job else {}

        def local(value: Any) -> Any:
            if protocol.is_tensor_spec(value):
                return specs[value["__tensor__"]].to_wire() if value["__tensor__"] in specs else value
            if isinstance(value, dict):
                return {k: local(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return type(value)(local(v) for v in value)
            if isinstance(value, str):
                return self.files.get(value, value)
            return value

        args = local(message.get("args") or {})
        if self.agent.comfyui_root and args.get("comfyui_root"):
            args["comfyui_root"] = self.agent.comfyui_root
        return protocol.encode({**message, "args": args})

    def _from_rank(self, rank: int, data: bytes) -> None:
        message = protocol.decode(data)
        job = (
            self.jobs.get(int(message.get("job_id", -1)))
            if message.get("kind") in ("done", "failed")
            else None
        )
        if job is None:
            self._up({"kind": "rank", "rank": rank, "data": data})
            return
        job["replied"].add(rank)
        if message["kind"] == "failed":
            job["failed"] = True
            self._up({"kind": "rank", "rank": rank, "data": data})
        else:
            job["held"].append((rank, data))  # after what the ranks wrote has gone back
        if job["replied"] >= set(self.ranks) - self.exited:
            self._finish(int(message["job_id"]), job)

    def _finish(self, job_id: int, job: dict) -> None:
        if not job["failed"]:
            parts = []
            for name, their_spec in job["outputs"].items():
                tensor = shm.attach(job["specs"][name])
                box = nonzero_box(tensor)
                if box is not None:
                    written = tensor[tuple(slice(lo, hi) for lo, hi in box)].contiguous()
                    parts.append({"spec": {k: v for k, v in their_spec.items() if k != OUT}, "box": box,
                                  "data": written.reshape(-1).view(torch.uint8).numpy().tobytes()})  # fmt: skip
            if parts:
                self._up({"kind": "outputs", "job_id": job_id, "parts": parts})
        for rank, data in job["held"]:
            self._up({"kind": "rank", "rank": rank, "data": data})
        for spec in job["specs"].values():
            shm.unlink(spec.name)
        del self.jobs[job_id]

    def _up(self, message: dict) -> None:
        self.conn.send_bytes(protocol.encode(message))


def _say(text: str) -> None:
    print(f"ltx2-mgpu worker: {text}", file=sys.stderr, flush=True)


def _exit_cleanly(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through the session's clean-up (finally)


def _send(conn: Connection, message: dict) -> None:
    conn.send_bytes(protocol.encode(message))


def _local_address(conn: Connection) -> str:
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        return str(sock.getsockname()[0])
    finally:
        sock.close()


def protocol_json(boot: dict) -> str:
    import json

    return json.dumps(boot)
