"""Gemma 3 tokenization for LTX-2, as ComfyUI's CLIPTextEncode does it; runs in the UI process.

Where the tokenizer comes from (first found wins):
1. inside a ComfyUI single-file text encoder: the `spiece_model` tensor (the SentencePiece model bytes
   ComfyUI's own Gemma files carry), or a `tokenizer_json` tensor (tokenizers' JSON, as ComfyUI's
   Gemma 4 files carry);
2. a folder: `tokenizer.json` (tokenizers) or `tokenizer.model` (SentencePiece) in the HF-style
   folder itself, or, for a single file, next to it, in `<file stem>/` or in `tokenizer/` beside it.

What ComfyUI 0.33 does with a prompt (`comfy/text_encoders/lt.py` Gemma3_12BTokenizer over
`sd1_clip.SDTokenizer`, no chat template, weights disabled): `\\(` and `\\)` become `(` and `)`; the
text is encoded in one piece without special tokens; the BOS id is put in front; nothing is truncated.
The model then sees the ids left-padded with id 0 to at least `MIN_LENGTH` tokens.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAD_ID = 0  # ComfyUI's Gemma3_12BModel special_tokens["pad"]; Gemma's <pad>
DEFAULT_BOS_ID = 2  # Gemma's <bos>, ComfyUI's special_tokens["start"]
MIN_LENGTH = 1024  # ComfyUI's Gemma3_12BTokenizer min_length: prompts are left-padded to this
# Pieces ComfyUI's SentencePiece wrapper maps itself (Gemma3_12BTokenizer special_tokens).
SPIECE_SPECIAL_TOKENS = {"<image_soft_token>": 262144, "<end_of_turn>": 106}
EMBEDDED_SPIECE_KEY = "spiece_model"
EMBEDDED_JSON_KEY = "tokenizer_json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")


class PromptTokenizer:
    """text -> Gemma token ids with BOS first (no padding). `source` says where it was loaded from.
    `pieces`: the vocabulary's pieces as text (for `min_tokens`), read on first use."""

    def __init__(self, encode: Any, bos_id: int, source: str, kind: str, pieces: Any = None) -> None:
        self._encode = encode
        self._pieces = pieces
        self.bos_id = bos_id
        self.source = source
        self.kind = kind  # "tokenizers" or "sentencepiece"

    @staticmethod
    def _unescape(text: str) -> str:
        return text.replace("\\)", ")").replace("\\(", "(")  # ComfyUI's escape/unescape of brackets

    def token_ids(self, text: str) -> list[int]:
        return [self.bos_id, *self._encode(self._unescape(text))]

    @functools.cached_property
    def longest_piece_bytes(self) -> int:
        """An upper bound on the UTF-8 bytes one token stands for: its piece's own bytes (the word marker
        and byte-fallback pieces take more bytes than they stand for)."""
        return max((len(piece.encode("utf-8")) for piece in self._pieces()), default=1) if self._pieces else 1

    def min_tokens(self, text: str) -> int:
        """A lower bound on len(token_ids(text)) without tokenizing: every token stands for at most
        `longest_piece_bytes` bytes (less the one id ComfyUI's SentencePiece path drops), plus BOS."""
        size = len(self._unescape(text).encode("utf-8"))
        return 1 + max(0, -(-size // self.longest_piece_bytes) - 1)


def padded_length(num_tokens: int) -> int:
    """Length of the left-padded sequence Gemma runs on for a prompt of `num_tokens` ids (BOS included)."""
    return max(MIN_LENGTH, num_tokens)


def _from_tokenizers_json(data: str, source: str) -> PromptTokenizer:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(data)
    bos = tokenizer.token_to_id("<bos>")
    return PromptTokenizer(
        lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
        DEFAULT_BOS_ID if bos is None else int(bos),
        source,
        "tokenizers",
        lambda: tokenizer.get_vocab(),
    )


def _from_sentencepiece(model: bytes, source: str) -> PromptTokenizer:
    try:
        import sentencepiece
    except ImportError:
        raise ValueError(
            f"the tokenizer in {source} is a SentencePiece model and the 'sentencepiece' package is not "
            "installed (ComfyUI installs it); run: pip install sentencepiece"
        ) from None
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    pattern = re.compile("(" + "|".join(re.escape(t) for t in SPIECE_SPECIAL_TOKENS) + ")")

    def encode(text: str) -> list[int]:
        if not pattern.search(text):
            return list(processor.encode(text, add_bos=False, add_eos=False))
        ids: list[int] = []
        for part in pattern.split(text):
            if part in SPIECE_SPECIAL_TOKENS:
                ids.append(SPIECE_SPECIAL_TOKENS[part])
            elif part:
                ids.extend(processor.encode(part, add_bos=False, add_eos=False))
        # ComfyUI 0.33 strips one leading id from the wrapper's output, expecting a BOS that this
        # branch of its SPieceTokenizer does not emit, so the first piece is lost; do the same so the
        # conditioning matches a native run.
        return ids[1:]

    bos = processor.bos_id()

    def pieces() -> list[str]:
        return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]

    return PromptTokenizer(encode, DEFAULT_BOS_ID if bos < 0 else int(bos), source, "sentencepiece", pieces)


def _embedded(path: Path) -> PromptTokenizer | None:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        keys = set(f.keys())
        if EMBEDDED_SPIECE_KEY in keys:
            data = f.get_tensor(EMBEDDED_SPIECE_KEY).numpy().tobytes()
            return _from_sentencepiece(data, f"{path} ({EMBEDDED_SPIECE_KEY})")
        if EMBEDDED_JSON_KEY in keys:
            data = f.get_tensor(EMBEDDED_JSON_KEY).numpy().tobytes().decode("utf-8")
            return _from_tokenizers_json(data, f"{path} ({EMBEDDED_JSON_KEY})")
    return None


def _in_folder(folder: Path) -> PromptTokenizer | None:
    json_file, model_file = (folder / name for name in TOKENIZER_FILES)
    if json_file.is_file():
        return _from_tokenizers_json(json_file.read_text(encoding="utf-8"), str(json_file))
    if model_file.is_file():
        return _from_sentencepiece(model_file.read_bytes(), str(model_file))
    return None


def tokenizer_folders(path: Path) -> list[Path]:
    """Folders searched for tokenizer files, in order, for a text encoder file or folder."""
    if path.is_dir():
        return [path]
    return [path.parent, path.parent / path.stem, path.parent / "tokenizer"]


@dataclass(frozen=True)
class _FileStamp:
    path: Path
    mtime_ns: int
    size: int


def load_prompt_tokenizer(path: Path | str) -> PromptTokenizer:
    """The tokenizer that belongs to the text encoder at `path` (file or HF-style folder).

    Raises ValueError naming every place searched when there is none. Cached per file version.
    """
    path = Path(path)
    stat = path.stat()
    return _load_cached(_FileStamp(path.resolve(), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _load_cached(stamp: _FileStamp) -> PromptTokenizer:
    path = stamp.path
    if path.is_file():
        found = _embedded(path)
        if found is not None:
            return found
    for folder in tokenizer_folders(path):
        found = _in_folder(folder) if folder.is_dir() else None
        if found is not None:
            return found
    places = ", ".join(str(f) for f in tokenizer_folders(path))
    inside = (
        f"no '{EMBEDDED_SPIECE_KEY}' or '{EMBEDDED_JSON_KEY}' entry in the file; " if path.is_file() else ""
    )
    raise ValueError(
        f"no tokenizer found for the text encoder {path}: {inside}no {' or '.join(TOKENIZER_FILES)} in "
        f"{places}. Use ComfyUI's Gemma 3 text encoder file (it carries its tokenizer) or put the "
        "tokenizer files of google/gemma-3-12b-it next to the weights."
    )


def tokenizer_json_bytes(tokenizer_json: dict) -> bytes:
    """Serialise a tokenizers JSON object the way it is embedded under `tokenizer_json`."""
    return json.dumps(tokenizer_json, ensure_ascii=False).encode("utf-8")
