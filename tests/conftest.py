"""Shared fixtures: the embedded tiny model, worker groups that clean up after themselves, and the
leak checks every group test ends with (nothing left in /dev/shm, no worker process left)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

# Before torch loads OpenMP (read once per process; every process the suite starts inherits it): idle
# OpenMP threads sleep instead of spinning. The suite runs several CPU ranks, ComfyUI servers and the
# test process on two cores, where spinning threads take the cores from the process with work to do:
# about 8% of the wall time of the rank-heavy modules (docs/DEVELOPERS.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Bytecode for every Python the suite starts (ComfyUI servers, fork servers, benches), kept outside the
# checkout and outside ComfyUI: ComfyUI's folder is read-only in CI, so each of the 60-70 processes that
# import it compiled its modules again (about 0.6 s of CPU each). A process asked not to write bytecode
# still reads it from here.
os.environ.setdefault(
    "PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"ltx2-mgpu-tests-pycache-{os.getuid()}")
)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the children fill the folder above

import psutil
import pytest
import torch

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import parse_devices
from ltx2_mgpu.workers.group.manager import get_manager
from ltx2_mgpu.workers.wire import shm
from ltx2_mgpu.workers.wire.pack_folder import PACK_ROOT, keep_pack_folder_off_sys_path

# The ComfyUI the comfyui-marked tests run against: COMFYUI_PATH, else a checkout beside this one
# (where CI lays the pinned ComfyUI 0.33). Set before collection so every test sees the same root.
SIBLING_COMFYUI = Path(__file__).resolve().parents[2] / "shared" / "comfyui"
if not os.environ.get("COMFYUI_PATH") and (SIBLING_COMFYUI / "main.py").is_file():
    os.environ["COMFYUI_PATH"] = str(SIBLING_COMFYUI)


@pytest.fixture(autouse=True, scope="session")
def _checkout_folder_off_sys_path() -> None:
    """The checkout is a package (ComfyUI loads its __init__.py), so pytest sets it up as one before the
    first test's fixtures; for a folder whose name is no Python identifier it imports that __init__.py
    as a top-level module and leaves the folder on sys.path, where our subpackages would shadow
    installed ones (NOTE [pack folder] in workers/wire/pack_folder.py). (Autouse and session-wide: set
    up before any other fixture, after the package.)"""
    keep_pack_folder_off_sys_path()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """How many test processes `-n auto` (pyproject's addopts) starts, each taking whole modules.

    Two on a machine with two or more cores and no GPU: most calls on the tiny models are Python-bound
    (one core), so two modules side by side keep both cores busy. The whole suite took 850 s in two
    processes against 1,231 s in one on the 2-core CI machine (docs/DEVELOPERS.md); more processes are
    unmeasured, and each holds its own ComfyUI servers and worker groups in memory. One process (0: no
    workers) where torch sees a GPU (GPU tests share the devices and print figures) and under `-s`
    (the figures the tests print reach the terminal only from this process).
    PYTEST_XDIST_AUTO_NUM_WORKERS overrides; `-n N` on the command line too."""
    value = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    if value.isdigit():
        return int(value)
    if config.getoption("capture") == "no" or torch.cuda.is_available() or (os.cpu_count() or 1) < 2:
        return 0
    return 2


def pytest_collection_modifyitems(config, items):
    has_gpu = torch.cuda.is_available()
    gpus = torch.cuda.device_count()
    comfy = os.environ.get("COMFYUI_PATH")
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "multigpu" in item.keywords and gpus < 2:
            item.add_marker(pytest.mark.skip(reason="needs at least 2 GPUs"))
        if "comfyui" in item.keywords and not comfy:
            item.add_marker(pytest.mark.skip(reason="set COMFYUI_PATH to a ComfyUI checkout to run"))


@pytest.fixture(autouse=True, scope="module")
def _no_comfyui_left_for_the_next_module() -> Iterator[None]:
    """A module that imports ComfyUI into this process (the loader's MODEL output builds ComfyUI's model
    class here) must not leave it to the next: our nodes resolve file names through ComfyUI's
    folder_paths whenever it is imported, as inside ComfyUI, and tests that pass plain paths then fail."""
    before, path_before = set(sys.modules), list(sys.path)
    yield
    raw = os.environ.get("COMFYUI_PATH", "")
    if not raw:
        return
    from comfyui_harness import _is_under

    root = Path(raw).expanduser().resolve()
    added = set(sys.modules) - before
    # By place, and by name: stand-ins such as the demo's comfy.nested_tensor (no file) count too.
    removed = {n for n in added if _is_under(sys.modules[n], root) or n.split(".")[0] in COMFYUI_TOP_LEVEL}
    # And our modules that hold those at module level (nodes/group_model/model.py imports comfy.*): left
    # in place, the next module's ComfyUI would mix with this one's classes and settings.
    # (ComfyUI's own modules are gone from sys.modules by now when comfyui_in_process imported them.)
    while holders := {n for n in added - removed if _holds_comfyui(sys.modules[n], root, removed)}:
        removed |= holders
    for name in removed:
        del sys.modules[name]
    # The rank bootstrap (import_comfyui, called in-process by benches and make-tiny) puts the root on
    # sys.path and remembers it imported ComfyUI; with its modules gone, both must go too, or the next
    # module's imports of comfy.* / folder_paths reach the real ComfyUI behind its stand-ins.
    sys.path[:] = [p for p in sys.path if p in path_before or not _is_dir_of(p, root)]
    for name, module in list(sys.modules.items()):
        if name.endswith(".engine.comfy.bootstrap") and "comfy.model_management" not in sys.modules:
            module._imported = None


def _holds_comfyui(module: types.ModuleType, root: Path, removed: set[str]) -> bool:
    """Whether `module` holds, at module level, a ComfyUI module or a class or function of one (or of a
    module being removed): ComfyUI's samplers test isinstance against their own classes, and a model
    built from another import of ComfyUI fails those tests silently (a flow model sampled as eps)."""
    from comfyui_harness import _is_under

    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            if value.__name__ in removed or _is_under(value, root):
                return True
        elif isinstance(value, type | types.FunctionType):
            owner = getattr(value, "__module__", None)
            owner = owner if isinstance(owner, str) else ""  # `type` itself has a descriptor there
            if owner in removed or owner.split(".")[0] in COMFYUI_TOP_LEVEL:
                return True
    return False


# ComfyUI's top-level modules and packages (under its root, imported by name).
COMFYUI_TOP_LEVEL = {"comfy", "comfy_extras", "comfy_api", "comfy_execution", "comfy_config", "folder_paths",
                     "node_helpers", "latent_preview", "nodes", "server", "execution"}  # fmt: skip


def _is_dir_of(entry: str, root: Path) -> bool:
    try:
        return Path(entry).resolve() == root
    except OSError:
        return False


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The embedded tiny LTX-2 (checkpoint + spatial upscaler), made once per test session."""
    from ltx2_mgpu.workers.embedded.tiny_model import make_tiny

    return make_tiny(tmp_path_factory.mktemp("tiny"))


def needs_comfyui(what: str) -> None:
    """Skip, saying why, when no ComfyUI is set (a fresh clone: tests need it for `what`)."""
    if not os.environ.get("COMFYUI_PATH"):
        pytest.skip(f"set COMFYUI_PATH to a ComfyUI checkout to run: {what}")


def make_tiny_cli(family: str, out: Path) -> None:
    """`python -m ltx2_mgpu.cli make-tiny --family <family> <out>` run as the README says, from the
    checkout's root (NOTE [pack folder]), in a subprocess: it imports ComfyUI's model code, which must
    not stay in this process (our nodes look for ComfyUI in sys.modules)."""
    cmd = [sys.executable, "-m", "ltx2_mgpu.cli", "make-tiny", "--family", family, str(out)]
    done = subprocess.run(cmd, cwd=PACK_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="session")
def tiny25(tmp_path_factory):
    """The tiny LTX-2.5 split files (ComfyUI's models/ layout), made once per session by make-tiny.
    Shared by every module: read them, never write beside them."""
    from ltx2_mgpu.workers.embedded.tiny_ltx25 import make_tiny_ltx25_paths

    needs_comfyui("the tiny LTX-2.5 is built with ComfyUI's classes")
    out = tmp_path_factory.mktemp("tiny25")
    make_tiny_cli("2.5", out)
    return make_tiny_ltx25_paths(out, seed=0)


@pytest.fixture(scope="session")
def tiny23(tmp_path_factory) -> types.SimpleNamespace:
    """The tiny LTX-2.3 made once per session by make-tiny, in ComfyUI's model folders under the released
    names (workers/embedded/released.py): `files` (TinyLTX23Files: checkpoint, both spatial upscalers),
    `checkpoint`, `gemma` (the tiny Gemma 3), `lora` and `text_lora`; `released` maps every
    "<folder>/<name>" make-tiny wrote to its path. Shared by every module: read them, never write beside
    them (link them into a folder of your own to add files or give them other names)."""
    from ltx2_mgpu.workers.embedded import tiny_ltx23
    from ltx2_mgpu.workers.embedded.released import RELEASED_LTX23

    needs_comfyui("the tiny LTX-2.3 is built with ComfyUI's classes")
    out = tmp_path_factory.mktemp("tiny23")
    make_tiny_cli("2.3", out)
    released = {f"{folder}/{name}": out / folder / name for folder, name in RELEASED_LTX23}
    at: dict[str, Path] = {}
    for (folder, name), role in RELEASED_LTX23.items():
        at.setdefault(role, out / folder / name)  # the dev checkpoint before the distilled slot
    files = tiny_ltx23.TinyLTX23Files(
        at["checkpoint"], at["spatial_upscaler_x2"], at["spatial_upscaler_x15"], seed=0
    )
    return types.SimpleNamespace(
        files=files,
        checkpoint=files.checkpoint,
        gemma=at["gemma"],
        lora=at["lora"],
        text_lora=at["text_lora"],
        released=released,
    )


@pytest.fixture(scope="session")
def _workflow_server_for_the_session(tiny, tmp_path_factory) -> Iterator:
    needs_comfyui("the example workflows run in a real ComfyUI")
    from workflow_server import start_workflow_server

    server = start_workflow_server(tmp_path_factory.mktemp("workflow-server"), tiny)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def workflow_server(_workflow_server_for_the_session) -> Iterator:
    """The ComfyUI server every module that runs example workflows shares (tests/workflow_server.py):
    started once per session; at this module's end its groups are unloaded (no worker, no segment)."""
    yield _workflow_server_for_the_session
    _workflow_server_for_the_session.unload_models()


def worker_children() -> list[psutil.Process]:
    """Live worker processes started by this test process (zombies excluded)."""
    from comfyui_harness import is_live_worker

    return [child for child in psutil.Process().children(recursive=True) if is_live_worker(child)]


def assert_no_leaks(timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (worker_children() or shm.list_segments(os.getpid())):
        time.sleep(0.1)
    assert worker_children() == [], "worker processes were left behind"
    assert shm.list_segments(os.getpid()) == [], "shared-memory segments were left in /dev/shm"


@contextlib.contextmanager
def rank_threads(ranks: int) -> Iterator[None]:
    """Run a native reference at the CPU thread count of one of `ranks` CPU workers (launcher.Placement
    splits the cores between them). oneDNN splits a convolution's or matmul's sums per thread, so 2
    against 1 thread moves float32 results by ~1e-6 of their largest value, and on the int8 convrot
    file, whose layers round activations to int8, by 4e-2 (measured on 2 cores: NOTE in
    test_comfy_ltx25_nodes.test_native_int8_convrot_is_discontinuous_at_float32_rounding)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(parse_devices(f"cpu:{ranks}").threads_per_rank())
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@pytest.fixture
def make_group() -> Iterator[Callable[..., WorkerGroup]]:
    """Start groups on demand; every one is stopped at the end and leaks are checked."""
    groups: list[WorkerGroup] = []

    def start(devices: str = "cpu:2", comfyui_root: str | None = None, **settings: float) -> WorkerGroup:
        # The ComfyUI the tests load from (None: COMFYUI_PATH's, as the requests name it), so CPU workers
        # are forked with it imported (NOTE [fork server]); "" for none.
        if comfyui_root is None:
            comfyui_root = (
                str(Path(os.environ["COMFYUI_PATH"]).resolve()) if os.environ.get("COMFYUI_PATH") else ""
            )
        group = WorkerGroup(parse_devices(devices), comfyui_root=comfyui_root)
        for name, value in settings.items():
            setattr(group, name, value)
        groups.append(group.start())
        return group

    yield start
    for group in groups:
        group.stop()
    assert_no_leaks()


@pytest.fixture
def manager() -> Iterator:
    """The process-wide group manager, unloaded (group stopped) after the test."""
    m = get_manager()
    yield m
    m.unload()
    assert_no_leaks()


def tiny_conditioning(tokens: int, width: int, seed: int, frame_rate: float = 25.0) -> list:
    """CONDITIONING in the form ComfyUI's LTX-2 text encoding gives (unprocessed features)."""
    g = torch.Generator().manual_seed(seed)
    return [
        [
            torch.randn(1, tokens, width, generator=g),
            {"unprocessed_ltxav_embeds": True, "frame_rate": frame_rate},
        ]
    ]


@pytest.fixture
def tiny_path(tiny) -> Path:
    return tiny.checkpoint


class NestedStandIn:
    """What comfy.nested_tensor.NestedTensor offers the nodes: is_nested and tensors."""

    is_nested = True

    def __init__(self, tensors):
        self.tensors = list(tensors)


@pytest.fixture
def fake_comfy(monkeypatch):
    """Just enough of ComfyUI for the nodes: nested tensors and the interrupt machinery.
    Returns (state, InterruptProcessingException); set state["interrupt"] to press Cancel."""
    state = {"interrupt": False}

    class InterruptProcessingException(Exception):
        pass

    mm = types.ModuleType("comfy.model_management")
    mm.processing_interrupted = lambda: state["interrupt"]
    mm.InterruptProcessingException = InterruptProcessingException

    def throw():
        if state["interrupt"]:
            state["interrupt"] = False
            raise InterruptProcessingException()

    mm.throw_exception_if_processing_interrupted = throw
    nested = types.ModuleType("comfy.nested_tensor")
    nested.NestedTensor = NestedStandIn
    monkeypatch.setitem(sys.modules, "comfy", types.ModuleType("comfy"))
    monkeypatch.setitem(sys.modules, "comfy.model_management", mm)
    monkeypatch.setitem(sys.modules, "comfy.nested_tensor", nested)
    return state, InterruptProcessingException


def _rank_then_exit(rank: int, env: dict[str, str], fn, *args: object) -> None:
    """Run fn(rank, *args) under the test's environment `env` (a forked rank has the fork server's),
    then end the process as the pack's workers do (workers/rank/entry.py): os._exit once the output is
    flushed, skipping interpreter teardown, where gloo's destructors can abort a finished rank
    ("terminate called without an active exception", seen once in a CI run on the loaded 2-core
    machine). A raised error still reaches torch.multiprocessing's error file."""
    os.environ.clear()
    os.environ.update(env)
    fn(rank, *args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _ensure_fork_server() -> None:
    """Start multiprocessing's fork server with tests/rank_preload.py imported (it finds tests/ on
    PYTHONPATH: the server does not take this process's sys.path for its preloads)."""
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.set_forkserver_preload(["rank_preload"])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), saved]))
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def run_ranks(fn, world_size: int, tmp_path: Path, *args: object, timeout_s: float) -> None:
    """Run fn(rank, world_size, init_file, *args) in `world_size` processes (torch.multiprocessing);
    re-raise a failure, and kill them and fail when they take longer than `timeout_s`.

    Where torch sees no GPU, the processes are forked from multiprocessing's fork server, which has
    imported torch and ComfyUI's model side once (tests/rank_preload.py); else spawned (a child forked
    after CUDA was touched cannot use it)."""
    import torch.multiprocessing as mp

    method = "spawn" if torch.cuda.is_available() else "forkserver"
    if method == "forkserver":
        _ensure_fork_server()
    init_file = tmp_path / f"rdzv-{fn.__name__}-{world_size}"
    ctx = mp.start_processes(
        _rank_then_exit,
        args=(dict(os.environ), fn, world_size, str(init_file), *args),
        nprocs=world_size,
        join=False,
        start_method=method,
    )
    for _ in range(int(timeout_s)):
        if ctx.join(timeout=1.0):
            return
    for process in ctx.processes:
        if process.is_alive():
            process.kill()
    raise AssertionError(f"{fn.__name__} with {world_size} ranks did not finish in {timeout_s} s")


@pytest.fixture(scope="session")
def lora_files(tiny, tmp_path_factory) -> dict[str, Path]:
    """The tiny checkpoint, its fp8 variant, a LoRA (rank 4) and one with alpha (rank 8, alpha 4)."""
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_fp8, make_tiny_lora

    folder = tmp_path_factory.mktemp("lora")
    return {
        "checkpoint": tiny.checkpoint,
        "fp8": make_tiny_fp8(tiny.checkpoint, folder / "ltx2-tiny-fp8.safetensors"),
        "lora": make_tiny_lora(folder / "tiny-lora.safetensors", tiny.checkpoint, rank=4, seed=1),
        "alpha": make_tiny_lora(
            folder / "tiny-lora-alpha.safetensors", tiny.checkpoint, rank=8, seed=2, alpha=4.0
        ),
    }
