"""fp8 matmuls for the block Linears (workers/engine/ltxcore/fp8_linear.py) and LoRAs fused into them (workers/engine/ltxcore/lora.py).

Claims (CPU, the emulated path, which computes the quantized product the GPU path computes):
- an Fp8Linear stays within FP8_LINEAR_TOLERANCE of the float32 Linear it replaced (measured 2.8e-2),
  activations scaled per token: an outlier token leaves the other tokens' outputs unchanged;
- Fp8Selection.released picks what the released fp8 files quantize: 1176 Linears of the 19B (1-42),
  leaving 21.55 GB of weights instead of 37.75; on the tiny model (block 0 kept, as make_tiny_fp8
  does) 28 Linears, whose fp8 bytes equal the fp8 file's when loading that file;
- the tiny model's forward stays within FP8_FORWARD_TOLERANCE of the unquantized one (measured
  4.1e-2 video, 2.4e-2 audio; folding the fp8 file alone, weights only: 2.7e-2 / 1.7e-2);
- a LoRA fused into Fp8Linears lands within one fp8 rounding of the bf16 fuse, taking one LoRA out gives
  what fusing the other alone gives, and strength 0 gives back the fresh quantization bit for bit;
GPU: torch._scaled_mm (rowwise) equals the emulation up to fp32 accumulation order and one bf16 rounding.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

import pytest
import torch
from ltx_core.model.transformer.model_configurator import LTXModelConfigurator
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from test_lora_fp8 import forward_errors

from conftest import tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_model import tiny_checkpoint_config
from ltx2_mgpu.workers.engine.ltxcore.checkpoint import TRANSFORMER, load_transformer
from ltx2_mgpu.workers.engine.ltxcore.fp8_linear import (
    EMULATED,
    SCALED_MM,
    Fp8Linear,
    Fp8Selection,
    MatmulPath,
    emulated_linear,
    matmul_path,
    quantize_linears,
    scaled_mm_linear,
)
from ltx2_mgpu.workers.engine.ltxcore.lora import FuseTarget, LoraFuser
from ltx2_mgpu.workers.engine.ltxcore.model_forward import ForwardMode
from ltx2_mgpu.workers.engine.ltxcore.reference import denoiser, load_in_process, relative_error
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

CPU = torch.device("cpu")
# Weights and activations each keep 3 mantissa bits (rounding <= 2^-4 of a value); measured 2.8e-2.
FP8_LINEAR_TOLERANCE = 6e-2
# The tiny model with block 1's Linears in fp8; measured 4.1e-2 video, 2.4e-2 audio.
FP8_FORWARD_TOLERANCE = 6e-2
# e4m3 rounds a value by at most 2^-4 of it (half the 2^-3 spacing at the bottom of a binade).
FP8_ROUNDING = 2.0**-4
BF16_ROUNDING = 2.0**-8  # the same for bf16's 7 stored mantissa bits
ACCUMULATION_TOLERANCE = 2.0**-10  # of the largest output: scaled_mm vs emulation (GPU test)
TINY_SELECTION = Fp8Selection(excluded_blocks=(0,))  # make_tiny_fp8's default: block 1 quantized
TINY_FP8_LINEARS = 28  # per block: q/k/v/out of 6 attentions, 2 Linears of 2 feed-forwards
RELEASED_19B_LINEARS = 1176  # 28 Linears x blocks 1-42
CAPTION = 64  # the tiny model's caption channels


@pytest.fixture
def files(lora_files):
    return lora_files


def state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (fp8 weights are buffers), as raw bytes so fp8 compares bit for bit."""
    return {name: t.detach().reshape(-1).clone().view(torch.uint8) for name, t in module.state_dict().items()}


def unequal(module: torch.nn.Module, expected: dict[str, torch.Tensor]) -> list[str]:
    return [name for name, t in state(module).items() if not torch.equal(t, expected[name])]


def fp8_modules(module: torch.nn.Module) -> dict[str, Fp8Linear]:
    return {name: m for name, m in module.named_modules() if isinstance(m, Fp8Linear)}


def test_fp8_linear_stays_within_fp8_rounding_and_scales_each_token_alone():
    g = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(256, 512)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(512, 256, generator=g) / 16)
        linear.bias.copy_(torch.randn(512, generator=g))
    x = torch.randn(3, 37, 256, generator=g)
    fp8 = Fp8Linear.from_linear(linear)
    assert matmul_path(CPU).name == EMULATED == fp8.path.name and not fp8.uses_scaled_mm(x)
    with torch.no_grad():
        expected, got = linear(x), fp8(x)
        error = relative_error(got, expected)
        print(f"Fp8Linear vs float32 Linear: relative error {error:.2e}")
        assert got.shape == expected.shape and error <= FP8_LINEAR_TOLERANCE
        outlier = x.clone()
        outlier[0, 0] *= 1000.0
        outlier[1, 2] = 0.0
        with_outlier = fp8(outlier)
    assert torch.allclose(with_outlier[0, 1:], got[0, 1:], rtol=1e-6, atol=1e-6)
    assert torch.equal(with_outlier[1, 2], linear.bias.detach())  # a zero token: the bias exactly
    assert fp8.weight.dtype == torch.float8_e4m3fn and fp8.bias is linear.bias
    assert relative_error(fp8.dequantized(), linear.weight.detach()) <= FP8_ROUNDING


def test_an_all_zero_linear_quantizes_to_zero_and_gives_its_bias():
    linear = torch.nn.Linear(32, 16).to(torch.bfloat16)
    torch.nn.init.zeros_(linear.weight)
    fp8 = Fp8Linear.from_linear(linear)
    assert torch.isfinite(fp8.weight_scale) and not fp8.dequantized().any()
    x = torch.randn(3, 32, dtype=torch.bfloat16)
    assert torch.equal(fp8(x), linear.bias.detach().expand(3, 16))


def test_the_19b_selection_is_the_released_one_and_its_weights_weigh_21_55_gb():
    config = {**tiny_checkpoint_config()["transformer"], **LTX2_19B_TRANSFORMER}
    with torch.device("meta"):
        model = LTXModelConfigurator.from_config({"transformer": config})
    selection = Fp8Selection.released(48)
    assert selection.excluded_blocks == (0, 43, 44, 45, 46, 47)
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    chosen = [(n, m) for n, m in linears if selection.includes(n)]
    blocks = {int(n.split(".")[1]) for n, _ in chosen}
    assert len(chosen) == RELEASED_19B_LINEARS and blocks == set(range(1, 43))
    bf16_bytes = 2 * sum(p.numel() for p in model.parameters())
    fp8_bytes = bf16_bytes - sum(m.weight.numel() for _, m in chosen) + 4 * len(chosen)  # 1 byte + scales
    print(f"19B transformer weights: bf16 {bf16_bytes / 1e9:.2f} GB, fp8 Linears {fp8_bytes / 1e9:.2f} GB")
    assert round(bf16_bytes / 1e9, 2) == 37.75 and round(fp8_bytes / 1e9, 2) == 21.55


def test_quantize_linears_on_the_fp8_file_gives_back_its_fp8_weights(files):
    model = load_transformer(files["fp8"], CPU, torch.bfloat16)
    assert quantize_linears(model, TINY_SELECTION) == TINY_FP8_LINEARS
    quantized = fp8_modules(model)
    assert len(quantized) == TINY_FP8_LINEARS and all(
        n.startswith("transformer_blocks.1.") for n in quantized
    )
    left = [n for n, m in model.named_modules() if type(m) is torch.nn.Linear and TINY_SELECTION.includes(n)]
    assert left == []
    with safe_open(str(files["fp8"]), framework="pt") as f:
        for name, module in quantized.items():
            stored = f.get_tensor(f"model.diffusion_model.{name}.weight")
            assert torch.equal(stored.view(torch.uint8), module.weight.view(torch.uint8)), name


def test_tiny_forward_with_fp8_linears_stays_close_to_the_unquantized_one(files):
    reference, model = load_in_process(files["checkpoint"]), load_in_process(files["checkpoint"])
    assert quantize_linears(model.transformer.model, TINY_SELECTION) == TINY_FP8_LINEARS
    errors = forward_errors(model, reference)
    print(f"tiny forward, fp8 Linears vs unquantized: video {errors[0]:.2e} audio {errors[1]:.2e}")
    assert 0 < max(errors) <= FP8_FORWARD_TOLERANCE


@pytest.mark.parametrize("kind", ["checkpoint", "fp8"])
def test_loras_fuse_into_fp8_linears_and_strength_zero_restores_them_bit_exactly(files, kind):
    path, dtype = files[kind], torch.bfloat16
    model = load_transformer(path, CPU, dtype)
    quantize_linears(model, TINY_SELECTION)
    fresh = state(model)
    fuser = LoraFuser(path, dtype, ForwardMode.COMFYUI)
    targets = [FuseTarget(model, TRANSFORMER)]
    loras = [(str(files["lora"]), 1.0), (str(files["alpha"]), 0.5)]
    report = fuser.switch(targets, loras)
    assert report.fused == 2 * TINY_FP8_LINEARS  # block 0's bf16 Linears and block 1's fp8 ones
    changed = unequal(model, fresh)
    assert {n.rsplit(".", 1)[0] for n in changed if n.startswith("transformer_blocks.1.")} == set(
        fp8_modules(model)
    )
    # Against the same LoRAs fused into the bf16 model: one fp8 rounding apart, plus bf16's.
    plain = load_transformer(path, CPU, dtype)
    LoraFuser(path, dtype, ForwardMode.COMFYUI).switch([FuseTarget(plain, TRANSFORMER)], loras)
    plain_weights = dict(plain.named_parameters())
    for name, module in fp8_modules(model).items():
        expected = plain_weights[f"{name}.weight"].detach().float()
        assert relative_error(module.dequantized(), expected) <= FP8_ROUNDING + BF16_ROUNDING, name
    # One LoRA taken out: as if the other had been fused alone into a fresh fp8 model.
    fuser.switch(targets, [(str(files["alpha"]), 0.5)])
    alone = load_transformer(path, CPU, dtype)
    quantize_linears(alone, TINY_SELECTION)
    LoraFuser(path, dtype, ForwardMode.COMFYUI).switch([FuseTarget(alone, TRANSFORMER)], loras[1:])
    assert unequal(model, state(alone)) == []
    report = fuser.switch(targets, [(str(files["lora"]), 0.0)])
    assert report.restored == 2 * TINY_FP8_LINEARS and report.fused == 0
    assert unequal(model, fresh) == []


def test_an_fp8_linear_is_not_fused_onto_a_checkpoint_changed_since_loading(files, tmp_path):
    path = tmp_path / "copy.safetensors"
    shutil.copy(files["checkpoint"], path)
    model = load_transformer(path, CPU, torch.bfloat16)
    quantize_linears(model, TINY_SELECTION)
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    tensors["model.diffusion_model.transformer_blocks.1.attn1.to_q.weight"] *= 2
    save_file(tensors, str(path), metadata=metadata)
    fuser = LoraFuser(path, torch.bfloat16, ForwardMode.COMFYUI)
    with pytest.raises(RuntimeError, match="changed on disk since it was loaded"):
        fuser.switch([FuseTarget(model, TRANSFORMER)], [(str(files["lora"]), 1.0)])


def test_loader_fp8_matmul_runs_on_the_workers_and_loras_switch_on_it(manager, files):
    """The MGPU Loader's fp8_matmul: each rank quantizes the Linears the fp8 file stores in fp8 (one
    rank = this process's quantized model, bit for bit), 2 ranks agree with one within bf16 rounding,
    a LoRA switches on and off again to the same weights, and a float32 loader is refused."""
    from test_sp_gpu import BF16_RELATIVE_TOLERANCE, _forward

    from ltx2_mgpu.workers.engine.ltxcore.model import LoadedModel
    from ltx2_mgpu.workers.engine.ltxcore.reference import _OneRank
    from ltx2_mgpu.workers.group.manager import MGPUModel, check_fits

    g = torch.Generator().manual_seed(0)
    video, audio = torch.randn(1, 128, 3, 3, 3, generator=g), torch.randn(1, 8, 7, 16, generator=g)
    positive = tiny_conditioning(9, CAPTION, seed=3)
    local = LoadedModel.load(
        files["fp8"], CPU, torch.bfloat16, _OneRank(), ForwardMode.COMFYUI, fp8_matmul=True
    )
    assert len(fp8_modules(local.transformer.model)) == TINY_FP8_LINEARS  # the file's own choice: block 1
    den = denoiser(local, video, audio, positive, None, 1.0, 1.0, frame_rate=24.0)
    with torch.inference_mode():
        (_, expected), _ = den.velocity([video, audio], 0.6, [None, None])
    results = {}
    for ranks in (1, 2):
        model = MGPUModel.create(files["fp8"], devices=f"cpu:{ranks}", dtype="bfloat16", fp8_matmul=True)
        results[ranks] = _forward(manager, model, video, audio, positive)
    assert torch.equal(results[1][0], expected.float())
    rel = relative_error(results[2][0], results[1][0])
    print(f"fp8_matmul, 2 CPU ranks vs 1: video {rel:.2e}")
    assert rel <= BF16_RELATIVE_TOLERANCE
    clean = [r["fingerprint"] for r in manager.run(model, "lora_state", {})]
    with_lora = MGPUModel.create(
        files["fp8"], devices="cpu:2", dtype="bfloat16", fp8_matmul=True, loras=((str(files["lora"]), 0.8),)
    )
    manager.acquire(with_lora)  # lora_state itself switches nothing: fuse as a sampler would
    assert [r["fingerprint"] for r in manager.run(with_lora, "lora_state", {})] != clean
    manager.acquire(model)
    assert [r["fingerprint"] for r in manager.run(model, "lora_state", {})] == clean
    with pytest.raises(ValueError, match="set weight_dtype to bfloat16"):
        check_fits(MGPUModel.create(files["fp8"], devices="cpu:1", dtype="float32", fp8_matmul=True))


@contextlib.contextmanager
def full_fp32_matmul() -> Iterator[None]:
    """CUDA float32 matmuls without TF32 inside, the flag as it was afterwards. Not monkeypatch:
    `torch.backends.cuda.matmul` serves allow_tf32 through __getattr__, so monkeypatch's undo deletes
    the attribute instead of restoring it and errors at teardown (torch 2.11+)."""
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    matmul.allow_tf32 = False
    try:
        yield
    finally:
        matmul.allow_tf32 = before


def test_full_fp32_matmul_restores_the_tf32_flag():
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    for start in (True, False):
        matmul.allow_tf32 = start
        with full_fp32_matmul():
            assert matmul.allow_tf32 is False
        assert matmul.allow_tf32 is start
    matmul.allow_tf32 = before


@pytest.mark.gpu
def test_scaled_mm_equals_the_emulation_on_cuda():
    device = torch.device("cuda")
    path = matmul_path(device)
    if torch.cuda.get_device_capability(device) < (8, 9):
        assert path.name == EMULATED and "capability" in path.reason
        pytest.skip(f"no fp8 matmul on this GPU: {path.reason}")
    assert path.name == SCALED_MM, path.reason
    with full_fp32_matmul():  # the emulation: true float32
        _check_scaled_mm_against_emulation(device, path)


def _check_scaled_mm_against_emulation(device: torch.device, path: MatmulPath) -> None:
    g = torch.Generator(device=device).manual_seed(0)
    linear = torch.nn.Linear(2048, 4096, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        linear.weight.normal_(0.0, 0.02, generator=g)
        linear.bias.normal_(0.0, 0.1, generator=g)
    fp8 = Fp8Linear.from_linear(linear)
    x = torch.randn(2, 1000, 2048, device=device, dtype=torch.bfloat16, generator=g)
    assert fp8.path == path and fp8.uses_scaled_mm(x) and not fp8.uses_scaled_mm(x.float())
    with torch.inference_mode():
        fast = fp8(x)
        direct = scaled_mm_linear(x, fp8.weight, fp8.weight_scale, fp8.bias)
        emulated = emulated_linear(x, fp8.weight, fp8.weight_scale, fp8.bias)
        reference = linear(x)
    assert torch.equal(fast, direct)
    differ = (fast != emulated).float().mean().item()
    error = relative_error(fast.float(), emulated.float())
    print(f"scaled_mm vs emulation: {differ:.2%} of outputs differ, relative error {error:.1e}; "
          f"vs bf16 Linear {relative_error(fast.float(), reference.float()):.1e}")  # fmt: skip
    # Both round an fp32 sum to bf16: one bf16 step (2^-7 of a value) apart, plus the accumulation-
    # order difference where outputs nearly cancel (Hopper's fp8 MMA adds in ~14 bits between fp32
    # promotions); a wrong scale or layout would be off by far more than either.
    atol = ACCUMULATION_TOLERANCE * emulated.abs().max().item()
    torch.testing.assert_close(fast.float(), emulated.float(), rtol=2.0**-7, atol=atol)
    assert relative_error(fast.float(), reference.float()) <= FP8_LINEAR_TOLERANCE
