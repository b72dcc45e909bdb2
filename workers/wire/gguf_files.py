"""GGUF model files as the ComfyUI-GGUF pack (city96/ComfyUI-GGUF) reads them, from their header alone.

Pure standard library, so the UI side refuses a wrong pick before any worker starts and the pre-flight
sizes the file without the `gguf` package. The ranks load the weights with the pack's own loader and
ops (workers/engine/comfy/gguf.py); this module only reads what the file declares.

NOTE [gguf layout]: what the pack reads (its loader.py gguf_sd_loader and tools/convert.py):
- the GGUF header (magic b"GGUF", version 2 or 3, little endian): key/value fields, then one record per
  tensor (name, dims innermost first, GGML type, offset), the data aligned to `general.alignment` (32);
- `general.architecture` names the model ("ltxv" for every LTX release, the pack's image list);
- tensor names as in ComfyUI's diffusion model, with or without the `model.diffusion_model.` prefix;
  the torch shape is the dims reversed, or `comfy.gguf.orig_shape.<name>` (INT32 array) where the
  converter reshaped a tensor for quantization;
- 1-D and small tensors in F32, the weights in a GGML type (Q8_0, Q6_K, Q5_K, Q4_K, ...);
- the safetensors file's metadata as string fields: `config` holds the JSON ComfyUI's detection reads
  (LTX-2.3's gated attention and prompt AdaLN, LTX-2.5's feed-forward without bias are set there only).
  The pack's releases since January 2026 pass these fields to ComfyUI as the file's metadata; older
  ones (the pinned 795e451 among them) pass none, and ComfyUI then builds LTX-2's layout.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
ORIG_SHAPE_PREFIX = "comfy.gguf.orig_shape."
CONFIG_KEY = "config"
ARCH_KEY = "general.architecture"
# The pack's architecture strings for image/video models (its loader.py IMG_ARCH_LIST) -> what they are.
LTX_ARCH = "ltxv"
OTHER_IMAGE_ARCHS = {
    "flux": "Flux", "sd1": "Stable Diffusion 1.x", "sdxl": "Stable Diffusion XL", "sd3": "Stable Diffusion 3",
    "aura": "AuraFlow", "hidream": "HiDream", "cosmos": "Cosmos", "hyvid": "HunyuanVideo", "wan": "Wan",
    "lumina2": "Lumina 2", "qwen_image": "Qwen-Image",
}  # fmt: skip
# GGML tensor types: id -> (name, elements per block, bytes per block) (ggml.h, gguf-py constants).
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
}  # fmt: skip
GGML_BLOCKS = {name: (block, size) for name, block, size in GGML_TYPES.values()}
# GGML types that hold plain floats (no dequantization).
GGML_FLOAT_TYPES = ("F32", "F16", "BF16", "F64")
# GGUF field value types: id -> struct format (8: string, 9: array, handled apart).
_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9
# A header string or array longer than this is no GGUF a model pack wrote (a corrupt length field).
_MAX_ITEMS = 1 << 28


@dataclass(frozen=True)
class GgufTensor:
    """One tensor record: `shape` in torch order (as the pack builds it), `ggml_type` its GGML type name,
    `offset` from the start of the data section, `size_bytes` its stored bytes."""

    name: str
    shape: tuple[int, ...]
    ggml_type: str
    offset: int
    size_bytes: int


@dataclass(frozen=True)
class GgufHeader:
    """What a GGUF file declares. `fields`: every key/value field (arrays as tuples); `data_start` where
    the tensor data begins; `size_bytes` the file's size."""

    path: Path
    version: int
    fields: Mapping[str, Any]
    tensors: tuple[GgufTensor, ...]
    data_start: int
    size_bytes: int

    @property
    def architecture(self) -> str | None:
        value = self.fields.get(ARCH_KEY)
        return value if isinstance(value, str) else None

    @property
    def data_end(self) -> int:
        return max((self.data_start + t.offset + t.size_bytes for t in self.tensors), default=self.data_start)

    def string_metadata(self) -> dict[str, str]:
        """The scalar fields as a safetensors-like metadata map (strings as they are, numbers as text):
        what ComfyUI's detection reads under "config"."""
        return {
            k: v if isinstance(v, str) else str(v) for k, v in self.fields.items() if not isinstance(v, tuple)
        }


def is_gguf_file(path: str | Path) -> bool:
    """Whether `path` starts with GGUF's magic bytes (False for a missing or unreadable file)."""
    try:
        with Path(path).open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def read_gguf_header(path: str | Path) -> GgufHeader:
    """Parse the header of a GGUF file; ValueError naming the file when it is no GGUF, a version the
    pack does not read, or cut short (its tensors end past the end of the file)."""
    path = Path(path)
    size_bytes = path.stat().st_size
    with path.open("rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise ValueError(f"{path.name} is not a GGUF file (no GGUF magic bytes)")
        try:
            header = _parse(f, path, size_bytes)
        except (struct.error, EOFError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"{path.name} is a GGUF file whose header is cut short or damaged ({exc}); download the file "
                "again (or wait until the copy finishes)"
            ) from exc
    if header.data_end > size_bytes:
        missing = header.data_end - size_bytes
        raise ValueError(
            f"{path.name} is incomplete: its GGUF header describes {header.data_end:,} bytes but the file has "
            f"{size_bytes:,} ({missing:,} missing). The download or copy was cut short; download the file again "
            "(or wait until the copy finishes)"
        )
    return header


def _parse(f: BinaryIO, path: Path, size_bytes: int) -> GgufHeader:
    (version,) = _unpack(f, "<I")
    if version not in GGUF_VERSIONS:
        raise ValueError(
            f"{path.name} is a GGUF file of version {version}; ComfyUI-GGUF reads versions "
            f"{', '.join(map(str, GGUF_VERSIONS))}: convert it again with a current gguf package"
        )
    tensor_count, field_count = _unpack(f, "<QQ")
    fields: dict[str, Any] = {}
    for _ in range(_count(field_count)):
        key = _string(f)
        (value_type,) = _unpack(f, "<I")
        fields[key] = _value(f, value_type)
    records = []
    for _ in range(_count(tensor_count)):
        name = _string(f)
        (n_dims,) = _unpack(f, "<I")
        dims = _unpack(f, "<" + "Q" * n_dims) if n_dims else ()
        type_id, offset = _unpack(f, "<IQ")
        records.append((name, dims, type_id, offset))
    alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
    alignment = alignment if isinstance(alignment, int) and alignment > 0 else DEFAULT_ALIGNMENT
    data_start = -(-f.tell() // alignment) * alignment
    tensors = tuple(_tensor(path, fields, *record) for record in records)
    return GgufHeader(path, version, fields, tensors, data_start, size_bytes)


def _tensor(
    path: Path, fields: Mapping[str, Any], name: str, dims: tuple, type_id: int, offset: int
) -> GgufTensor:
    if type_id not in GGML_TYPES:
        raise ValueError(
            f"{path.name}: tensor {name} has GGML type {type_id}, which neither ComfyUI-GGUF nor the gguf package "
            "reads; pick a file quantized as Q8_0, Q6_K, Q5_K or Q4_K"
        )
    ggml_type, block, block_bytes = GGML_TYPES[type_id]
    elements = 1
    for d in dims:
        elements *= int(d)
    orig = fields.get(ORIG_SHAPE_PREFIX + name)
    shape = tuple(int(d) for d in orig) if isinstance(orig, tuple) else tuple(int(d) for d in reversed(dims))
    return GgufTensor(name, shape, ggml_type, int(offset), -(-elements // block) * block_bytes)


def _unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    raw = f.read(size)
    if len(raw) < size:
        raise EOFError("the file ends inside its header")
    return struct.unpack(fmt, raw)


def _count(n: int) -> int:
    if n > _MAX_ITEMS:
        raise EOFError(f"a count of {n:,} items")
    return n


def _string(f: BinaryIO) -> str:
    (length,) = _unpack(f, "<Q")
    raw = f.read(_count(length))
    if len(raw) < length:
        raise EOFError("the file ends inside a string")
    return raw.decode("utf-8")


def _value(f: BinaryIO, value_type: int) -> Any:
    if value_type == _STRING:
        return _string(f)
    if value_type == _ARRAY:
        item_type, n = _unpack(f, "<IQ")
        if item_type in _SCALAR_FORMATS:  # numbers: one read
            fmt = _SCALAR_FORMATS[item_type]
            return _unpack(f, "<" + fmt[1] * _count(n)) if n else ()
        return tuple(_value(f, item_type) for _ in range(_count(n)))
    if value_type not in _SCALAR_FORMATS:
        raise EOFError(f"unknown field type {value_type}")
    return _unpack(f, _SCALAR_FORMATS[value_type])[0]


def element_bytes(ggml_type: str) -> float:
    """Stored bytes per weight of a GGML type (Q8_0: 34/32); 2 for a name it does not know."""
    block, size = GGML_BLOCKS.get(ggml_type, (1, 2))
    return size / block
