"""LoRAs fused in place on the loaded base, and fp8 checkpoints (issue 11).

Claims, on the tiny model (bf16 file, CPU):
- reference mode fuses exactly as ltx-core's own builder (`SingleGPUModelBuilder.lora`): every
  parameter bit-equal, so the forward is ltx-core's; comfyui mode follows ComfyUI's formula (fp32 sum,
  alpha / rank honoured);
- strength 0, and taking a LoRA out again, give back the clean base bit for bit (torch.equal on every
  parameter), for the bf16 and the fp8 file alike;
- stage 1 without and stage 2 with a LoRA, through the nodes, share one group and one base load, and
  each stage equals the in-process run of that weight set (1e-5, the SP tolerance);
- the fp8 variant loads with its scales folded (weights = fp8 * scale exactly) and its forward stays
  within FP8_TOLERANCE of the bf16 one (measured 2.7e-2 video, 1.7e-2 audio).
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import replace

import pytest
import torch
from comfyui_harness import pack_node_classes
from ltx_core.loader import LTXV_LORA_COMFY_RENAMING_MAP, SingleGPUModelBuilder
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from conftest import tiny_conditioning
from ltx2_mgpu.nodes.loader import load_model
from ltx2_mgpu.nodes.mgpu_lora import add_lora
from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_lora
from ltx2_mgpu.workers.engine.ltxcore.checkpoint import (
    TRANSFORMER,
    embeddings_processor_spec,
    load_transformer,
)
from ltx2_mgpu.workers.engine.ltxcore.lora import FuseTarget, LoraFuser
from ltx2_mgpu.workers.engine.ltxcore.model_forward import ForwardMode
from ltx2_mgpu.workers.engine.ltxcore.reference import (
    denoiser,
    load_in_process,
    relative_error,
    sample_in_process,
)
from ltx2_mgpu.workers.group import client
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire.errors import JobInputError
from ltx2_mgpu.workers.wire.lora_files import read_lora
from ltx2_mgpu.workers.wire.model_files import read_safetensors_header

SP_TOLERANCE = 1e-5  # tests/test_sp_parity.py: N ranks vs one process, fp32
# fp8 e4m3 keeps 3 mantissa bits (weights within 2^-4 relative); measured 2.7e-2 on the tiny model.
FP8_TOLERANCE = 5e-2
CAPTION = 64  # the tiny model's caption channels
CPU = torch.device("cpu")


@pytest.fixture
def files(lora_files):
    return lora_files


def ltx_core_fused(checkpoint, loras, dtype):
    """The transformer as ltx-core builds it with LoRAs (as ltx-pipelines passes them)."""
    builder = SingleGPUModelBuilder(
        model_class_configurator=TRANSFORMER.configurator,
        model_path=str(checkpoint),
        model_sd_ops=TRANSFORMER.sd_ops,
    )
    for path, strength in loras:
        builder = builder.lora(str(path), strength, LTXV_LORA_COMFY_RENAMING_MAP)
    return builder.build(device=CPU, dtype=dtype)


def params(module):
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def unequal(module, expected) -> list[str]:
    return [name for name, p in module.named_parameters() if not torch.equal(p, expected[name])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_mode_fuses_bit_exactly_as_ltx_core(files, dtype):
    base = load_transformer(files["checkpoint"], CPU, dtype)
    fuser = LoraFuser(files["checkpoint"], dtype, ForwardMode.REFERENCE)
    targets = [FuseTarget(base, TRANSFORMER)]
    for loras in ([(files["lora"], 0.7)], [(files["lora"], 0.7), (files["alpha"], -1.3)]):
        report = fuser.switch(targets, [(str(p), s) for p, s in loras])
        expected = params(ltx_core_fused(files["checkpoint"], loras, dtype))
        assert report.changed and report.fused == 56  # 28 Linears x 2 blocks
        assert unequal(base, expected) == []


def test_comfyui_mode_sums_in_fp32_and_honours_alpha(files):
    base = load_transformer(files["checkpoint"], CPU, torch.float32)
    clean = params(base)
    fuser = LoraFuser(files["checkpoint"], torch.float32, ForwardMode.COMFYUI)
    fuser.switch([FuseTarget(base, TRANSFORMER)], [(str(files["alpha"]), 0.6)])
    lora = load_file(str(files["alpha"]))
    stem = "diffusion_model.transformer_blocks.1.ff.net.2"
    down, up = lora[f"{stem}.lora_A.weight"].double(), lora[f"{stem}.lora_B.weight"].double()
    expected = clean["transformer_blocks.1.ff.net.2.weight"].double() + 0.6 * (4.0 / 8) * (up @ down)
    got = dict(base.named_parameters())["transformer_blocks.1.ff.net.2.weight"].detach().double()
    assert relative_error(got, expected) < 1e-6


@pytest.mark.parametrize("kind", ["checkpoint", "fp8"])
def test_strength_zero_and_unfuse_restore_the_base_bit_exactly(files, kind):
    path = files[kind]
    base = load_transformer(path, CPU, torch.float32)
    clean = params(base)
    fuser = LoraFuser(path, torch.float32, ForwardMode.COMFYUI)
    targets = [FuseTarget(base, TRANSFORMER)]
    assert not fuser.switch(targets, [(str(files["lora"]), 0.0)]).changed
    assert unequal(base, clean) == []
    fuser.switch(targets, [(str(files["lora"]), 1.0), (str(files["alpha"]), 0.5)])
    assert len(unequal(base, clean)) == 56
    fuser.switch(targets, [(str(files["alpha"]), 0.5)])  # one LoRA taken out: as if fused alone
    alone = load_transformer(path, CPU, torch.float32)
    LoraFuser(path, torch.float32, ForwardMode.COMFYUI).switch(
        [FuseTarget(alone, TRANSFORMER)], [(str(files["alpha"]), 0.5)]
    )
    assert unequal(base, params(alone)) == []
    report = fuser.switch(targets, [(str(files["lora"]), 0.0)])
    assert report.restored == 56 and report.fused == 0
    assert unequal(base, clean) == []


def test_connector_loras_fuse_into_the_text_connectors_and_come_out_again(files, tmp_path):
    """ComfyUI keeps the text connectors in the diffusion model, so its LoRA keys reach them too."""
    lora = make_tiny_lora(
        tmp_path / "connector-lora.safetensors", files["checkpoint"], rank=4, seed=3,
        prefixes=("video_embeddings_connector.", "transformer_blocks.0."),
    )  # fmt: skip
    model = load_in_process(files["checkpoint"])
    targets = [
        FuseTarget(model.transformer.model, TRANSFORMER),
        FuseTarget(model.processor, embeddings_processor_spec()),
    ]
    clean_connectors, clean_blocks = params(model.processor), params(model.transformer.model)
    fuser = LoraFuser(files["checkpoint"], torch.float32, ForwardMode.COMFYUI)
    fuser.switch(targets, [(str(lora), 1.0)])
    changed = unequal(model.processor, clean_connectors)
    assert changed and all(name.startswith("video_connector.") for name in changed)
    assert len(unequal(model.transformer.model, clean_blocks)) == 28  # block 0 only
    fuser.switch(targets, [])
    assert unequal(model.processor, clean_connectors) == [] == unequal(model.transformer.model, clean_blocks)


def test_a_checkpoint_changed_on_disk_is_not_restored_silently(files, tmp_path):
    path = tmp_path / "copy.safetensors"
    shutil.copy(files["checkpoint"], path)
    base = load_transformer(path, CPU, torch.float32)
    fuser = LoraFuser(path, torch.float32, ForwardMode.COMFYUI)
    fuser.switch([FuseTarget(base, TRANSFORMER)], [(str(files["lora"]), 1.0)])
    tensors = load_file(str(path))
    tensors["model.diffusion_model.transformer_blocks.0.attn1.to_q.weight"] += 1
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(RuntimeError, match="changed on disk since it was loaded"):
        fuser.switch([FuseTarget(base, TRANSFORMER)], [])


def test_lora_files_that_do_not_fit_are_refused_with_the_reason(files, tmp_path):
    header = read_safetensors_header(files["checkpoint"])
    other = tmp_path / "other-model.safetensors"
    save_file(
        {
            "diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight": torch.zeros(4, 4096),
            "diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight": torch.zeros(4096, 4),
        },
        str(other),
    )
    with pytest.raises(ValueError, match=r"does not fit the checkpoint .* \[out, in\] = \[128, 128\]"):
        read_lora(other, header)
    foreign = tmp_path / "foreign.safetensors"
    save_file(
        {"unet.down.0.lora_A.weight": torch.zeros(4, 8), "unet.down.0.lora_B.weight": torch.zeros(8, 4)},
        str(foreign),
    )
    with pytest.raises(
        ValueError, match=r"changes no weight .* names weights like 'diffusion_model\.transformer_blocks"
    ):
        read_lora(foreign, header)
    model = MGPUModel.create(files["checkpoint"], devices="cpu:1", dtype="float32")
    with pytest.raises(ValueError, match="does not fit"):
        add_lora(model, str(other), 1.0)
    assert add_lora(model, str(files["lora"]), 0.0) == (model,)


def test_fp8_checkpoint_loads_with_scales_folded_and_stays_close_to_bf16(files):
    header = read_safetensors_header(files["fp8"])
    key = "model.diffusion_model.transformer_blocks.1.attn1.to_q"
    assert header.dtypes[f"{key}.weight"] == "F8_E4M3"
    assert header.shapes[f"{key}.weight_scale"] == () and header.shapes[f"{key}.input_scale"] == ()
    assert header.dtypes["model.diffusion_model.transformer_blocks.0.attn1.to_q.weight"] == "BF16"
    with safe_open(str(files["fp8"]), framework="pt") as f:
        folded = (f.get_tensor(f"{key}.weight").float() * f.get_tensor(f"{key}.weight_scale")).to(
            torch.bfloat16
        )
    fp8, bf16 = (
        load_transformer(files["fp8"], CPU, torch.bfloat16),
        load_transformer(files["checkpoint"], CPU, torch.bfloat16),
    )
    assert torch.equal(dict(fp8.named_parameters())["transformer_blocks.1.attn1.to_q.weight"], folded)
    differ = unequal(fp8, params(bf16))  # only the quantized Linears: 28 in block 1, none in block 0
    assert len(differ) == 28 and all(name.startswith("transformer_blocks.1.") for name in differ)
    errors = forward_errors(load_in_process(files["fp8"]), load_in_process(files["checkpoint"]))
    print(f"fp8 vs bf16 relative error: video {errors[0]:.2e} audio {errors[1]:.2e}")
    assert max(errors) <= FP8_TOLERANCE


def forward_errors(model, reference, sigma=0.7):
    g = torch.Generator().manual_seed(0)
    video, audio = torch.randn(1, 128, 3, 3, 3, generator=g), torch.randn(1, 8, 7, 16, generator=g)
    positive = tiny_conditioning(9, CAPTION, seed=3)
    outs = []
    for m in (model, reference):
        den = denoiser(m, video, audio, positive, None, 1.0, 1.0, frame_rate=24.0)
        with torch.inference_mode():
            (_, v), (_, a) = den.velocity([video, audio], sigma, [None, None])
        outs.append((v, a))
    return relative_error(outs[0][0], outs[1][0]), relative_error(outs[0][1], outs[1][1])


@pytest.fixture
def commands(monkeypatch):
    """Every command the group manager sends, in order."""
    sent: list[str] = []
    original = client.WorkerGroup.run

    def spy(self, op, args=None, **kwargs):
        sent.append(op)
        return original(self, op, args, **kwargs)

    monkeypatch.setattr(client.WorkerGroup, "run", spy)
    return sent


def test_stage_1_without_and_stage_2_with_a_lora_share_one_base_load(manager, files, commands):
    """The two-stage workflow through the nodes, twice (two prompts), in reference mode so stage 2
    can be held against ltx-core's own fusing."""
    stage1 = load_model(str(files["checkpoint"]), "cpu:2", "float32", mode="reference")[0]
    (stage2,) = add_lora(stage1, str(files["lora"]), 0.8)
    g = torch.Generator().manual_seed(4)
    video = torch.randn(1, 128, 3, 2, 3, generator=g)
    positive, negative = tiny_conditioning(7, CAPTION, seed=1), tiny_conditioning(5, CAPTION, seed=2)
    sigmas1, sigmas2 = torch.tensor([1.0, 0.9, 0.6]), torch.tensor([0.6, 0.3, 0.0])
    clean = manager.run(stage1, "lora_state", {})  # a command that needs no LoRA switch
    for _prompt in range(2):
        (out1,) = sample_latent(
            stage1, positive, negative, {"samples": video}, sigmas1, "euler", 3.0, 3.0, seed=7
        )
        (out2,) = sample_latent(
            stage2, positive, positive, {"samples": out1["samples"]}, sigmas2, "euler", 1.0, 1.0, seed=8
        )
    assert [r["active"] for r in manager.run(stage2, "lora_state", {})] == [[[str(files["lora"]), 0.8]]] * 2
    sample_latent(stage1, positive, negative, {"samples": video}, sigmas1, "euler", 3.0, 3.0, seed=7)
    fingerprints = [r["fingerprint"] for r in clean]
    assert [r["fingerprint"] for r in manager.run(stage1, "lora_state", {})] == fingerprints
    # One load; set_loras after it (nothing to do), then with, without, with, without.
    assert commands.count("load_model") == 1 and commands.count("set_loras") == 5
    manager.run(stage2, "ping", {})  # a command that never runs the transformer switches nothing
    missing = replace(stage1, loras=((str(files["lora"].with_name("missing.safetensors")), 1.0),))
    with pytest.raises(JobInputError, match=r"missing\.safetensors does not exist"):
        manager.acquire(missing)  # refused before any weight changed: the group keeps its state
    assert [r["fingerprint"] for r in manager.run(stage1, "lora_state", {})] == fingerprints
    assert commands.count("load_model") == 1 and commands.count("set_loras") == 6
    # The loader's own LoRA input gives the same model as MGPU LoRA after it, on the same base.
    with_lora = load_model(
        str(files["checkpoint"]),
        "cpu:2",
        "float32",
        mode="reference",
        lora_name=str(files["lora"]),
        lora_strength=0.8,
    )[0]
    assert with_lora == stage2 and commands.count("load_model") == 1 and commands.count("set_loras") == 7

    reference = load_in_process(files["checkpoint"], ForwardMode.REFERENCE)
    (expected1,) = sample_in_process(
        reference, video, None, None, positive, negative, sigmas1, "euler", 3.0, seed=7
    )
    (without_lora,) = sample_in_process(
        reference, expected1, None, None, positive, positive, sigmas2, "euler", 1.0, seed=8
    )
    reference.transformer.model.load_state_dict(
        ltx_core_fused(files["checkpoint"], [(files["lora"], 0.8)], torch.float32).state_dict()
    )
    (expected2,) = sample_in_process(
        reference, expected1, None, None, positive, positive, sigmas2, "euler", 1.0, seed=8
    )
    errors = relative_error(out1["samples"], expected1), relative_error(out2["samples"], expected2)
    print(f"stage 1 vs in-process {errors[0]:.1e}, stage 2 vs ltx-core-fused in-process {errors[1]:.1e}")
    assert max(errors) <= SP_TOLERANCE
    assert relative_error(expected2, without_lora) > 1e-2  # the LoRA does change stage 2


def test_fp8_checkpoint_runs_in_the_group(manager, files):
    model = MGPUModel.create(files["fp8"], devices="cpu:2", dtype="float32")
    g = torch.Generator().manual_seed(0)
    video, audio = torch.randn(1, 128, 3, 3, 3, generator=g), torch.randn(1, 8, 7, 16, generator=g)
    positive = tiny_conditioning(9, CAPTION, seed=3)
    out_v = client.output_slot((1, 27, 128), torch.float32)
    out_a = client.output_slot((1, 7, 128), torch.float32)
    args = {"video": video, "audio": audio, "video_mask": None, "sigma": 0.7, "frame_rate": 24.0,
            "positive": {"tensor": positive[0][0], "unprocessed": True}, "negative": None,
            "out_video": out_v, "out_audio": out_a}  # fmt: skip
    manager.run(model, "forward", args)
    expected = {}
    for kind in ("fp8", "checkpoint"):
        den = denoiser(load_in_process(files[kind]), video, audio, positive, None, 1.0, 1.0, frame_rate=24.0)
        with torch.inference_mode():
            (_, v), (_, a) = den.velocity([video, audio], 0.7, [None, None])
        expected[kind] = (v, a)
    assert relative_error(out_v.tensor, expected["fp8"][0]) <= SP_TOLERANCE
    assert relative_error(out_a.tensor, expected["fp8"][1]) <= SP_TOLERANCE
    assert relative_error(out_v.tensor, expected["checkpoint"][0]) <= FP8_TOLERANCE


@pytest.mark.comfyui
def test_loader_inputs_keep_their_order_and_lora_inputs_come_last():
    """ComfyUI keeps widget values by position: saved workflows must load unchanged."""
    nodes = pack_node_classes()
    spec = nodes["LTX2MGPULoader"].INPUT_TYPES()
    assert list(spec["required"]) == ["ckpt_name", "gpus", "weight_dtype"]
    assert list(spec["optional"])[:4] == ["max_video_tokens", "mode", "lora_name", "lora_strength"]
    assert spec["optional"]["lora_name"][1]["options"][0] == "None"
    lora = nodes["LTX2MGPULoRA"].INPUT_TYPES()["required"]
    assert list(lora) == ["mgpu_model", "lora_name", "strength"]
    assert lora["strength"][1]["min"] == -100.0 and lora["strength"][1]["max"] == 100.0


def test_a_header_length_ending_in_0x80_is_not_taken_for_a_pickle(tmp_path):
    """Found with an fp8 file: 0x80 (pickle's magic) is also the low byte of a 0x..80-byte header."""
    data = torch.arange(4, dtype=torch.float32)
    entry = {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, data.numel() * 4]}}
    raw = json.dumps(entry).encode()
    raw += b" " * (0x180 - len(raw))  # safetensors pads headers with spaces
    path = tmp_path / "header-0x180.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data.numpy().tobytes())
    assert read_safetensors_header(path).shapes == {"x": (4,)}
    assert torch.equal(load_file(str(path))["x"], data)


@pytest.mark.comfyui
def test_comfyui_mode_fuses_as_comfyuis_lora_loader_does(files):
    """Opt-in (COMFYUI_PATH, ComfyUI's python): ComfyUI's LoraLoaderModelOnly on the tiny checkpoint,
    its patched weights against ours in comfyui mode, alpha included."""
    from comfyui_harness import comfyui_in_process, comfyui_root

    with comfyui_in_process(comfyui_root()):
        import folder_paths

        import nodes  # ComfyUI's nodes.py, not our package

        folder_paths.add_model_folder_path("checkpoints", str(files["checkpoint"].parent))
        folder_paths.add_model_folder_path("loras", str(files["lora"].parent))
        (model,) = nodes.CheckpointLoaderSimple().load_checkpoint(files["checkpoint"].name)[:1]
        for lora, strength in ((files["lora"], 0.7), (files["alpha"], -1.3)):
            (patched,) = nodes.LoraLoaderModelOnly().load_lora_model_only(model, lora.name, strength)
            keys = [k for k in patched.patches if k.startswith("diffusion_model.transformer_blocks.")]
            native = {
                k[len("diffusion_model.") :]: patched.patch_weight_to_device(k, return_weight=True)
                for k in keys
            }
            dtype = next(iter(native.values())).dtype
            ours = load_transformer(files["checkpoint"], CPU, dtype)
            LoraFuser(files["checkpoint"], dtype, ForwardMode.COMFYUI).switch(
                [FuseTarget(ours, TRANSFORMER)], [(str(lora), strength)]
            )
            theirs = dict(ours.named_parameters())
            assert len(native) == 56
            worst = max(relative_error(theirs[k].detach(), v) for k, v in native.items())
            print(
                f"{lora.name} x {strength}: ComfyUI vs ours, worst relative difference {worst:.1e} ({dtype})"
            )
            assert all(torch.equal(theirs[k], v) for k, v in native.items())
