"""Every header reader of the UI side on metadata that is absent, partial, null, malformed or carries
extra keys (NOTE [file metadata] in workers/wire/file_metadata.py): a result, or a ValueError naming
the file where ComfyUI's own loader refuses it too; never another exception. No ComfyUI needed; the
files are written here, key names as the releases have them, values zero."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ltx2_mgpu.workers.group.manager import MGPUModel, check_fits
from ltx2_mgpu.workers.wire.comfy_refusals import check_transformer_header
from ltx2_mgpu.workers.wire.file_metadata import model_version
from ltx2_mgpu.workers.wire.file_pairing import check_comfy_readable, lora_release
from ltx2_mgpu.workers.wire.loader_files import check_loader_files
from ltx2_mgpu.workers.wire.ltx_files import read_model_file_info, read_vae_release
from ltx2_mgpu.workers.wire.model_family import LTX25, detect_model_family, release_of_version
from ltx2_mgpu.workers.wire.model_files import describe_header, read_safetensors_header
from ltx2_mgpu.workers.wire.vae_outputs import audio_output

P = "model.diffusion_model."
HEADS, HEAD_DIM, AUDIO_HEADS, AUDIO_HEAD_DIM = 4, 8, 2, 8
TRANSFORMER = {
    "num_attention_heads": HEADS,
    "attention_head_dim": HEAD_DIM,
    "audio_num_attention_heads": AUDIO_HEADS,
    "audio_attention_head_dim": AUDIO_HEAD_DIM,
    "ff_bias": False,
}
# "config" values a file may carry: each is one ComfyUI reads without complaint, unless marked refused.
CONFIGS = {
    "full": {"transformer": TRANSFORMER, "vae": {"decoder_blocks": []}, "audio_vae": {}, "vocoder": {}},
    "transformer only": {"transformer": TRANSFORMER},
    "null sections": {"transformer": TRANSFORMER, "vae": None, "audio_vae": None, "vocoder": None},
    "extra keys": {
        "transformer": {**TRANSFORMER, "future_flag": [1, {"x": None}]},
        "other": {"a": 1},
        "n": None,
    },
    "nested nulls": {
        "transformer": TRANSFORMER,
        "audio_vae": {"model": None, "preprocessing": {"stft": None}},
    },
}
REFUSED_CONFIGS = {  # ComfyUI's model detection fails on these too (json.loads, dict.get, dict.update)
    "not json": "{not json",
    "a list": "[1, 2]",
    "null transformer": json.dumps({"transformer": None}),
    "list transformer": json.dumps({"transformer": [1]}),
}


def write(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> Path:
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def transformer_tensors(prefix: str = P) -> dict[str, torch.Tensor]:
    video, audio = HEADS * HEAD_DIM, AUDIO_HEADS * AUDIO_HEAD_DIM
    z = torch.zeros
    return {
        prefix + "adaln_single.emb.timestep_embedder.linear_1.bias": z(4),
        prefix + "audio_adaln_single.linear.weight": z(4, 4),
        prefix + "transformer_blocks.0.attn1.to_q.weight": z(video, video),
        prefix + "transformer_blocks.0.attn2.to_k.weight": z(video, video),
        prefix + "transformer_blocks.0.audio_attn1.to_q.weight": z(audio, audio),
        prefix + "transformer_blocks.0.ff.net.0.proj.weight": z(4, video),
    }


def metadata_for(config, version: str | None) -> dict[str, str]:
    out = {} if config is None else {"config": config if isinstance(config, str) else json.dumps(config)}
    return out | ({} if version is None else {"model_version": version})


@pytest.mark.parametrize(
    ("config", "version", "prefix"),
    list(itertools.product([*CONFIGS, None], ["2.5.0", None], [P, ""])),
    ids=lambda v: repr(v),
)
def test_transformer_headers_comfyui_reads_never_crash(tmp_path, config, version, prefix):
    """A split LTX-2.5 transformer file whose config says `"vae": null` (issue 39) and its variants:
    the loader's header checks and the group's pre-flight (check_fits) pass."""
    path = write(
        tmp_path / "t.safetensors",
        transformer_tensors(prefix),
        metadata_for(None if config is None else CONFIGS[config], version),
    )
    header = check_comfy_readable(path)
    if config is None:  # ComfyUI's defaults (32 heads x 64 for audio) do not describe these weights
        with pytest.raises(
            ValueError, match=r"t\.safetensors: ComfyUI 0\.33 builds its (video|audio) attention"
        ):
            check_transformer_header(header)
        return
    check_transformer_header(header)
    description = describe_header(header)
    assert (description.video_num_heads, description.audio_num_heads) == (HEADS, AUDIO_HEADS)
    found = detect_model_family(header.shapes, header.dtypes, header.metadata)
    assert found.family == LTX25  # no video feed-forward bias
    assert read_model_file_info(path).family == LTX25
    assert release_of_version(header.metadata) == (LTX25 if version else None)
    check_fits(MGPUModel(checkpoint=str(path), devices=("cpu", "cpu")))


@pytest.mark.parametrize("config", list(REFUSED_CONFIGS))
def test_configs_comfyui_refuses_are_refused_in_one_line_naming_the_file(tmp_path, config):
    path = write(tmp_path / "bad.safetensors", transformer_tensors(), {"config": REFUSED_CONFIGS[config]})
    with pytest.raises(ValueError, match=r"^bad\.safetensors: .*ComfyUI.* refuses the file too") as refused:
        check_fits(MGPUModel(checkpoint=str(path)))
    assert "\n" not in str(refused.value)
    # What only reads the metadata for hints still answers.
    header = read_safetensors_header(path)
    assert detect_model_family(header.shapes, header.dtypes, header.metadata).family == LTX25
    describe_header(header)


def test_null_numbers_in_the_transformer_section_never_crash_our_readers(tmp_path):
    """Null where ComfyUI expects a number: what ComfyUI then does is its own (for most keys its model
    constructor fails, reported by the ranks naming the file); our header readers take the defaults."""
    config = {"transformer": {**TRANSFORMER, "rope_type": None, "num_layers": None, "caption_channels": None}}
    path = write(tmp_path / "t.safetensors", transformer_tensors(), metadata_for(config, None))
    header = check_comfy_readable(path)
    check_transformer_header(header)
    assert describe_header(header).num_layers == 48 and describe_header(header).rope_type == "interleaved"
    assert read_model_file_info(path).family == LTX25


AUDIO_KEYS = {"vocoder.resblocks.0.convs1.0.weight": torch.zeros(1)}
BWE_KEYS = {
    "vocoder.vocoder.resblocks.0.convs1.0.weight": torch.zeros(1),
    "vocoder.bwe_generator.x": torch.zeros(1),
}
AUDIO_CONFIGS = [
    None,
    {"audio_vae": None, "vocoder": None},
    {"audio_vae": {"model": {"params": None}}, "vocoder": {"upsample_rates": None}},
    {"audio_vae": {}, "vocoder": {"bwe": {"input_sampling_rate": 16000, "output_sampling_rate": 48000}}},
    "{broken",
]


@pytest.mark.parametrize("keys", ["plain", "bwe"])
@pytest.mark.parametrize("config", range(len(AUDIO_CONFIGS)))
def test_audio_vae_headers_never_crash_the_release_read(tmp_path, keys, config):
    raw = AUDIO_CONFIGS[config]
    metadata = metadata_for(raw, "2.5.0")
    path = write(tmp_path / "a.safetensors", AUDIO_KEYS if keys == "plain" else BWE_KEYS, metadata)
    found = read_vae_release(path)
    assert found.release == LTX25 and found.hint == (None if keys == "plain" else "LTX-2.3")
    if isinstance(raw, dict):
        frames = audio_output(raw, 5)
        assert frames.samples > 0 and frames.channels == 2


def test_an_ltx25_audio_vae_with_the_bwe_vocoder_fits_an_ltx25_transformer(tmp_path):
    """Issue 39: the 48 kHz vocoder with model_version 2.5.0 was refused as an LTX-2.3 audio VAE."""
    transformer = write(
        tmp_path / "t.safetensors", transformer_tensors(), metadata_for(CONFIGS["full"], None)
    )
    video = write(tmp_path / "v.safetensors", {"decoder.conv_in_x_t.weight": torch.zeros(1)}, None)
    config = {
        "audio_vae": {},
        "vocoder": {"bwe": {"input_sampling_rate": 16000, "output_sampling_rate": 48000}},
    }
    audio = write(tmp_path / "a.safetensors", BWE_KEYS, metadata_for(config, "2.5.0"))
    assert check_loader_files(transformer, str(video), str(audio)).warnings == ()
    unstated = write(tmp_path / "a-unstated.safetensors", BWE_KEYS, metadata_for(config, None))
    (warning,) = check_loader_files(transformer, str(video), str(unstated)).warnings
    assert "a-unstated.safetensors may be an LTX-2.3 audio VAE" in warning


def test_an_audio_vae_without_the_sections_comfyui_builds_it_from_is_refused(tmp_path):
    transformer = write(
        tmp_path / "t.safetensors", transformer_tensors(), metadata_for(CONFIGS["full"], None)
    )
    video = write(tmp_path / "v.safetensors", {"decoder.conv_in_x_t.weight": torch.zeros(1)}, None)
    audio = write(
        tmp_path / "a.safetensors", AUDIO_KEYS, metadata_for({"audio_vae": {}, "vocoder": None}, None)
    )
    with pytest.raises(ValueError, match=r"^a\.safetensors is an LTX audio VAE with no vocoder section"):
        check_loader_files(transformer, str(video), str(audio))


def test_lora_and_quantization_records_with_nulls(tmp_path):
    lora = write(
        tmp_path / "l.safetensors",
        {"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight": torch.zeros(1, 1)},
        {"config": json.dumps({"lora": None})},
    )
    assert lora_release(read_safetensors_header(lora)) is None
    path = write(
        tmp_path / "q.safetensors",
        transformer_tensors(),
        {"_quantization_metadata": json.dumps({"layers": [1]})},
    )
    check_comfy_readable(path)
    assert read_model_file_info(path).weight_format == "unknown quantization"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("2.5.0", (2, 5)), ("2.3", (2, 3)), ("2", (2, 0)), ("v2.5.1-rc", (2, 5)), ("", None), ("latest", None)],
)
def test_model_version(raw, expected):
    assert model_version({"model_version": raw}) == expected
    assert model_version({"config": json.dumps({"model_version": raw})}) == expected
    assert model_version({}) is None and model_version({"config": "{"}) is None
