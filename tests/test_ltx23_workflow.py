"""The LTX-2.3 example workflow on our own stage nodes (ltx2_3_mgpu_t2v_tdp: video_ltx2_3_t2v's files and
schedules on the SP Sampler and TDP Upscaler) run headless in a real ComfyUI on the tiny LTX-2.3 (opt-in:
COMFYUI_PATH). The twins of the official templates run in tests/test_official_templates.py.

The twin's released file names point at the tiny files (same names, same folders), sizes and frame
counts shrink to CPU scale (tests/test_comfyui_workflows.py tiny_scale), the workers run on 2 CPU ranks.
"""

from __future__ import annotations

import json

import pytest
from comfyui_harness import ComfyUIServer, link_models, saved_files
from test_comfyui_workflows import API, FRAMES, HEIGHT, TIMEOUT_S, WIDTH, probe, tiny_scale
from workflow_server import released_names

pytestmark = pytest.mark.comfyui

RELEASED_23 = {
    "checkpoints": "ltx-2.3-22b-dev-fp8.safetensors",
    "latent_upscale_models": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors",
    "text_encoders": "gemma_3_12B_it_fp4_mixed.safetensors",
    "loras": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
}


@pytest.fixture(scope="module")
def server23(workflow_server, tiny23, tmp_path_factory) -> ComfyUIServer:
    """The session's workflow server (conftest) with the tiny LTX-2.3 linked in under its released
    names (its tiny Gemma is the LTX-2 workflows' file: the same bytes, the same name)."""
    staging = tmp_path_factory.mktemp("released-names-23")
    sources = {
        "checkpoints": tiny23.checkpoint,
        "latent_upscale_models": tiny23.files.spatial_upscaler_x2,
        "text_encoders": tiny23.gemma,
        "loras": tiny23.lora,
    }
    link_models(workflow_server.layout, released_names(staging, sources, RELEASED_23))
    return workflow_server


def test_ltx23_text_to_video_on_sp_and_tdp_runs_headless(server23):
    graph = tiny_scale(json.loads((API / "ltx2_3_mgpu_t2v_tdp.json").read_text()))
    entry = server23.run_prompt(graph, TIMEOUT_S)
    files = saved_files(entry, server23.layout.output)
    assert len(files) == 1, entry.get("status")
    frames, width, height, has_audio = probe(files[0])
    assert (frames, width, height, has_audio) == (FRAMES, 2 * WIDTH, 2 * HEIGHT, True)
    log = server23.log_tail(200_000)
    assert "LTX-2.3, weights bf16, with its VAE (backend comfy)" in log
