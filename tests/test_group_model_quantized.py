"""The MGPU Loader's MODEL on a quantized LTX-2 file as ComfyUI reads it (opt-in: COMFYUI_PATH).

The tiny fp8 variant (tiny_variants.make_tiny_fp8: float8_e4m3fn block Linears with per-tensor
scales and ComfyUI's `_quantization_metadata`, the released fp8 layout) loads in every rank through
ComfyUI's own checkpoint loader, so its mixed-precision layers compute there as in native ComfyUI.
SamplerCustomAdvanced + CFGGuider on it against CheckpointLoaderSimple's MODEL of the same file, 2 CPU
ranks, float32 compute. (LTX-2.5's int8 convrot transformer: tests/test_group_model_ltx25.py.)
"""

from __future__ import annotations

import pytest
import torch
from test_comfyui_native_parity import comfy, errors  # noqa: F401
from test_group_model import Graph, run_graph, split_forwards

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5


def test_group_model_on_the_fp8_checkpoint_matches_native(comfy, lora_files):  # noqa: F811
    import folder_paths

    import nodes  # ComfyUI's nodes.py
    from ltx2_mgpu.nodes.loader import load_model

    fp8 = lora_files["fp8"]
    folder_paths.add_model_folder_path("checkpoints", str(fp8.parent))
    with torch.inference_mode():  # as ComfyUI's executor loads it (quantized layers move only so)
        native_model = nodes.CheckpointLoaderSimple().load_checkpoint(fp8.name)[0]
    _, model, info = load_model(
        fp8.name, "cpu:2", "float32", guidance_parallel="auto"
    )  # quantized: no groups
    try:
        assert "fp8" in info
        ours_config, native_config = model.model.model_config, native_model.model.model_config
        assert ours_config.unet_config == native_config.unet_config
        assert ours_config.quant_config == native_config.quant_config is not None
        graph = Graph(sampler="euler")
        native, ours = run_graph(comfy, native_model, graph), run_graph(comfy, model, graph)
        call = model.model.diffusion_model.call
        assert (call.calls, split_forwards(call)) == (3, 3)  # three CFG calls, each token-split
    finally:
        get_manager().unload()
        assert_no_leaks()
    found = errors(ours, native)
    print(f"\n[group MODEL] LTX-2 fp8 file, 2 ranks: rel {[f'{r:.2e}' for _, r in found]}")
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found
    # The fp8 rounding matters here: the bf16 file's MODEL gives another result.
    assert max(rel for _, rel in errors(run_graph(comfy, comfy.model, graph), native)) > 1e-4
