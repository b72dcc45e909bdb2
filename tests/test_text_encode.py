"""MGPU Text Encode: the same CONDITIONING as a single-process Gemma 3 encoding, on 1, 2 and 3 ranks.

The reference is written here independently of the pack's Gemma: transformers' Gemma3TextModel built
from the tiny Gemma's config.json, run as ComfyUI runs it (BOS first, left-padded with id 0 to at least
1,024 tokens, attention mask, all hidden states), then ComfyUI's normalisation and the checkpoint's
text projection.

Tolerance (fp32 on CPU): max |ours - reference| <= 1e-4 x max |reference|. The two Gemma
implementations fuse differently (torch's rms_norm vs transformers' manual RMSNorm, attention
kernels); over 48 layers that is measured at ~1e-6 relative. Results on different rank counts and
placements are compared bit for bit: each prompt runs alone, so the arithmetic is the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from nvfp4_helpers import quantize_nvfp4_for_tests
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from conftest import NestedStandIn, assert_no_leaks
from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.nodes.text_encode import PROJECTION_KEY, encode_prompt
from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
from ltx2_mgpu.workers.engine.ltxcore.reference import load_in_process, relative_error, sample_in_process
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.text.gemma3 import SequenceContext
from ltx2_mgpu.workers.text.placement import split_layers
from ltx2_mgpu.workers.text.quantized import block_scale_index, dequantize_nvfp4
from ltx2_mgpu.workers.text.text_encoder import load_segment, open_gemma, text_features
from ltx2_mgpu.workers.text.text_tokenizer import MIN_LENGTH, PAD_ID, load_prompt_tokenizer
from ltx2_mgpu.workers.wire.errors import JobInputError

TOLERANCE = 1e-4
# bf16 weights on a GPU against the same bf16 arithmetic on the CPU: features are normalised and
# projected in bfloat16 (8 mantissa bits) as ComfyUI does there, so one rounding step of a value near
# the maximum (8) is 4e-3 relative; kernels differ between CPU and GPU.
BF16_TOLERANCE = 1e-2
# ... and against the float32 reference: ComfyUI forms each RMSNorm's 1 + w in the weights' dtype; with
# the tiny model's norm weights near 0 that rounds by up to 2^-8 per norm, 4.4e-2 after 48 layers.
BF16_VS_FP32 = 0.1
SHORT = "A red fox runs through fresh snow at dawn, cinematic."
LONG = ("Slow dolly shot along a misty river at sunrise; " * 25)[:1100]  # 1,101 tokens > 1,024
PROMPTS = [SHORT, LONG, "", "Close-up of rain on a window.\nSoft piano."]
# Same arithmetic, other thread counts: 1.4e-6 measured on an AVX-512/AMX Xeon (0 on AVX2 machines).
SAME_ARITHMETIC = 1e-5
_FIRST_RUN: dict[str, torch.Tensor] = {}  # outputs of the first rank count tested, to compare the others with


@pytest.fixture(scope="module")
def gemma(tiny) -> dict[str, Path]:
    folder = tiny.checkpoint.parent
    return {"comfyui": make_tiny_gemma(folder), "hf": make_tiny_gemma(folder, layout="hf")}


@pytest.fixture(scope="module")
def reference(tiny, gemma) -> dict[str, torch.Tensor]:
    """prompt -> [1, n, 64] from transformers' Gemma 3 + ComfyUI's feature formula (see module doc)."""
    from transformers import Gemma3TextConfig, Gemma3TextModel

    folder = gemma["hf"]
    config = Gemma3TextConfig(**json.loads((folder / "config.json").read_text())["text_config"])
    config._attn_implementation = "sdpa"
    model = Gemma3TextModel(config).eval()
    prefix = "language_model.model."
    weights = {}
    for shard in sorted(folder.glob("model-*.safetensors")):
        weights |= {k[len(prefix) :]: v.float() for k, v in load_file(shard).items() if k.startswith(prefix)}
    model.load_state_dict(weights, strict=True)
    with safe_open(str(tiny.checkpoint), framework="pt") as f:
        projection = f.get_tensor(PROJECTION_KEY).float()
    tokenizer = load_prompt_tokenizer(folder)
    out = {}
    for text in PROMPTS:
        ids = tokenizer.token_ids(text)
        n, length = len(ids), max(MIN_LENGTH, len(ids))
        input_ids = torch.tensor([[PAD_ID] * (length - n) + ids])
        mask = (torch.arange(length) >= length - n).long()[None]
        with torch.inference_mode():
            hidden = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states
        x = torch.stack([h[:, -n:] for h in hidden], dim=1).movedim(1, -1)  # [1, n, 16, 49]
        span = x.amax(dim=(1, 2), keepdim=True) - x.amin(dim=(1, 2), keepdim=True)
        x = 8.0 * (x - x.mean(dim=(1, 2), keepdim=True)) / (span + 1e-6)
        out[text] = x.reshape(1, n, -1) @ projection.T
    return out


@pytest.fixture(scope="module")
def group_manager():
    """The process-wide manager, shared by this module's tests (a group per rank count, reused)."""
    manager = get_manager()
    yield manager
    manager.unload()
    assert_no_leaks()


def encode_job(manager, model: MGPUModel, encoder: Path, texts: list[str], placement: str):
    tokenizer = load_prompt_tokenizer(encoder)
    ids = [tokenizer.token_ids(t) for t in texts]
    outputs = [output_slot((1, len(i), 64), torch.float32) for i in ids]
    args = {"text_encoder": str(encoder), "prompts": ids, "placement": placement, "outputs": outputs}
    results = manager.run(model, "encode_text", args)
    return [o.tensor.clone() for o in outputs], results


def test_tokenizer_follows_comfyui(gemma, tmp_path):
    # The tiny file carries the tokenizer twice (tiny_gemma): SentencePiece, read first as ComfyUI reads
    # it, and tokenizers' JSON (as Gemma 4 files carry it), tested here on a copy without the former.
    spiece = load_prompt_tokenizer(gemma["comfyui"])
    assert spiece.source.endswith("(spiece_model)")
    json_only = tmp_path / "json-only.safetensors"
    save_file(
        {k: v for k, v in load_file(str(gemma["comfyui"])).items() if k != "spiece_model"}, str(json_only)
    )
    single, folder = load_prompt_tokenizer(json_only), load_prompt_tokenizer(gemma["hf"])
    assert single.source.endswith("(tokenizer_json)") and folder.source.endswith("tokenizer.json")
    assert spiece.token_ids("Snow \\(soft\\) é") == single.token_ids("Snow \\(soft\\) é")
    text = "Snow \\(soft\\) <end_of_turn> é"
    ids = single.token_ids(text)
    assert ids == folder.token_ids(text) == [2, *single.token_ids("Snow (soft) <end_of_turn> é")[1:]]
    assert 106 in ids and ids[-1] == 3  # the special token whole; unknown characters as <unk>
    assert single.token_ids("") == [2] and len(single.token_ids(LONG)) == 1101
    lonely = tmp_path / "lonely.safetensors"
    save_file({"model.norm.weight": torch.ones(16)}, str(lonely))
    with pytest.raises(
        ValueError, match=r"no tokenizer found .*spiece_model.*tokenizer.json or tokenizer.model"
    ):
        load_prompt_tokenizer(lonely)


def test_sentencepiece_tokenizer_inside_a_comfyui_file(gemma, tmp_path):
    """ComfyUI's own Gemma files carry the SentencePiece model as the `spiece_model` entry."""
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join([SHORT, LONG[:200], "rain on a window, soft piano, snow"] * 20))
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=60, model_type="bpe",
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, minloglevel=2,
    )  # fmt: skip
    model_bytes = (tmp_path / "sp.model").read_bytes()
    tensors = {k: v for k, v in load_file(gemma["comfyui"]).items() if k != "tokenizer_json"}
    tensors["spiece_model"] = torch.frombuffer(bytearray(model_bytes), dtype=torch.uint8)
    path = tmp_path / "gemma_sp.safetensors"
    save_file(tensors, str(path))
    tokenizer = load_prompt_tokenizer(path)
    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    assert tokenizer.kind == "sentencepiece"
    assert tokenizer.token_ids(SHORT) == [2, *processor.encode(SHORT)]
    # ComfyUI 0.33 loses the first piece when the prompt holds one of its special tokens.
    assert tokenizer.token_ids("snow <end_of_turn>rain") == [
        2,
        *processor.encode("snow ")[1:],
        106,
        *processor.encode("rain"),
    ]


def test_both_layouts_load_the_same_model_and_bad_files_say_what_to_change(tiny, gemma, tmp_path):
    single, folder = open_gemma(gemma["comfyui"]), open_gemma(gemma["hf"])
    assert single.config == folder.config and single.config.num_hidden_states == 49
    assert single.tensors.keys() == folder.tensors.keys() and len(single.tensors) == 48 * 13 + 2
    with pytest.raises(ValueError, match="is not a Gemma 3 text encoder"):
        open_gemma(tiny.checkpoint)
    tensors = load_file(gemma["comfyui"])
    quantized = dict(
        tensors,
        **{
            "model.layers.0.mlp.up_proj.weight": tensors["model.layers.0.mlp.up_proj.weight"].to(
                torch.float8_e4m3fn
            )
        },
    )
    save_file(quantized, str(tmp_path / "fp8.safetensors"))
    with pytest.raises(ValueError, match=r"as F8_E4M3 without ComfyUI's quantization marks.*gemma_3_12B_it"):
        open_gemma(tmp_path / "fp8.safetensors")
    del tensors["model.layers.7.self_attn.k_norm.weight"]
    save_file(tensors, str(tmp_path / "cut.safetensors"))
    with pytest.raises(
        ValueError, match=r"1 tensors missing under 'model.': layers.7.self_attn.k_norm.weight"
    ):
        open_gemma(tmp_path / "cut.safetensors")


def test_split_layers_follows_free_memory():
    assert split_layers(48, [1, 1, 1]) == ((0, 16), (16, 32), (32, 48))
    assert split_layers(48, [30, 10, 20]) == ((0, 24), (24, 32), (32, 48))
    assert split_layers(4, [100, 0, 1]) == ((0, 2), (2, 3), (3, 4))  # at least one layer each


def test_a_text_encoder_that_cannot_fit_beside_the_model_is_refused_before_loading(gemma, monkeypatch):
    """NOTE [text room]: GPUs whose free memory holds Gemma's weights together, but not each block with
    its room to run (what the transformer left on small cards), are refused by the plan before any layer
    loads, naming the sizes and what to change; with room the blocks follow the free memory."""
    import ltx2_mgpu.workers.rank.ops_text as ops_text
    from ltx2_mgpu.workers.engine.protocol import InputRejected

    files = open_gemma(gemma["comfyui"])
    dtype = torch.float32
    layers = ops_text._block_bytes(files, dtype, 0, files.config.num_layers)
    embedding = files.size_bytes(dtype, ["embed_tokens.weight"])
    job = SimpleNamespace(world_size=2, rank=0)

    def plan(free: list[float]):  # bytes each GPU has free beside the embedding on rank 0
        gathered = [("cuda:0", int(embedding + free[0])), ("cuda:0", int(free[1]))]
        monkeypatch.setattr(ops_text, "free_bytes", lambda job: gathered)
        return ops_text._plan(job, files, dtype, "layers")

    placement, blocks = plan([layers, layers])
    assert placement == "layers" and blocks == (
        (0, files.config.num_layers // 2),
        (files.config.num_layers // 2, files.config.num_layers),
    )
    assert embedding + 2 * 0.55 * layers >= files.size_bytes(dtype)  # the weights fit together
    with pytest.raises(InputRejected, match=r"MGPU Text Encode: the text encoder needs .* GiB in torch.float32 .* "
                       r"free beside the loaded diffusion model\. Use a quantized text encoder file"):  # fmt: skip
        plan([0.55 * layers, 0.55 * layers])


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_encode_equals_single_process(group_manager, tiny, gemma, reference, ranks):
    model = MGPUModel.create(tiny.checkpoint, devices=f"cpu:{ranks}", dtype="float32")
    (cond,) = encode_prompt(model, str(gemma["comfyui"]), SHORT, "layers")
    tensor, extras = cond[0]
    assert extras == {"pooled_output": None, "unprocessed_ltxav_embeds": True}
    assert tensor.dtype == torch.float32 and tensor.shape == (
        1,
        len(SHORT) + 1,
        64,
    )  # one token per character, BOS
    worst = relative_error(tensor, reference[SHORT])
    # Layouts are checked on one rank, placements on several (each run: all four prompts).
    cases = (
        [("layers", "comfyui"), ("layers", "hf")]
        if ranks == 1
        else [("layers", "comfyui"), ("replicas", "comfyui")]
    )
    runs = {}
    for placement, layout in cases:
        runs[placement, layout], results = encode_job(group_manager, model, gemma[layout], PROMPTS, placement)
        assert [r["placement"] for r in results] == [placement] * ranks
        for text, got in zip(PROMPTS, runs[placement, layout]):
            assert got.shape == reference[text].shape
            error = relative_error(got, reference[text])
            assert error <= TOLERANCE, (ranks, placement, layout, text[:20], error)
            worst = max(worst, error)
    first = runs[cases[0]]
    for outputs in runs.values():
        assert all(torch.equal(a, b) for a, b in zip(outputs, first))
    assert torch.equal(first[0], tensor)
    # Across rank counts the arithmetic is the same but CPU workers get cpu_count // ranks threads,
    # and some CPU kernels split their sums by thread count: equal up to float32 rounding.
    for text, got in zip(PROMPTS, first):
        assert relative_error(got, _FIRST_RUN.setdefault(text, got)) <= SAME_ARITHMETIC, (ranks, text[:20])
    print(f"ranks={ranks} worst relative error vs transformers {worst:.2e}")


def test_weights_stay_resident_until_something_else_is_asked(group_manager, tiny, gemma):
    model = MGPUModel.create(tiny.checkpoint, devices="cpu:3", dtype="float32")
    encode_job(group_manager, model, gemma["comfyui"], [SHORT], "layers")
    _, again = encode_job(group_manager, model, gemma["comfyui"], [SHORT], "auto")
    assert [r["layers"] for r in again] == [[0, 16], [16, 32], [32, 48]]
    assert not any(r["loaded"] for r in again)  # auto keeps what is loaded
    _, other = encode_job(group_manager, model, gemma["comfyui"], [SHORT], "replicas")
    assert all(r["loaded"] for r in other) and [r["layers"] for r in other] == [[0, 48]] * 3
    print(f"load {max(r['load_s'] for r in other):.2f} s, encode {max(r['encode_s'] for r in other):.2f} s")
    bad = {"text_encoder": str(gemma["comfyui"]), "prompts": [[2, 999]], "placement": "auto",
           "outputs": [output_slot((1, 2, 64), torch.float32)]}  # fmt: skip
    with pytest.raises(JobInputError, match=r"outside 0\.\.255"):
        group_manager.run(model, "encode_text", bad)
    with pytest.raises(ValueError, match="is not a Gemma 3 text encoder"):
        encode_prompt(model, str(tiny.checkpoint), SHORT)
    assert group_manager.group is not None and group_manager.group.is_alive


def test_conditioning_feeds_the_sp_sampler(group_manager, tiny, gemma, reference, fake_comfy):
    """Node -> frame rate (what LTXVConditioning adds) -> SP Sampler, against the same job in one
    process fed with the transformers reference conditioning."""
    model = MGPUModel.create(tiny.checkpoint, devices="cpu:3", dtype="float32")
    fps = 24.0
    positive, negative = (
        [[c[0][0], {**c[0][1], "frame_rate": fps}]]
        for c in (encode_prompt(model, str(gemma["comfyui"]), t)[0] for t in (SHORT, PROMPTS[3]))
    )
    g = torch.Generator().manual_seed(7)
    video, audio = torch.randn(1, 128, 2, 2, 3, generator=g), torch.randn(1, 8, 5, 16, generator=g)
    sigmas = torch.tensor([1.0, 0.909375, 0.725, 0.421875, 0.0])
    (out,) = sample_latent(
        model,
        positive,
        negative,
        {"samples": NestedStandIn([video, audio])},
        sigmas,
        "euler",
        3.0,
        3.0,
        seed=11,
    )
    ref_pos = [[reference[SHORT], {"frame_rate": fps}]]
    ref_neg = [[reference[PROMPTS[3]], {"frame_rate": fps}]]
    expected = sample_in_process(
        load_in_process(tiny.checkpoint),
        video,
        audio,
        None,
        ref_pos,
        ref_neg,
        sigmas,
        "euler",
        3.0,
        11,
        frame_rate=fps,
    )
    for got, want in zip(out["samples"].tensors, expected):
        assert relative_error(got, want) <= TOLERANCE
    assert not torch.allclose(out["samples"].tensors[0], video, atol=1e-2)


def in_process_features(
    tiny, encoder: Path, texts: list[str], weights: torch.dtype, features: torch.dtype
) -> list[torch.Tensor]:
    """The pack's own code in this process on the CPU (no group): Gemma weights held in `weights`,
    float32 activations, normalisation and projection in `features`."""
    files = open_gemma(encoder)
    segment = load_segment(files, 0, files.config.num_layers, torch.device("cpu"), weights)
    projection = torch.nn.Linear(files.config.feature_width, 64, bias=False)
    with safe_open(str(tiny.checkpoint), framework="pt") as f:
        projection.weight.data = f.get_tensor(PROJECTION_KEY).to(weights)
    tokenizer, out = load_prompt_tokenizer(encoder), []
    for text in texts:
        ids = tokenizer.token_ids(text)
        n = len(ids)
        context = SequenceContext.build(files.config, n, max(MIN_LENGTH, n), torch.device("cpu"))
        states: list[torch.Tensor] = []
        with torch.inference_mode():
            segment(segment.embed(torch.tensor([ids])), context, states)
            out.append(text_features(states, projection, features))
    return out


def write_quantized(source: Path, path: Path, old_fp8: bool = False) -> Path:
    """`source` with layers 1.. quantized the ways ComfyUI's files are: MLPs nvfp4 marked by
    comfy_quant entries and q/o projections fp8 listed in _quantization_metadata; or (old_fp8) k/v
    projections fp8 in the older scaled_fp8 / scale_weight form."""
    tensors, layers = load_file(source), {}
    for i in range(1, 48):
        names = ("k_proj", "v_proj") if old_fp8 else ("q_proj", "o_proj")
        for name in names:
            key = f"model.layers.{i}.self_attn.{name}"
            weight = tensors[f"{key}.weight"].float()
            scale = weight.abs().amax() / 448.0
            tensors[f"{key}.weight"] = (weight / scale).to(torch.float8_e4m3fn)
            tensors[f"{key}.scale_weight" if old_fp8 else f"{key}.weight_scale"] = scale.reshape(())
            layers[key] = {"format": "float8_e4m3fn"}
        for name in () if old_fp8 else ("gate_proj", "up_proj", "down_proj"):
            key = f"model.layers.{i}.mlp.{name}"
            q = quantize_nvfp4_for_tests(tensors[f"{key}.weight"].float())
            tensors[f"{key}.weight"], tensors[f"{key}.weight_scale"] = q["weight"], q["block_scale"]
            tensors[f"{key}.weight_scale_2"] = q["scale"]
            tensors[f"{key}.comfy_quant"] = torch.tensor(list(b'{"format": "nvfp4"}'), dtype=torch.uint8)
    if old_fp8:
        tensors["scaled_fp8"] = torch.zeros(0, dtype=torch.float8_e4m3fn)
    metadata = None if old_fp8 else {"_quantization_metadata": json.dumps({"layers": layers})}
    save_file(tensors, str(path), metadata=metadata)
    return path


def write_dequantized(quantized: Path, path: Path) -> Path:
    """The same model with every quantized linear stored as its float32 dequantized weight."""
    files = open_gemma(quantized)
    segment = load_segment(files, 0, files.config.num_layers, torch.device("cpu"), torch.float32)
    tensors = {f"model.{k}": v.clone() for k, v in segment.state_dict().items() if not k.endswith("scale")}
    for name in files.quantized:
        tensors[f"model.{name}.weight"] = segment.get_submodule(name).dequantized(torch.float32)
    tensors["tokenizer_json"] = load_file(quantized)["tokenizer_json"]
    save_file(tensors, str(path))
    return path


def test_nvfp4_block_scales_follow_the_cublas_tile_layout():
    """cuBLAS 1D block scaling factors: 128 x 4 tiles, each stored as [32][4][4]."""
    index = block_scale_index(256, 8)
    assert [int(index[r, c]) for r, c in [(0, 0), (0, 1), (1, 0), (32, 0), (127, 3)]] == [0, 1, 16, 4, 511]
    assert int(index[0, 4]) == 512 and int(index[128, 0]) == 1024  # next tile along the row, then down
    weight = torch.randn(48, 64) * 0.02
    q = quantize_nvfp4_for_tests(weight)
    back = dequantize_nvfp4(q["weight"], q["scale"], q["block_scale"], torch.float32)
    # e2m1 steps are at most 2 of 6 units of a block's largest value; the fp8 block scale adds ~6%.
    error, largest = (
        (back - weight).abs().view(48, 4, 16),
        weight.abs().view(48, 4, 16).amax(-1, keepdim=True),
    )
    assert (error <= largest / 6 * 1.07).all()


def test_quantized_comfyui_files_equal_their_dequantized_weights(group_manager, tiny, gemma, tmp_path):
    """fp8 and nvfp4 layers are dequantized per use into float32, as ComfyUI does."""
    for old_fp8 in (False, True):
        quantized = write_quantized(gemma["comfyui"], tmp_path / f"q{old_fp8}.safetensors", old_fp8)
        dense = write_dequantized(quantized, tmp_path / f"d{old_fp8}.safetensors")
        files = open_gemma(quantized)
        assert len(files.quantized) == 47 * (2 if old_fp8 else 5)
        assert files.size_bytes(torch.float32) < open_gemma(dense).size_bytes(torch.float32)
        got = in_process_features(tiny, quantized, [SHORT], torch.float32, torch.float32)
        want = in_process_features(tiny, dense, [SHORT], torch.float32, torch.float32)
        assert torch.equal(got[0], want[0])
    model = MGPUModel.create(tiny.checkpoint, devices="cpu:3", dtype="float32")
    (outputs, _) = encode_job(group_manager, model, quantized, [SHORT], "layers")
    assert relative_error(outputs[0], got[0]) <= SAME_ARITHMETIC
    unknown = dict(
        load_file(quantized),
        **{
            "model.layers.1.mlp.up_proj.comfy_quant": torch.tensor(
                list(b'{"format": "mxfp8"}'), dtype=torch.uint8
            )
        },
    )
    save_file(unknown, str(tmp_path / "mxfp8.safetensors"))
    with pytest.raises(ValueError, match=r"stored as 'mxfp8'.*use the bf16 text encoder file"):
        open_gemma(tmp_path / "mxfp8.safetensors")


@pytest.mark.gpu
def test_gpu_ranks_sharing_one_gpu_match_the_cpu_reference(group_manager, tiny, gemma, reference):
    """One rank, and two ranks on one GPU (gloo; hidden states staged through host memory).
    float32 weights: against transformers. bf16 weights: against the same ComfyUI-style bf16
    arithmetic on the CPU (BF16_TOLERANCE), and within BF16_VS_FP32 of the float32 reference."""
    texts = PROMPTS[:2]
    bf16_expected = in_process_features(tiny, gemma["comfyui"], texts, torch.bfloat16, torch.bfloat16)
    for devices, dtype in [
        ("cuda:0", "float32"),
        ("cuda:0,cuda:0", "float32"),
        ("cuda:0,cuda:0", "bfloat16"),
    ]:
        model = MGPUModel.create(tiny.checkpoint, devices=devices, dtype=dtype)
        for placement in ("layers", "replicas"):
            outputs, _ = encode_job(group_manager, model, gemma["comfyui"], texts, placement)
            for i, (text, got) in enumerate(zip(texts, outputs)):
                error = relative_error(got, reference[text])
                print(f"{devices} {dtype} {placement} {len(text) + 1} tokens: vs float32 {error:.2e}", end="")
                if dtype == "float32":
                    assert error <= TOLERANCE
                    print()
                    continue
                same_arithmetic = relative_error(got, bf16_expected[i])
                print(f", vs bf16 on the CPU {same_arithmetic:.2e}")
                assert same_arithmetic <= BF16_TOLERANCE and error <= BF16_VS_FP32
    quantized = write_quantized(gemma["comfyui"], tiny.checkpoint.parent / "gemma3-tiny-mixed.safetensors")
    expected = in_process_features(tiny, quantized, texts, torch.float32, torch.float32)
    model = MGPUModel.create(tiny.checkpoint, devices="cuda:0,cuda:0", dtype="float32")
    outputs, _ = encode_job(group_manager, model, quantized, texts, "layers")
    for got, want in zip(outputs, expected):
        print(f"nvfp4/fp8 file on the GPU vs the CPU: {relative_error(got, want):.2e}")
        assert relative_error(got, want) <= TOLERANCE


@pytest.mark.multigpu
def test_layers_over_two_gpus_match_the_cpu_reference(group_manager, tiny, gemma, reference):
    """One rank per GPU: NCCL send/recv between the layer blocks."""
    model = MGPUModel.create(tiny.checkpoint, devices="cuda:0,cuda:1", dtype="float32")
    for placement in ("layers", "replicas"):
        outputs, _ = encode_job(group_manager, model, gemma["comfyui"], PROMPTS, placement)
        for text, got in zip(PROMPTS, outputs):
            assert relative_error(got, reference[text]) <= TOLERANCE
