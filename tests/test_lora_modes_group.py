"""LoRA switching on ComfyUI's engine through the nodes' functions and the group manager, as a two-stage
workflow queues it: stage 2 with the MGPU LoRA, stage 1 without, stage 2 again (NOTE [kept weight sets]).

- the console line of each switch says how the set was made live;
- the SP Sampler's latents with LTX2_MGPU_LORA_SETS kept and unfused equal fused's (ComfyUI's own
  switching) within 1e-5 of the largest value on 2 CPU workers (float32), stage 1 bit for bit.

A module of its own: the kept-sets module imports ComfyUI into the test process, where the loader then
resolves names in ComfyUI's folders.
"""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_conditioning

pytestmark = pytest.mark.comfyui
CAPTION = 64  # the tiny model's caption channels


def test_the_console_says_how_each_stage_got_its_lora(manager, lora_files, caplog):
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


def test_two_stages_sample_alike_with_kept_unfused_and_fused_sets(manager, lora_files, monkeypatch, caplog):
    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.mgpu_lora import add_lora
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    g = torch.Generator().manual_seed(4)
    video = torch.randn(1, 128, 3, 2, 3, generator=g)
    positive, negative = tiny_conditioning(7, CAPTION, seed=1), tiny_conditioning(5, CAPTION, seed=2)
    sigmas1, sigmas2 = torch.tensor([1.0, 0.9, 0.6]), torch.tensor([0.6, 0.3, 0.0])
    outputs, lines = {}, {}
    for mode in ("fused", "kept", "unfused"):
        monkeypatch.setenv("LTX2_MGPU_LORA_SETS", mode)
        manager.unload()  # the next group's workers start with this environment
        stage1 = load_model(str(lora_files["checkpoint"]), "cpu:2", "float32")[0]
        (stage2,) = add_lora(stage1, str(lora_files["lora"]), 0.8)
        runs = []
        with caplog.at_level("INFO", logger="ltx2_mgpu"):
            caplog.clear()
            for _ in range(2):
                (out1,) = sample_latent(
                    stage1, positive, negative, {"samples": video}, sigmas1, "euler", 3.0, 3.0, seed=7
                )
                (out2,) = sample_latent(stage2, positive, positive, {"samples": out1["samples"]}, sigmas2, "euler", 1.0, 1.0, seed=8)  # fmt: skip
                runs.append((out1["samples"], out2["samples"]))
        lines[mode] = [r.getMessage() for r in caplog.records if "LoRA set" in r.getMessage()]
        assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1], strict=True)), mode  # switching back
        outputs[mode] = runs[0]
    for mode in ("kept", "unfused"):
        assert torch.equal(outputs[mode][0], outputs["fused"][0])  # stage 1: the base, bit for bit
        error = float((outputs[mode][1] - outputs["fused"][1]).abs().max() / outputs["fused"][1].abs().max())
        print(f"\n[LoRA {mode} vs fused] stage 2 latent: {error:.1e} of the largest value")
        assert error <= 1e-5, (mode, error)
    assert "unfused" in lines["unfused"][0] and "nothing fused" in lines["unfused"][-1], lines["unfused"]
    assert "LTX2_MGPU_LORA_SETS=fused" in lines["fused"][0], lines["fused"]
