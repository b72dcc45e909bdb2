"""Driving a real ComfyUI from the opt-in tests (COMFYUI_PATH points at a ComfyUI checkout).

Two ways in:
- `comfyui_in_process(root)`: import ComfyUI's own modules into the test process, configured as
  `main.py --cpu --use-pytorch-cross-attention` configures them; removed again afterwards so later
  tests in the same session see no ComfyUI (our nodes check `sys.modules` for it).
- `ComfyUIServer`: ComfyUI's main.py as a subprocess on a free loopback port, with every folder it
  writes to (models, custom_nodes, input, output, temp, user, database) in a temporary base
  directory (`--base-directory`, `--database-url`), so the checkout itself stays untouched.
  Our pack is symlinked into that base's custom_nodes, as a user would install it.

Only the standard library, psutil and our own package here: the tests run in ComfyUI's own virtual
environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
from child_env import no_bytecode_beside_sources

COMFYUI_PATH_ENV = "COMFYUI_PATH"
# The folder name users clone the pack into; ComfyUI reports nodes as custom_nodes.<folder>.
PACK_FOLDER = "ComfyUI-LTX2-MultiGPU"
PACK_ROOT = Path(__file__).resolve().parent.parent
# Spawned worker processes carry this in their command line (workers/group/launcher.py BOOTSTRAP);
# forked ones (workers/group/forked_workers.py) have the fork server's, and both name themselves
# WORKER_NAME (their /proc comm).
WORKER_MARKER = "ltx2_mgpu.workers.rank.entry"
WORKER_NAME = "ltx2-worker"
# ComfyUI 0.33 boots in ~15 s on a 16-core machine and ~35 s on the 2-core CI box (measured).
BOOT_TIMEOUT_S = 180.0
# SIGINT (Ctrl+C) is how users stop ComfyUI; main.py then exits its event loop and runs atexit.
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 30.0
POLL_S = 0.25
FREE_RETRY_S = 5.0  # unload_models asks again after this long (a missed /free, see there)


def signal_lines(status: Path) -> str:
    """SigBlk / SigIgn / SigCgt of a /proc status file, as hex masks (bit n-1 is signal n: SIGINT 0x2)."""
    try:
        fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
    except OSError as error:
        return f"({error})"
    return " ".join(
        f"{k}={fields.get(k, '?').strip().lstrip('0') or '0'}" for k in ("SigBlk", "SigIgn", "SigCgt")
    )


def comfyui_root() -> Path:
    """The ComfyUI checkout named by COMFYUI_PATH. Callers are skipped by conftest when it is unset."""
    raw = os.environ.get(COMFYUI_PATH_ENV, "")
    root = Path(raw).expanduser().resolve()
    if not raw or not (root / "main.py").is_file() or not (root / "comfy").is_dir():
        raise ValueError(
            f"{COMFYUI_PATH_ENV}={raw!r} is not a ComfyUI checkout (no main.py and comfy/ there); "
            "point it at the folder that holds ComfyUI's main.py"
        )
    return root


# ----- in process ------------------------------------------------------------------------------


@contextlib.contextmanager
def comfyui_in_process(root: Path) -> Iterator[ModuleType]:
    """Import ComfyUI's modules from `root` into this process; yields comfy.model_management.

    CPU, and pytorch (SDPA) attention, which is what ComfyUI runs on GPUs; on CPU it would default
    to sub-quadratic attention (docs/COMFYUI_LTX2_PARITY.md section 7.5). Modules imported here
    are removed from sys.modules on exit (objects built from them stay usable).
    """
    before = set(sys.modules)
    saved_dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # leave no __pycache__ in the checkout
    sys.path.insert(0, str(root))
    try:
        from comfy.cli_args import args

        args.cpu = True
        args.use_pytorch_cross_attention = True
        import comfy.ldm.modules.attention as attention
        import comfy.model_management as model_management

        # In case another caller imported ComfyUI before us with other settings.
        attention.optimized_attention = attention.attention_pytorch
        attention.optimized_attention_masked = attention.attention_pytorch
        yield model_management
    finally:
        sys.dont_write_bytecode = saved_dont_write_bytecode
        with contextlib.suppress(ValueError):
            sys.path.remove(str(root))
        # Decide for all first: a namespace package's __path__ is recomputed from its parent's entry.
        ours = [name for name in set(sys.modules) - before if _is_under(sys.modules[name], root)]
        for name in ours:
            del sys.modules[name]


def pack_node_classes() -> dict[str, type]:
    """The pack's V3 node classes by node id (nodes/v3/), imported with the comfy_api of the ComfyUI named
    by COMFYUI_PATH, as ComfyUI's loader gets them from the extension. Only comfy_api and what it imports
    come in (not comfy.model_management: the file pickers list nothing, as outside ComfyUI); conftest
    removes them, and these classes, after the test module."""
    root = comfyui_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    saved_dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # leave no __pycache__ in the ComfyUI checkout
    try:
        from ltx2_mgpu.nodes.v3 import NODES
    finally:
        sys.dont_write_bytecode = saved_dont_write_bytecode
    return {cls.GET_SCHEMA().node_id: cls for cls in NODES}


def _is_under(module: ModuleType, root: Path) -> bool:
    """Whether a module is ComfyUI's own (third-party ones, torch or av, stay imported). ComfyUI's
    `comfy` and several subpackages are namespace packages: no __file__, only __path__."""
    places = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
    return any(place and Path(place).resolve().is_relative_to(root) for place in places)


# ----- server ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ServerLayout:
    """A ComfyUI base directory: models/<folder>/, custom_nodes/, output/, user/ ... under `base`."""

    base: Path

    @property
    def custom_nodes(self) -> Path:
        return self.base / "custom_nodes"

    @property
    def output(self) -> Path:
        return self.base / "output"

    @property
    def database(self) -> Path:
        return self.base / "comfyui.db"

    @property
    def log(self) -> Path:
        return self.base / "comfyui.log"


def make_layout(
    base: Path,
    *,
    models: Mapping[str, Sequence[Path]] = {},
    extra_packs: Mapping[str, str] = {},
) -> ServerLayout:
    """Create a base directory holding our pack (symlinked), model files (symlinked into
    models/<folder>/) and extra single-file node packs {folder name: __init__.py source}."""
    layout = ServerLayout(base)
    layout.custom_nodes.mkdir(parents=True, exist_ok=True)
    (layout.custom_nodes / PACK_FOLDER).symlink_to(PACK_ROOT, target_is_directory=True)
    for name, source in extra_packs.items():
        pack = layout.custom_nodes / name
        pack.mkdir()
        (pack / "__init__.py").write_text(source)
    link_models(layout, models)
    return layout


def link_models(layout: ServerLayout, models: Mapping[str, Sequence[Path]]) -> None:
    """Symlink model files into models/<folder>/ under their own names; also into a running server
    (ComfyUI lists a folder again when it changes). A name already there must be the same bytes."""
    for folder, files in models.items():
        target = layout.base / "models" / folder
        target.mkdir(parents=True, exist_ok=True)
        for file in files:
            link = target / file.name
            if link.exists():
                if link.read_bytes() != Path(file).read_bytes():
                    raise ValueError(f"{link} is already there with other contents than {file}")
                continue
            link.symlink_to(Path(file).resolve())


class ServerError(RuntimeError):
    """ComfyUI refused a request, failed a prompt or did not start; the message carries its log tail."""


class ComfyUIServer:
    """ComfyUI's main.py in a subprocess. Use as a context manager or call start()/stop()."""

    def __init__(
        self, root: Path, layout: ServerLayout, *, extra_args: Sequence[str] = (), python: str | None = None
    ) -> None:
        self.root = root
        self.layout = layout
        self.extra_args = tuple(extra_args)
        self.python = python or sys.executable
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.boot_s = 0.0
        self._log_file = None
        self.spawned_with = ""  # the spawning thread's signal state (inherited across exec)
        self.stuck = ""  # signal_report() when the first stop signal did not end ComfyUI

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    @property
    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> ComfyUIServer:
        self.port = free_port()
        command = [
            self.python, "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(self.port),
            "--base-directory", str(self.layout.base),
            "--database-url", f"sqlite:///{self.layout.database}",
            "--disable-auto-launch",
            "--disable-api-nodes",  # ComfyUI's paid-API nodes: a third of its start (no test uses them)
            *self.extra_args,
        ]  # fmt: skip
        env = no_bytecode_beside_sources(os.environ)
        self._log_file = open(self.layout.log, "ab")  # closed in stop()
        t0 = time.monotonic()
        self.spawned_with = signal_lines(Path(f"/proc/self/task/{threading.get_native_id()}/status"))
        self.proc = subprocess.Popen(
            command, cwd=self.root, env=env, stdout=self._log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = t0 + BOOT_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(
                    f"ComfyUI exited with code {self.proc.returncode} while starting\n{self.log_tail()}"
                )
            with contextlib.suppress(OSError, ServerError):
                self.get("/system_stats", timeout_s=2.0)
                self.boot_s = time.monotonic() - t0
                return self
            time.sleep(POLL_S)
        self.stop()
        raise ServerError(f"ComfyUI did not answer within {BOOT_TIMEOUT_S:.0f} s\n{self.log_tail()}")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> str:
        """Stop as a user does (Ctrl+C = SIGINT); escalate to SIGTERM, then SIGKILL.
        Returns how it ended: "exited", "sigint", "sigterm" or "sigkill"."""
        how = "exited"
        escalation = (("sigint", signal.SIGINT), ("sigterm", signal.SIGTERM), ("sigkill", signal.SIGKILL))
        for name, sig in escalation:
            if self.proc is None or self.proc.poll() is not None:
                break
            if how != "exited" and not self.stuck:
                self.stuck = self.signal_report()
            how = name
            self.proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout_s)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return how

    def signal_report(self) -> str:
        """Why a signal may not have ended ComfyUI: its signal masks and each thread's state, and the
        signal state the test thread that spawned it had (SIG_IGN and blocked masks pass through exec)."""
        if not self.is_running:
            return "ComfyUI is not running"
        lines = [f"ComfyUI {self.pid}: {signal_lines(Path(f'/proc/{self.pid}/status'))}"]
        for task in sorted(Path(f"/proc/{self.pid}/task").glob("*")):
            with contextlib.suppress(OSError):
                name = (task / "comm").read_text().strip()
                state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                wchan = (task / "wchan").read_text().strip()
                lines.append(f"  thread {task.name} {name!r} {state} {wchan} {signal_lines(task / 'status')}")
        lines.append(f"spawned by a test thread with {self.spawned_with}")
        return "\n".join(lines)

    def __enter__(self) -> ComfyUIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, chars: int = 6000) -> str:
        try:
            return self.layout.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"

    # ----- HTTP --------------------------------------------------------------------------------
    def _request(self, path: str, body: Any = None, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"} if data else {}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise ServerError(f"{path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
        return json.loads(raw) if raw.strip() else None

    def get(self, path: str, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
        return self._request(path, timeout_s=timeout_s)

    def post(self, path: str, body: Any) -> Any:
        return self._request(path, body=body)

    def queue_prompt(self, prompt: Mapping[str, Any]) -> str:
        """POST an API-format graph; returns its prompt id (validation errors raise ServerError)."""
        answer = self.post("/prompt", {"prompt": prompt, "client_id": "ltx2-mgpu-tests"})
        if answer.get("node_errors"):
            raise ServerError(f"prompt rejected: {json.dumps(answer['node_errors'])[:4000]}")
        return answer["prompt_id"]

    def wait_done(self, prompt_id: str, timeout_s: float) -> dict:
        """The /history entry of a prompt once it has ended, however it ended."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.is_running:
                raise ServerError(f"ComfyUI died while running {prompt_id}\n{self.log_tail()}")
            entry = self.get(f"/history/{prompt_id}").get(prompt_id)
            if entry and entry.get("status", {}).get("completed") is not None:
                return entry
            time.sleep(POLL_S)
        raise ServerError(f"prompt {prompt_id} did not finish within {timeout_s:.0f} s\n{self.log_tail()}")

    def wait_history(self, prompt_id: str, timeout_s: float) -> dict:
        """The /history entry of a prompt that succeeded; ServerError (with the log) otherwise."""
        entry = self.wait_done(prompt_id, timeout_s)
        status = entry["status"]
        if status.get("status_str") != "success":
            raise ServerError(
                f"prompt {prompt_id} ended with {status.get('status_str')}: "
                f"{json.dumps(status.get('messages'))[:4000]}\n{self.log_tail()}"
            )
        return entry

    def run_prompt(self, prompt: Mapping[str, Any], timeout_s: float) -> dict:
        return self.wait_history(self.queue_prompt(prompt), timeout_s)

    def unload_models(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """The UI's "Free model and node cache" (unload every model, forget cached node outputs): returns
        once no worker of our pack runs under the server and none of its segments is left in /dev/shm.
        Between two modules sharing a server: nothing of one is carried into the other."""
        # ComfyUI's prompt worker can miss one /free: the request only sets a flag and wakes the queue,
        # and a flag set after the worker read the flags of the run that just ended, but before it waits
        # on the queue again (while it collects garbage), sits there until the queue's 1,000 s timeout
        # (main.py prompt_worker, PromptQueue.get). Asking again wakes it, as a user clicks twice.
        deadline = time.monotonic() + timeout_s
        while True:
            self.post("/free", {"unload_models": True, "free_memory": True})
            left = deadline - time.monotonic()
            if wait_until(lambda: not worker_processes(self.pid), min(FREE_RETRY_S, max(left, 0))):
                break
            if left <= FREE_RETRY_S:
                raise ServerError(f"Unload Models left workers running\n{self.log_tail()}")
        from ltx2_mgpu.workers.wire import shm

        if not wait_until(lambda: not shm.list_segments(self.pid), timeout_s):
            raise ServerError(f"Unload Models left {shm.list_segments(self.pid)} in /dev/shm")


# ----- what a server leaves behind -----------------------------------------------------------


def worker_processes(parent_pid: int) -> list[psutil.Process]:
    """Live (non-zombie) worker processes of our pack started by `parent_pid`."""
    try:
        children = psutil.Process(parent_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if is_live_worker(p)]


def is_live_worker(process: psutil.Process) -> bool:
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.name() == WORKER_NAME or WORKER_MARKER in " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(POLL_S)
    return bool(predicate())


def status_message(history_entry: dict, event: str) -> dict | None:
    """The data of a status event ("execution_interrupted", "execution_error"...) of a finished prompt."""
    for name, data in history_entry.get("status", {}).get("messages", []):
        if name == event:
            return data
    return None


def saved_files(history_entry: dict, output_dir: Path) -> list[Path]:
    """Files the prompt's output nodes report (SaveVideo, SaveImage...), as paths under output_dir."""
    files = []
    for node_output in history_entry.get("outputs", {}).values():
        for items in node_output.values():
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("type") == "output" and "filename" in item:
                    files.append(output_dir / item.get("subfolder", "") / item["filename"])
    return files
