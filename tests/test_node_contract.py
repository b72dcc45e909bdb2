"""Node ids, input names, their order and types are a public contract: saved workflows keep widget
values by position, and API-format prompts by name. This test compares the nodes with the snapshot in
tests/node_contract.json and allows only what keeps every saved workflow loading:

- a node id never disappears;
- widgets keep their name, type and order, new ones appended at the end of "optional" (an old
  workflow's shorter widget value list then maps onto the same names, and the new input takes its
  default);
- sockets (links, restored by name) keep their name and type; a required socket may become optional
  (the SP Sampler's prompts, which a GUIDER replaces), never the reverse; new ones are optional;
- existing outputs keep their position and type.

To change the contract otherwise, write a migration that rewrites old workflows (and a test that loads
an old one), then regenerate the snapshot: `COMFYUI_PATH=... python tests/test_node_contract.py --update`.

The nodes are read as ComfyUI reads them: the V3 classes (nodes/v3/) through ComfyUI's comfy_api, in
the form /object_info serves (INPUT_TYPES, RETURN_TYPES).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from comfyui_harness import pack_node_classes

pytestmark = pytest.mark.comfyui

SNAPSHOT = Path(__file__).with_name("node_contract.json")


def describe() -> dict:
    nodes = {}
    for node_id, cls in sorted(pack_node_classes().items()):
        spec = cls.INPUT_TYPES()
        inputs = []
        for section in ("required", "optional"):
            for name, entry in spec.get(section, {}).items():
                kind = entry[0] if isinstance(entry[0], str) else "COMBO"  # V1's form of a combo: its list
                inputs.append([section, name, kind])
        nodes[node_id] = {"inputs": inputs, "outputs": list(cls.RETURN_TYPES)}
    return nodes


def test_node_contract_only_grows():
    saved = json.loads(SNAPSHOT.read_text())
    current = describe()
    for node_id, old in saved.items():
        assert node_id in current, f"node {node_id} was removed; saved workflows use it"
        new = current[node_id]
        widgets_then, widgets_now = _widgets(old), _widgets(new)
        assert widgets_now[: len(widgets_then)] == widgets_then, (
            f"{node_id}: widgets changed name, type or order; saved workflows keep their values by position.\n"
            f"was: {widgets_then}\nnow: {widgets_now}"
        )
        now_by_name = {name: (section, kind) for section, name, kind in new["inputs"]}
        for section, name, kind in old["inputs"]:
            assert name in now_by_name, f"{node_id}: input {name!r} was removed"
            assert now_by_name[name][1] == kind, f"{node_id}: input {name!r} changed type"
            assert not (section == "optional" and now_by_name[name][0] == "required"), (
                f"{node_id}: optional input {name!r} became required (old workflows may lack it)"
            )
        old_names = {name for _, name, _ in old["inputs"]}
        for section, name, _ in new["inputs"]:
            assert name in old_names or section == "optional", (
                f"{node_id}: new input {name!r} must be optional (old workflows lack it)"
            )
        assert new["outputs"][: len(old["outputs"])] == old["outputs"], f"{node_id}: outputs changed"


def _widgets(node: dict) -> list:
    return [entry for entry in node["inputs"] if entry[2] not in _SOCKETS]


def test_old_ui_workflows_map_onto_current_widgets():
    """Every widget value of the shipped example workflows still lands on an input of the same name."""
    folder = Path(__file__).resolve().parent.parent / "example_workflows"
    saved = json.loads(SNAPSHOT.read_text())
    current = describe()
    for path in sorted(folder.glob("*.json")):
        for node in json.loads(path.read_text())["nodes"]:
            if node["type"] not in current:
                continue
            widgets_then = [n for s, n, k in saved[node["type"]]["inputs"] if k not in _SOCKETS]
            widgets_now = [n for s, n, k in current[node["type"]]["inputs"] if k not in _SOCKETS]
            assert widgets_now[: len(widgets_then)] == widgets_then, (
                f"{path.name}: {node['type']} widgets moved"
            )


_SOCKETS = {
    "MGPU_MODEL",
    "CONDITIONING",
    "LATENT",
    "SIGMAS",
    "IMAGE",
    "AUDIO",
    "VIDEO",
    "VAE",
    "CLIP",
    "MODEL",
    "GUIDER",
}


if __name__ == "__main__" and "--update" in sys.argv:
    SNAPSHOT.write_text(json.dumps(describe(), indent=1) + "\n")
    print(f"wrote {SNAPSHOT}")
