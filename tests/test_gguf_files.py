"""GGUF files on the UI side, without ComfyUI: the header reader against the `gguf` package's own reader,
the refusals before any worker starts (truncated, another model, another release's layout without its
config, a missing pack), where the ComfyUI-GGUF pack is found, and the writer's encodings against the
`gguf` package's decoders."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from ltx2_mgpu.workers.embedded.gguf_writer import (  # noqa: E402
    quantize_q4_0,
    quantize_q6_k,
    quantize_q8_0,
    tensor_type,
    write_gguf,
)
from ltx2_mgpu.workers.wire import capabilities  # noqa: E402
from ltx2_mgpu.workers.wire.capabilities import COMFY, LTXCORE, LoaderOptions, check_loader_options  # noqa: E402
from ltx2_mgpu.workers.wire.file_pairing import check_comfy_readable  # noqa: E402
from ltx2_mgpu.workers.wire.gguf_checks import check_gguf_loadable, check_gguf_model, gguf_model_header  # noqa: E402
from ltx2_mgpu.workers.wire.gguf_files import GGML_TYPES, read_gguf_header  # noqa: E402
from ltx2_mgpu.workers.wire.gguf_pack import GGUF_PACK_ENV, find_gguf_pack, require_gguf_pack  # noqa: E402
from ltx2_mgpu.workers.wire.memory_plan import model_sizes, plan  # noqa: E402
from ltx2_mgpu.workers.wire.model_family import detect_model_family  # noqa: E402
from ltx2_mgpu.workers.wire.model_files import read_safetensors_header  # noqa: E402

PINNED_PACK = Path(__file__).resolve().parents[2] / "shared" / "comfyui-gguf"
WIDTH = 256


def ltx_tensors(release: str) -> dict[str, torch.Tensor]:
    """A two-block stand-in with the key names ComfyUI's detection and ours read for `release`."""
    g = torch.Generator().manual_seed(0)
    t = {
        "adaln_single.linear.weight": torch.randn(6 * WIDTH, WIDTH, generator=g),
        "audio_adaln_single.linear.weight": torch.randn(6 * WIDTH, WIDTH, generator=g),
        "scale_shift_table": torch.randn(2, WIDTH, generator=g),
    }
    for i in range(2):
        t[f"transformer_blocks.{i}.attn1.to_q.weight"] = torch.randn(WIDTH, WIDTH, generator=g)
        t[f"transformer_blocks.{i}.ff.net.0.proj.weight"] = torch.randn(4 * WIDTH, WIDTH, generator=g)
        t[f"transformer_blocks.{i}.ff.net.0.proj.bias"] = torch.randn(4 * WIDTH, generator=g)
        t[f"transformer_blocks.{i}.scale_shift_table"] = torch.randn(6, WIDTH, generator=g)
        if release == "2.3":
            t[f"transformer_blocks.{i}.attn1.to_gate_logits.weight"] = torch.randn(32, WIDTH, generator=g)
    return t


def test_header_reader_agrees_with_the_gguf_package(tmp_path):
    path = write_gguf(ltx_tensors("2.3"), tmp_path / "m.gguf", "Q6_K", {"transformer": {"num_layers": 2}})
    ours = read_gguf_header(path)
    theirs = gguf.GGUFReader(path)
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, their in zip(ours.tensors, theirs.tensors):
        assert mine.shape == tuple(int(d) for d in reversed(their.shape)), mine.name
        assert mine.ggml_type == their.tensor_type.name
        assert ours.data_start + mine.offset == their.data_offset, mine.name
        assert mine.size_bytes == their.n_bytes
    assert ours.data_end == path.stat().st_size
    assert json.loads(ours.fields["config"]) == {"transformer": {"num_layers": 2}}
    # Q6_K where rows have 256 values; the 2-D plain parameters (scale_shift_table) stay F32.
    types = {t.name: t.ggml_type for t in ours.tensors}
    assert types["transformer_blocks.0.attn1.to_q.weight"] == "Q6_K"
    assert types["transformer_blocks.0.scale_shift_table"] == "F32"
    assert types["transformer_blocks.0.attn1.to_gate_logits.weight"] == "Q6_K"
    for type_id, (name, block, size) in GGML_TYPES.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)] == (block, size), name


def test_safetensors_header_of_a_gguf_sizes_the_stored_bytes(tmp_path):
    path = write_gguf(ltx_tensors("2.3"), tmp_path / "m.gguf", "Q8_0", {"transformer": {}})
    header = read_safetensors_header(path)
    assert header.dtypes["transformer_blocks.0.attn1.to_q.weight"] == "Q8_0"
    assert header.shapes["transformer_blocks.0.attn1.to_q.weight"] == (WIDTH, WIDTH)
    sizes = model_sizes(header.shapes, header.dtypes, "bfloat16")
    blocks = [t for t in read_gguf_header(path).tensors if t.name.startswith("transformer_blocks.")]
    quantized = sum(t.size_bytes for t in blocks if t.ggml_type == "Q8_0")
    floats = sum(t.size_bytes // 4 * 2 for t in blocks if t.ggml_type == "F32")  # cast to bf16 on load
    assert quantized > 0 and sizes.blocks_bytes == quantized + floats  # Q8_0 kept at 34 bytes per 32 values
    # The pre-flight never proposes sharded for a GGUF (the engines' rows refuse it) and says why.
    found = plan(sizes, ["cuda:0", "cuda:1"], [16 << 30] * 2, "replicated", 4096, "bfloat16")
    assert sizes.gguf and "sharded" not in found.available and found.recommended == "replicated"
    assert "(not for GGUF files)" in found.console_block()


def test_a_truncated_gguf_is_refused_naming_the_file(tmp_path):
    path = write_gguf(ltx_tensors("2.3"), tmp_path / "cut.gguf", "Q8_0", {"transformer": {}})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(
        ValueError, match=r"cut\.gguf is incomplete: .*1,000 missing.*download the file again"
    ):
        check_comfy_readable(path)
    path.write_bytes(data[:200])  # cut inside the header
    with pytest.raises(ValueError, match=r"cut\.gguf is a GGUF file whose header is cut short"):
        check_comfy_readable(path)


def test_another_model_is_refused_naming_what_it_is(tmp_path):
    flux = write_gguf(
        {"double_blocks.0.img_attn.proj.weight": torch.randn(64, 64)},
        tmp_path / "f.gguf",
        "Q8_0",
        None,
        arch="flux",
    )
    with pytest.raises(
        ValueError, match=r"f\.gguf is a GGUF of a Flux model, not an LTX transformer; pick an LTX-2"
    ):
        check_comfy_readable(flux)
    video_only = {k: v for k, v in ltx_tensors("2").items() if not k.startswith("audio_")}
    ltxv = write_gguf(video_only, tmp_path / "v.gguf", "Q8_0", None)
    with pytest.raises(ValueError, match=r"v\.gguf is an LTX-Video \(0\.9\.x, video only\) GGUF"):
        check_comfy_readable(ltxv)


@pytest.mark.parametrize("release", ["2.3", "2.5"])
def test_a_later_release_without_its_config_is_refused(tmp_path, release):
    tensors = ltx_tensors(release)
    if release == "2.5":  # LTX-2.5's video feed-forward has no bias
        tensors = {k: v for k, v in tensors.items() if not k.endswith("ff.net.0.proj.bias")}
    path = write_gguf(tensors, tmp_path / "n.gguf", "Q8_0", None)
    with pytest.raises(
        ValueError, match=rf"n\.gguf is an LTX-{release} transformer GGUF without the model config"
    ):
        check_gguf_model(path)
    with_config = write_gguf(tensors, tmp_path / "c.gguf", "Q8_0", {"transformer": {}})
    assert check_gguf_model(with_config).dtypes["transformer_blocks.0.attn1.to_q.weight"] == "Q8_0"


def test_the_pack_is_found_in_custom_nodes_or_where_the_user_says(tmp_path, monkeypatch):
    if not (PINNED_PACK / "nodes.py").is_file():
        pytest.skip(f"the pinned ComfyUI-GGUF pack is not at {PINNED_PACK}")
    monkeypatch.delenv(GGUF_PACK_ENV, raising=False)
    root = tmp_path / "ComfyUI"
    (root / "custom_nodes" / "some-other-pack").mkdir(parents=True)
    assert find_gguf_pack(root) is None
    with pytest.raises(
        ValueError,
        match=r"m\.gguf is a GGUF file: loading it needs the ComfyUI-GGUF .*city96/ComfyUI-GGUF.*custom_nodes",
    ):
        require_gguf_pack("m.gguf", root)
    (root / "custom_nodes" / "comfyui-gguf").symlink_to(PINNED_PACK)  # any folder name, as ComfyUI loads it
    assert find_gguf_pack(root) == PINNED_PACK.resolve()
    monkeypatch.setenv(GGUF_PACK_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=rf"{GGUF_PACK_ENV} points at .* which is not the ComfyUI-GGUF"):
        find_gguf_pack(root)
    monkeypatch.setenv(GGUF_PACK_ENV, str(PINNED_PACK))
    assert find_gguf_pack(None) == PINNED_PACK.resolve()


def test_a_gguf_needs_the_comfy_backend_and_no_sharding(tmp_path):
    path = write_gguf(ltx_tensors("2.3"), tmp_path / "m.gguf", "Q8_0", {"transformer": {}})
    with pytest.raises(
        ValueError, match=r"m\.gguf is a GGUF file, which the workers load with ComfyUI's model stack"
    ):
        check_gguf_loadable(path, "ltxcore", "", "replicated")
    with pytest.raises(
        ValueError, match=r"m\.gguf is a GGUF file, whose quantized blocks weights sharded cannot"
    ):
        check_gguf_loadable(path, "comfy", "", "sharded")


def _options(path: Path, **changes) -> LoaderOptions:
    header = gguf_model_header(path)
    found = detect_model_family(header.shapes, header.dtypes, header.metadata)
    options = LoaderOptions(
        file_name=path.name, family=found.family, weight_format=found.weight_format, mode="comfyui",
        weight_dtype="bfloat16", compile_blocks=False, fp8_matmul=False, weights="replicated",
        guidance_groups=1, devices=("cpu", "cpu"), gguf=True,
    )  # fmt: skip
    return replace(options, **changes)


def test_loader_options_a_gguf_does_not_take_are_refused_naming_the_file(tmp_path, monkeypatch):
    """The engines' capability rows for GGUF files: ComfyUI's engine with replicated, offloaded or layers;
    fp8_matmul and compile_blocks refused naming the file and what to change; ltx-core refused."""
    monkeypatch.setattr(capabilities, "has_cxx_compiler", lambda: True)
    path = write_gguf(ltx_tensors("2.3"), tmp_path / "m.gguf", "Q8_0", {"transformer": {}})
    for weights in ("replicated", "offloaded", "layers"):
        check_loader_options(COMFY, _options(path, weights=weights))
    with pytest.raises(ValueError, match=r"m\.gguf is a GGUF file, whose quantized blocks weights sharded"):
        check_loader_options(COMFY, _options(path, weights="sharded"))
    with pytest.raises(
        ValueError,
        match=r"fp8_matmul stores .* m\.gguf is a GGUF file, quantized already \(GGUF Q8_0.*Turn fp8_matmul off",
    ):
        check_loader_options(COMFY, _options(path, fp8_matmul=True))
    with pytest.raises(
        ValueError, match=r"compile_blocks is not served with GGUF files: m\.gguf.*Turn compile_blocks off"
    ):
        check_loader_options(COMFY, _options(path, compile_blocks=True))
    with pytest.raises(ValueError, match=r"m\.gguf is a GGUF file.*the ltx-core engine does not read it"):
        check_loader_options(LTXCORE, _options(path, family="LTX-2"))


def test_layers_refuses_guidance_groups_and_compile_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(capabilities, "has_cxx_compiler", lambda: True)
    path = write_gguf(ltx_tensors("2.3"), tmp_path / "m.gguf", "Q8_0", {"transformer": {}})
    plain = _options(path, gguf=False, weight_format="bf16", weights="layers")
    with pytest.raises(
        ValueError, match=r"guidance_parallel 2 splits the GPUs .* weights layers needs every GPU"
    ):
        check_loader_options(COMFY, replace(plain, guidance_groups=2))
    with pytest.raises(
        ValueError, match=r"weights layers hands the activations over between GPUs.*compile_blocks off"
    ):
        check_loader_options(COMFY, replace(plain, compile_blocks=True))
    with pytest.raises(ValueError, match=r"weights layers is not served by the ltx-core engine"):
        check_loader_options(LTXCORE, replace(plain, family="LTX-2"))


@pytest.mark.parametrize(
    ("name", "quantize", "bound"),
    [
        ("Q8_0", quantize_q8_0, 0.5 / 127 + 1e-4),  # half a step of 1/127 of the block's largest value
        ("Q4_0", quantize_q4_0, 1 / 8 + 1e-3),  # the side opposite the largest value clamps at 7/8 of it
        ("Q6_K", quantize_q6_k, 0.05),  # half a step of 1/32, plus the int8 rounding of the sub-block scale
    ],
)
def test_encodings_decode_with_the_gguf_package(name, quantize, bound):
    """Each block decodes (gguf's own dequantizer) to the value within the format's rounding, relative to
    its block's (Q6_K: sub-block's) largest magnitude: the layout is the one ggml reads."""
    x = torch.randn(4, 512, generator=torch.Generator().manual_seed(1))
    decoded = gguf.quants.dequantize(
        quantize(x).reshape(4, -1).numpy(), getattr(gguf.GGMLQuantizationType, name)
    )
    block = 16 if name == "Q6_K" else 32
    amax = x.reshape(-1, block).abs().amax(dim=1, keepdim=True).expand(-1, block).reshape(4, 512)
    error = np.abs(decoded - x.numpy()) / amax.numpy()
    assert error.max() <= bound, error.max()


def test_tensor_types_follow_the_packs_converter():
    assert tensor_type("transformer_blocks.0.attn1.to_q.weight", torch.zeros(64, 256), "Q6_K") == "Q6_K"
    assert tensor_type("transformer_blocks.0.attn1.to_q.weight", torch.zeros(64, 96), "Q6_K") == "Q8_0"
    assert tensor_type("transformer_blocks.0.attn1.to_q.weight", torch.zeros(64, 20), "Q8_0") == "F16"
    assert tensor_type("transformer_blocks.0.attn1.to_q.bias", torch.zeros(64), "Q8_0") == "F32"
    assert (
        tensor_type("video_embeddings_connector.learnable_registers", torch.zeros(128, 64), "Q8_0") == "F32"
    )
