"""The comfy backend on a GPU, two ranks sharing one GPU against one rank: the SP Sampler's loop with the
head exchange on the IPC kernel (LTX2_MGPU_ALL2ALL=kernel: a fallback is an error; float32, CFG 3 / 7,
euler, 3 steps), and ComfyUI's int8 attention chosen by ModelAttentionBackend on the MGPU MODEL.
GPU only, COMFYUI_PATH."""

from __future__ import annotations

import pytest
from comfyui_harness import comfyui_root
from test_comfyui_native_parity import comfy  # noqa: F401
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


def test_comfy_kitchen_int8_attention_on_the_group_model(comfy, tiny):  # noqa: F811
    """ComfyUI's ModelAttentionBackend("comfy kitchen attention") on the MGPU Loader's MODEL (bf16, one
    GPU): every rank runs ComfyUI's int8 attention (counted in its reply), 2 ranks through the head
    exchange give 1 rank's result within bf16 SP parity, and the int8 result's distance from the
    default attention's is printed (the opt-in's measured error)."""
    import comfy.ldm.modules.attention as attention
    from comfy_extras.nodes_model_advanced import ModelAttentionBackend
    from test_group_model import Graph, errors, run_graph

    from ltx2_mgpu.nodes.loader import load_model

    if "comfy_kitchen_int8" not in attention.REGISTERED_ATTENTION_FUNCTIONS:
        pytest.skip("this ComfyUI has no comfy_kitchen int8 attention (comfy_kitchen with its CUDA kernels)")
    results, served = {}, {}
    try:
        for devices in ("cuda:0", "cuda:0,cuda:0"):
            _mgpu, model, _info = load_model(tiny.checkpoint.name, devices, "bfloat16")
            call = model.model.diffusion_model.call
            for backend in ("pytorch attention", "comfy kitchen attention"):
                (patched,) = ModelAttentionBackend().patch(model, backend)
                results[devices, backend] = run_graph(comfy, patched, Graph(sampler="euler"))
                served[devices, backend] = [r["attention_backend_calls"] for r in call.last_replies]
            get_manager().unload()
    finally:
        get_manager().unload()
    assert_no_leaks()
    int8 = "comfy kitchen attention"
    for devices in ("cuda:0", "cuda:0,cuda:0"):
        assert all(calls.get("comfy_kitchen_int8", 0) > 0 for calls in served[devices, int8]), served
    split = errors(results["cuda:0,cuda:0", int8], results["cuda:0", int8])
    error = errors(results["cuda:0", int8], results["cuda:0", "pytorch attention"])
    print(f"\n[int8 attention] 2 ranks vs 1: {split}; int8 vs pytorch attention (1 rank): {error}")
    # H200, bf16 tiny model, 3 steps: 2 ranks vs 1 2.3e-2 / 1.8e-2, int8 vs PyTorch attention 2.2e-2 /
    # 2.0e-2 of the largest value: bf16 rounding over 3 steps of a tiny model alone is of that order
    # (docs/PERFORMANCE.md has the 22B figures).
    assert all(rel <= 5e-2 for _, rel in split), split
    assert all(0 < rel <= 0.1 for _, rel in error), error


def _two_ranks_on_one_gpu(tiny, **env) -> tuple[list, dict]:
    """The SP Sampler's loop (tests/test_guidance_gpu.py sample: float32, CFG 3 / 7, euler, 3 steps) on
    two ranks sharing cuda:0 through the IPC kernel, with the workers' environment `env`."""
    from test_guidance_gpu import sample

    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cuda:0,cuda:0", dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version, guidance_groups=1,
    )  # fmt: skip
    manager = get_manager()
    manager.env.update(LTX2_MGPU_ALL2ALL="kernel", **env)
    try:
        return sample(model, 1)
    finally:
        manager.unload()
        for key in ("LTX2_MGPU_ALL2ALL", *env):
            manager.env.pop(key, None)


def test_cuda_graphs_on_two_ranks_replay_the_exchange_bit_for_bit(tiny, monkeypatch):
    """NOTE [call graphs] on a group of several ranks: the blocks with sequence parallelism and the IPC
    kernel's exchanges inside, captured on each rank and replayed, give the eager steps' bits."""
    import torch

    monkeypatch.setenv("LTX2_MGPU_ALL2ALL", "kernel")
    graphed, reply = _two_ranks_on_one_gpu(tiny, LTX2_MGPU_CUDA_GRAPHS="1")
    eager, eager_reply = _two_ranks_on_one_gpu(tiny, LTX2_MGPU_CUDA_GRAPHS="0")
    assert_no_leaks()
    print(f"\n[call graphs, 2 ranks on one GPU] replays/captures/eager keys {reply['cuda_graphs']}")
    assert reply["exchange"] == "ipc-kernel" and eager_reply["cuda_graphs"] is None
    assert reply["cuda_graphs"][0] >= 1 and reply["cuda_graphs"][1] >= 1, reply["cuda_graphs"]
    assert reply["split_forwards"] == eager_reply["split_forwards"] > 0  # replayed forwards count too
    for a, b in zip(graphed, eager):
        assert torch.equal(a, b), float((a - b).abs().max())


def test_compiled_blocks_on_two_ranks_through_the_kernel(tiny, monkeypatch):
    """compile_blocks on ComfyUI's engine on a GPU: the exchange traced as our custom ops (kernels/ops.py)
    inside the compiled blocks; the result is the eager one to float rounding (inductor's fusions)."""
    import dataclasses

    import torch
    from test_guidance_gpu import sample

    monkeypatch.setenv("LTX2_MGPU_ALL2ALL", "kernel")
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cuda:0,cuda:0", dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version, guidance_groups=1,
    )  # fmt: skip
    manager = get_manager()
    manager.env["LTX2_MGPU_ALL2ALL"] = "kernel"
    try:
        eager, _ = sample(model, 1)
        compiled, reply = sample(dataclasses.replace(model, compile_blocks=True), 1)
    finally:
        manager.unload()
        manager.env.pop("LTX2_MGPU_ALL2ALL", None)
    assert_no_leaks()
    assert reply["compiled"] and reply["exchange"] == "ipc-kernel"
    for name, a, b in zip(("video", "audio"), compiled, eager):
        rel = float((a - b).abs().max() / b.abs().max())
        print(f"\n[compile_blocks, 2 ranks on one GPU] {name} vs eager: rel {rel:.2e}")
        assert rel <= 1e-4, (name, rel)
    assert torch.isfinite(compiled[0]).all()


def test_fp8_matmul_on_an_fp8_gpu(tiny):
    """fp8_matmul on a bf16 group (Hopper): ComfyUI's fp8 ops run (UNETLoader fp8_e4m3fn_fast's path, its
    CPU parity with native is tests/test_comfy_speed_options.py); the result is finite and not the bf16
    one. The distance is printed, not bounded: the tiny model's small random weights sit in fp8's
    subnormal range, so it says nothing of a real model's."""
    import torch
    from test_guidance_gpu import sample

    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cuda:0", dtype="bfloat16", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    try:
        plain, _ = sample(model, 1)
        get_manager().unload()
        import dataclasses

        fp8, _ = sample(dataclasses.replace(model, fp8_matmul=True), 1)
    finally:
        get_manager().unload()
    assert_no_leaks()
    for name, a, b in zip(("video", "audio"), fp8, plain):
        rel = float((a.float() - b.float()).abs().max() / b.float().abs().max())
        print(f"\n[fp8_matmul, 1 H200] {name} vs bf16: rel {rel:.2e}")
        assert torch.isfinite(a).all() and rel > 0, (name, rel)
