"""The tiny Gemma's character tokenizer as a SentencePiece model, for ComfyUI's Gemma tokenizer.

ComfyUI tokenizes Gemma prompts with SentencePiece, from the `spiece_model` entry of the text
encoder file (comfy/text_encoders/lt.py, spiece_tokenizer.py). This writes a CHAR model whose pieces
sit at the same ids as the tiny tokenizer's (tiny_gemma.tiny_tokenizer_json), so both tokenizers
give the same ids for the same text: one id per character, space as "▁", no dummy prefix; the
turn markers are user-defined pieces (matched whole in the text, as in Gemma's own model).

The ModelProto is written field by field (sentencepiece_model.proto): protobuf is not a dependency.
"""

from __future__ import annotations

import struct

# sentencepiece_model.proto enums and field numbers.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED = 1, 2, 3, 4, 5
_MODEL_TYPE_CHAR = 4
_USER_DEFINED_PIECES = ("<start_of_turn>", "<end_of_turn>")
_CONTROL_PIECES = ("<pad>", "<eos>", "<bos>")
_SPECIAL_PIECE_FIELDS = ((45, "<unk>"), (46, "<bos>"), (47, "<eos>"), (48, "<pad>"))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire_type) + payload


def _int(number: int, value: int) -> bytes:
    return _field(number, 0, _varint(value))


def _bytes(number: int, value: bytes) -> bytes:
    return _field(number, 2, _varint(len(value)) + value)


def _float(number: int, value: float) -> bytes:
    return _field(number, 5, struct.pack("<f", value))


def spiece_model_bytes(vocab: dict[str, int], vocab_size: int) -> bytes:
    """A serialized SentencePiece ModelProto with `vocab` (piece -> id); unused ids get UNUSED pieces."""
    by_id = {i: piece for piece, i in vocab.items()}
    pieces = b""
    for i in range(vocab_size):
        piece = by_id.get(i, f"<unused{i}>")
        if piece == "<unk>":
            kind = _UNKNOWN
        elif piece in _CONTROL_PIECES:
            kind = _CONTROL
        elif piece in _USER_DEFINED_PIECES:
            kind = _USER_DEFINED
        elif i in by_id:
            kind = _NORMAL
        else:
            kind = _UNUSED
        pieces += _bytes(1, _bytes(1, piece.encode()) + _float(2, 0.0) + _int(3, kind))
    trainer = (
        _int(3, _MODEL_TYPE_CHAR)
        + _int(4, vocab_size)
        + _int(40, vocab["<unk>"])
        + _int(41, vocab["<bos>"])
        + _int(42, vocab["<eos>"])
        + _int(43, vocab["<pad>"])
        # The processor resolves the special ids through these piece names (defaults "<s>", "</s>").
        + b"".join(_bytes(number, name.encode()) for number, name in _SPECIAL_PIECE_FIELDS)
    )
    normalizer = _bytes(1, b"identity") + _int(3, 0) + _int(4, 0) + _int(5, 1)
    return pieces + _bytes(2, trainer) + _bytes(3, normalizer)
