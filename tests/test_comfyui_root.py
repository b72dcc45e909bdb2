"""Which ComfyUI the workers import: found in order, and refused with the path, version and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx2_mgpu.workers.wire import comfyui_root as cr


def fake_comfyui(base: Path, version: str | None = "0.20.1", ltx: bool = False) -> Path:
    (base / "comfy").mkdir(parents=True)
    (base / "main.py").write_text("")
    if version is not None:
        (base / "comfyui_version.py").write_text(f'__version__ = "{version}"\n')
    if ltx:
        target = base / cr.LTX_FILES["LTX-2"]
        target.parent.mkdir(parents=True)
        target.write_text("")
    return base


def test_a_folder_that_is_not_comfyui_is_refused_with_its_path(tmp_path):
    with pytest.raises(cr.ComfyUIUnusable, match=r"COMFYUI_PATH points at .*not a ComfyUI folder"):
        cr.check_comfyui_root(tmp_path)


def test_a_comfyui_without_ltx2_is_refused_with_its_version(tmp_path):
    root = fake_comfyui(tmp_path / "old", version="0.3.40")
    with pytest.raises(
        cr.ComfyUIUnusable, match=r"version 0\.3\.40\) has no LTX-2 support.*0\.33\.0 or newer"
    ):
        cr.check_comfyui_root(root)


def test_a_comfyui_with_ltx2_is_accepted(tmp_path):
    root = fake_comfyui(tmp_path / "new", version="0.38.2", ltx=True)
    assert cr.check_comfyui_root(root) == cr.ComfyUIRoot(str(root.resolve()), "0.38.2")


def test_named_root_wins_over_the_custom_nodes_parent_and_a_bad_one_is_an_error(tmp_path, monkeypatch):
    parent = fake_comfyui(tmp_path / "ComfyUI", ltx=True)
    pack = parent / "custom_nodes" / "pack"
    pack.mkdir(parents=True)
    monkeypatch.delenv(cr.COMFYUI_PATH_ENV, raising=False)
    monkeypatch.delitem(__import__("sys").modules, "comfy", raising=False)
    assert cr.find_comfyui_root(pack).path == str(parent.resolve())
    other = fake_comfyui(tmp_path / "other", ltx=True)
    monkeypatch.setenv(cr.COMFYUI_PATH_ENV, str(other))
    assert cr.find_comfyui_root(pack).path == str(other.resolve())
    monkeypatch.setenv(cr.COMFYUI_PATH_ENV, str(tmp_path / "missing"))
    with pytest.raises(cr.ComfyUIUnusable, match="missing"):
        cr.find_comfyui_root(pack)


def test_no_comfyui_anywhere_means_none(tmp_path, monkeypatch):
    monkeypatch.delenv(cr.COMFYUI_PATH_ENV, raising=False)
    monkeypatch.delitem(__import__("sys").modules, "comfy", raising=False)
    assert cr.find_comfyui_root(tmp_path) is None
