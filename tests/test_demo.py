"""`ltx2-mgpu demo`, the README's first command, end to end on the embedded tiny model: two CPU workers,
the two-stage job, an mp4 with audio, stage 1 within the demo's own parity bound, nothing left behind.
The node outputs it unpacks are the ones a workflow links to, so a changed node signature breaks this."""

from __future__ import annotations

import os

import pytest

from conftest import worker_children
from ltx2_mgpu.cli import main
from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV
from ltx2_mgpu.workers.wire.config import SHM_PREFIX


@pytest.mark.parametrize("engine", ["ltxcore", "comfy"])
def test_demo_writes_the_video_and_leaves_nothing_running(engine, tmp_path, monkeypatch, capsys):
    if engine == "ltxcore":
        monkeypatch.delenv(COMFYUI_PATH_ENV, raising=False)  # a fresh clone: no ComfyUI beside it
    elif not os.environ.get(COMFYUI_PATH_ENV):
        pytest.skip("needs COMFYUI_PATH")
    shm_before = set(os.listdir("/dev/shm"))
    status = main(["demo", "--out", str(tmp_path), "--devices", "cpu:2"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "(ok)" in printed and "audio yes" in printed
    assert ("backend: ComfyUI" in printed) == (engine == "comfy")
    assert list(tmp_path.rglob("*.mp4"))
    assert worker_children() == []
    assert not {n for n in set(os.listdir("/dev/shm")) - shm_before if n.startswith(SHM_PREFIX)}
