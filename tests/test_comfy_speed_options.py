"""The speed options on ComfyUI's engine (opt-in: COMFYUI_PATH): fp8_matmul is ComfyUI's own fp8 path for
bf16 files (UNETLoader's weight_dtype fp8_e4m3fn_fast), compile_blocks compiles the blocks ComfyUI's
model runs (NOTE [compiled blocks]) under sequence parallelism too; an option the engine cannot honour
is refused in the node from its capability table, before any worker starts (nothing in /dev/shm).
GPU-only parts (fp8 tensor cores, compile and CUDA graphs on an H200) are in test_sp_comfy_gpu.py."""

from __future__ import annotations

import pytest
import torch
from comfyui_harness import comfyui_root
from test_comfyui_native_parity import Case, comfy, errors, native_inputs, our_sample  # noqa: F401

from conftest import assert_no_leaks, worker_children
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.capabilities import COMFY, has_cxx_compiler
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5  # SP's reduction order, as every parity test of the pack
CASE = Case("euler", 3.0, 3.0, sigmas="manual", audio=True)
SIGMAS = "0.909375, 0.725, 0.0"  # two steps: a compiled shape's first step compiles, the second reuses it


@pytest.fixture(autouse=True)
def short_sigmas(monkeypatch):
    import test_comfyui_native_parity as native

    monkeypatch.setattr(native, "MANUAL_SIGMAS", SIGMAS)


def _model(tiny, ranks: int, **options) -> MGPUModel:
    root = check_comfyui_root(comfyui_root())
    return MGPUModel.create(
        tiny.checkpoint, devices=f"cpu:{ranks}", backend="comfy", comfyui_root=root.path,
        comfyui_version=root.version, guidance_groups=1, **options,
    )  # fmt: skip


def _native_fp8_fast(comfy, tiny, inputs) -> list[torch.Tensor]:  # noqa: F811
    """Native ComfyUI with the file loaded by UNETLoader, weight_dtype fp8_e4m3fn_fast."""
    import folder_paths

    import nodes

    folder_paths.add_model_folder_path("diffusion_models", str(tiny.checkpoint.parent))
    (model,) = nodes.UNETLoader().load_unet(tiny.checkpoint.name, "fp8_e4m3fn_fast")
    positive, negative, latent, sigmas = inputs
    (guider,) = comfy.cs.CFGGuider.execute(model, positive, negative, CASE.cfg)
    (noise,) = comfy.cs.RandomNoise.execute(42)
    (sampler,) = comfy.cs.KSamplerSelect.execute(CASE.sampler)
    with torch.inference_mode():
        out = comfy.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]["samples"]
    return [t.clone() for t in out.unbind()]


@pytest.mark.parametrize("ranks", [1, 2])
def test_fp8_matmul_is_unetloaders_fp8_fast(comfy, tiny, ranks):  # noqa: F811
    inputs = native_inputs(comfy, CASE)
    native = _native_fp8_fast(comfy, tiny, inputs)
    try:
        ours = our_sample(comfy, _model(tiny, ranks, dtype="bfloat16", fp8_matmul=True), CASE, *inputs)
    finally:
        get_manager().unload()
        assert_no_leaks()
    found = errors(ours, native)
    print(f"\n[fp8_matmul, comfy engine] {ranks} rank(s) vs UNETLoader fp8_e4m3fn_fast: {found}")
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found)


@pytest.mark.skipif(not has_cxx_compiler(), reason="torch.compile on CPU (inductor) needs a C++ compiler")
def test_compiled_blocks_under_sequence_parallelism_give_the_eager_result(comfy, tiny, monkeypatch):  # noqa: F811
    """Two ranks, the tokens split: compiled blocks against the same group's eager blocks (inductor
    fuses and reorders float32 sums: rounding-level differences); the reply says the blocks ran compiled."""
    import ltx2_mgpu.nodes.sp_sampler as sp

    replies: list[list[dict]] = []
    run_job = sp.run_job
    monkeypatch.setattr(sp, "run_job", lambda *a, **k: replies.append(run_job(*a, **k)) or replies[-1])
    inputs = native_inputs(comfy, CASE)
    try:
        eager = our_sample(comfy, _model(tiny, 2, dtype="float32"), CASE, *inputs)
        compiled = our_sample(comfy, _model(tiny, 2, dtype="float32", compile_blocks=True), CASE, *inputs)
    finally:
        get_manager().unload()
        assert_no_leaks()
    found = errors(compiled, eager)
    print(f"\n[compile_blocks, comfy engine] 2 ranks vs eager: {found}")
    assert [r["compiled"] for r in replies[0]] == [False, False]
    assert [r["compiled"] for r in replies[1]] == [True, True]
    assert [r["split_forwards"] for r in replies[1]] == [2, 2]  # both steps split over the ranks
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found)


def _load(checkpoint, **options):
    """The MGPU Loader on `checkpoint` as ComfyUI runs it (the file named from its checkpoints folder)."""
    import folder_paths

    from ltx2_mgpu.nodes.loader import load_model

    folder_paths.add_model_folder_path("checkpoints", str(checkpoint.parent))
    return load_model(checkpoint.name, "cpu:1", options.pop("weight_dtype", "bfloat16"), **options)


def test_options_the_engine_cannot_honour_are_refused_before_any_worker_starts(
    comfy,  # noqa: F811 (the imported fixture: ComfyUI's folder_paths names the files)
    tiny,
    tmp_path,
    monkeypatch,
):
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_fp8
    from ltx2_mgpu.workers.wire import capabilities

    fp8_file = make_tiny_fp8(tiny.checkpoint, tmp_path / "ltx2-tiny-fp8.safetensors")
    with pytest.raises(
        ValueError, match=r"fp8_matmul means .*fp8_e4m3fn_fast.*already stored as bf16 \+ fp8 e4m3 scaled"
    ):
        _load(fp8_file, fp8_matmul=True)
    with pytest.raises(ValueError, match=r"fp8_matmul computes in bfloat16.*set weight_dtype to bfloat16"):
        _load(tiny.checkpoint, weight_dtype="float32", fp8_matmul=True)
    with pytest.raises(ValueError, match=r"compile_blocks runs with weights replicated.*weights offloaded"):
        _load(tiny.checkpoint, compile_blocks=True, weights="offloaded")
    monkeypatch.setattr(capabilities, "has_cxx_compiler", lambda: False)
    with pytest.raises(ValueError, match="compile_blocks on CPU workers needs a C\\+\\+ compiler"):
        _load(tiny.checkpoint, compile_blocks=True)
    assert worker_children() == [] and get_manager().group is None
    assert_no_leaks()


def test_fp8_matmul_on_a_gpu_without_fp8_is_refused(monkeypatch):
    from ltx2_mgpu.workers.wire import capabilities

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 6))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA RTX A6000")
    with pytest.raises(ValueError, match=r"fp8_matmul needs .*8\.9.*cuda:1 \(NVIDIA RTX A6000\) is 8\.6"):
        capabilities.check_fp8_matmul(COMFY, "bf16", "bfloat16", ("cuda:1", "cuda:2"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    capabilities.check_fp8_matmul(COMFY, "bf16", "bfloat16", ("cuda:1",))


def test_compile_blocks_on_a_gpu_triton_cannot_take_is_refused(monkeypatch):
    import importlib.util

    from ltx2_mgpu.workers.wire import capabilities
    from ltx2_mgpu.workers.wire.checks import ForwardMode

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (6, 1))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla P40")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: object() if name == "triton" else find_spec(name)
    )
    with pytest.raises(
        ValueError, match=r"compile_blocks needs a GPU of compute capability 7\.0.*cuda:0 \(Tesla P40\)"
    ):
        capabilities.check_compile_blocks(COMFY, ForwardMode.COMFYUI, ("cuda:0",))
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "triton" else find_spec(name)
    )
    with pytest.raises(ValueError, match="compile_blocks on GPUs needs Triton"):
        capabilities.check_compile_blocks(COMFY, ForwardMode.COMFYUI, ("cuda:0",))
