"""An embedded tiny Gemma 3 text encoder with its tokenizer, for tests and the demo (no downloads).

Real structure (48 layers: five sliding-window layers then one global, sandwich norms, q/k norms,
grouped-query attention, two rope bases), Gemma 3 12B's non-size settings, small widths: hidden 16,
which with 49 hidden states fits the tiny LTX-2 checkpoint's text projection (tiny_model
GEMMA_HIDDEN_SIZE x GEMMA_NUM_HIDDEN_STATES inputs). Random weights, stored in bfloat16.

The tokenizer is a character-level `tokenizers` BPE (no merges): every printable ASCII character is
one token (space as "▁", like SentencePiece), anything else is <unk>; Gemma's special ids: <pad> 0,
<eos> 1, <bos> 2, <unk> 3, <start_of_turn> 105, <end_of_turn> 106. A 1,100-character prompt is
1,101 tokens with BOS, longer than the 1,024 the text path pads to.

Layouts (`make_tiny_gemma(dir, layout=...)`):
- "comfyui": one file `gemma3-tiny.safetensors`, language model under `model.`, a vision-tower and
  projector stand-in (ignored by loaders, as in ComfyUI's files), the tokenizer embedded as the
  `tokenizer_json` entry and as a SentencePiece model in `spiece_model` (what ComfyUI's Gemma
  tokenizer reads; same ids, tiny_spiece.py); no config (loaders use Gemma 3 12B's settings, as for ComfyUI's files).
- "hf": a folder `gemma3-tiny-hf/` as google/gemma-3-12b-it is laid out: config.json with a
  "text_config", two shards with `language_model.model.` keys and an index, tokenizer.json.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..text.gemma3 import GemmaConfig, GemmaSegment, default_sliding_layers
from ..text.text_tokenizer import EMBEDDED_JSON_KEY, tokenizer_json_bytes
from .tiny_spiece import spiece_model_bytes

COMFYUI_FILE_NAME = "gemma3-tiny.safetensors"
SPIECE_MODEL_KEY = "spiece_model"
HF_FOLDER_NAME = "gemma3-tiny-hf"
STORAGE_DTYPE = torch.bfloat16
VOCAB_SIZE = 256
NUM_HEADS, NUM_KV_HEADS, HEAD_DIM = 2, 1, 8  # grouped-query attention as in 12B (16 / 8 heads)
INTERMEDIATE_SIZE = 32
SPECIAL_TOKENS = {
    "<pad>": 0,
    "<eos>": 1,
    "<bos>": 2,
    "<unk>": 3,
    "<start_of_turn>": 105,
    "<end_of_turn>": 106,
}
CHARACTERS = "\n\t" + "".join(chr(c) for c in range(33, 127))  # space is "▁" (below)
SPACE_PIECE = "▁"
NORM_WEIGHT_STD = 0.1  # (1 + w) scales around 1
LINEAR_GAIN = 1.0  # std gain / sqrt(fan_in): every layer contributes O(1)


def tiny_gemma_config() -> GemmaConfig:
    from .tiny_model import GEMMA_HIDDEN_SIZE, GEMMA_NUM_HIDDEN_STATES

    layers = GEMMA_NUM_HIDDEN_STATES - 1
    return GemmaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=GEMMA_HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_layers=layers,
        num_heads=NUM_HEADS,
        num_kv_heads=NUM_KV_HEADS,
        head_dim=HEAD_DIM,
        query_pre_attn_scalar=float(HEAD_DIM),
        sliding_layers=default_sliding_layers(layers),
    )


def tiny_tokenizer_json() -> dict:
    """tokenizers' JSON for the character-level tokenizer described in the module docstring."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers

    vocab = dict(SPECIAL_TOKENS)
    free = (i for i in range(VOCAB_SIZE) if i not in SPECIAL_TOKENS.values())
    for piece in (SPACE_PIECE, *CHARACTERS):
        vocab[piece] = next(free)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Replace(" ", SPACE_PIECE)
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return json.loads(tokenizer.to_str())


def _vocab_with_specials() -> dict[str, int]:
    data = tiny_tokenizer_json()
    return {**data["model"]["vocab"], **{token["content"]: token["id"] for token in data["added_tokens"]}}


def hf_text_config(config: GemmaConfig) -> dict:
    """The "text_config" of config.json in transformers 4.50's format (as google's 12B file has it)."""
    return {
        "model_type": "gemma3_text",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "query_pre_attn_scalar": int(config.query_pre_attn_scalar),
        "rms_norm_eps": config.rms_norm_eps,
        "sliding_window": config.sliding_window,
        "sliding_window_pattern": 6,
        "rope_theta": config.rope_theta_global,
        "rope_local_base_freq": config.rope_theta_local,
        "rope_scaling": {"rope_type": "linear", "factor": config.rope_scale_global},
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 131072,
    }


def make_tiny_gemma(
    out_dir: Path | str,
    seed: int = 0,
    layout: str = "comfyui",
    config: GemmaConfig | None = None,
    device: str = "cpu",
    vision_stand_ins: bool = True,
) -> Path:
    """Write the tiny Gemma into `out_dir` (created if needed); returns the file ("comfyui") or the
    folder ("hf"). Same seed, same torch version: the same weights in both layouts. `config`: other
    sizes with the same tokenizer (benchmarks: GemmaConfig() is Gemma 3 12B, 24 GB in bf16), drawn on
    `device`. `vision_stand_ins=False` leaves out the small vision entries (at 12B sizes ComfyUI builds
    the real vision tower, whose shapes they would not fit)."""
    if layout not in ("comfyui", "hf"):
        raise ValueError(f"layout {layout!r} is not 'comfyui' or 'hf'")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = config or tiny_gemma_config()
    weights = _random_weights(config, seed, device)
    vision = {  # stand-ins: loaders must skip what is not the language model
        "vision_model.embeddings.patch_embedding.weight": torch.zeros(4, 3, 2, 2),
        "multi_modal_projector.mm_input_projection_weight": torch.zeros(4, config.hidden_size),
    }
    if not vision_stand_ins:
        vision = {}
    if layout == "comfyui":
        path = out_dir / COMFYUI_FILE_NAME
        tensors = {f"model.{k}": v for k, v in weights.items()} | vision
        tokenizer = tokenizer_json_bytes(tiny_tokenizer_json())
        tensors[EMBEDDED_JSON_KEY] = torch.frombuffer(bytearray(tokenizer), dtype=torch.uint8)
        # ComfyUI's Gemma tokenizer reads a SentencePiece model from this entry (as its own files carry).
        spiece = spiece_model_bytes(_vocab_with_specials(), VOCAB_SIZE)
        tensors[SPIECE_MODEL_KEY] = torch.frombuffer(bytearray(spiece), dtype=torch.uint8)
        _save(tensors, path)
        return path
    folder = out_dir / HF_FOLDER_NAME
    folder.mkdir(exist_ok=True)
    tensors = {f"language_model.model.{k}": v for k, v in weights.items()}
    tensors |= {f"vision_tower.{k}" if k.startswith("vision") else k: v for k, v in vision.items()}
    half = config.num_layers // 2
    first = {k: v for k, v in tensors.items() if "embed_tokens" in k or _layer(k) < half}
    shards = {"model-00001-of-00002.safetensors": first}
    shards["model-00002-of-00002.safetensors"] = {k: v for k, v in tensors.items() if k not in first}
    for name, part in shards.items():
        _save(part, folder / name)
    index = {"metadata": {}, "weight_map": {k: n for n, part in shards.items() for k in part}}
    _write_json(folder / "model.safetensors.index.json", index)
    _write_json(
        folder / "config.json",
        {
            "architectures": ["Gemma3ForConditionalGeneration"],
            "model_type": "gemma3",
            "text_config": hf_text_config(config),
        },
    )
    _write_json(folder / "tokenizer.json", tiny_tokenizer_json())
    _write_json(
        folder / "tokenizer_config.json",
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
         "pad_token": "<pad>", "unk_token": "<unk>", "padding_side": "left"},
    )  # fmt: skip
    return folder


def _layer(key: str) -> int:
    parts = key.split(".")
    return int(parts[parts.index("layers") + 1]) if "layers" in parts else 1 << 30


def _random_weights(config: GemmaConfig, seed: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Module key -> bfloat16 value on the CPU. Linears std gain/sqrt(fan_in); norm weights around 0
    (the model multiplies by 1 + w); embeddings std 1/sqrt(hidden) (the model scales them by
    sqrt(hidden)). Drawn on `device` (a GPU draws the 12B sizes in seconds; other values than the CPU's)."""
    with torch.device("meta"):
        model = GemmaSegment(config, 0, config.num_layers, torch.float32)
    out = {}
    for key, value in model.state_dict().items():
        digest = hashlib.sha256(f"tiny-gemma:{seed}:{key}".encode()).digest()
        gen = torch.Generator(device).manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))
        if key.endswith("norm.weight"):
            std = NORM_WEIGHT_STD
        elif key == "embed_tokens.weight":
            std = 1.0 / math.sqrt(config.hidden_size)
        else:
            std = LINEAR_GAIN / math.sqrt(value.shape[1])
        drawn = torch.randn(tuple(value.shape), generator=gen, device=device) * std
        out[key] = drawn.to(STORAGE_DTYPE).cpu()
    return out


def _save(tensors: dict[str, torch.Tensor], path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    os.replace(tmp, path)


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
