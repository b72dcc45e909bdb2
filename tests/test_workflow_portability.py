"""A workflow saved with gpus = "all" runs on whatever the machine has: the device choice is stored as
"all", resolved when it runs, and TDP's "auto" tiles follow the latent's size, not the group's, so the
video is the same. Here "all" resolves to 1, 2 and 3 CPU workers (LTX2_MGPU_CPU_WORKERS, as on a
machine without GPUs)."""

from __future__ import annotations

import torch

from conftest import NestedStandIn, tiny_conditioning
from ltx2_mgpu.nodes.loader import load_model
from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale
from ltx2_mgpu.workers.engine.ltxcore.reference import relative_error

SIGMAS = torch.tensor([1.0, 0.9, 0.6, 0.0])


def test_same_saved_workflow_on_1_2_and_3_workers(manager, tiny, monkeypatch, fake_comfy):
    pos, neg = tiny_conditioning(9, 64, seed=1), tiny_conditioning(5, 64, seed=2)
    latent = {"samples": NestedStandIn([torch.zeros(1, 128, 2, 4, 6), torch.zeros(1, 8, 9, 16)])}
    stage1, upscaled = {}, {}
    for workers in (1, 2, 3):
        monkeypatch.setenv("LTX2_MGPU_CPU_WORKERS", str(workers))
        model = load_model(str(tiny.checkpoint), "all", "float32")[0]
        assert model.world_size == workers
        (s1,) = sample_latent(model, pos, neg, latent, SIGMAS, "euler", 3.0, 3.0, 5)
        (s2,) = tdp_upscale(model, pos, neg, s1, str(tiny.spatial_upscaler), "euler", 1.0, 5, "auto", 2)
        stage1[workers] = [t.clone() for t in s1["samples"].tensors]
        upscaled[workers] = s2["samples"].tensors[0].clone()
    for workers in (2, 3):
        for got, want in zip(stage1[workers], stage1[1]):
            assert relative_error(got, want) <= 1e-5  # SP: the same result whatever the group size
        # TDP "auto" tiles follow the latent (8 x 12 cells: one tile) on every group size.
        assert upscaled[workers].shape == upscaled[1].shape == (1, 128, 2, 8, 12)
        assert relative_error(upscaled[workers], upscaled[1]) <= 1e-5, workers
