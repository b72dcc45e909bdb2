"""The MGPU twin of an official LTX template, as the official graph with our heavy nodes (test support).

`twin_of(prompt)` takes a template's API prompt (tests/template_graphs.py ui_to_prompt) and swaps in what
the twins in example_workflows/ use: the MGPU Loader's MODEL wherever the template's loader MODEL went,
with the LoRA that the template puts on that MODEL in the loader (as tests/test_official_templates.py
swap_loader does), MGPU Text Encode for each CLIPTextEncode, Distributed VAE Decode for VAEDecodeTiled
(tiled, with the template's tile settings); nodes that then feed no output are dropped. Every other
node, value and link stays the template's. `same_graph` checks a committed twin against that, node for
node (matched in topological order).
"""

from __future__ import annotations

import copy
from typing import Any

from template_graphs import nodes_of

LOADER_ID = "9000"
# The loader's settings in the committed twins (a saved workflow runs on whatever GPUs the machine has).
TWIN_LOADER = {
    "gpus": "all", "weight_dtype": "bfloat16", "max_video_tokens": 32768, "mode": "comfyui",
    "compile_blocks": False, "fp8_matmul": False, "guidance_parallel": "off",
}  # fmt: skip
FROM_CHECKPOINT = "(from the checkpoint)"  # the loader's VAE choice when the checkpoint holds it
OUTPUT_NODES = frozenset({"SaveVideo", "PreviewAny", "PreviewImage", "SaveLatent", "SaveImage"})


def _swap_loader(prompt: dict) -> dict:
    """The MGPU Loader for the template's model loader; the LoRA on its MODEL moves into the loader (whose
    MODEL carries the LoRA file's metadata, which GetICLoRAParameters reads for an IC-LoRA)."""
    base = {
        **TWIN_LOADER, "lora_name": "None", "lora_strength": 1.0, "video_vae_name": FROM_CHECKPOINT,
        "audio_vae_name": FROM_CHECKPOINT,
    }  # fmt: skip
    return swap_loader(prompt, base, lora_in_loader=True)


def swap_loader(prompt: dict, base_inputs: dict, *, lora_in_loader: bool) -> dict:
    """The MGPU Loader (`base_inputs` plus the template's file) wherever CheckpointLoaderSimple's MODEL went
    (LTX-2.5: UNETLoader's, with the VAELoaders' files for video and audio); with `lora_in_loader`, the
    LoRA on the checkpoint's MODEL (LoraLoaderModelOnly) moves into the loader and that node's consumers
    take the loader's MODEL. Every other node unchanged."""
    graph = copy.deepcopy(prompt)
    (checkpoint,) = nodes_of(graph, "CheckpointLoaderSimple") + nodes_of(graph, "UNETLoader")
    inputs = graph[checkpoint]["inputs"]
    loader = {"ckpt_name": inputs.get("ckpt_name", inputs.get("unet_name")), **base_inputs}
    replaced = [checkpoint]
    if graph[checkpoint]["class_type"] == "UNETLoader":
        for decoder, vae_input, loader_input in (
            ("VAEDecodeTiled", "vae", "video_vae_name"), ("LTXVAudioVAEDecode", "audio_vae", "audio_vae_name"),
        ):  # fmt: skip
            (node,) = nodes_of(graph, decoder)
            loader[loader_input] = graph[graph[node]["inputs"][vae_input][0]]["inputs"]["vae_name"]
    on_checkpoint = [
        n for n in nodes_of(graph, "LoraLoaderModelOnly") if graph[n]["inputs"]["model"] == [checkpoint, 0]
    ]
    if lora_in_loader and on_checkpoint:
        (lora,) = on_checkpoint
        lora_inputs = graph.pop(lora)["inputs"]
        loader.update(lora_name=lora_inputs["lora_name"], lora_strength=lora_inputs["strength_model"])
        replaced.append(lora)
    graph[LOADER_ID] = {"class_type": "LTX2MGPULoader", "inputs": loader}
    for node in graph.values():
        for key, value in node["inputs"].items():
            if isinstance(value, list) and value in ([r, 0] for r in replaced):
                node["inputs"][key] = [LOADER_ID, 1]
    return graph


def _swap_text_and_decode(graph: dict) -> dict:
    for node_id in nodes_of(graph, "CLIPTextEncode"):
        inputs = graph[node_id]["inputs"]
        clip = graph[inputs["clip"][0]]
        text_encoder = clip["inputs"].get("text_encoder", clip["inputs"].get("clip_name"))
        graph[node_id] = {
            "class_type": "LTX2MGPUTextEncode",
            "inputs": {"mgpu_model": [LOADER_ID, 0], "text_encoder": text_encoder, "text": inputs["text"],
                       "placement": "auto", "lora_name": "None", "lora_strength": 1.0},
        }  # fmt: skip
    for node_id in nodes_of(graph, "VAEDecodeTiled"):
        tiled = graph[node_id]["inputs"]
        graph[node_id] = {
            "class_type": "LTX2DistributedVAEDecode",
            "inputs": {
                "mgpu_model": [LOADER_ID, 0], "latent": tiled["samples"],
                **{k: tiled[k] for k in ("tile_size", "overlap", "temporal_size", "temporal_overlap")},
                "mode": "tiled", "attention_chunk_mb": 0,
            },
        }  # fmt: skip
    return graph


def _prune(graph: dict) -> dict:
    """Only the nodes an output node needs (what the swaps left unused goes)."""
    needed: set[str] = set()
    todo = [k for k, n in graph.items() if n["class_type"] in OUTPUT_NODES]
    while todo:
        node_id = todo.pop()
        if node_id in needed:
            continue
        needed.add(node_id)
        todo += [v[0] for v in graph[node_id]["inputs"].values() if _is_link(v)]
    return {k: v for k, v in graph.items() if k in needed}


def _is_link(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
    )


def twin_of(prompt: dict) -> dict:
    """The template's API prompt with our nodes swapped in, the loader first (see module docstring)."""
    graph = _prune(_swap_text_and_decode(_swap_loader(prompt)))
    loader = graph.pop(LOADER_ID)
    return {LOADER_ID: loader, **graph}


def comparable(node: dict) -> dict:
    """A node's inputs as compared: SaveVideo's codec (a widget whose spelling differs between the UI
    format and the API) left out."""
    inputs = dict(node["inputs"])
    if node["class_type"] == "SaveVideo":
        inputs = {k: v for k, v in inputs.items() if k not in ("codec", "format.codec")}
    return {"class_type": node["class_type"], "inputs": inputs}


def topological(graph: dict) -> list[str]:
    """Node ids, every node after the nodes it takes links from; ties in the graph's own order."""
    order, done, position = [], set(), {k: i for i, k in enumerate(graph)}
    pending = {k: {v[0] for v in n["inputs"].values() if _is_link(v)} for k, n in graph.items()}
    while pending:
        ready = min((k for k, deps in pending.items() if deps <= done), key=position.__getitem__)
        order.append(ready)
        done.add(ready)
        del pending[ready]
    return order


def inline_texts(graph: dict) -> dict:
    """The graph with each PrimitiveStringMultiline's text in place of the links from it (the UI
    needs such a node where the template's subgraph face typed a prompt into a socket)."""
    texts = {
        k: n["inputs"]["value"] for k, n in graph.items() if n["class_type"] == "PrimitiveStringMultiline"
    }
    out = {}
    for node_id, node in graph.items():
        if node_id not in texts:
            inputs = {
                k: texts[v[0]] if _is_link(v) and v[0] in texts else v for k, v in node["inputs"].items()
            }
            out[node_id] = {**node, "inputs": inputs}
    return out


def same_graph(twin: dict, expected: dict) -> dict[str, str]:
    """Assert `twin` is `expected` node for node (ids renamed, matched in topological order; prompt texts
    inlined); returns twin id -> expected id."""
    orders = [
        [k for k in topological(g) if g[k]["class_type"] != "PrimitiveStringMultiline"]
        for g in (twin, expected)
    ]
    twin, expected = inline_texts(twin), inline_texts(expected)
    to_expected = dict(zip(*orders))
    assert len(twin) == len(expected)
    assert [twin[k]["class_type"] for k in to_expected] == [
        expected[v]["class_type"] for v in to_expected.values()
    ]
    for twin_id, expected_id in to_expected.items():
        got = comparable(twin[twin_id])
        got["inputs"] = {k: [to_expected[v[0]], v[1]] if _is_link(v) else v for k, v in got["inputs"].items()}
        assert got == comparable(expected[expected_id]), (twin_id, expected_id)
    return to_expected
