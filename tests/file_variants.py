"""The same weights written in the layouts ComfyUI 0.33's loaders accept (issue 39), for the variants
matrix (tests/test_file_variants.py). Not the pack's writers: this module reads a release's files and
writes them again as other hands would (split or whole, with or without the `model.diffusion_model.`
prefix, metadata config full / partial / with null sections / with extra keys / absent / broken,
`model_version` stated or not, quantized with or without the attention gates, the LTX-2.5 audio VAE
with the 48 kHz bandwidth-extension vocoder, Gemma with SentencePiece or tokenizer JSON, with a config
in its metadata, a Gemma 4 of its own sizes drawn here with ComfyUI's classes, int8 convrot; scaled fp8
transformers).

Each variant records what ComfyUI is expected to do with it (`refused`: its loader fails on the file;
the matrix checks that too, against ComfyUI itself, and that ours refuses it before any work).
Import ComfyUI first (tests/comfyui_harness.comfyui_in_process): quantizing and drawing use its code.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

PREFIX = "model.diffusion_model."
RELEASES = ("2", "2.3", "2.5")
VERSIONS = {"2": "2.0.0", "2.3": "2.3.0", "2.5": "2.5.0"}
SPLIT_PREFIXES = ("vae.", "audio_vae.", "vocoder.", "text_embedding_projection.")
CONVROT_GROUP = 16  # ComfyUI's int8 convrot rotates input features in groups of a power of 4
# Metadata keys real files carry that ComfyUI never reads (safetensors' own, modelspec, trainers').
EXTRA_METADATA = {"format": "pt", "modelspec.title": "variant", "ss_network_dim": "4", "empty": ""}


@dataclass(frozen=True)
class Variant:
    """One file. `folder`: the ComfyUI models folder it sits in; `refused`: ComfyUI's own loader is
    expected to refuse it (the matrix asserts that too). `same_as`: a file ComfyUI refuses that the
    pack reads anyway (an extension), and the label of the variant whose native result it must give."""

    release: str
    component: str  # transformer, video_vae, audio_vae, upscaler, gemma3, gemma4
    label: str
    path: Path
    folder: str
    refused: bool = False
    same_as: str = ""

    @property
    def id(self) -> str:
        return f"{self.release}/{self.component}/{self.label}"


def read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def write(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata or None)
    return path


def _config(metadata: dict[str, str]) -> dict:
    return json.loads(metadata["config"])


# ----- transformer -------------------------------------------------------------------------------


def transformer_variants(source: Path, release: str, out: Path) -> list[Variant]:
    """`source` (a full checkpoint or a diffusion-model file) in every transformer layout."""
    tensors, metadata = read(source)
    config = _config(metadata)
    model = {k: v for k, v in tensors.items() if k.startswith(PREFIX)}
    full = {**config}
    made = []

    def add(label: str, t: dict, meta: dict | None, folder: str = "diffusion_models", refused: bool = False):
        name = (
            f"{release}-transformer-{label.replace(' ', '-').replace(':', '').replace(',', '')}.safetensors"
        )
        made.append(
            Variant(release, "transformer", label, write(out / folder / name, t, meta), folder, refused)
        )

    if any(k.startswith("vae.") for k in tensors):
        add("checkpoint as made", tensors, metadata, "checkpoints")
        add(
            "checkpoint, model_version",
            tensors,
            metadata | {"model_version": VERSIONS[release]},
            "checkpoints",
        )
    add("prefixed, config full", model, {"config": json.dumps(full)})
    add("no prefix", {k.removeprefix(PREFIX): v for k, v in model.items()}, {"config": json.dumps(full)})
    add("config transformer only", model, {"config": json.dumps({"transformer": config["transformer"]})})
    nulls = {"transformer": config["transformer"], "vae": None, "audio_vae": None, "vocoder": None}
    add("config null sections", model, {"config": json.dumps(nulls), "model_version": VERSIONS[release]})
    extra = {"transformer": {**config["transformer"], "a_future_option": [1, None]}, "training": {"steps": 1}}
    add("config extra keys", model, {"config": json.dumps(extra)} | EXTRA_METADATA)
    add("config absent", model, None, refused=True)  # ComfyUI's defaults are the 22B's widths
    add("config not json", model, {"config": "{'transformer': 1}"}, refused=True)
    gates = any(".to_gate_logits." in k for k in model)
    for with_gates in (True, False) if gates else (True,):
        suffix = (", gates quantized" if with_gates else ", gates not") if gates else ""
        add(
            "int8 convrot" + suffix,
            int8_convrot(model, block_linears(with_gates)),
            {"config": json.dumps(full)},
        )
        add("fp8 scaled" + suffix, fp8_scaled(model, block_linears(with_gates)), {"config": json.dumps(full)})
    return made


def block_linears(with_gates: bool):
    """Picks the transformer blocks' 2-D Linear weights, the attention gates too or not."""

    def picks(key: str, value: torch.Tensor) -> bool:
        if ".to_gate_logits." in key and not with_gates:
            return False
        return ".transformer_blocks." in f".{key.removeprefix(PREFIX)}" and key.endswith(".weight")

    return picks


def gemma_layer_linears(key: str, value: torch.Tensor) -> bool:
    """Gemma's layer Linears, as the released comfy-int8-convrot Gemma 4 quantizes them."""
    return key.startswith("model.layers.") and key.endswith("_proj.weight")


def int8_convrot(tensors: dict[str, torch.Tensor], picks) -> dict[str, torch.Tensor]:
    """The 2-D weights `picks(key, value)` selects in ComfyUI's int8 convrot format (int8 weight, per-row
    `weight_scale`, a `comfy_quant` record); every other entry as stored."""
    from comfy.quant_ops import QuantizedTensor

    record = json.dumps({"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": CONVROT_GROUP})
    out = {}
    for key, value in tensors.items():
        if not (picks(key, value) and value.ndim == 2 and value.shape[1] % CONVROT_GROUP == 0):
            out[key] = value
            continue
        q = QuantizedTensor.from_float(
            value.to(torch.bfloat16), "TensorWiseINT8Layout", per_channel=True, convrot=True,
            convrot_groupsize=CONVROT_GROUP,
        )  # fmt: skip
        layer = key.removesuffix(".weight")
        out[key], out[f"{layer}.weight_scale"] = q._qdata, q._params.scale
        out[f"{layer}.comfy_quant"] = torch.frombuffer(bytearray(record.encode()), dtype=torch.uint8).clone()
    return out


def fp8_scaled(tensors: dict[str, torch.Tensor], picks) -> dict[str, torch.Tensor]:
    """The 2-D weights `picks(key, value)` selects in ComfyUI's scaled fp8 format, as the released fp8
    files store them: float8_e4m3fn weight, one float32 `weight_scale` per tensor, a `comfy_quant`
    record; every other entry as stored. Written with torch alone."""
    record = json.dumps({"format": "float8_e4m3fn"})
    fp8_max = torch.finfo(torch.float8_e4m3fn).max
    out = {}
    for key, value in tensors.items():
        if not (picks(key, value) and value.ndim == 2):
            out[key] = value
            continue
        scale = (value.float().abs().amax() / fp8_max).clamp(min=1e-12)
        layer = key.removesuffix(".weight")
        out[key] = (value.float() / scale).clamp(-fp8_max, fp8_max).to(torch.float8_e4m3fn)
        out[f"{layer}.weight_scale"] = scale.reshape(())
        out[f"{layer}.comfy_quant"] = torch.frombuffer(bytearray(record.encode()), dtype=torch.uint8).clone()
    return out


# ----- VAEs ----------------------------------------------------------------------------------------


def video_vae_variants(source: Path, release: str, out: Path, kind: str = "") -> list[Variant]:
    """The video VAE as its own file (from a checkpoint's `vae.*`, or a VAE file as made); `kind` starts
    the labels where a release has two (LTX-2.5's diffusion decoder and its conv decoder option)."""
    tensors, metadata = read(source)
    if any(k.startswith("vae.") for k in tensors):
        tensors = {k.removeprefix("vae."): v for k, v in tensors.items() if k.startswith("vae.")}
    vae = _config(metadata)["vae"]
    made = []

    def add(label: str, meta: dict | None, refused: bool = False) -> None:
        label = f"{kind}, {label}" if kind else label
        name = f"{release}-video-vae-{label.replace(' ', '-').replace(',', '')}.safetensors"
        made.append(
            Variant(release, "video_vae", label, write(out / "vae" / name, tensors, meta), "vae", refused)
        )

    add("config vae", {"config": json.dumps({"vae": vae})})
    add(
        "model_version, extra keys",
        {"config": json.dumps({"vae": vae, "x": None}), "model_version": VERSIONS[release]} | EXTRA_METADATA,
    )
    add("config absent", None, refused=True)  # ComfyUI builds its default (full-size) decoder
    return made


def audio_vae_variants(
    source: Path, release: str, out: Path, bwe_source: Path | None = None
) -> list[Variant]:
    """The audio VAE (autoencoder + vocoder) as its own file; with `bwe_source` (a checkpoint with the
    bandwidth-extension vocoder) also LTX-2.5's layout with that vocoder, stating 2.5.0 or not."""
    tensors, metadata = read(source)
    keep = ("audio_vae.", "vocoder.")
    made = []

    def add(label: str, t: dict, meta: dict | None, refused: bool = False) -> None:
        name = f"{release}-audio-vae-{label.replace(' ', '-').replace(',', '')}.safetensors"
        made.append(Variant(release, "audio_vae", label, write(out / "vae" / name, t, meta), "vae", refused))

    audio = {k: v for k, v in tensors.items() if k.startswith(keep)}
    sections = {k: _config(metadata)[k] for k in ("audio_vae", "vocoder")}
    add("config sections", audio, {"config": json.dumps(sections)})
    add(
        "model_version, extra keys",
        audio,
        {"config": json.dumps(sections | {"vae": None}), "model_version": VERSIONS[release]} | EXTRA_METADATA,
    )
    add("config absent", audio, None, refused=True)  # ComfyUI's AudioVAE asserts its config
    if bwe_source is not None:
        bwe_tensors, bwe_metadata = read(bwe_source)
        bwe = {k: v for k, v in bwe_tensors.items() if k.startswith(keep)}
        bwe_sections = {k: _config(bwe_metadata)[k] for k in ("audio_vae", "vocoder")}
        add(
            "bwe vocoder, model_version",
            bwe,
            {"config": json.dumps(bwe_sections), "model_version": VERSIONS[release]},
        )
        add("bwe vocoder, unstated", bwe, {"config": json.dumps(bwe_sections)})
    return made


def upscaler_variants(source: Path, release: str, out: Path) -> list[Variant]:
    tensors, metadata = read(source)
    made = []

    def add(label: str, meta: dict | None, refused: bool = False) -> None:
        name = f"{release}-upscaler-{label.replace(' ', '-').replace(',', '')}.safetensors"
        path = write(out / "latent_upscale_models" / name, tensors, meta)
        made.append(Variant(release, "upscaler", label, path, "latent_upscale_models", refused))

    add("model_version, extra keys", metadata | {"model_version": VERSIONS[release]} | EXTRA_METADATA)
    add("config absent", None, refused=True)  # LatentUpscaleModelLoader reads metadata["config"]
    return made


# ----- text encoders -------------------------------------------------------------------------------

GEMMA3_HF_CONFIG = {  # what an export of google/gemma-3-12b-it's config writes; ComfyUI never reads it
    "model_type": "gemma3_text", "query_pre_attn_scalar": 256, "sliding_window": 512, "rope_theta": 1e6,
    "rope_local_base_freq": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
}  # fmt: skip


def gemma3_variants(source: Path, out: Path) -> list[Variant]:
    tensors, metadata = read(source)
    made = []

    def add(label: str, t: dict, meta: dict | None, refused: bool = False, same_as: str = "") -> None:
        name = f"gemma3-{label.replace(' ', '-').replace(',', '')}.safetensors"
        path = write(out / "text_encoders" / name, t, meta)
        made.append(Variant("2.3", "gemma3", label, path, "text_encoders", refused, same_as))

    json_only = {k: v for k, v in tensors.items() if k != "spiece_model"}
    add("sentencepiece only", {k: v for k, v in tensors.items() if k != "tokenizer_json"}, metadata)
    add("config in metadata", tensors, {"config": json.dumps(GEMMA3_HF_CONFIG)} | EXTRA_METADATA)
    # ComfyUI's Gemma 3 tokenizer reads only the SentencePiece model (lt.py Gemma3_12BTokenizer) and
    # refuses this file; MGPU Text Encode reads its tokenizer JSON (the same ids: tiny_spiece.py).
    add("tokenizer json only", json_only, metadata, refused=True, same_as="sentencepiece only")
    return made


def gemma4_variants(sources: dict[str, Path], out: Path) -> list[Variant]:
    """`sources`: label -> a Gemma 4 with projection file (make-tiny's bf16 and int8, this module's own)."""
    made = []
    for label, source in sources.items():
        made.append(Variant("2.5", "gemma4", label, source, "text_encoders"))
    tensors, metadata = read(sources["own sizes, int8 convrot"])
    path = write(
        out / "text_encoders" / "gemma4-config-in-metadata.safetensors",
        tensors,
        metadata | {"config": json.dumps({"model_type": "gemma4", "hidden_size": 3840})} | EXTRA_METADATA,
    )
    made.append(Variant("2.5", "gemma4", "own sizes, config in metadata", path, "text_encoders"))
    return made


# Sizes of this module's own Gemma 4 (make-tiny's: hidden 16, 2 heads of 8, 1 KV head): others on
# purpose, and a projection with biases.
GEMMA4_SIZES = {
    "vocab_size": 256, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 48,
    "num_attention_heads": 4, "num_key_value_heads": 2,
}  # fmt: skip
GEMMA4_CONSTANTS = {
    "head_dim": 8, "global_head_dim": 16, "suppress_tokens": [],
    "vision_config": {"model_patch_size": 4, "patch_size": 2, "pooling_kernel_size": 2, "mm_embed_dim": 8,
                      "mm_posemb_size": 8, "output_proj_dims": 8, "rms_norm_eps": 1e-6},
    "audio_config": {"audio_samples_per_token": 640, "output_proj_dims": 8, "rms_norm_eps": 1e-6},
}  # fmt: skip


def own_gemma4(
    out: Path, tokenizer_json: torch.Tensor, widths: tuple[int, int], seed: int = 5
) -> dict[str, Path]:
    """A Gemma 4 12B-structured file at GEMMA4_SIZES / GEMMA4_CONSTANTS with the LTX projection to the
    transformer's (video, audio) widths, drawn here with ComfyUI's Gemma 4 class; bf16 and int8 convrot."""
    from comfy.ops import disable_weight_init
    from comfy.text_encoders import gemma4

    with gemma4_constants(GEMMA4_CONSTANTS):
        model = gemma4.Gemma4_12B(dict(GEMMA4_SIZES), torch.float32, "cpu", disable_weight_init)
    gen = torch.Generator().manual_seed(seed)
    sd = {}
    for key, value in model.state_dict().items():
        scale = value.shape[-1] ** -0.5 if value.ndim > 1 else 0.1
        sd[key] = (torch.randn(value.shape, generator=gen) * scale + (value.ndim == 1)).to(torch.bfloat16)
    width = GEMMA4_SIZES["hidden_size"] * (GEMMA4_SIZES["num_hidden_layers"] + 1)
    for name, out_width in zip(("video", "audio"), widths):
        prefix = f"text_embedding_projection.{name}_aggregate_embed."
        sd[prefix + "weight"] = (torch.randn(out_width, width, generator=gen) / width**0.5).to(torch.bfloat16)
        sd[prefix + "bias"] = (torch.randn(out_width, generator=gen) * 0.1).to(torch.bfloat16)
    sd["tokenizer_json"] = tokenizer_json
    quantized = int8_convrot(sd, gemma_layer_linears)
    folder = out / "text_encoders"
    return {
        "own sizes, bf16": write(folder / "gemma4-own-sizes-bf16.safetensors", sd, None),
        "own sizes, int8 convrot": write(
            folder / "gemma4-own-sizes-int8-convrot.safetensors", quantized, None
        ),
    }


@contextlib.contextmanager
def gemma4_constants(constants: dict) -> Iterator[None]:
    """ComfyUI's Gemma4_12B_Config with the given class constants (head sizes, embedder configs) while
    inside: what a native run at a small Gemma 4's sizes sets (the sizes go through model_options)."""
    from comfy.text_encoders import gemma4

    config = gemma4.Gemma4_12B_Config
    saved = {key: getattr(config, key) for key in constants}
    try:
        for key, value in constants.items():
            setattr(config, key, value)
        yield
    finally:
        for key, value in saved.items():
            setattr(config, key, value)
