"""The console line of each LoRA switch on ComfyUI's engine (NOTE [kept weight sets]), through the nodes'
functions and the group manager as a two-stage workflow queues them. A module of its own: the kept-sets
module imports ComfyUI into the test process, where the loader then resolves names in ComfyUI's folders.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.comfyui


def test_the_console_says_how_each_stage_got_its_lora(manager, lora_files, caplog):
    """Stage 2 with the MGPU LoRA, stage 1 without, stage 2 again, as a two-stage workflow queues them."""
    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.mgpu_lora import add_lora

    stage1 = load_model(str(lora_files["checkpoint"]), "cpu:1", "float32")[0]
    (stage2,) = add_lora(stage1, str(lora_files["lora"]), 0.8)
    lines = []
    for model in (stage2, stage1, stage2):
        caplog.clear()
        with caplog.at_level("INFO", logger="ltx2_mgpu"):
            manager.acquire(model)
        lines.append(next(r.getMessage() for r in caplog.records if "LoRA set" in r.getMessage()))
    assert "fused in" in lines[0] and "kept beside the base" in lines[0], lines
    assert "removed in" in lines[1] and "base weights stayed" in lines[1], lines
    assert "switched in" in lines[2] and "nothing fused" in lines[2], lines
