"""Gemma 3 text-encoder files, loading a block of layers from them, and LTX-2's text features.

Two layouts are read (never pickles; safetensors only):
- ComfyUI single file (the `text_encoders` folder; what LTXAVTextEncoderLoader takes): language-model
  keys under `model.` (plus vision tower, projector and the tokenizer entry, which are skipped), no
  config: the dimensions come from the tensor shapes, the rest are Gemma 3 12B's values
  (`GemmaConfig` defaults, as ComfyUI hard-codes them). A "config" in the file's metadata changes
  nothing, as in ComfyUI, which never reads it (NOTE [file metadata] in wire/file_metadata.py): the
  same file gives ComfyUI's result with and without one.
- HF folder (google/gemma-3-12b-it as downloaded): config.json (multimodal with "text_config", or a
  text-only Gemma 3 config) and one or more *.safetensors shards; language-model keys under
  `language_model.model.`, `model.language_model.` or `model.`.
ComfyUI's quantized files (fp8 "scaled", nvfp4 "mixed") are read too: their quantized linears stay
as stored and are dequantized at each use, as ComfyUI does (quantized.py). Every other weight is held
in the group's weight dtype (the MGPU Loader's; ComfyUI holds Gemma in its file's dtype, bf16 for the
released files, so the default matches native runs).

The text features are ComfyUI's (`comfy/text_encoders/lt.py` LTXAVTEModel.encode_token_weights,
"single_linear" projection of the LTX-2 19B checkpoints): the prompt tokens of all hidden states,
each state normalised over (tokens, hidden) as 8 (x - mean) / (max - min + 1e-6), flattened hidden-
major / state-minor, then the checkpoint's `text_embedding_projection`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import safe_open

from ..wire.model_files import read_safetensors_header
from .gemma3 import GemmaConfig, GemmaSegment, default_sliding_layers
from .quantized import NVFP4, QuantizedLinear, QuantSpec, find_quantized, logical_shape

__all__ = ["GemmaFiles", "feature_dtype", "load_segment", "open_gemma", "text_features"]

# Where the language model sits in the known layouts (ComfyUI / text-only HF; HF multimodal old / new).
MODEL_PREFIXES = ("model.", "language_model.model.", "model.language_model.", "")
_PROBE_KEY = "layers.0.self_attn.q_norm.weight"
_LAYER_KEY = re.compile(r"^layers\.(\d+)\.")
# ComfyUI's normalisation of each hidden state (lt.py): 8 (x - mean) / (max - min + eps).
FEATURE_SCALE = 8.0
FEATURE_EPS = 1e-6
# safetensors dtypes loaded as they are (cast to the weight dtype); quantized linears (fp8 "scaled",
# nvfp4 "mixed" files) are kept as stored and dequantized per use (quantized.py).
_FLOAT_DTYPES = {"BF16", "F16", "F32"}
_ITEM_BYTES = {"F64": 8, "F32": 4, "I64": 8, "I32": 4, "BF16": 2, "F16": 2, "I16": 2}  # others: 1 byte
_NVFP4_PAD = 16  # nvfp4 storage pads rows and columns to multiples of this
_MAX_LISTED = 6


@dataclass(frozen=True)
class GemmaFiles:
    """A Gemma 3 text encoder on disk, checked against its config.

    tensors: module key (prefix removed, e.g. "layers.3.mlp.up_proj.weight") -> (file, key in file).
    shapes: module key -> shape. layout: "single file" or "folder".
    """

    path: Path
    layout: str
    config: GemmaConfig
    tensors: Mapping[str, tuple[Path, str]]
    shapes: Mapping[str, tuple[int, ...]]
    quantized: Mapping[str, tuple[QuantSpec, Path]]  # module name ("layers.3.mlp.up_proj") -> storage
    stored_bytes: Mapping[str, int]  # quantized weights' module keys -> bytes as stored (with scales)

    def size_bytes(self, dtype: torch.dtype, keys: Sequence[str] | None = None) -> int:
        """Bytes the given module tensors (all by default) take held in `dtype` (quantized: as stored)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        chosen = keys if keys is not None else self.shapes
        return sum(self.stored_bytes.get(k, math.prod(self.shapes[k]) * itemsize) for k in chosen)


def open_gemma_cached(path: Path | str) -> GemmaFiles:
    """open_gemma, remembered per version of the files (their names, sizes and times): the node opens
    the same text encoder on every run, and checking its shapes builds the model's skeleton."""
    path = Path(path).resolve()
    files = sorted([*path.glob("*.safetensors"), *path.glob("config.json")]) if path.is_dir() else [path]
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.exists())
    return _open_gemma_version(path, stamp)


@functools.lru_cache(maxsize=4)
def _open_gemma_version(path: Path, _stamp: tuple) -> GemmaFiles:
    return open_gemma(path)


def open_gemma(path: Path | str) -> GemmaFiles:
    """Read the headers of a text encoder (single file or HF folder) and check it is a Gemma 3 text
    decoder whose tensors match its config. Reads no tensor data. Raises ValueError saying what to change."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise ValueError(
                f"the folder {path} holds no .safetensors files; point to a Gemma 3 text encoder file or to the "
                "folder of google/gemma-3-12b-it with its config.json and model-*.safetensors"
            )
        config_file = path / "config.json"
        raw = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else None
        layout = "folder"
    elif path.is_file():
        files = [path]
        raw = None
        layout = "single file"
    else:
        raise ValueError(f"text encoder {path} does not exist on this machine")
    located: dict[str, tuple[Path, str]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    quantized: dict[str, tuple[QuantSpec, Path]] = {}
    for file in files:
        header = read_safetensors_header(file)
        for key, shape in header.shapes.items():
            located[key], shapes[key], dtypes[key] = (file, key), shape, header.dtypes[key]
        with safe_open(str(file), framework="pt") as f:
            specs = find_quantized(header.shapes, header.metadata, f.get_tensor)
        quantized |= {layer: (spec, file) for layer, spec in specs.items()}
    prefix = next((p for p in MODEL_PREFIXES if p + _PROBE_KEY in shapes), None)
    if prefix is None:
        raise ValueError(
            f"{path} is not a Gemma 3 text encoder: no '{_PROBE_KEY}' under any of the prefixes "
            f"{', '.join(repr(p) for p in MODEL_PREFIXES if p)}. Pick the Gemma 3 12B text encoder LTX-2 uses "
            "(ComfyUI's gemma_3_12B_it.safetensors or the google/gemma-3-12b-it folder)."
        )
    quant = {layer[len(prefix) :]: q for layer, q in quantized.items() if layer.startswith(prefix)}
    module_shapes = {k[len(prefix) :]: s for k, s in shapes.items() if k.startswith(prefix)}
    for name, (spec, _) in quant.items():
        module_shapes[f"{name}.weight"] = logical_shape(spec, module_shapes[f"{name}.weight"])
    config = _config(module_shapes, raw, path)
    expected = _expected_shapes(config)
    module_dtypes = {k[len(prefix) :]: d for k, d in dtypes.items() if k.startswith(prefix)}
    _check_tensors(path, prefix, expected, module_shapes, module_dtypes, quant)
    stored = {
        f"{name}.weight": sum(
            math.prod(shapes[k]) * _ITEM_BYTES.get(dtypes[k], 1) for k in spec.tensors.values()
        )
        for name, (spec, _) in quant.items()
    }
    return GemmaFiles(
        path=path,
        layout=layout,
        config=config,
        tensors={k: located[prefix + k] for k in expected},
        shapes=expected,
        quantized=quant,
        stored_bytes=stored,
    )


def _config(shapes: Mapping[str, tuple[int, ...]], raw: dict | None, path: Path) -> GemmaConfig:
    """Dimensions from the tensors; the other numbers from the config when there is one, else 12B's."""
    try:
        vocab, hidden = shapes["embed_tokens.weight"]
        head_dim = shapes[_PROBE_KEY][0]
        num_layers = 1 + max(int(m.group(1)) for k in shapes if (m := _LAYER_KEY.match(k)))
        dims = {
            "vocab_size": vocab,
            "hidden_size": hidden,
            "head_dim": head_dim,
            "num_layers": num_layers,
            "num_heads": shapes["layers.0.self_attn.q_proj.weight"][0] // head_dim,
            "num_kv_heads": shapes["layers.0.self_attn.k_proj.weight"][0] // head_dim,
            "intermediate_size": shapes["layers.0.mlp.gate_proj.weight"][0],
            "query_pre_attn_scalar": float(head_dim),  # ComfyUI's attention scale 1/sqrt(head_dim)
            "sliding_layers": default_sliding_layers(num_layers),
        }
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path} lacks the Gemma 3 tensors its dimensions are read from ({exc})") from None
    config = GemmaConfig(**dims)
    if raw is None:
        return config
    return _apply_hf_config(config, raw.get("text_config", raw), path)


def _apply_hf_config(config: GemmaConfig, text: dict[str, Any], path: Path) -> GemmaConfig:
    """Overlay a transformers Gemma 3 text config (4.50+ or 5.x format) on the shape-derived one."""
    for key, ours in (("hidden_size", "hidden_size"), ("num_hidden_layers", "num_layers")):
        if key in text and int(text[key]) != getattr(config, ours):
            raise ValueError(
                f"{path}: config.json says {key} = {text[key]} but the weights have {getattr(config, ours)}; "
                "the folder mixes files of different models"
            )
    if text.get("attn_logit_softcapping") or text.get("use_bidirectional_attention"):
        raise ValueError(
            f"{path}: attention softcapping / bidirectional attention is not Gemma 3's text decoder"
        )
    if text.get("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        raise ValueError(
            f"{path}: activation {text['hidden_activation']!r} is not Gemma 3's gelu_pytorch_tanh"
        )
    n = config.num_layers
    if isinstance(text.get("layer_types"), list):
        sliding = tuple(t == "sliding_attention" for t in text["layer_types"])
        if len(sliding) != n:
            raise ValueError(f"{path}: config.json lists {len(sliding)} layer types for {n} layers")
    else:
        pattern = int(text.get("sliding_window_pattern", 6))
        sliding = tuple((i + 1) % pattern != 0 for i in range(n))
    params = text.get("rope_parameters")
    if isinstance(params, dict) and ("full_attention" in params or "sliding_attention" in params):
        full, local = params.get("full_attention") or {}, params.get("sliding_attention") or {}
    else:  # transformers 4.x: rope_theta, rope_scaling (global layers), rope_local_base_freq
        full = {"rope_theta": text.get("rope_theta", 1e6), **(text.get("rope_scaling") or {})}
        local = {"rope_theta": text.get("rope_local_base_freq", 1e4)}
    return replace(
        config,
        rms_norm_eps=float(text.get("rms_norm_eps", config.rms_norm_eps)),
        query_pre_attn_scalar=float(text.get("query_pre_attn_scalar", 256)),
        # transformers' Gemma3TextConfig default when a config.json does not set it.
        sliding_window=int(text.get("sliding_window") or 4096),
        sliding_layers=sliding,
        rope_theta_global=float(full.get("rope_theta", 1e6)),
        rope_scale_global=_linear_factor(full, path),
        rope_theta_local=float(local.get("rope_theta", 1e4)),
        rope_scale_local=_linear_factor(local, path),
    )


def _linear_factor(rope: dict[str, Any], path: Path) -> float:
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind == "default":
        return 1.0
    if kind == "linear":
        return float(rope["factor"])
    raise ValueError(f"{path}: rope type {kind!r} is not supported (Gemma 3 uses 'default' and 'linear')")


def _expected_shapes(config: GemmaConfig) -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        whole = GemmaSegment(config, 0, config.num_layers, torch.float32)
    return {k: tuple(v.shape) for k, v in whole.state_dict().items()}


def _check_tensors(
    path: Path,
    prefix: str,
    expected: Mapping[str, tuple[int, ...]],
    shapes: Mapping[str, tuple[int, ...]],
    dtypes: Mapping[str, str],
    quantized: Mapping[str, tuple[QuantSpec, Path]],
) -> None:
    """Every tensor present with its shape (quantized weights: their logical [out, in], nvfp4's padded
    to multiples of 16) and a float dtype unless the file marks the layer as quantized."""
    quantized_keys = {f"{name}.weight": spec for name, (spec, _) in quantized.items()}
    odd = sorted({dtypes[k] for k in expected if k in dtypes and k not in quantized_keys} - _FLOAT_DTYPES)
    if odd:
        raise ValueError(
            f"{path} stores weights as {', '.join(odd)} without ComfyUI's quantization marks (comfy_quant, "
            "_quantization_metadata or scaled_fp8); use the bf16 text encoder file (gemma_3_12B_it.safetensors)"
        )

    def fits(key: str, want: tuple[int, ...]) -> bool:
        have = shapes[key]
        spec = quantized_keys.get(key)
        if spec is not None and spec.format == NVFP4:
            return all(h == -(-w // _NVFP4_PAD) * _NVFP4_PAD for h, w in zip(have, want))
        return have == want

    missing = sorted(k for k in expected if k not in shapes)
    wrong = sorted(
        f"{k} {list(shapes[k])} (expected {list(v)})"
        for k, v in expected.items()
        if k in shapes and not fits(k, v)
    )
    if missing or wrong:
        problems = []
        if missing:
            problems.append(
                f"{len(missing)} tensors missing under {prefix!r}: {', '.join(missing[:_MAX_LISTED])}"
            )
        if wrong:
            problems.append(f"{len(wrong)} of the wrong shape: {', '.join(wrong[:_MAX_LISTED])}")
        raise ValueError(f"{path} is not a complete Gemma 3 text decoder: " + "; ".join(problems))


def load_segment(
    files: GemmaFiles, start: int, stop: int, device: torch.device, dtype: torch.dtype
) -> GemmaSegment:
    """Layers [start, stop) (with the embedding / final norm at the ends) on `device`, weights in
    `dtype` (quantized linears as stored). Reads only this block's tensors."""
    with torch.device("meta"):
        segment = GemmaSegment(files.config, start, stop, dtype)
    names = {name for name, _ in segment.named_modules()}
    for name, (spec, file) in files.quantized.items():
        if name not in names:
            continue
        with safe_open(str(file), framework="pt") as f:
            stored = {role: f.get_tensor(key).to(device) for role, key in spec.tensors.items()}
        parent, _, child = name.rpartition(".")
        shape = files.shapes[f"{name}.weight"]
        setattr(
            segment.get_submodule(parent), child, QuantizedLinear(spec.format, stored, (shape[0], shape[1]))
        )
    wanted = [
        k
        for k in segment.state_dict()
        if files.tensors.get(k) and k.rpartition(".")[0] not in files.quantized
    ]
    by_file: dict[Path, list[str]] = {}
    for key in wanted:
        by_file.setdefault(files.tensors[key][0], []).append(key)
    values: dict[str, torch.Tensor] = {}
    for file, keys in by_file.items():
        with safe_open(str(file), framework="pt") as f:
            for key in keys:
                values[key] = f.get_tensor(files.tensors[key][1]).to(device=device, dtype=dtype)
    segment.load_state_dict(values, strict=False, assign=True)
    left = [n for n, t in (*segment.named_parameters(), *segment.named_buffers()) if t.is_meta]
    assert not left, f"no values loaded for {left[:_MAX_LISTED]}"
    return segment.requires_grad_(False).eval()


def feature_dtype(device: torch.device, weight_dtype: torch.dtype) -> torch.dtype:
    """Dtype of the normalisation and projection: ComfyUI uses bfloat16 where the device supports it
    (lt.py, should_use_bf16) and float32 on the CPU; float32 weights ask for float32 throughout."""
    if weight_dtype == torch.float32 or device.type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32


def text_features(
    states: Sequence[torch.Tensor], projection: torch.nn.Linear, dtype: torch.dtype
) -> torch.Tensor:
    """The conditioning tensor from the prompt tokens of every hidden state.

    states: num_hidden_states tensors [B, n, hidden] (embeddings first, final-normed output last).
    projection: Linear(hidden * num_hidden_states -> C). Returns [B, n, C] float32.
    """
    x = torch.stack(list(states), dim=1).to(dtype).movedim(1, -1)  # [B, n, hidden, states]
    span = x.amax(dim=(1, 2), keepdim=True) - x.amin(dim=(1, 2), keepdim=True)
    x = FEATURE_SCALE * (x - x.mean(dim=(1, 2), keepdim=True)) / (span + FEATURE_EPS)
    x = x.reshape(x.shape[0], x.shape[1], -1)
    bias = None if projection.bias is None else projection.bias.to(dtype)
    return F.linear(x, projection.weight.to(dtype), bias).float()


# safetensors dtype names of the weights ComfyUI holds Gemma in unconverted (llama_detect: the dtype
# of model.norm.weight; quantized files keep their layers and hold the rest in that dtype).
_STORED_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


def stored_dtype(files: GemmaFiles) -> torch.dtype:
    """The dtype Gemma's files store it in (its final norm's), as ComfyUI's text encoder loaders read it;
    bfloat16 for any other stored type."""
    file, key = files.tensors["norm.weight"]
    return _STORED_DTYPES.get(read_safetensors_header(file).dtypes[key], torch.bfloat16)
