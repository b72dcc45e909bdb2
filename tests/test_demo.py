"""`ltx2-mgpu demo`, the README's first command, end to end on the embedded tiny model: two CPU workers,
the two-stage job, an mp4 with audio, stage 1 within the demo's own parity bound, nothing left behind.
The node outputs it unpacks are the ones a workflow links to, so a changed node signature breaks this.

Without ComfyUI it runs as on a fresh clone: the command itself, from the checkout's root, and every
package it imports (in the CLI process and in the workers) must come with `pip install -e ".[ltxcore]"` (the README's demo line) alone."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from child_env import no_bytecode_beside_sources
from packaging.requirements import Requirement

from conftest import worker_children
from ltx2_mgpu.cli import main
from ltx2_mgpu.workers.wire import shm
from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV
from ltx2_mgpu.workers.wire.pack_folder import PACK_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DEMO_TIMEOUT_S = 600
# Loaded first by every Python process of the run (a sitecustomize on PYTHONPATH, which the workers
# inherit): records each absolute import that our own code does (an import statement in a file under
# ROOT, whether or not another package imported the module before), as "<top-level name> <file>"
# lines, one file per process (a CPU worker forked from the fork server records what it imports after
# the fork; the server, what they share). Third-party packages' own imports are their installers'
# business.
IMPORT_PROBE = """
import builtins, os, sys

ROOT = os.path.realpath(os.environ["DEMO_PACK_ROOT"]) + os.sep
# Installed packages are not ours, even in a virtual environment made inside the checkout (CI's .venv).
INSTALLED = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix)})
OUT = os.environ["DEMO_IMPORTS_DIR"]
_seen = set()
_import = builtins.__import__

def _recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    caller = sys._getframe(0).f_back  # None for an import from C (runpy at start-up)
    if level == 0 and caller is not None:
        importer = caller.f_code.co_filename
        key = (name.partition(".")[0], importer)
        if key not in _seen:
            _seen.add(key)
            # (not "<frozen importlib._bootstrap>", which realpath would put in the current directory)
            where = os.path.realpath(importer) if os.path.isabs(importer) else ""
            if where.startswith(ROOT) and not where.startswith(INSTALLED):
                # (per pid at the time: a forked worker's imports after the fork go to a file of its own)
                with open(os.path.join(OUT, f"{os.getpid()}.txt"), "a") as f:
                    f.write(f"{key[0]} {importer}\\n")
    return _import(name, globals, locals, fromlist, level)

builtins.__import__ = _recording_import
"""


def _check_output(printed: str, out: Path, on_comfyui: bool) -> None:
    assert "(ok)" in printed and "audio yes" in printed, printed
    assert ("backend: ComfyUI" in printed) == on_comfyui, printed
    assert list(out.rglob("*.mp4")), printed


def test_demo_on_comfyui_writes_the_video_and_leaves_nothing_running(tmp_path, capsys):
    if not os.environ.get(COMFYUI_PATH_ENV):
        pytest.skip("needs COMFYUI_PATH")
    status = main(["demo", "--out", str(tmp_path), "--devices", "cpu:2"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    _check_output(printed, tmp_path, on_comfyui=True)
    assert worker_children() == []
    assert shm.list_segments(os.getpid()) == []  # this process's segments only: other runs may share /dev/shm


def test_demo_on_a_fresh_clone_needs_only_the_packages_dependencies(tmp_path):
    """`python -m ltx2_mgpu.cli demo` from the checkout root, no ComfyUI: the mp4, nothing left running
    or in /dev/shm, and no module from outside `pip install -e ".[ltxcore]"`'s dependencies (e.g. the tiny Gemma's
    SentencePiece tokenizer once came only with the test extra)."""
    probe, imports = tmp_path / "probe", tmp_path / "imports"
    probe.mkdir()
    imports.mkdir()
    (probe / "sitecustomize.py").write_text(IMPORT_PROBE)
    tag = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != COMFYUI_PATH_ENV}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(probe), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env |= {"DEMO_IMPORTS_DIR": str(imports), "DEMO_PACK_ROOT": str(PACK_ROOT), "DEMO_RUN_TAG": tag}
    env = no_bytecode_beside_sources(env)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ltx2_mgpu.cli", "demo", "--out", str(out), "--devices", "cpu:2"]
    demo = subprocess.Popen(command, cwd=PACK_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    printed = demo.communicate(timeout=DEMO_TIMEOUT_S)[0].decode(errors="replace")
    assert demo.returncode == 0, printed[-6000:]
    _check_output(printed, out, on_comfyui=False)
    assert _processes_tagged(tag) == [], "the demo left worker processes running"
    assert shm.list_segments(demo.pid) == [], "the demo left shared-memory segments in /dev/shm"

    files = sorted(imports.glob("*.txt"))
    # the demo, and its 2 workers (spawned, or forked from a fork server that recorded what they share)
    assert len(files) >= 3, f"the probe saw {len(files)} processes; the demo runs itself and 2 workers"
    imported: dict[str, str] = {}  # top-level name -> a file of ours that imports it
    for file in files:
        for line in file.read_text().splitlines():
            name, _, importer = line.partition(" ")
            imported.setdefault(name, importer)
    assert {"torch", "safetensors"} <= set(imported), f"the probe recorded too little: {imported}"
    allowed = _dependency_closure()
    outside = {
        f"{name} (from {importer})": sorted(dists)
        for name, importer in imported.items()
        if (dists := _distributions_of(name)) and not dists & allowed
    }
    assert outside == {}, (
        f"the demo imports packages that `pip install -e '.[ltxcore]'` does not install: {outside}"
    )


def _processes_tagged(tag: str, timeout_s: float = 10.0) -> list[int]:
    """Live processes whose environment carries DEMO_RUN_TAG=tag (the demo's workers inherit it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = []
        for process in psutil.process_iter():
            try:
                if process.status() != psutil.STATUS_ZOMBIE and process.environ().get("DEMO_RUN_TAG") == tag:
                    found.append(process.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions_of(module: str) -> set[str]:
    return {_normalized(d) for d in importlib.metadata.packages_distributions().get(module, [])}


def _dependency_closure() -> set[str]:
    """pyproject.toml's [project] name, dependencies and the [ltxcore] extra (the README's demo line
    installs it: the demo's tiny model is ltx-core's), and theirs, transitively: each installed
    distribution's requirements whose markers hold here without an extra."""
    project = tomllib.loads((PACK_ROOT / "pyproject.toml").read_text())["project"]
    closure = {_normalized(project["name"])}
    requirements = project["dependencies"] + project["optional-dependencies"]["ltxcore"]
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = _normalized(requirement.name)
        if name in closure or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        closure.add(name)
        try:
            todo += [Requirement(r) for r in importlib.metadata.requires(name) or []]
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here (a CUDA wheel on a CPU machine): nothing of it can be imported
    return closure
