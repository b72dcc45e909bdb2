"""The MGPU Loader's MODEL on the tiny LTX-2.3 (opt-in: COMFYUI_PATH): SamplerCustomAdvanced with
CFGGuider cfg 3 on it, 1 and 2 CPU ranks, against the same graph on CheckpointLoaderSimple's MODEL
(tests/ltx23_fixtures.py), at most 1e-5 of the largest magnitude per stream in float32. The 2.3 model's
gated attention, prompt AdaLN and dual text projection run in the ranks as ComfyUI's own code."""

from __future__ import annotations

import pytest
import torch
from ltx23_fixtures import comfy23  # noqa: F401
from test_ltx23_nodes import SEED, av_inputs, relative, streams

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui


def cfg_sample(c, model) -> list[torch.Tensor]:
    """SamplerCustomAdvanced + CFGGuider 3, euler_ancestral, on `model` from the tiny AV inputs."""
    positive, negative, latent, sigmas = av_inputs(c)
    (guider,) = c.cs.CFGGuider.execute(model, positive, negative, 3.0)
    (noise,) = c.cs.RandomNoise.execute(SEED)
    (sampler,) = c.cs.KSamplerSelect.execute("euler_ancestral")
    with torch.inference_mode():
        out = c.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]
    return streams(out["samples"])


@pytest.mark.parametrize("ranks", [1, 2])
def test_group_model_matches_native_on_ltx23(comfy23, ranks):  # noqa: F811
    from ltx2_mgpu.nodes.loader import load_model

    c = comfy23
    _, model, _info = load_model(
        c.files.checkpoint.name,
        f"cpu:{ranks}",
        "float32",
        guidance_parallel="off",  # token split checked
    )
    try:
        results = [cfg_sample(c, sampled) for sampled in (c.model, model)]
        found = [relative(a, b) for a, b in zip(results[1], results[0])]
        print(f"\n[group MODEL] LTX-2.3 {ranks} ranks: rel {[f'{r:.2e}' for _, r in found]}")
        assert len(found) == 2 and all(rel <= 1e-5 for _, rel in found), found
        split = model.model.diffusion_model.call.last_replies[0]["split_forwards"]
        assert split == (3 if ranks > 1 else 0)  # three CFG calls, each token-split over 2 ranks
    finally:
        get_manager().unload()
    assert_no_leaks()


@pytest.mark.parametrize("ranks", [1, 2])
def test_lora_node_on_group_model_matches_native_on_ltx23(comfy23, ranks):  # noqa: F811
    """The template's LoraLoaderModelOnly (the tiny distilled LoRA at 0.5) on the MGPU Loader's MODEL
    against the same node on CheckpointLoaderSimple's MODEL (NOTE [node patches])."""
    from ltx2_mgpu.nodes.loader import load_model

    c = comfy23
    _, model, _info = load_model(
        c.files.checkpoint.name,
        f"cpu:{ranks}",
        "float32",
        guidance_parallel="off",  # token split checked
    )
    try:
        lora = c.nodes.LoraLoaderModelOnly().load_lora_model_only
        runs = ((c.model, 0.5), (model, 0.5), (c.model, 0.0))
        results = [cfg_sample(c, lora(sampled, c.lora.name, strength)[0]) for sampled, strength in runs]
        found = [relative(a, b) for a, b in zip(results[1], results[0])]
        print(f"\n[group MODEL + LoRA node] LTX-2.3 {ranks} ranks: rel {[f'{r:.2e}' for _, r in found]}")
        assert len(found) == 2 and all(rel <= 1e-5 for _, rel in found), found
        # The LoRA matters here: the base (strength 0) is far off.
        assert max(rel for _, rel in (relative(a, b) for a, b in zip(results[2], results[0]))) > 1e-3
    finally:
        get_manager().unload()
    assert_no_leaks()
