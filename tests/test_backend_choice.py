"""Which backend a recipe runs on (workers/wire/backend.py), decided in the UI process before any
worker starts. No ComfyUI import: a folder with ComfyUI's layout is enough for the choice."""

from __future__ import annotations

import pytest

from ltx2_mgpu.workers.wire.backend import ENV_BACKEND, choose_backend
from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV, LTX_FILES, ComfyUIUnusable


def fake_comfyui(folder, version="0.33.0", ltx=True):
    (folder / "comfy").mkdir(parents=True)
    (folder / "main.py").write_text("")
    (folder / "comfyui_version.py").write_text(f'__version__ = "{version}"\n')
    if ltx:
        path = folder / LTX_FILES["LTX-2"]
        path.parent.mkdir(parents=True)
        path.write_text("")
    return folder


@pytest.fixture
def pack(tmp_path, monkeypatch):
    """A pack outside any ComfyUI, with no COMFYUI_PATH and no forced backend."""
    monkeypatch.delenv(COMFYUI_PATH_ENV, raising=False)
    monkeypatch.delenv(ENV_BACKEND, raising=False)
    root = tmp_path / "ComfyUI-LTX2-MultiGPU"
    root.mkdir()
    return root


def test_no_comfyui_runs_ltxcore(pack):
    choice = choose_backend(pack)
    assert (choice.backend, choice.root) == ("ltxcore", None)
    assert "no ComfyUI found" in choice.reason


def test_comfyui_path_selects_comfy_for_mode_comfyui_only(pack, tmp_path, monkeypatch):
    root = fake_comfyui(tmp_path / "ComfyUI")
    monkeypatch.setenv(COMFYUI_PATH_ENV, str(root))
    choice = choose_backend(pack, mode="comfyui")
    assert (choice.backend, choice.root_path, choice.root_version) == ("comfy", str(root.resolve()), "0.33.0")
    assert choose_backend(pack, mode="reference").backend == "ltxcore"


def test_pack_inside_custom_nodes_selects_comfy(tmp_path, monkeypatch):
    monkeypatch.delenv(COMFYUI_PATH_ENV, raising=False)
    monkeypatch.delenv(ENV_BACKEND, raising=False)
    root = fake_comfyui(tmp_path / "ComfyUI")
    pack = root / "custom_nodes" / "ComfyUI-LTX2-MultiGPU"
    pack.mkdir(parents=True)
    assert choose_backend(pack).backend == "comfy"


@pytest.mark.parametrize(
    ("layout", "message"),
    [("empty", "not a ComfyUI folder"), ("old", r"version 0\.3\.40\) has no LTX-2 support")],
)
def test_bad_comfyui_path_is_refused_with_path_and_version(pack, tmp_path, monkeypatch, layout, message):
    folder = tmp_path / "named"
    if layout == "empty":
        folder.mkdir()
    else:
        fake_comfyui(folder, version="0.3.40", ltx=False)
    monkeypatch.setenv(COMFYUI_PATH_ENV, str(folder))
    with pytest.raises(ComfyUIUnusable, match=message) as info:
        choose_backend(pack)
    assert str(folder.resolve()) in str(info.value)


def test_forced_backend(pack, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_BACKEND, "comfy")
    with pytest.raises(ValueError, match="no ComfyUI was found"):
        choose_backend(pack)
    monkeypatch.setenv(COMFYUI_PATH_ENV, str(fake_comfyui(tmp_path / "ComfyUI")))
    monkeypatch.setenv(ENV_BACKEND, "ltxcore")
    assert choose_backend(pack).backend == "ltxcore"
    monkeypatch.setenv(ENV_BACKEND, "sometimes")
    with pytest.raises(ValueError, match="not one of auto, comfy, ltxcore"):
        choose_backend(pack)


def test_demo_refuses_a_bad_comfyui_path_before_writing_or_starting_anything(
    pack, tmp_path, monkeypatch, capsys
):
    import argparse

    from conftest import worker_children
    from ltx2_mgpu.demo import run_demo

    monkeypatch.setenv(COMFYUI_PATH_ENV, str(tmp_path / "no-comfyui-here"))
    out = tmp_path / "demo"
    status = run_demo(argparse.Namespace(out=str(out), models=None, devices="cpu:2", runs=1))
    assert status == 2
    assert "no-comfyui-here" in capsys.readouterr().err
    assert not out.exists() and worker_children() == []
