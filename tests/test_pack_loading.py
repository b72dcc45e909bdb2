"""The pack loads the way ComfyUI loads custom nodes: importing it touches nothing of ComfyUI (and
works without one), ComfyUI's V3 extension call gives the seven nodes and installs the process hooks
(nodes/comfy.py NOTE [process hooks]), nothing collides with ComfyUI's top-level modules; workers
never import ComfyUI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PACK_ROOT = Path(__file__).resolve().parent.parent
COMFY_TOP_LEVEL = ("nodes", "utils", "server", "execution", "app", "comfy", "folder_paths")
# Imported by the UI side these would pull a model stack into ComfyUI's process (PACK: the pack's name).
MODEL_SIDE_PREFIXES = ("ltx_core", "PACK.workers.engine", "PACK.workers.rank")
# Node ids and display names: saved workflows name the ids, users know the names.
EXPECTED_NODES = {
    "LTX2MGPULoader": "MGPU Loader",
    "LTX2MGPULoRA": "MGPU LoRA",
    "LTX2SPSampler": "SP Sampler",
    "LTX2TDPUpscaler": "TDP Upscaler",
    "LTX2DistributedVAEDecode": "Distributed VAE Decode",
    "LTX2DistributedVAEEncode": "Distributed VAE Encode",
    "LTX2MGPUTextEncode": "MGPU Text Encode",
}
WIDGETS = ("COMBO", "INT", "FLOAT", "STRING", "BOOLEAN")
# Imports the pack as ComfyUI 0.33's load_custom_node does (module named after its path), then, when
# argv[1] names a ComfyUI, runs what load_custom_node runs next for a V3 extension: comfy_entrypoint,
# on_load, get_node_list (with comfy.model_management stood in, so on_load sees a ComfyUI process).
# Prints what it found as JSON.
LOAD_SCRIPT = """
import asyncio, importlib.util, inspect, json, signal, sys, types
path, comfyui = sys.argv[1], sys.argv[2]
before = set(sys.modules)
name = path.replace(".", "_x_")
spec = importlib.util.spec_from_file_location(name, path + "/__init__.py")
module = importlib.util.module_from_spec(spec)
sys.modules[name] = module
spec.loader.exec_module(module)
report = {"import_added": sorted(m for m in set(sys.modules) - before if m.split(".")[0] in COMFY_TOP_LEVEL),
          "has_v1_mappings": hasattr(module, "NODE_CLASS_MAPPINGS"),
          "entrypoint_is_async": inspect.iscoroutinefunction(getattr(module, "comfy_entrypoint", None))}
if comfyui:
    sys.path.insert(0, comfyui)
    sys.dont_write_bytecode = True
    from comfy_api.latest import ComfyExtension
    mm = types.ModuleType("comfy.model_management")
    mm.unload_all_models = lambda: None
    sys.modules["comfy.model_management"] = mm
    extension = asyncio.run(module.comfy_entrypoint())
    asyncio.run(extension.on_load())
    schemas = [cls.GET_SCHEMA() for cls in asyncio.run(extension.get_node_list())]
    report.update(is_extension=isinstance(extension, ComfyExtension),
                  names={s.node_id: s.display_name for s in schemas},
                  categories=sorted({s.category for s in schemas}),
                  unload_hooked=getattr(mm.unload_all_models, "_ltx2_mgpu_hooked", False),
                  sigterm_hooked=getattr(signal.getsignal(signal.SIGTERM), "_ltx2_mgpu_exit", False))
model_side = tuple(p.replace("PACK", name) for p in MODEL_SIDE_PREFIXES)
report["model_side"] = sorted(m for m in sys.modules if m.startswith(model_side))
report["has_manager"] = name + ".workers.group.manager" in sys.modules
print(json.dumps(report))
"""


def load_as_comfyui_does(tmp_path: Path, comfyui: str) -> dict:
    folder = tmp_path / "custom_nodes" / "ComfyUI-LTX2-MultiGPU"
    folder.parent.mkdir()
    folder.symlink_to(PACK_ROOT, target_is_directory=True)
    script = (
        f"COMFY_TOP_LEVEL = {COMFY_TOP_LEVEL!r}\nMODEL_SIDE_PREFIXES = {MODEL_SIDE_PREFIXES!r}\n{LOAD_SCRIPT}"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(folder), comfyui], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_pack_as_comfyui_does_imports_nothing_of_comfyui_and_no_model_stack(tmp_path):
    report = load_as_comfyui_does(tmp_path, "")
    assert report["import_added"] == [], "importing the pack pulled in modules named like ComfyUI's"
    # ComfyUI 0.33 takes NODE_CLASS_MAPPINGS over comfy_entrypoint: the pack must not define it.
    assert report["entrypoint_is_async"] and not report["has_v1_mappings"]
    assert report["model_side"] == []


@pytest.mark.comfyui
def test_comfy_entrypoint_gives_the_seven_nodes_and_installs_the_process_hooks(tmp_path):
    from comfyui_harness import comfyui_root

    report = load_as_comfyui_does(tmp_path, str(comfyui_root()))
    assert report["is_extension"]
    assert report["names"] == EXPECTED_NODES
    assert report["categories"] == ["LTX-2 MultiGPU"]
    # The UI side loads no model stack (docs/DESIGN.md, "Rooms"); has_manager: the check sees our names.
    assert report["has_manager"] and report["model_side"] == [], (
        f"loading the pack imported {report['model_side']}"
    )
    assert report["unload_hooked"] and report["sigterm_hooked"]  # on_load (nodes/comfy.py NOTE)


@pytest.mark.comfyui
def test_node_inputs_are_typed_with_tooltips_and_limits():
    from comfyui_harness import pack_node_classes

    nodes = pack_node_classes()
    assert set(nodes) == set(EXPECTED_NODES)
    for name, cls in nodes.items():
        spec = cls.INPUT_TYPES()
        assert cls.RETURN_TYPES and cls.CATEGORY and cls.DESCRIPTION, name
        for section in ("required", "optional"):
            for input_name, (kind, options) in spec.get(section, {}).items():
                if kind in ("INT", "FLOAT"):
                    assert "min" in options and "max" in options, f"{name}.{input_name} has no limits"
                if kind not in WIDGETS or input_name in ("seed", "sampler_name"):
                    continue  # sockets; and seed and sampler as KSampler's, which need no tooltip
                assert options.get("tooltip"), f"{name}.{input_name} has no tooltip"


def test_workers_never_import_comfyui(make_group):
    group = make_group("cpu:1", comfyui_root="")  # a group that was given no ComfyUI to run
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


def test_outside_comfyui_no_process_hook_is_installed():
    import signal

    from ltx2_mgpu.nodes import comfy

    assert "comfy.model_management" not in sys.modules
    before = signal.getsignal(signal.SIGTERM)
    comfy.install_process_hooks()
    assert signal.getsignal(signal.SIGTERM) is before
