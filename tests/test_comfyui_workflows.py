"""The example workflows, run headless in a real ComfyUI on the tiny model (opt-in: COMFYUI_PATH).

Each API-format twin in example_workflows/api/ is posted as it is, with three changes a tiny run needs:
the released model file names point at the tiny files (same names, in the same folders); native
Gemma text encoding becomes MGPU Text Encode with the tiny Gemma (ComfyUI's own loader only builds the
12B); sizes, frame counts and steps shrink to CPU scale. The workers run on 2 CPU ranks.

Run: COMFYUI_PATH=/path/to/ComfyUI <ComfyUI's python> -m pytest tests/test_comfyui_workflows.py -s
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from comfyui_harness import ComfyUIServer, saved_files
from workflow_server import API, FRAMES, HEIGHT, RELEASED, WIDTH

pytestmark = pytest.mark.comfyui

TIMEOUT_S = 900


@pytest.fixture(scope="module")
def server(workflow_server) -> ComfyUIServer:
    """The session's shared workflow server (conftest, tests/workflow_server.py)."""
    return workflow_server


def tiny_scale(workflow: dict) -> dict:
    """The twin at CPU scale, with MGPU Text Encode in place of native Gemma (see module docstring)."""
    graph = copy.deepcopy(workflow)
    loader = next(k for k, n in graph.items() if n["class_type"] == "LTX2MGPULoader")
    graph[loader]["inputs"]["gpus"] = "cpu:2"
    graph[loader]["inputs"]["weight_dtype"] = "float32"
    for node_id, node in list(graph.items()):
        inputs = node["inputs"]
        kind = node["class_type"]
        if kind == "LTXAVTextEncoderLoader":
            del graph[node_id]
        elif kind == "CLIPTextEncode":
            graph[node_id] = {
                "class_type": "LTX2MGPUTextEncode",
                "inputs": {
                    "mgpu_model": [loader, 0],
                    "text_encoder": RELEASED["text_encoders"],
                    "text": inputs["text"],
                    "placement": "auto",
                },
            }
        elif kind in ("EmptyLTXVLatentVideo", "LTXVImgToVideo"):
            inputs.update(width=WIDTH, height=HEIGHT, length=FRAMES)
        elif kind == "LTXVEmptyLatentAudio":
            inputs.update(frames_number=FRAMES)
        elif kind == "LTXVScheduler":
            inputs.update(steps=3)
        elif kind == "LTX2TDPUpscaler":
            inputs.update(overlap=2)
    return graph


def run(server: ComfyUIServer, name: str) -> Path:
    graph = tiny_scale(json.loads((API / f"{name}.json").read_text()))
    entry = server.run_prompt(graph, TIMEOUT_S)
    files = saved_files(entry, server.layout.output)
    assert len(files) == 1, entry.get("status")
    return files[0]


def probe(path: Path) -> tuple[int, int, int, bool]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(video=0))
        return (
            frames,
            stream.codec_context.width,
            stream.codec_context.height,
            len(container.streams.audio) == 1,
        )


def test_text_to_video_two_stage(server):
    path = run(server, "ltx2_mgpu_t2v_two_stage")
    frames, width, height, has_audio = probe(path)
    assert (frames, width, height, has_audio) == (FRAMES, 2 * WIDTH, 2 * HEIGHT, True)
    # SaveVideo keeps the graph in the file, so dropping our output onto ComfyUI restores the workflow.
    import av

    with av.open(str(path)) as container:
        prompt = json.loads(container.metadata["prompt"])
    assert {n["class_type"] for n in prompt.values()} >= {
        "LTX2SPSampler",
        "LTX2TDPUpscaler",
        "LTX2DistributedVAEDecode",
    }


def test_image_to_video(server):
    assert probe(run(server, "ltx2_mgpu_i2v")) == (FRAMES, WIDTH, HEIGHT, True)


def test_upscale_a_saved_latent(server):
    frames, width, height, _ = probe(run(server, "ltx2_mgpu_tdp_upscale_latent"))
    assert (frames, width, height) == (FRAMES, 2 * WIDTH, 2 * HEIGHT)


def test_upscale_a_video_keeps_frames_and_audio(server):
    assert probe(run(server, "ltx2_mgpu_upscale_video")) == (FRAMES, 2 * WIDTH, 2 * HEIGHT, True)


def test_native_sampler_on_the_loaders_model(server):
    """The two-stage twin with stage 1 sampled by ComfyUI's own SamplerCustomAdvanced + CFGGuider on the
    MGPU Loader's MODEL output (nodes/group_model/): the real executor accepts it as a MODEL and every
    model call runs in the 2 CPU ranks; stage 2, decode and save are unchanged."""
    graph = tiny_scale(json.loads((API / "ltx2_mgpu_t2v_two_stage.json").read_text()))
    sp = graph["11"]["inputs"]
    graph["101"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": sp["seed"]}}
    graph["102"] = {
        "class_type": "CFGGuider",
        "inputs": {
            "model": ["1", 1],
            "positive": sp["positive"],
            "negative": sp["negative"],
            "cfg": sp["cfg"],
        },
    }
    graph["103"] = {"class_type": "KSamplerSelect", "inputs": {"sampler_name": sp["sampler_name"]}}
    graph["11"] = {
        "class_type": "SamplerCustomAdvanced",
        "inputs": {
            "noise": ["101", 0],
            "guider": ["102", 0],
            "sampler": ["103", 0],
            "sigmas": sp["sigmas"],
            "latent_image": sp["latent"],
        },
    }
    files = saved_files(server.run_prompt(graph, TIMEOUT_S), server.layout.output)
    assert len(files) == 1
    assert probe(files[0]) == (FRAMES, 2 * WIDTH, 2 * HEIGHT, True)
