"""The SP Sampler's loop on the comfy backend on a GPU: two ranks sharing one GPU, the head exchange on
the IPC kernel (LTX2_MGPU_ALL2ALL=kernel: a fallback is an error), against one rank on the same GPU
(float32, CFG 3 / 7, euler, 3 steps). GPU only, COMFYUI_PATH."""

from __future__ import annotations

import pytest
from comfyui_harness import comfyui_root
from test_guidance_gpu import sample

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = [pytest.mark.gpu, pytest.mark.comfyui]


def test_two_ranks_through_the_kernel_equal_one_rank(tiny, monkeypatch):
    monkeypatch.setenv("LTX2_MGPU_ALL2ALL", "kernel")
    root = check_comfyui_root(comfyui_root())
    results = {}
    try:
        for devices in ("cuda:0", "cuda:0,cuda:0"):
            model = MGPUModel.create(
                tiny.checkpoint, devices=devices, dtype="float32", backend="comfy",
                comfyui_root=root.path, comfyui_version=root.version,
            )  # fmt: skip
            get_manager().env["LTX2_MGPU_ALL2ALL"] = "kernel"
            results[devices], reply = sample(model, 1)
            get_manager().unload()
        assert reply["exchange"] == "ipc-kernel", reply
    finally:
        get_manager().unload()
        get_manager().env.pop("LTX2_MGPU_ALL2ALL", None)
    assert_no_leaks()
    for name, a, b in zip(("video", "audio"), results["cuda:0,cuda:0"], results["cuda:0"]):
        rel = float((a - b).abs().max() / b.abs().max())
        print(f"\n[SP comfy, 2 ranks on one GPU vs 1 rank] {name} rel {rel:.2e}")
        assert rel <= 1e-4, (name, rel)
