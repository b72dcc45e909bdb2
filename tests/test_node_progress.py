"""What the SP Sampler node shows in ComfyUI while it runs: progress per step, a live latent preview,
and Cancel pressed while ComfyUI's own progress hook is the one that notices it."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from conftest import tiny_conditioning
from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.workers.group.manager import MGPUModel


class InterruptProcessingException(Exception):
    pass


@pytest.fixture
def comfy_with_previews(monkeypatch):
    """ComfyUI's pieces the node touches: interrupt flag, ProgressBar (its hook raises on Cancel, as
    ComfyUI's does), preview method latent2rgb and LTX-2's latent-to-RGB factors."""
    state = {"interrupt": False, "updates": [], "cancel_at": None}
    mm = types.ModuleType("comfy.model_management")
    mm.InterruptProcessingException = InterruptProcessingException
    mm.processing_interrupted = lambda: state["interrupt"]
    mm.interrupt_current_processing = lambda value=True: state.__setitem__("interrupt", value)

    def throw():
        if state["interrupt"]:
            state["interrupt"] = False
            raise InterruptProcessingException()

    mm.throw_exception_if_processing_interrupted = throw

    class ProgressBar:
        def __init__(self, total, node_id=None):
            self.total = total

        def update_absolute(self, value, total=None, preview=None):
            state["updates"].append((value, total, preview))
            if state["cancel_at"] == value:
                state["interrupt"] = True
            throw()  # ComfyUI's hook checks the flag (and clears it) on every update

    utils = types.ModuleType("comfy.utils")
    utils.ProgressBar = ProgressBar
    cli = types.ModuleType("comfy.cli_args")
    cli.args = types.SimpleNamespace(preview_method=types.SimpleNamespace(value="latent2rgb"))
    formats = types.ModuleType("comfy.latent_formats")
    factors = torch.randn(128, 3, generator=torch.Generator().manual_seed(0)).mul(0.05).tolist()
    formats.LTXAV = lambda: types.SimpleNamespace(
        latent_rgb_factors=factors, latent_rgb_factors_bias=[0.0, 0.0, 0.0]
    )
    for name, module in {
        "comfy": types.ModuleType("comfy"),
        "comfy.model_management": mm,
        "comfy.utils": utils,
        "comfy.cli_args": cli,
        "comfy.latent_formats": formats,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    return state


def _run(model, sigmas):
    video = torch.zeros(1, 128, 3, 4, 5)
    pos, neg = tiny_conditioning(7, 64, seed=1), tiny_conditioning(5, 64, seed=2)
    return sample_latent(model, pos, neg, {"samples": video}, sigmas, "euler", 3.0, 3.0, seed=3, node_id="9")


def test_progress_and_live_preview_per_step(manager, tiny_path, comfy_with_previews):
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    _run(model, torch.tensor([1.0, 0.8, 0.5, 0.0]))
    updates = comfy_with_previews["updates"]
    assert [(v, t) for v, t, _ in updates] == [(1, 3), (2, 3), (3, 3)]
    kind, image, max_size = updates[-1][2]
    assert kind == "JPEG" and max_size == 512
    assert image.size == (5, 4)  # the latent frame, width x height


def test_cancel_noticed_by_comfyuis_progress_hook_still_stops_every_rank(
    manager, tiny_path, comfy_with_previews
):
    comfy_with_previews["cancel_at"] = 2
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with pytest.raises(InterruptProcessingException):
        _run(model, torch.linspace(1.0, 0.0, 60))
    assert max(v for v, _, _ in comfy_with_previews["updates"]) < 10, "the workers kept going after Cancel"
    assert manager.group.is_alive
    comfy_with_previews["cancel_at"] = None
    (out,) = _run(model, torch.tensor([1.0, 0.5, 0.0]))
    assert torch.isfinite(out["samples"]).all()


def test_tdp_upscaler_shows_the_denoising_latent_too(manager, tiny, comfy_with_previews):
    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale

    model = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32")
    pos, neg = tiny_conditioning(7, 64, seed=1), tiny_conditioning(5, 64, seed=2)
    stage1 = {"samples": torch.zeros(1, 128, 2, 3, 5)}
    tdp_upscale(model, pos, neg, stage1, str(tiny.spatial_upscaler), "euler", 1.0, 3, "1x2", 2, node_id="7")
    previews = [p for _, _, p in comfy_with_previews["updates"] if p is not None]
    assert len(previews) == 2  # the default schedule 0.625, 0.4, 0 has two steps
    assert previews[-1][1].size == (10, 6)  # the upscaled latent frame, width x height


@pytest.mark.comfyui
def test_comfy_backend_reports_progress_previews_and_stops_on_cancel(manager, tiny_path, comfy_with_previews):
    """The same node behaviour when the ranks sample with ComfyUI's own sampler (comfy backend)."""
    import os

    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    root = check_comfyui_root(os.environ["COMFYUI_PATH"])
    model = MGPUModel.create(
        tiny_path, devices="cpu:2", dtype="float32", backend="comfy", comfyui_root=root.path
    )
    _run(model, torch.tensor([1.0, 0.8, 0.5, 0.0]))
    updates = comfy_with_previews["updates"]
    assert [(v, t) for v, t, _ in updates] == [(1, 3), (2, 3), (3, 3)]
    assert all(p is not None and p[1].size == (5, 4) for _, _, p in updates)
    comfy_with_previews["cancel_at"] = 2
    with pytest.raises(InterruptProcessingException):
        _run(model, torch.linspace(1.0, 0.0, 60))
    assert max(v for v, _, _ in comfy_with_previews["updates"]) < 10, "the workers kept going after Cancel"
    assert manager.group.is_alive
    comfy_with_previews["cancel_at"] = None
    (out,) = _run(model, torch.tensor([1.0, 0.5, 0.0]))
    assert torch.isfinite(out["samples"]).all()
