"""The 22B benchmark's pieces on the CPU: the family configs as ComfyUI builds them, the quantized
layouts ComfyUI loads (fp8 scaled, int8 convrot), and the FLOPs formula against torch's FLOP counter
on ComfyUI's own forward (bench/av_flops.py, bench/bench_comfy_step.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

COMFYUI = os.environ.get("COMFYUI_PATH", "")
BENCH = Path(__file__).resolve().parents[1] / "bench"
VIDEO_SHAPE, AUDIO_FRAMES = [1, 128, 4, 4, 6], 126


def _load_bench_module(name: str):
    """bench/NAME.py as its script imports it: bench/ on sys.path for its sibling modules."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    added = str(BENCH) not in sys.path
    if added:
        sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(str(BENCH))
    return module


@pytest.fixture(scope="module")
def comfy():
    if not COMFYUI:
        pytest.skip("set COMFYUI_PATH to a ComfyUI checkout")
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    import_comfyui(check_comfyui_root(COMFYUI), torch.device("cpu"))
    from ltx2_mgpu.workers.engine.comfy import random_model

    return random_model


def _config(random_model, family: str, tiny: bool = True) -> dict:
    from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

    # bench_comfy_step --tiny's own small widths, so the counts checked here are the script's.
    small = _load_bench_module("bench_step").TINY if tiny else {}
    return random_model.family_config({**LTX2_19B_TRANSFORMER, **small}, family)


@pytest.mark.comfyui
def test_22b_configurations_count_as_released(comfy):
    """19B stays 19.6B; 2.3 / 2.5 hold 21.0B in ComfyUI's diffusion model (the 1.16B text projection sits
    in the text encoder): the 8-layer connectors at the streams' widths are what the 22B adds."""
    counts = {f: comfy.count_parameters(_config(comfy, f, tiny=False)) for f in ("2", "2.3", "2.5")}
    assert 19.5e9 < counts["2"] < 19.7e9
    assert 20.9e9 < counts["2.3"] < 21.1e9
    # 2.5: video feed-forward biases gone (48 x (16384 + 4096)), keyframe embedding added (4096).
    assert counts["2.3"] - counts["2.5"] == 48 * (16384 + 4096) - 4096
    shapes = comfy.parameter_shapes(_config(comfy, "2.5", tiny=False))
    assert "keyframes_abs_pos_embedding" in shapes
    assert "transformer_blocks.0.ff.net.0.proj.bias" not in shapes
    assert shapes["transformer_blocks.0.attn1.to_gate_logits.weight"] == (32, 4096)
    assert shapes["transformer_blocks.0.prompt_scale_shift_table"] == (2, 4096)
    assert (
        sum(
            1
            for k in shapes
            if k.startswith("video_embeddings_connector.transformer_1d_blocks.")
            and k.endswith("attn1.to_q.weight")
        )
        == 8
    )


@pytest.mark.comfyui
@pytest.mark.parametrize("weights", ["fp8", "int8"])
def test_quantized_random_model_is_held_as_comfyui_holds_the_file(comfy, weights):
    """The released layers are QuantizedTensors in ComfyUI's mixed-precision Linears; the rest stays in
    the compute dtype; a CFG step runs and gives finite values."""
    from comfy.quant_ops import QuantizedTensor

    from ltx2_mgpu.workers.engine.comfy.bench import random_job_inputs, time_steps

    config = _config(comfy, "2.5")
    patcher = comfy.comfy_random_model(config, torch.device("cpu"), torch.float32, 0, weights)
    blocks = patcher.model.diffusion_model.transformer_blocks
    layers = comfy.quantized_layers(comfy.parameter_shapes(config), weights, config["num_layers"])
    found = {
        name.removesuffix(".weight")
        for name, p in blocks.named_parameters(prefix="transformer_blocks")
        if isinstance(p.data, QuantizedTensor)
    }
    assert found == set(layers)
    if weights == "fp8":  # block 0 kept, block 1's attention and feed-forward quantized
        assert not any(k.startswith("transformer_blocks.0.") for k in found)
        assert (
            "transformer_blocks.1.ff.net.2" in found
            and "transformer_blocks.1.attn1.to_gate_logits" not in found
        )
        assert blocks[1].attn1.to_q.weight._qdata.dtype == torch.float8_e4m3fn
    else:  # every block Linear, convrot in groups of 16 (the tiny widths)
        assert blocks[0].attn1.to_gate_logits.weight._params.convrot_groupsize == 64
        assert blocks[0].ff.net[2].weight._qdata.dtype == torch.int8
    assert patcher.model.diffusion_model.adaln_single.linear.weight.dtype == torch.float32
    inputs = random_job_inputs(
        VIDEO_SHAPE, AUDIO_FRAMES, config["caption_channels"], 0, comfy.context_width(config)
    )
    outputs = []

    def keep_output(apply_model, args):
        outputs.append(apply_model(args["input"], args["timestep"], **args["c"]))
        return outputs[-1]

    patcher.set_model_unet_function_wrapper(keep_output)
    time_steps(patcher, inputs, 1, torch.device("cpu"))
    assert len(outputs) >= 2 and all(torch.isfinite(out).all() for out in outputs)


@pytest.mark.comfyui
@pytest.mark.parametrize("family", ["2", "2.3", "2.5"])
def test_flops_formula_matches_the_linear_layers_comfyui_runs(comfy, family):
    """Over one sampling run (2 CFG model calls) of ComfyUI's forward, every Linear's 2 x rows x in x out
    adds up to the formula's Linear part within 1% (the AdaLN MLPs it leaves out are small; the context is
    given processed, so the text connectors do not run, as in a step after the first)."""
    from ltx2_mgpu.workers.engine.comfy.bench import random_job_inputs, time_steps

    av_flops = _load_bench_module("av_flops")
    config = _config(comfy, family)
    patcher = comfy.comfy_random_model(config, torch.device("cpu"), torch.float32, 0, "bf16")
    inputs = random_job_inputs(
        VIDEO_SHAPE, AUDIO_FRAMES, config["caption_channels"], 0, comfy.context_width(config)
    )
    counted = [0]

    def count(module, args, output):
        counted[0] += 2 * args[0].numel() * module.out_features

    model = patcher.model.diffusion_model
    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        time_steps(patcher, inputs, 1, torch.device("cpu"))
    finally:
        for hook in hooks:
            hook.remove()
    linear, attention = av_flops.av_step_flops_parts(config, 96, AUDIO_FRAMES)
    assert counted[0] == pytest.approx(2 * linear, rel=0.01)
    # Attention products: at least video self-attention's 4 N^2 d per layer and batch element.
    assert attention / 2 / 2 >= 4 * 96 * 96 * 128


def test_mfu_uses_the_format_peak():
    av_flops = _load_bench_module("av_flops")
    assert av_flops.mfu(989e12, 1000.0, "bf16") == pytest.approx(1.0)
    assert av_flops.mfu(989e12, 1000.0, "int8") == pytest.approx(989 / 1979)


@pytest.mark.parametrize("weights", ["bf16", "fp8", "int8"])
def test_the_random_model_request_carries_the_weight_format(weights):
    from ltx2_mgpu.workers.rank import ops
    from ltx2_mgpu.workers.wire.requests import ComfyLoadRandomModel

    request = ComfyLoadRandomModel("/comfyui", weights=weights)
    assert ops.read_request(ComfyLoadRandomModel, request.to_wire()).weights == weights


def test_an_unknown_weight_format_is_refused_before_any_worker_starts():
    from ltx2_mgpu.workers.rank import ops
    from ltx2_mgpu.workers.wire.requests import ComfyLoadRandomModel

    with pytest.raises(ValueError, match="weights 'nvfp4' is not one of bf16, fp8, fp8_fast, int8"):
        ComfyLoadRandomModel("/comfyui", weights="nvfp4")
    with pytest.raises(ops.InputRejected, match="weights 'fp4' is not one of"):
        ops.read_request(ComfyLoadRandomModel, {"comfyui_root": "/comfyui", "weights": "fp4"})


@pytest.mark.comfyui
def test_real_size_ltx25_files_are_what_comfyuis_loaders_load(comfy, tmp_path):
    """bench/e2e_models.py --family 2.5 with one block, one text-connector block and no Gemma 4 (ComfyUI
    builds only the whole 12B, a GPU's job): UNETLoader's loader takes the transformer file as LTX-2.5
    at the 22B widths (keyframe position embedding, video feed-forward without bias, every block Linear
    int8 convrot in the released groups of 256) and LatentUpscaleModelLoader's code takes the upscaler."""
    import json

    import comfy.ops
    import comfy.sd
    import comfy.utils
    from comfy.ldm.lightricks.latent_upsampler import LatentUpsampler
    from comfy.quant_ops import QuantizedTensor

    e2e = _load_bench_module("e2e_models")
    models = e2e.write_real_ltx25_models(
        tmp_path, torch.device("cpu"), num_layers=1, text_encoder=False, connector_layers=1
    )
    released = e2e.released_names()[1]
    patcher = comfy.sd.load_diffusion_model(str(models / "diffusion_models" / released["diffusion_models"]))
    net = patcher.model.diffusion_model
    assert type(net).__name__ == "LTXAVModel" and len(net.transformer_blocks) == 1
    assert len(net.video_embeddings_connector.transformer_1d_blocks) == 1
    assert net.keyframes_abs_pos_embedding is not None and net.keyframes_abs_pos_embedding.shape == (1, 4096)
    block = net.transformer_blocks[0]
    assert block.ff.net[2].bias is None and block.audio_ff.net[2].bias is not None
    quantized = {n for n, p in block.named_parameters() if isinstance(p.data, QuantizedTensor)}
    linears = {n for n, p in block.named_parameters() if n.endswith(".weight") and p.ndim == 2}
    assert quantized == linears and block.attn1.to_q.weight._params.convrot_groupsize == 256
    assert block.attn1.to_q.weight.shape == (4096, 4096)
    upscaler_file = models / "latent_upscale_models" / released["latent_upscale_models"]
    state, metadata = comfy.utils.load_torch_file(str(upscaler_file), return_metadata=True)
    assert "post_upsample_res_blocks.0.conv2.bias" in state  # the key the loader recognises LTX's by
    upsampler = LatentUpsampler.from_config(
        json.loads(metadata["config"]), operations=comfy.ops.disable_weight_init
    )
    upsampler.load_state_dict(state)  # strict: every key of the file and the model
    for name in ("video_vae", "audio_vae"):
        assert (models / "vae" / released[name]).stat().st_size > 0
    weights = json.loads((models / "WEIGHTS.json").read_text())
    assert (
        "1 blocks" in weights[released["diffusion_models"]]
        and "NOT representative" in weights[released["video_vae"]]
    )


@pytest.mark.comfyui
def test_the_step_bench_measures_an_attention_backend_tiny_on_cpu(comfy, tmp_path):
    """bench_comfy_step --attention --accuracy on the CPU (sub_quad: registered by every ComfyUI): native
    and our worker time the steps with it, the worker's reply shows it ran there, and its error against
    the default attention is measured (float32: rounding only); our denoised prediction is compared with
    native's, beside native's difference between batching cond and uncond together and apart."""
    import sys

    sys.path.insert(0, str(BENCH))
    try:
        bench = _load_bench_module("bench_comfy_step")
        report = bench.main(["--tiny", "--family", "2.3", "--repeats", "1", "--attention", "sub_quad",
                             "--accuracy", "--comfyui", COMFYUI, "--out", str(tmp_path / "step.json")])  # fmt: skip
    finally:
        sys.path.remove(str(BENCH))
    assert report["attention"] == "sub_quad"
    (case,) = report["formats"][0]["cases"]
    assert case["comfy_attention_backend_calls"]["sub_quad"] > 0
    assert len(case["comfy_worker_attention_ms"]) == len(case["native_attention_ms"]) == 1
    assert all(0 <= error < 1e-5 for error in case["native_attention_error"]), case["native_attention_error"]
    assert case["comfy_worker_attention_speedup"] > 0 and case["native_attention_speedup"] > 0
    # two streams (video, audio); float32 on one CPU rank: ComfyUI's forward, rounding apart at most
    assert len(case["comfy_worker_error"]) == len(case["native_batching_error"]) == 2
    assert all(0 <= error < 1e-5 for error in case["comfy_worker_error"] + case["native_batching_error"]), (
        case
    )


@pytest.mark.parametrize("weights", ["fp8", "int8"])
def test_the_lora_switch_bench_runs_both_modes_tiny_on_cpu(comfy, tmp_path, weights):
    """bench_lora_sets --tiny: ComfyUI's fused switching, the kept sets and the unfused LoRAs side by
    side; fused and kept leave the same weights bit for bit; kept builds the set once and swaps it in
    afterwards; a step is timed in each mode."""
    sys.path.insert(0, str(BENCH))
    try:
        bench = _load_bench_module("bench_lora_sets")
        report = bench.main(["--tiny", "--family", "2.5", "--weights", weights, "--rank", "4", "--repeats", "2",
                             "--step-tokens", "96", "--comfyui", COMFYUI, "--out", str(tmp_path / "sets.json")])  # fmt: skip
    finally:
        sys.path.remove(str(BENCH))
    assert report["same_weights_bit_for_bit"] is True
    assert report["kept"]["how"] == ["built", "base", "kept", "base"]
    assert report["unfused"]["how"] == ["unfused", "base", "unfused", "base"]
    assert report["kept"]["patched_weights"] == report["fused"]["patched_weights"] > 0
    assert len(report["fused"]["lora_on_s"]) == len(report["kept"]["lora_off_s"]) == 2
    assert report["kept_gib"] > 0
    assert all(len(report[mode]["step_ms"]) == 2 for mode in ("fused", "kept", "unfused"))
