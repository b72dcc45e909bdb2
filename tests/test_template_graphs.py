"""The UI-to-API conversion of tests/template_graphs.py on ComfyUI's real LTX templates, without a server
(ComfyUI's node list comes from a child process; opt-in: COMFYUI_PATH, and the package index reachable
once per cache for the templates)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from comfyui_harness import comfyui_root
from template_graphs import (
    FRONTEND_ONLY,
    MODE_BYPASS,
    MODE_NEVER,
    core_object_info,
    fetch_templates,
    load_template,
    nodes_of,
    set_face,
    templates_cache,
    ui_to_prompt,
)

pytestmark = pytest.mark.comfyui


@pytest.fixture(scope="module")
def templates(pytestconfig, tmp_path_factory) -> Path:
    return fetch_templates(templates_cache(pytestconfig, tmp_path_factory))


@pytest.fixture(scope="module")
def object_info() -> dict:
    return core_object_info(comfyui_root())


def assert_links_resolve(prompt: dict) -> None:
    for node_id, node in prompt.items():
        assert node["class_type"] not in FRONTEND_ONLY, node_id
        for name, value in node["inputs"].items():
            if isinstance(value, list):
                source, slot = value
                assert source in prompt, f"{node_id}.{name} -> {source}: not in the prompt"
                assert isinstance(slot, int), (node_id, name)


def inner(prompt: dict, class_type: str) -> dict:
    (node_id,) = nodes_of(prompt, class_type)
    return prompt[node_id]["inputs"]


def test_ltx23_t2v_flattens_with_the_templates_values(templates, object_info):
    prompt = ui_to_prompt(load_template(templates, "video_ltx2_3_t2v"), object_info)
    # 52 nodes in the subgraph less its Reroute, plus SaveVideo; the MarkdownNote is gone.
    assert len(prompt) == 51
    assert_links_resolve(prompt)
    assert all(k.startswith("267:") for k in prompt if k != "75")
    assert prompt["75"]["inputs"]["video"] == ["267:242", 0]  # the instance's output, followed inside
    assert inner(prompt, "LoraLoaderModelOnly")["strength_model"] == 0.5
    assert inner(prompt, "CheckpointLoaderSimple")["ckpt_name"] == "ltx-2.3-22b-dev-fp8.safetensors"
    seeds = {prompt[k]["inputs"]["noise_seed"] for k in nodes_of(prompt, "RandomNoise")}
    assert seeds == {42, 810138461690240}  # one fixed in the subgraph, one promoted to its face
    assert prompt["267:257"] == {"class_type": "PrimitiveInt", "inputs": {"value": 1280}}  # face width
    # The Reroute between the checkpoint's VAE and three nodes is skipped, the link kept.
    assert inner(prompt, "VAEDecodeTiled")["vae"] == ["267:236", 2]
    # A V3 dynamic combo's inputs are named under it; a "FLOAT,INT" socket keeps its FLOAT widget.
    resize = prompt["267:238"]["inputs"]
    assert (resize["resize_type"], resize["resize_type.crop"], resize["scale_method"]) == (
        "scale dimensions", "center", "lanczos",
    )  # fmt: skip
    assert inner(prompt, "LTXVEmptyLatentAudio")["batch_size"] == 1


def test_face_widgets_reach_the_inner_nodes(templates, object_info):
    workflow = load_template(templates, "video_ltx2_3_t2v")
    set_face(workflow, "width", 128)  # the subgraph input value_2
    set_face(workflow, "value_5", False)  # labelled prompt_enhance
    prompt = ui_to_prompt(workflow, object_info)
    assert prompt["267:257"]["inputs"]["value"] == 128
    assert prompt["267:330"]["inputs"]["value"] is False


def test_an_instance_saved_without_values_shows_the_inner_widgets(templates, object_info):
    """video_ltx2_3_flf2v's subgraph node saves no widgets_values (its face lists proxyWidgets): each face
    widget shows the value of the inner widget it feeds, and a value typed there reaches every inner
    node that input feeds."""
    workflow = load_template(templates, "video_ltx2_3_flf2v")
    (instance,) = [n for n in workflow["nodes"] if n["id"] == 129]
    assert instance["widgets_values"] == []
    prompt = ui_to_prompt(workflow, object_info)
    assert_links_resolve(prompt)
    assert [prompt[k]["inputs"]["value"] for k in ("129:113", "129:98", "129:114")] == [1280, 720, 25]
    checkpoints = {prompt[k]["inputs"]["ckpt_name"] for k in ("129:126", "129:103", "129:127")}
    assert checkpoints == {"ltx-2.3-22b-distilled-fp8.safetensors"}  # one face widget, three inner nodes
    set_face(workflow, "width", 128)
    set_face(workflow, "fps", 8)
    prompt = ui_to_prompt(workflow, object_info)
    assert [prompt[k]["inputs"]["value"] for k in ("129:113", "129:98", "129:114")] == [128, 720, 8]


def test_ltx23_id_lora_takes_audio_and_a_second_lora(templates, object_info):
    workflow = load_template(templates, "video_ltx2_3_id_lora")
    set_face(workflow, "duration", 1.0)  # a FLOAT on this template's face
    prompt = ui_to_prompt(workflow, object_info)
    assert_links_resolve(prompt)
    assert prompt["276"] == {"class_type": "LoadAudio", "inputs": {"audio": "ltx23_reference_audio.mp3"}}
    assert inner(prompt, "LTXVReferenceAudio")["reference_audio"] == ["276", 0]
    loras = {
        prompt[k]["inputs"]["lora_name"]: prompt[k]["inputs"] for k in nodes_of(prompt, "LoraLoaderModelOnly")
    }
    assert loras["ltx-2.3-id-lora-talkvid-3k.safetensors"]["model"] == ["340:293", 0]  # on the distilled one
    assert prompt["340:331"]["inputs"]["value"] == 1.0


def test_typing_into_a_connected_face_widget_disconnects_it(templates, object_info):
    workflow = load_template(templates, "video_ltx2_5_t2v")
    set_face(workflow, "width", 128)  # fed by the top-level ResolutionSelector in the template
    prompt = ui_to_prompt(workflow, object_info)
    widths = [n["inputs"]["value"] for n in prompt.values() if n["class_type"] == "PrimitiveInt"]
    assert 128 in widths
    targets = [
        v for n in prompt.values() for v in n["inputs"].values() if isinstance(v, list) and v[0] == "409"
    ]
    assert targets == [["409", 1]]  # only the height still comes from the ResolutionSelector


def test_ltx23_i2v_takes_the_image_from_outside_the_subgraph(templates, object_info):
    prompt = ui_to_prompt(load_template(templates, "video_ltx2_3_i2v"), object_info)
    assert_links_resolve(prompt)
    assert prompt["269"] == {"class_type": "LoadImage", "inputs": {"image": "egyptian_queen.png"}}
    consumers = [k for k, n in prompt.items() if ["269", 0] in n["inputs"].values()]
    assert consumers, "the subgraph's IMAGE input must resolve to LoadImage's output"


def test_ltx25_t2v_links_from_the_top_level_into_the_subgraph(templates, object_info):
    prompt = ui_to_prompt(load_template(templates, "video_ltx2_5_t2v"), object_info)
    assert_links_resolve(prompt)
    assert inner(prompt, "UNETLoader")["unet_name"].startswith("ltx-2.5-22b-distilled-transformer")
    assert len(nodes_of(prompt, "LTXVDualCFGGuider")) == 2
    # ResolutionSelector on the top level feeds the subgraph's width/height inputs.
    targets = [
        v for n in prompt.values() for v in n["inputs"].values() if isinstance(v, list) and v[0] == "409"
    ]
    assert sorted(targets) == [["409", 0], ["409", 1]]


@pytest.mark.parametrize("mode", [MODE_BYPASS, MODE_NEVER])
def test_bypassed_and_muted_nodes(templates, object_info, mode):
    workflow = copy.deepcopy(load_template(templates, "video_ltx2_3_t2v"))
    lora = next(
        n for n in workflow["definitions"]["subgraphs"][0]["nodes"] if n["type"] == "LoraLoaderModelOnly"
    )
    lora["mode"] = mode
    prompt = ui_to_prompt(workflow, object_info)
    assert nodes_of(prompt, "LoraLoaderModelOnly") == []
    guiders = [prompt[k]["inputs"] for k in nodes_of(prompt, "CFGGuider")]
    if mode == MODE_BYPASS:  # the MODEL passes through to the checkpoint's
        assert [g["model"] for g in guiders] == [["267:236", 0]] * 2
    else:  # muted: nothing comes out of it
        assert all("model" not in g for g in guiders)


def test_an_unreachable_index_fails_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # as if the package index could not be reached
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with pytest.raises(
        RuntimeError, match=r"could not download comfyui-workflow-templates-json==0\.1\.123.*reachable"
    ):
        fetch_templates(tmp_path)
    assert not list(tmp_path.rglob("*.json"))
