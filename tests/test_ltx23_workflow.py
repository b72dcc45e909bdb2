"""The LTX-2.3 example workflow on our own stage nodes (ltx2_3_mgpu_t2v_tdp: video_ltx2_3_t2v's files and
schedules on the SP Sampler and TDP Upscaler) run headless in a real ComfyUI on the tiny LTX-2.3 (opt-in:
COMFYUI_PATH). The twins of the official templates run in tests/test_official_templates.py.

The twin's released file names point at the tiny files (same names, same folders), sizes and frame
counts shrink to CPU scale (tests/test_comfyui_workflows.py tiny_scale), the workers run on 2 CPU ranks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfyui_harness import ComfyUIServer, comfyui_in_process, comfyui_root, make_layout, saved_files
from test_comfyui_workflows import API, FRAMES, HEIGHT, TIMEOUT_S, WIDTH, probe, tiny_scale

pytestmark = pytest.mark.comfyui

RELEASED_23 = {
    "checkpoints": "ltx-2.3-22b-dev-fp8.safetensors",
    "latent_upscale_models": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors",
    "text_encoders": "gemma_3_12B_it_fp4_mixed.safetensors",
    "loras": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
}


@pytest.fixture(scope="module")
def server23(tmp_path_factory) -> Iterator[ComfyUIServer]:
    from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
    from ltx2_mgpu.workers.embedded.tiny_ltx23 import make_tiny_ltx23, make_tiny_ltx23_loras

    staging = tmp_path_factory.mktemp("released-names-23")
    with comfyui_in_process(comfyui_root()):  # make_tiny_ltx23 builds ComfyUI's classes
        files = make_tiny_ltx23(staging / "tiny")
    gemma = make_tiny_gemma(staging / "gemma")
    lora, _text_lora = make_tiny_ltx23_loras(files, gemma)
    sources = {
        "checkpoints": files.checkpoint,
        "latent_upscale_models": files.spatial_upscaler_x2,
        "text_encoders": gemma,
        "loras": lora,
    }
    models = {}
    for folder, source in sources.items():
        named = staging / RELEASED_23[folder]
        named.symlink_to(Path(source).resolve())
        models[folder] = [named]
    layout = make_layout(tmp_path_factory.mktemp("comfyui-base-23"), models=models)
    with ComfyUIServer(comfyui_root(), layout) as running:
        yield running


def test_ltx23_text_to_video_on_sp_and_tdp_runs_headless(server23):
    graph = tiny_scale(json.loads((API / "ltx2_3_mgpu_t2v_tdp.json").read_text()))
    entry = server23.run_prompt(graph, TIMEOUT_S)
    files = saved_files(entry, server23.layout.output)
    assert len(files) == 1, entry.get("status")
    frames, width, height, has_audio = probe(files[0])
    assert (frames, width, height, has_audio) == (FRAMES, 2 * WIDTH, 2 * HEIGHT, True)
    log = server23.log_tail(200_000)
    assert "LTX-2.3, weights bf16, with its VAE (backend comfy)" in log
