"""ComfyUI's official workflow templates as API prompts, for the tests that run them (test support).

The templates (PyPI `comfyui-workflow-templates-json`, pinned below) are UI-format workflows: node
widgets as positional `widgets_values`, links as ids, the real work inside a subgraph
(`definitions.subgraphs`). ComfyUI's server runs API prompts ({id: {class_type, inputs}}), which its
frontend builds with graphToPrompt. `ui_to_prompt` does the same conversion here:
- subgraphs are flattened: an inner node's id becomes "<instance id>:<inner id>" (nested alike); a link
  from the subgraph's input node (-10) follows the instance's outer link, or takes the instance's
  widget value; a link from an instance's output follows the subgraph's output node (-20) inside;
- frontend-only nodes (notes, Reroute, the legacy PrimitiveNode) are dropped, links through them kept;
- muted nodes (mode 2) are dropped with the links from them; bypassed nodes (mode 4) pass their input
  of the link's type through, as the frontend does;
- widget values are named from the server's /object_info: inputs in input_order (required, then
  optional), one extra "control_after_generate" value after an INT/FLOAT that asks for it (seeds), one
  upload-button value after a combo with image_upload, and a V3 dynamic combo's chosen option's inputs
  right after it, named "<combo>.<input>".

The template files are fetched once per cache (pytest's cache folder), never committed: they are the
specification, not ours. Only the standard library here (the server tests run in ComfyUI's venv).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from child_env import no_bytecode_beside_sources

# The release whose LTX-2.3/2.5 templates the tests follow (issue 18). Not a project dependency:
# ComfyUI's requirements pin an older one through comfyui-workflow-templates.
TEMPLATES_PACKAGE = "comfyui-workflow-templates-json"
TEMPLATES_VERSION = "0.1.123"
TEMPLATES_FOLDER = "comfyui_workflow_templates_json/templates"
PIP_TIMEOUT_S = 300

# The frontend's LGraphEventMode values.
MODE_ALWAYS, MODE_NEVER, MODE_BYPASS = 0, 2, 4
# Nodes that exist only in the frontend (no server class).
FRONTEND_ONLY = frozenset({"Note", "MarkdownNote", "Reroute", "PrimitiveNode"})
# The frontend's ids of a subgraph's input and output nodes.
SUBGRAPH_INPUT_ID, SUBGRAPH_OUTPUT_ID = -10, -20
WIDGET_TYPES = frozenset({"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"})
DYNAMIC_COMBO = "COMFY_DYNAMICCOMBO_V3"
UPLOAD_OPTIONS = ("image_upload", "video_upload", "audio_upload")


# ----- the template files ------------------------------------------------------------------------


def templates_cache(pytestconfig, tmp_path_factory) -> Path:
    """pytest's cache folder for the download; a temporary one under `-p no:cacheprovider`."""
    cache = getattr(pytestconfig, "cache", None)
    if cache is None:
        return tmp_path_factory.mktemp("comfyui-workflow-templates")
    return Path(cache.mkdir("comfyui-workflow-templates"))


def fetch_templates(cache_dir: Path, python: str = sys.executable) -> Path:
    """The folder of the pinned release's template JSON files, downloaded with pip into `cache_dir`
    on first use (a wheel from the package index, unpacked there)."""
    folder = cache_dir / f"{TEMPLATES_PACKAGE}-{TEMPLATES_VERSION}"
    templates = folder / TEMPLATES_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    # Test sessions running side by side download once: the first holds the lock, the others wait.
    with open(cache_dir / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not templates.is_dir():
            _download(folder, python)
    return templates


def _download(folder: Path, python: str) -> None:
    spec = f"{TEMPLATES_PACKAGE}=={TEMPLATES_VERSION}"
    command = [
        python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        spec,
        "-d",
        str(folder),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"`{' '.join(command)}` took over {PIP_TIMEOUT_S} s; is the package index reachable?"
        ) from None
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise RuntimeError(
            f"could not download {spec} (the official ComfyUI templates these tests follow): "
            f"`{' '.join(command)}` exited {done.returncode}. The package index must be reachable "
            f"(pip's index settings apply), or put the unpacked wheel under {folder}.\n{done.stderr[-2000:]}"
        )
    with zipfile.ZipFile(wheels[-1]) as wheel:
        wheel.extractall(folder)


def load_template(templates: Path, name: str) -> dict:
    return json.loads((templates / f"{name}.json").read_text())


# A child process, so ComfyUI's modules never load into the test process; prints what /object_info
# would serve for every core node (the two fields the conversion reads).
_OBJECT_INFO_SCRIPT = """
import asyncio, json, sys
from comfy.cli_args import args
args.cpu = True
import nodes
from comfy_api.internal import _ComfyNodeInternal
asyncio.run(nodes.init_extra_nodes(init_custom_nodes=False, init_api_nodes=False))
info = {}
for name, cls in nodes.NODE_CLASS_MAPPINGS.items():
    if issubclass(cls, _ComfyNodeInternal):
        full = cls.GET_NODE_INFO_V1()
        info[name] = {"input": full["input"], "input_order": full["input_order"]}
    else:
        types = cls.INPUT_TYPES()
        info[name] = {"input": types, "input_order": {k: list(v) for k, v in types.items()}}
sys.stdout.write("\\n@@OBJECT_INFO@@" + json.dumps(info, default=str))
"""


def core_object_info(comfyui_root: Path, python: str = sys.executable) -> dict[str, Any]:
    """ComfyUI's /object_info for its core nodes (inputs and their order), without starting a server."""
    done = subprocess.run(
        [python, "-c", _OBJECT_INFO_SCRIPT], cwd=comfyui_root, capture_output=True, text=True,
        env=no_bytecode_beside_sources(os.environ),
        timeout=600,
    )  # fmt: skip
    if done.returncode != 0 or "@@OBJECT_INFO@@" not in done.stdout:
        raise RuntimeError(f"listing ComfyUI's nodes in {comfyui_root} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.split("@@OBJECT_INFO@@", 1)[1])


# ----- UI graph -> API prompt --------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    origin_id: int
    origin_slot: int
    target_id: int
    target_slot: int
    type: str


@dataclass(frozen=True)
class Scope:
    """One graph level: the top-level workflow, or one subgraph instance's inner graph."""

    nodes: Mapping[int, dict]
    links: Mapping[int, Link]
    prefix: str  # "" at the top, "<instance id>:" inside an instance (nested: "12:34:")
    parent: Scope | None = None
    instance: dict | None = None  # the subgraph node in `parent` this scope belongs to
    definition: dict | None = None  # that subgraph's definition


def _links(raw: list) -> dict[int, Link]:
    out = {}
    for item in raw:
        if isinstance(item, dict):  # subgraphs store links as objects
            out[item["id"]] = Link(
                item["origin_id"], item["origin_slot"], item["target_id"], item["target_slot"], item["type"]
            )
        else:  # the top level as [id, origin, origin slot, target, target slot, type]
            out[item[0]] = Link(item[1], item[2], item[3], item[4], item[5])
    return out


Source = tuple  # ("node", api id, output slot) | ("value", value) | ("none",)
NONE: Source = ("none",)


class _Converter:
    def __init__(self, workflow: Mapping[str, Any], object_info: Mapping[str, Any]) -> None:
        self.subgraphs = {sg["id"]: sg for sg in workflow.get("definitions", {}).get("subgraphs", [])}
        self.object_info = object_info
        self.prompt: dict[str, dict] = {}
        self.top = Scope({n["id"]: n for n in workflow["nodes"]}, _links(workflow["links"]), "")

    def child(self, scope: Scope, instance: dict) -> Scope:
        definition = self.subgraphs[instance["type"]]
        return Scope(
            {n["id"]: n for n in definition["nodes"]}, _links(definition["links"]),
            f"{scope.prefix}{instance['id']}:", scope, instance, definition,
        )  # fmt: skip

    # -- where a link's value comes from
    def resolve(self, scope: Scope, link_id: int | None) -> Source:
        if link_id is None:
            return NONE
        link = scope.links[link_id]
        if link.origin_id == SUBGRAPH_INPUT_ID:
            return self.resolve_subgraph_input(scope, link.origin_slot)
        origin = scope.nodes[link.origin_id]
        mode = origin.get("mode", MODE_ALWAYS)
        if origin["type"] in self.subgraphs:
            if mode == MODE_NEVER:
                return NONE
            if mode == MODE_BYPASS:
                return self.bypass(scope, origin, link)
            inner = self.child(scope, origin)
            out = next(
                i for i, lk in inner.links.items()
                if lk.target_id == SUBGRAPH_OUTPUT_ID and lk.target_slot == link.origin_slot
            )  # fmt: skip
            return self.resolve(inner, out)
        if origin["type"] == "Reroute":
            return self.resolve(scope, origin["inputs"][0].get("link"))
        if origin["type"] == "PrimitiveNode":
            return ("value", origin["widgets_values"][0])
        if mode == MODE_NEVER:
            return NONE
        if mode == MODE_BYPASS:
            return self.bypass(scope, origin, link)
        return ("node", f"{scope.prefix}{origin['id']}", link.origin_slot)

    def resolve_subgraph_input(self, scope: Scope, slot: int) -> Source:
        assert scope.instance is not None and scope.definition is not None and scope.parent is not None
        name = scope.definition["inputs"][slot]["name"]
        outer = next((i for i in scope.instance.get("inputs", []) if i["name"] == name), None)
        if outer is not None and outer.get("link") is not None:
            return self.resolve(scope.parent, outer["link"])
        return ("value", self.instance_widget(scope, name))

    def instance_widget(self, scope: Scope, name: str) -> Any:
        """The value of a subgraph instance's promoted widget `name`: the instance's own value where it
        stores one (by name, or by position among the promoted inputs), else the inner widget's value,
        as the frontend seeds a promoted widget from the widget it promotes (SubgraphNode.configure)."""
        named = scope.instance.get("widgets_values_named")
        if named is not None and name in named:
            return named[name]
        position = promoted_inputs(scope.definition).index(name)
        values = scope.instance.get("widgets_values") or []
        if position < len(values):
            return values[position]
        return self.inner_widget(scope, name)

    def inner_widget(self, scope: Scope, name: str) -> Any:
        """The value of the first inner widget that the subgraph input `name` feeds."""
        slot = next(i for i in scope.definition["inputs"] if i["name"] == name)
        for link_id in slot.get("linkIds", []):
            link = scope.links[link_id]
            node = scope.nodes[link.target_id]
            widget = node["inputs"][link.target_slot].get("widget")
            if widget is None:
                continue
            if node["type"] in self.subgraphs:  # promoted again from a nested subgraph
                return self.instance_widget(self.child(scope, node), widget["name"])
            values = dict(widget_values(self.object_info[node["type"]], node.get("widgets_values") or []))
            if widget["name"] in values:
                return values[widget["name"]]
        raise ValueError(
            f"subgraph node {scope.prefix.rstrip(':')}: its input {name!r} has no value and feeds no widget"
        )

    def bypass(self, scope: Scope, node: dict, link: Link) -> Source:
        """A bypassed node hands on its input of the link's type: the same slot first, as the frontend."""
        inputs = node.get("inputs", [])
        order = ([inputs[link.origin_slot]] if link.origin_slot < len(inputs) else []) + inputs
        for candidate in order:
            if candidate.get("type") == link.type and candidate.get("link") is not None:
                return self.resolve(scope, candidate["link"])
        return NONE

    # -- nodes
    def add_scope(self, scope: Scope) -> None:
        for node in scope.nodes.values():
            mode = node.get("mode", MODE_ALWAYS)
            if node["type"] in FRONTEND_ONLY or mode in (MODE_NEVER, MODE_BYPASS):
                continue
            if node["type"] in self.subgraphs:
                self.add_scope(self.child(scope, node))
                continue
            self.add_node(scope, node)

    def add_node(self, scope: Scope, node: dict) -> None:
        class_type = node["type"]
        if class_type not in self.object_info:
            raise ValueError(f"node {scope.prefix}{node['id']}: ComfyUI has no node {class_type!r}")
        by_widget = {i["widget"]["name"]: i for i in node.get("inputs", []) if i.get("widget")}
        inputs: dict[str, Any] = {}
        for name, value in widget_values(self.object_info[class_type], node.get("widgets_values") or []):
            linked = by_widget.get(name)
            source = self.resolve(scope, linked.get("link")) if linked else NONE
            inputs[name] = value if source == NONE else _api_value(source)
        for ui_input in node.get("inputs", []):
            if ui_input.get("widget") and ui_input["widget"]["name"] in inputs:
                continue
            source = self.resolve(scope, ui_input.get("link"))
            if source != NONE:
                inputs[ui_input["name"]] = _api_value(source)
        self.prompt[f"{scope.prefix}{node['id']}"] = {"class_type": class_type, "inputs": inputs}


def _api_value(source: Source) -> Any:
    return [source[1], source[2]] if source[0] == "node" else source[1]


def widget_values(info: Mapping[str, Any], values: list) -> list[tuple[str, Any]]:
    """(input name, value) for a node's positional widgets_values, in the frontend's widget order."""
    named: list[tuple[str, Any]] = []
    position = 0

    def take(spec_inputs: Mapping[str, Any], order: Mapping[str, list], prefix: str) -> None:
        nonlocal position
        for section in ("required", "optional"):
            for name in order.get(section, []):
                if position >= len(values):
                    return
                kind, options = _spec(spec_inputs[section][name])
                kind = options.get("widgetType", kind)  # "FLOAT,INT" sockets with a FLOAT widget
                if not (isinstance(kind, list) or kind in WIDGET_TYPES or kind == DYNAMIC_COMBO):
                    continue  # a socket
                value = values[position]
                position += 1
                if not _fits(kind, options, value) and "default" in options:
                    # Saved by a ComfyUI whose widgets differ here (e.g. CreateVideo's 'auto' where
                    # this one has an INT bit_depth): the frontend would show the default.
                    value = options["default"]
                named.append((prefix + name, value))
                if options.get("control_after_generate") or any(options.get(k) for k in UPLOAD_OPTIONS):
                    position += 1  # the frontend-only widget after it
                if kind == DYNAMIC_COMBO:
                    chosen = next(o for o in options["options"] if o["key"] == value)["inputs"]
                    take(chosen, {k: list(v) for k, v in chosen.items()}, f"{prefix}{name}.")

    take(info["input"], info.get("input_order") or {k: list(v) for k, v in info["input"].items()}, "")
    return named


def _fits(kind: Any, options: Mapping[str, Any], value: Any) -> bool:
    """Whether a saved widget value is one this ComfyUI's widget can hold."""
    choices = kind if isinstance(kind, list) else options.get("options")
    if kind in ("INT", "FLOAT"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "BOOLEAN":
        return isinstance(value, bool)
    if kind == "STRING":
        return isinstance(value, str)
    return not choices or value in choices  # model lists are empty offline: any name fits


def _spec(spec: Any) -> tuple[Any, dict]:
    kind = spec[0]
    options = spec[1] if len(spec) > 1 and isinstance(spec[1], dict) else {}
    return kind, options


def ui_to_prompt(workflow: Mapping[str, Any], object_info: Mapping[str, Any]) -> dict[str, dict]:
    """The API prompt ComfyUI's frontend would queue for a UI-format `workflow` (see module docstring)."""
    converter = _Converter(workflow, object_info)
    converter.add_scope(converter.top)
    return converter.prompt


def set_face(workflow: dict, label: str, value: Any) -> None:
    """Set the widget a user sees as `label` (or named so) on the top-level subgraph node, as a user
    would: typing a value into a connected widget first disconnects it (LTX-2.5's width and height
    come from a ResolutionSelector)."""
    subgraphs = {sg["id"]: sg for sg in workflow["definitions"]["subgraphs"]}
    instance = next(n for n in workflow["nodes"] if n["type"] in subgraphs)
    face = {i.get("label", i["name"]): i for i in instance["inputs"]} | {
        i["name"]: i for i in instance["inputs"]
    }
    if label not in face:
        raise KeyError(f"no widget {label!r} on the subgraph node; it has {sorted(face)}")
    ui_input = face[label]
    if ui_input.get("link") is not None:
        link_id = ui_input["link"]
        workflow["links"] = [lk for lk in workflow["links"] if lk[0] != link_id]
        for node in workflow["nodes"]:
            for output in node.get("outputs", []):
                if link_id in (output.get("links") or []):
                    output["links"].remove(link_id)
        ui_input["link"] = None
    name = ui_input["name"]
    position = promoted_inputs(subgraphs[instance["type"]]).index(name)
    values = instance.get("widgets_values") or []
    if position < len(values):
        values[position] = value
    if "widgets_values_named" in instance or position >= len(values):
        # An instance saved without its own values (the promoted widgets show the inner ones, e.g.
        # video_ltx2_3_flf2v) keeps the edit by name; the others stay the inner widgets' values.
        instance.setdefault("widgets_values_named", {})[name] = value


def promoted_inputs(definition: Mapping[str, Any]) -> list[str]:
    """A subgraph's inputs that show a widget on its instances, in the order of the instances'
    positional widgets_values."""
    return [i["name"] for i in definition["inputs"] if i["type"] in WIDGET_TYPES]


def nodes_of(prompt: Mapping[str, dict], class_type: str) -> list[str]:
    return sorted(k for k, n in prompt.items() if n["class_type"] == class_type)
