"""The committed benchmark results are for readers of the repository: a path of the machine that ran
them (where its ComfyUI or its output folder was) means nothing there, so neither the reports nor the
commands they record carry one (bench/bench_report.py writes absolute paths by name)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ltx2_mgpu.workers.wire.pack_folder import PACK_ROOT

RESULTS = sorted((PACK_ROOT / "bench" / "results").glob("*.json"))


def _bench_report():
    spec = importlib.util.spec_from_file_location("bench_report", PACK_ROOT / "bench" / "bench_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_there_are_results_to_check():
    assert len(RESULTS) >= 10, RESULTS


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_a_committed_result_names_no_path_of_the_machine_that_ran_it(path):
    report = json.loads(path.read_text())
    words = (word.strip("'\",=") for text in _strings(report) for word in text.split())
    absolute = [word for word in words if len(word) > 1 and Path(word).is_absolute()]  # not "a / b"
    assert absolute == [], f"{path.name}: {absolute}"


def test_the_recorded_command_names_paths_by_name(tmp_path):
    out = tmp_path / "result.json"
    report = _bench_report().finish(
        {"x": 1}, out, ["--comfyui", "/opt/ComfyUI", "--out", str(out), "--n", "2"]
    )
    assert report["command"].endswith("--comfyui ComfyUI --out result.json --n 2"), report["command"]
    assert json.loads(out.read_text())["command"] == report["command"]
