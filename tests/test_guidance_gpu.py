"""Guidance groups on the GPU: several ranks sharing one GPU (CUDA IPC works between processes on one
device), the head exchange of each group and the per-step gather on the IPC kernel
(LTX2_MGPU_ALL2ALL=kernel: a fallback is an error). The SP Sampler's CFG job on the comfy backend,
float32, with 1, 2 and 4 groups: every plan gives the plain-SP result (GPU only, COMFYUI_PATH).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from comfyui_harness import comfyui_root

from conftest import assert_no_leaks, tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_model import CAPTION_CHANNELS
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root
from ltx2_mgpu.workers.wire.requests import Sample, TextConditioning

pytestmark = [pytest.mark.gpu, pytest.mark.comfyui]
SIGMAS = torch.tensor([0.909375, 0.725, 0.421875, 0.0])


def sample(model: MGPUModel, groups: int) -> tuple[list[torch.Tensor], dict]:
    g = torch.Generator().manual_seed(0)
    video = torch.randn(1, 128, 3, 4, 6, generator=g)
    audio = torch.randn(1, 8, 11, 16, generator=g)
    cond = [
        TextConditioning(c[0][0], True)
        for c in (tiny_conditioning(11, CAPTION_CHANNELS, 1), tiny_conditioning(6, CAPTION_CHANNELS, 2))
    ]
    out_v, out_a = output_slot(video.shape, torch.float32), output_slot(audio.shape, torch.float32)
    request = Sample(
        video=video, audio=audio, sigmas=SIGMAS, positive=cond[0], negative=cond[1], cfg_video=3.0,
        cfg_audio=7.0, sampler="euler", seed=3, guidance_groups=groups, out_video=out_v, out_audio=out_a,
    )  # fmt: skip
    replies = get_manager().run(model, request)
    return [out_v.tensor.clone(), out_a.tensor.clone()], replies[0]


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_guidance_plan_gives_the_plain_sp_result(tiny, monkeypatch, ranks):
    monkeypatch.setenv("LTX2_MGPU_ALL2ALL", "kernel")
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices=",".join(["cuda:0"] * ranks), dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    get_manager().env["LTX2_MGPU_ALL2ALL"] = "kernel"
    try:
        plain, reply = sample(dataclasses.replace(model, guidance_groups=1), 1)
        assert reply["exchange"] == "ipc-kernel"
        for groups in (2, 4)[: 1 if ranks == 2 else 2]:
            ours, reply = sample(model, groups)
            assert reply["guidance_groups"] == groups and reply["parallel_steps"] == 3, reply
            assert reply["group_exchange"] == ("ipc-kernel" if ranks // groups > 1 else "none"), reply
            for name, a, b in zip(("video", "audio"), ours, plain):
                rel = float((a - b).abs().max() / b.abs().max())
                print(
                    f"\n[guidance groups, {ranks} ranks on one GPU] {groups} groups vs plain SP: {name} rel {rel:.2e}"
                )
                assert rel <= 1e-4, (groups, name, rel)
    finally:
        get_manager().unload()
        get_manager().env.pop("LTX2_MGPU_ALL2ALL", None)
    assert_no_leaks()
