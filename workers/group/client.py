"""The worker group as seen from the UI process: start, run one job at a time, stop.

`WorkerGroup.run` sends one command to every rank and waits for all of them, watching for worker
death (process sentinels), hangs (heartbeats in the control block), cancel (polled callback, passed
to workers through the control block) and ranks that fall out of step. Recoverable failures raise
`JobError` / `JobInputError` / `JobCancelled` and leave the group up; anything else stops the group
and raises a fatal error naming the rank and cause (the next run starts a fresh group).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener, wait
from pathlib import Path
from typing import Any

import torch

from ..wire import protocol, shm
from ..wire.config import ERROR_GRACE_S, HEARTBEAT_TIMEOUT_S, POLL_INTERVAL_S, START_TIMEOUT_S, STOP_GRACE_S
from ..wire.errors import (
    GroupStartError,
    LoadCancelled,
    WorkerDied,
    WorkerGroupError,
    WorkerHung,
)
from ..wire.machines import split_device
from ..wire.requests import OUTPUT_PREFIX
from . import console, forked_workers, kept_slots, shutdown
from .failures import exit_text, job_failure, out_of_step
from .launcher import Placement, worker_command, worker_env
from .machine_link import OUT, MachineLink, join_listener, join_wait_s

ProgressFn = Callable[[int, int, dict], None]
ALL2ALL_ENV = "LTX2_MGPU_ALL2ALL"  # kernels/__init__.py ENV_MODE
CancelFn = Callable[[], bool]


class WorkerGroup:
    """One process per rank, started with subprocess from a clean environment. Not thread-safe by
    design beyond its own lock: one job at a time."""

    def __init__(
        self, placement: Placement, *, env: dict[str, str] | None = None, comfyui_root: str = ""
    ) -> None:
        """`comfyui_root`: the ComfyUI the ranks will import, if known now; CPU workers are then forked
        with its model side already imported (forked_workers.py NOTE [fork server])."""
        self.placement = placement
        # What was asked for; `placement` loses the machines that did not join (NOTE [machines]).
        self.requested_placement = placement
        self._env_extra = env or {}
        self._comfyui_root = comfyui_root
        self._lock = threading.RLock()
        self._procs: list[subprocess.Popen | forked_workers.ForkedWorker] = []
        self._conns: list[Connection] = []
        self._links: list[MachineLink] = []  # other machines' ranks (NOTE [machines])
        self._control: protocol.ControlBlock | None = None
        self._control_name: str | None = None
        self._workdir: Path | None = None
        self._job_ids = itertools.count(1)
        self.worker_info: list[dict] = []
        self.heartbeat_timeout_s = HEARTBEAT_TIMEOUT_S
        self.error_grace_s = ERROR_GRACE_S

    # ----- lifecycle -------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.placement.world_size

    @property
    def is_alive(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for p in self._procs)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> WorkerGroup:
        with self._lock:
            if self._procs:
                raise RuntimeError("this group was already started; make a new WorkerGroup to restart")
            shutdown.wait_if_exiting()
            shm.sweep_stale_segments()
            t0 = time.monotonic()
            try:
                self._start(timeout_s)
            except BaseException:
                shutdown.wait_if_exiting()  # ended under its start by the process's exit: NOTE [exit]
                self._teardown(kill=True)
                raise
            shutdown.track(self)
            console.info(
                f"started {self.world_size} workers ({', '.join(self.placement.devices)}) "
                f"in {console.seconds(time.monotonic() - t0)}"
            )
            return self

    def _start(self, timeout_s: float) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="ltx2mgpu-"))  # mode 0700
        env = worker_env(self.placement, self._env_extra)
        links = self._claim_machines(env)  # first: a machine that never joined leaves nothing to undo
        authkey = secrets.token_bytes(32)
        address = str(self._workdir / "control.sock")
        listener = Listener(address=address, family="AF_UNIX", authkey=authkey)
        control_spec, self._control = protocol.ControlBlock.create(self.world_size)
        self._control_name = control_spec.name
        accepted: queue.Queue[Connection] = queue.Queue()
        acceptor = threading.Thread(target=_accept, args=(listener, self.world_size, accepted), daemon=True)
        acceptor.start()
        local_devices = [self.placement.devices[r] for r in self.placement.local_ranks]
        forking = forked_workers.enabled(local_devices)
        for rank in self.placement.local_ranks:
            device = self.placement.devices[rank]
            boot = {
                "rank": rank,
                "world_size": self.world_size,
                "device": device,
                "backend": self.placement.backend,
                "address": address,
                "authkey": authkey.hex(),
                "control": control_spec.to_wire(),
                "store_path": str(self._workdir / "store"),
                "workdir": str(self._workdir),
                "owner_pid": os.getpid(),
                "threads": self.placement.threads_per_rank() if device == "cpu" else 0,
            }
            proc: subprocess.Popen | forked_workers.ForkedWorker | None = None
            if forking:
                proc = forked_workers.start_worker(env, str(self._workdir), self._comfyui_root)
            if proc is None:
                proc = subprocess.Popen(
                    worker_command(),
                    stdin=subprocess.PIPE,
                    cwd=self._workdir,
                    env=env,
                    start_new_session=True,
                )
            assert proc.stdin is not None
            proc.stdin.write((_json_line(boot)).encode())
            proc.stdin.flush()  # stdin stays open: its EOF tells the worker that we are gone
            self._procs.append(proc)
        for link in links:
            ranks = {
                r: self.placement.devices[r].partition(":")[2] for r in self.placement.ranks_on(link.name)
            }
            started = link.start(
                ranks, world_size=self.world_size, backend=self.placement.backend, control=self._control,
                store_path=str(self._workdir / "store"), env={**self._env_extra, ALL2ALL_ENV: "fallback"},
            )  # fmt: skip
            for rank in sorted(started):
                proc, conn = started[rank]
                self._procs.append(proc)
                accepted.put(conn)
        try:
            self._conns = self._await_hellos(accepted, timeout_s)
        finally:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
        self.worker_info = [m["info"] for m in self._await_all("ready", timeout_s)]

    def _claim_machines(self, env: dict[str, str]) -> list[MachineLink]:
        """The links of the other machines the placement names (NOTE [machines]), claimed from the join
        listener's lobby; the collectives then run on the interface the listener serves."""
        if not self.placement.machines:
            return []
        try:
            listener = join_listener()
            env["GLOO_SOCKET_IFNAME"] = env["NCCL_SOCKET_IFNAME"] = listener.interface
            # CUDA IPC reaches GPUs of one machine only: sequence parallelism in a group that spans
            # machines exchanges heads through torch.distributed (kernels/ NOTE, LTX2_MGPU_ALL2ALL).
            env[ALL2ALL_ENV] = "fallback"
            wait_s = join_wait_s()
        except ValueError as exc:
            raise GroupStartError(str(exc)) from None
        host, port = listener.address
        missing = []
        for name in self.placement.machines:
            claimed = listener.claim(name, wait_s)
            if claimed is None:
                missing.append(name)
            else:
                self._links.append(MachineLink(name, *claimed))
        if missing:
            how = (
                f"On {', '.join(missing)}, run `ltx2-mgpu worker --join {host}:{port} --name NAME` with this machine's "
                "join token (LTX2_MGPU_JOIN_TOKEN or its token file)"
            )
            left = tuple(d for d in self.placement.devices if split_device(d)[0] not in missing)
            if not left:
                raise GroupStartError(
                    f"machine {', '.join(missing)} has not joined within {wait_s:.0f} s. {how}, or name devices of "
                    "this machine in the loader's gpus"
                )
            # The jobs give the same result on fewer ranks: the GPUs that are here keep working.
            console.warning(
                f"machine {', '.join(missing)} has not joined within {wait_s:.0f} s: this group runs on "
                f"{', '.join(left)} without it. {how}; Unload Models then starts a group with it again"
            )
            self.placement = Placement(left)
        return self._links

    def _await_hellos(self, accepted: queue.Queue[Connection], timeout_s: float) -> list[Connection]:
        deadline = time.monotonic() + timeout_s
        by_rank: dict[int, Connection] = {}
        while len(by_rank) < self.world_size:
            self._raise_if_start_died()
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.world_size)) - set(by_rank))
                raise GroupStartError(
                    f"workers {missing} did not connect within {timeout_s:.0f} s", rank=missing[0]
                )
            try:
                conn = accepted.get(timeout=POLL_INTERVAL_S)
            except queue.Empty:
                continue
            if not conn.poll(timeout_s):
                raise GroupStartError("a worker connected but never said hello")
            hello = protocol.decode(conn.recv_bytes())
            by_rank[int(hello["rank"])] = conn
        return [by_rank[r] for r in range(self.world_size)]

    def _await_all(self, kind: str, timeout_s: float) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        got: dict[int, dict] = {}
        while len(got) < self.world_size:
            self._raise_if_start_died()
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.world_size)) - set(got))
                raise GroupStartError(
                    f"workers {missing} were not {kind} within {timeout_s:.0f} s", rank=missing[0]
                )
            for conn in wait([c for r, c in enumerate(self._conns) if r not in got], timeout=POLL_INTERVAL_S):
                rank = self._conns.index(conn)
                try:
                    message = protocol.decode(conn.recv_bytes())
                except (EOFError, OSError):
                    continue  # the death check above reports it
                if message["kind"] == kind:
                    got[rank] = message
        return [got[r] for r in range(self.world_size)]

    def _raise_if_start_died(self) -> None:
        for rank, proc in enumerate(self._procs):
            code = proc.poll()
            if code is not None:
                where = (
                    "above in the console"
                    if rank in self.placement.local_ranks
                    else "in its machine's console"
                )
                raise GroupStartError(
                    f"worker rank {rank} ({self.placement.devices[rank]}) exited during start-up "
                    f"with {_ended(proc, code)}; its error is printed {where}",
                    rank=rank,
                )

    def stop(self, reason: str = "") -> None:
        """Stop every worker and free what the group holds. Safe to call twice. Waits for a running job
        (it holds the lock); the process-exit path that must not wait is `end_now`. `reason` goes into
        the console line."""
        with self._lock:
            running = len(self._procs)
            t0 = time.monotonic()
            self._teardown(kill=False)
            if running:
                because = f" ({reason})" if reason else ""
                console.info(
                    f"stopped {running} workers in {console.seconds(time.monotonic() - t0)}{because}"
                )

    def end_now(self, deadline: float) -> None:
        """Process exit (workers/group/shutdown.py NOTE [exit]): SIGTERM every worker now, SIGKILL those
        left at `deadline` (time.monotonic), without waiting for the job lock. A job still running in
        another thread then fails (its workers are gone); the group cannot be used afterwards."""
        procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._control_name is not None:
            shm.unlink(self._control_name)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def _teardown(self, *, kill: bool) -> None:
        if not kill:
            for conn in self._conns:
                with contextlib.suppress(OSError, ValueError):
                    conn.send_bytes(
                        protocol.encode({"kind": "request", "job_id": 0, "op": "stop", "args": {}})
                    )
        deadline = time.monotonic() + (0 if kill else STOP_GRACE_S)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for conn in self._conns:
            conn.close()
        for link in self._links:
            link.close()
        self._procs, self._conns, self._links = [], [], []
        if self._control_name is not None:
            shm.unlink(self._control_name)
            self._control_name = None
        self._control = None
        kept_slots.release_all()  # a stopped group frees what its callers kept for the next job
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        shutdown.untrack(self)

    # ----- jobs ------------------------------------------------------------------------------
    def run(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        *,
        on_progress: ProgressFn | None = None,
        should_cancel: CancelFn | None = None,
        timeout_s: float | None = None,
        abort_on_cancel: bool = False,
    ) -> list[dict]:
        """Run `op` on every rank; return each rank's result dict (index = rank).

        `abort_on_cancel`: for commands with no step boundary to stop at (loading a checkpoint), a
        cancel stops the whole group at once instead (the next run starts a fresh one).

        Tensors in `args` are copied into shared memory; `protocol.OutputSlot`s are passed as they
        are so workers write into them. Every segment name of the job is unlinked when it ends.
        """
        with self._lock:
            shutdown.wait_if_exiting()
            if not self.is_alive:
                raise WorkerDied("the worker group is not running; it is restarted on the next run")
            job_id = next(self._job_ids)
            names: list[str] = []
            try:
                wire_args = protocol.share_tensors(_slots_to_wire(args or {}, names), names)
                for link in self._links:  # NOTE [machines]: the same files there, outputs merged back
                    link.check_files(_files_in(wire_args))
                    link.zero_outputs(wire_args)
                request = protocol.encode({"kind": "request", "job_id": job_id, "op": op, "args": wire_args})
                for rank, conn in enumerate(self._conns):
                    try:
                        conn.send_bytes(request)
                    except OSError as exc:
                        self._fail(
                            WorkerDied(f"worker rank {rank} is gone ({exc})", rank=rank, job_id=job_id)
                        )
                return self._collect(job_id, on_progress, should_cancel, timeout_s, abort_on_cancel)
            except BaseException:
                # The workers may have been ended under this job by the process's exit (shutdown.py
                # NOTE [exit]): block instead of raising into the host while it finalizes.
                shutdown.wait_if_exiting()
                raise
            finally:
                for name in names:
                    shm.unlink(name)

    def _collect(
        self,
        job_id: int,
        on_progress: ProgressFn | None,
        should_cancel: CancelFn | None,
        timeout_s: float | None,
        abort_on_cancel: bool = False,
    ) -> list[dict]:
        assert self._control is not None
        started = time.monotonic()
        results: dict[int, dict] = {}
        failures: dict[int, dict] = {}
        first_failure_at: float | None = None
        cancel_sent = False
        while len(results) + len(failures) < self.world_size:
            shutdown.wait_if_exiting()
            pending = [r for r in range(self.world_size) if r not in results and r not in failures]
            # Deaths are found by polling below, after draining the messages that arrived first.
            for item in wait([self._conns[r] for r in pending], timeout=POLL_INTERVAL_S):
                rank = self._conns.index(item)
                try:
                    message = protocol.decode(item.recv_bytes())
                except (EOFError, OSError):
                    continue
                if message.get("job_id") != job_id:
                    continue
                kind = message["kind"]
                if kind == "progress" and on_progress is not None:
                    on_progress(int(message["step"]), int(message["total"]), message)
                elif kind == "done":
                    results[rank] = message["result"]
                elif kind == "failed":
                    failures[rank] = message
                    first_failure_at = first_failure_at or time.monotonic()
            now = time.monotonic()
            for rank in pending:
                if rank in results or rank in failures:
                    continue
                code = self._procs[rank].poll()
                if code is not None:
                    self._fail(
                        WorkerDied(
                            f"worker rank {rank} ({self.placement.devices[rank]}) died during the job with "
                            f"{_ended(self._procs[rank], code)}. The worker group was stopped; the next run "
                            "starts a fresh one.",
                            rank=rank,
                            job_id=job_id,
                        )
                    )
                silent_s = now - self._control.last_beat(rank)
                if silent_s > self.heartbeat_timeout_s:
                    self._fail(
                        WorkerHung(
                            f"worker rank {rank} ({self.placement.devices[rank]}) stopped responding: no heartbeat "
                            f"for {silent_s:.1f} s. The worker group was stopped; the next run starts a fresh one.",
                            rank=rank,
                            job_id=job_id,
                        )
                    )
            if failures and first_failure_at is not None and now - first_failure_at > self.error_grace_s:
                self._fail(out_of_step(failures, job_id))
            if not cancel_sent and should_cancel is not None and should_cancel():
                if abort_on_cancel:
                    self._fail(
                        LoadCancelled(
                            "cancelled while the workers were loading; they were stopped and start again on the next run",
                            job_id=job_id,
                        )
                    )
                self._control.request_cancel(job_id)
                cancel_sent = True
            if timeout_s is not None and now - started > timeout_s:
                self._fail(WorkerHung(f"job {job_id} did not finish within {timeout_s:.0f} s", job_id=job_id))
        if failures:
            error = job_failure(failures, self.world_size, job_id)
            if error.fatal:
                self._fail(error)
            raise error
        return [results[r] for r in range(self.world_size)]

    def _fail(self, error: WorkerGroupError) -> None:
        """Stop the whole group and raise `error` (fatal path). During the process's exit the workers
        are already being ended (shutdown.end_all_groups): block as NOTE [exit] says instead."""
        shutdown.wait_if_exiting()
        self._teardown(kill=True)
        raise error


def _ended(proc: Any, code: int) -> str:
    """How a rank ended: its exit code, or for a rank on another machine why it is gone."""
    reason = getattr(proc, "exit_reason", None)
    return reason if reason else exit_text(code)


def _files_in(value: Any) -> list[str]:
    """The files of this machine a command names (absolute paths of existing files), for the check that
    other machines hold the same ones (NOTE [machines])."""
    if isinstance(value, str):
        return [value] if os.path.isabs(value) and os.path.isfile(value) else []
    if isinstance(value, dict) and not protocol.is_tensor_spec(value):
        return [f for item in value.values() for f in _files_in(item)]
    if isinstance(value, list | tuple):
        return [f for item in value for f in _files_in(item)]
    return []


def _slots_to_wire(value: Any, names: list[str], out: bool = False) -> Any:
    """Slots as TensorSpec dicts. A slot under a request's output field (its name starts with "out":
    wire/requests.py OUTPUT_PREFIX) is marked, so other machines send back what their ranks wrote there;
    a kept input slot (the MODEL path's latent streams) goes to them as an input."""
    if isinstance(value, protocol.OutputSlot):
        wire = value.spec.to_wire()
        if not value.kept:
            names.append(value.spec.name)
        else:
            wire[protocol.KEPT] = True  # the ranks keep its mapping
        return {**wire, OUT: True} if out else wire
    if isinstance(value, dict):
        return {
            k: _slots_to_wire(v, names, out or str(k).startswith(OUTPUT_PREFIX)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(_slots_to_wire(v, names, out) for v in value)
    return value


def output_slot(shape: Sequence[int], dtype: torch.dtype) -> protocol.OutputSlot:
    """Allocate a tensor in shared memory for workers to write a result into."""
    shutdown.wait_if_exiting()
    spec, tensor = shm.create(tuple(shape), dtype)
    return protocol.OutputSlot(spec=spec, tensor=tensor)


def _accept(listener: Listener, count: int, out: queue.Queue[Connection]) -> None:
    accepted = 0
    while accepted < count:
        try:
            conn = listener.accept()
        except (AuthenticationError, EOFError, ConnectionError):
            continue  # a peer without the key, or one that hung up mid-handshake: keep listening
        except OSError:
            return  # the listener was closed
        out.put(conn)
        accepted += 1


def _json_line(obj: dict) -> str:
    import json

    return json.dumps(obj) + "\n"
