"""The CLI and the workers never have the checkout's folder on sys.path (NOTE [pack folder] in
workers/wire/pack_folder.py): there our kernels/ shadows Hugging Face's `kernels`, which transformers
>= 5.25 imports ("cannot import name 'CUDAProperties' from 'kernels'"), and nodes/ or workers/ would
shadow any package of those names. The checks below look at sys.path and at where the names resolve,
so they fail whether or not Hugging Face's kernels is installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import no_bytecode_beside_sources

from ltx2_mgpu.workers.wire.pack_folder import PACK_ROOT, is_pack_folder

# Our subpackages whose names an installed package may carry.
SHADOWING_NAMES = ("kernels", "nodes", "workers")

# Loaded by Python at start-up (a sitecustomize on PYTHONPATH); at exit it writes what the process
# ended with: its sys.path and where the names above resolve.
PROBE = """
import atexit, importlib.util, json, os, sys

def _report():
    found = {}
    for name in NAMES:
        spec = importlib.util.find_spec(name)
        found[name] = None if spec is None else [spec.origin, *(spec.submodule_search_locations or [])]
    with open(os.environ["PACK_FOLDER_PROBE"], "w") as f:
        json.dump({"sys_path": sys.path, "found": found}, f)

atexit.register(_report)
"""


def is_our_subpackage(place: str | None, name: str) -> bool:
    """`place` lies in our own subfolder `name` (kernels/, nodes/, workers/): the name is shadowed. A
    package installed into a virtual environment inside the checkout (.venv/, as CI makes one) is not."""
    return bool(place) and Path(place).resolve().is_relative_to(PACK_ROOT / name)


def places_in_the_pack(report: dict) -> list[str]:
    """sys.path entries that are the pack's folder, and names that resolve to our own subfolders."""
    wrong = [f"sys.path has {entry!r}" for entry in report["sys_path"] if is_pack_folder(entry)]
    for name, places in report["found"].items():
        wrong += [f"{name} resolves to {p}" for p in places or [] if is_our_subpackage(p, name)]
    return wrong


def run_probed(command: list[str], tmp_path: Path) -> dict:
    """Run `command` from the checkout root with the checkout on PYTHONPATH too (PYTHONPATH=. as a
    developer might set it), the probe loaded first; return the probe's report."""
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "sitecustomize.py").write_text(f"NAMES = {SHADOWING_NAMES!r}\n{PROBE}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(probe_dir), str(PACK_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env["PACK_FOLDER_PROBE"] = str(tmp_path / "report.json")
    env = no_bytecode_beside_sources(env)
    done = subprocess.run(command, cwd=PACK_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((tmp_path / "report.json").read_text())


def test_the_probe_sees_the_folder_where_python_puts_it(tmp_path):
    """Without our entry points the folder is there and shadows: the check below can fail."""
    report = run_probed([sys.executable, "-c", "pass"], tmp_path)
    assert any("kernels resolves to" in line for line in places_in_the_pack(report)), report


def _console_script() -> Path:
    script = Path(sys.executable).with_name("ltx2-mgpu")
    if not script.is_file():
        pytest.skip(f"no ltx2-mgpu script beside {sys.executable} (pip install -e . puts it there)")
    return script


@pytest.mark.parametrize("entry", ["python -m ltx2_mgpu.cli", "ltx2-mgpu"])
def test_the_cli_run_from_the_checkout_root_keeps_the_folder_off_sys_path(entry, tmp_path):
    start = (
        [sys.executable, "-m", "ltx2_mgpu.cli"] if entry.startswith("python") else [str(_console_script())]
    )
    report = run_probed([*start, "doctor"], tmp_path)
    assert places_in_the_pack(report) == []


def test_workers_keep_the_folder_off_sys_path(make_group, monkeypatch):
    """A UI process started with the checkout on PYTHONPATH passes it to the workers (they inherit the
    environment); the worker entry takes it off before the engines import transformers."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PACK_ROOT), os.environ.get("PYTHONPATH", "")]))
    group = make_group("cpu:1")
    (reply,) = group.run("ping", {})
    assert [entry for entry in reply["sys_path"] if is_pack_folder(entry)] == []
    assert reply["sys_path"], "the worker reported no sys.path: the check above checks nothing"


def test_this_test_process_has_the_folder_off_sys_path():
    """tests/conftest.py does it for the session (pytest puts a checkout whose folder name is no
    identifier there); a test that imports transformers then gets Hugging Face's kernels."""
    assert [entry for entry in sys.path if is_pack_folder(entry)] == []
    spec = importlib.util.find_spec("kernels")
    assert spec is None or not is_our_subpackage(spec.origin, "kernels"), spec
