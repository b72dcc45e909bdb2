"""The pack loads the way ComfyUI loads custom nodes, without ComfyUI present, and never collides
with ComfyUI's top-level modules; workers never import ComfyUI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACK_ROOT = Path(__file__).resolve().parent.parent
COMFY_TOP_LEVEL = ("nodes", "utils", "server", "execution", "app", "comfy", "folder_paths")
# Imported by the UI side these would pull a model stack into ComfyUI's process (PACK: the pack's name).
MODEL_SIDE_PREFIXES = ("ltx_core", "PACK.workers.engine", "PACK.workers.rank")
EXPECTED_NODES = {
    "LTX2MGPULoader",
    "LTX2MGPULoRA",
    "LTX2SPSampler",
    "LTX2TDPUpscaler",
    "LTX2DistributedVAEDecode",
    "LTX2DistributedVAEEncode",
    "LTX2MGPUTextEncode",
}


def test_loads_from_a_folder_named_like_the_repo_as_comfyui_does_without_a_model_stack(tmp_path):
    folder = tmp_path / "custom_nodes" / "ComfyUI-LTX2-MultiGPU"
    folder.parent.mkdir()
    folder.symlink_to(PACK_ROOT, target_is_directory=True)
    script = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        path = {str(folder)!r}
        before = set(sys.modules)
        name = path.replace(".", "_x_")  # ComfyUI 0.33 load_custom_node names the module after its path
        spec = importlib.util.spec_from_file_location(name, path + "/__init__.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        added = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in {COMFY_TOP_LEVEL!r})
        model_side = tuple(p.replace("PACK", name) for p in {MODEL_SIDE_PREFIXES!r})
        print(json.dumps({{"nodes": sorted(module.NODE_CLASS_MAPPINGS), "names": module.NODE_DISPLAY_NAME_MAPPINGS,
                           "added": added, "categories": sorted({{c.CATEGORY for c in module.NODE_CLASS_MAPPINGS.values()}}),
                           "model_side": sorted(m for m in sys.modules if m.startswith(model_side)),
                           "has_manager": name + ".workers.group.manager" in sys.modules}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert EXPECTED_NODES <= set(report["nodes"])
    assert report["added"] == [], "importing the pack pulled in modules named like ComfyUI's"
    # The UI side loads no model stack (docs/DESIGN.md, "Rooms"); has_manager: the check sees our names.
    assert report["has_manager"] and report["model_side"] == [], (
        f"loading the pack imported {report['model_side']}"
    )
    assert report["categories"] == ["LTX-2 MultiGPU"]
    assert report["names"]["LTX2SPSampler"] == "SP Sampler"


@pytest.mark.parametrize("name", sorted(EXPECTED_NODES))
def test_node_inputs_are_typed_with_tooltips_and_limits(name):
    import ltx2_mgpu

    cls = ltx2_mgpu.NODE_CLASS_MAPPINGS[name]
    spec = cls.INPUT_TYPES()
    assert cls.FUNCTION and cls.RETURN_TYPES and cls.CATEGORY
    for section in ("required", "optional"):
        for input_name, entry in spec.get(section, {}).items():
            kind = entry[0]
            options = entry[1] if len(entry) > 1 else {}
            if kind in ("INT", "FLOAT"):
                assert "min" in options and "max" in options, f"{name}.{input_name} has no limits"
            assert isinstance(options, dict), f"{name}.{input_name}"


def test_workers_never_import_comfyui(make_group):
    group = make_group("cpu:1")
    assert group.run("ping")[0]["comfyui_modules"] == []


def test_unload_models_stops_the_group(monkeypatch, make_group):
    import types

    from ltx2_mgpu.nodes import comfy
    from ltx2_mgpu.workers.group.manager import GroupManager

    mm = types.ModuleType("comfy.model_management")
    calls = []
    mm.unload_all_models = lambda: calls.append("native")
    monkeypatch.setitem(sys.modules, "comfy.model_management", mm)
    manager = GroupManager()
    group = make_group("cpu:1")
    manager._group = group
    assert comfy.install_unload_hook(manager.unload)
    assert not comfy.install_unload_hook(manager.unload), "the hook must be installed once"
    mm.unload_all_models()
    assert calls == ["native"]
    assert not group.is_alive and manager.group is None
