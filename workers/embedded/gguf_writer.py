"""Write an LTX transformer as a GGUF file in the layout the ComfyUI-GGUF pack reads (NOTE [gguf layout]
in workers/wire/gguf_files.py), for tests, make-tiny and benchmarks. Needs the `gguf` package (the test
extra; ComfyUI-GGUF's own requirement).

As the pack's tools/convert.py and its patched llama.cpp quantizer lay a file out: the
`model.diffusion_model.` prefix stripped, architecture "ltxv", 1-D tensors, tensors of at most 1,024
values and every tensor that is not a layer's `.weight` in F32 (the pack dequantizes only in its GGMLOps
layers; ComfyUI's plain parameters, the `scale_shift_table`s and the connectors' `learnable_registers`,
take float data), every other tensor in the chosen GGML type, row by row over its last dimension; a tensor whose rows do not divide into the type's blocks falls back to Q8_0 (32-value
blocks), else F16, as llama.cpp's quantizer falls back. The safetensors file's `config` metadata is kept
as the string field `config` (what ComfyUI's detection reads; NOTE [gguf layout]).

Encoders: Q8_0 is the gguf package's own (gguf.quants.quantize); the package has no K-quant or Q4_0
encoder in torch, so Q6_K and Q4_0 are encoded here in torch (the same arithmetic on CPU or GPU, for
22B benchmark files), plain round-to-nearest per block (llama.cpp searches scales for a smaller error;
the stored format is the same, which is what a loader reads). Their decoding is checked against the
gguf package's dequantizer in tests/test_gguf_files.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import torch

DIFFUSION_PREFIX = "model.diffusion_model."
# Keys outside the diffusion model in a single-file checkpoint (ComfyUI-GGUF loads the transformer only).
NOT_TRANSFORMER = ("vae.", "audio_vae.", "vocoder.", "text_embedding_projection.", "text_encoders.")
QUANTIZATION_THRESHOLD = 1024  # the pack's convert.py: smaller tensors stay F32
WRITTEN_TYPES = ("Q8_0", "Q6_K", "Q4_0", "F16", "BF16")


def transformer_tensors(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The diffusion model's tensors of a checkpoint or transformer file, prefix stripped."""
    has_prefix = any(k.startswith(DIFFUSION_PREFIX) for k in tensors)
    out = {}
    for key, value in tensors.items():
        if has_prefix and not key.startswith(DIFFUSION_PREFIX):
            continue
        name = key.removeprefix(DIFFUSION_PREFIX)
        if not name.startswith(NOT_TRANSFORMER):
            out[name] = value
    return out


def write_gguf(
    tensors: Iterable[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor],
    path: Path | str,
    qtype: str,
    config: Mapping | None = None,
    *,
    arch: str = "ltxv",
) -> Path:
    """Write `tensors` (transformer keys, no prefix) to `path` as a GGUF of GGML type `qtype` (one of
    WRITTEN_TYPES) with `config` as its `config` field. Tensors may be on any device; each is encoded and
    written in turn (a 22B model never sits whole in host memory beyond its encoded bytes)."""
    import gguf

    if qtype not in WRITTEN_TYPES:
        raise ValueError(f"qtype {qtype!r} is not one of {', '.join(WRITTEN_TYPES)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    items = tensors.items() if isinstance(tensors, Mapping) else tensors
    writer = gguf.GGUFWriter(path=None, arch=arch)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(getattr(gguf.LlamaFileType, f"MOSTLY_{qtype}", gguf.LlamaFileType.MOSTLY_F16))
    if config is not None:
        writer.add_string("config", json.dumps(config))
    for name, value in items:
        chosen = tensor_type(name, value, qtype)
        writer.add_tensor(name, encode(value, chosen), raw_dtype=getattr(gguf.GGMLQuantizationType, chosen))
    tmp = path.with_name(f".{path.name}.tmp")
    writer.write_header_to_file(path=tmp)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path


def tensor_type(name: str, value: torch.Tensor, qtype: str) -> str:
    """The GGML type the pack's converter and quantizer give this tensor when the file's type is `qtype`."""
    if value.dim() <= 1 or value.numel() <= QUANTIZATION_THRESHOLD or not name.endswith(".weight"):
        return "F32"
    row = value.shape[-1]
    if qtype in ("F16", "BF16"):
        return qtype
    block = 256 if qtype.endswith("_K") else 32
    if row % block == 0:
        return qtype
    return "Q8_0" if row % 32 == 0 else "F16"


def encode(value: torch.Tensor, ggml_type: str) -> np.ndarray:
    """The stored bytes of `value` in `ggml_type` as the numpy array GGUFWriter.add_tensor takes (float
    arrays for F32/F16, uint8 rows of blocks for quantized types)."""
    import gguf

    x = value.detach().float()
    if ggml_type == "F32":
        return x.cpu().numpy()
    if ggml_type == "F16":
        return x.half().cpu().numpy()
    if ggml_type == "BF16":
        return gguf.quants.quantize(x.cpu().numpy(), gguf.GGMLQuantizationType.BF16)
    if ggml_type == "Q8_0":
        if x.is_cuda:
            return _rows(quantize_q8_0(x.reshape(-1, x.shape[-1])), x.shape)
        return gguf.quants.quantize(x.cpu().numpy(), gguf.GGMLQuantizationType.Q8_0)
    quantize = {"Q6_K": quantize_q6_k, "Q4_0": quantize_q4_0}[ggml_type]
    return _rows(quantize(x.reshape(-1, x.shape[-1])), x.shape)


def _rows(blocks: torch.Tensor, shape: torch.Size) -> np.ndarray:
    """[rows * blocks_per_row, block_bytes] uint8 -> the tensor's shape with its last dim in bytes."""
    return blocks.reshape(*shape[:-1], -1).cpu().numpy()


def quantize_q8_0(x: torch.Tensor) -> torch.Tensor:
    """[rows, n] float (n % 32 == 0) -> [blocks, 34] uint8: per 32 values an f16 scale d = max|x| / 127
    and int8 values round(x / d) (ggml's block_q8_0)."""
    blocks = x.reshape(-1, 32)
    d = (blocks.abs().amax(dim=1) / 127).half()
    inv = torch.where(d.float() > 0, 1 / d.float(), torch.zeros_like(d.float()))
    q = torch.round(blocks * inv[:, None]).clamp(-127, 127).to(torch.int8)
    return torch.cat([d[:, None].view(torch.uint8), q.view(torch.uint8)], dim=1)


def quantize_q4_0(x: torch.Tensor) -> torch.Tensor:
    """[rows, n] float (n % 32 == 0) -> [blocks, 18] uint8 (ggml's block_q4_0): an f16 scale d = m / -8
    where m is the value of largest magnitude, 4-bit values q = round(x / d) + 8 in 0..15, value j in the
    low nibble of byte j and value j + 16 in its high nibble; decoded as (q - 8) * d."""
    blocks = x.reshape(-1, 32)
    index = blocks.abs().argmax(dim=1, keepdim=True)
    d = (torch.gather(blocks, 1, index)[:, 0] / -8).half()
    inv = torch.where(d.float() != 0, 1 / d.float(), torch.zeros_like(d.float()))
    q = torch.round(blocks * inv[:, None] + 8).clamp(0, 15).to(torch.uint8)
    packed = q[:, :16] | (q[:, 16:] << 4)
    return torch.cat([d[:, None].view(torch.uint8), packed], dim=1)


def quantize_q6_k(x: torch.Tensor) -> torch.Tensor:
    """[rows, n] float (n % 256 == 0) -> [blocks, 210] uint8 (ggml's block_q6_K: ql[128], qh[64],
    scales[16] int8, d f16). Per 256 values, 16 sub-blocks of 16 consecutive values, each with an int8
    scale sc; value = d * sc * (q - 32), q in 0..63. Value j of a 128-value half h, in group g = j // 32,
    lane l = j % 32: its low 4 bits in ql[64h + 32(g % 2) + l] (low nibble for g < 2, high otherwise), its
    high 2 bits in qh[32h + l] at bit 2g."""
    blocks = x.reshape(-1, 256)
    subs = blocks.reshape(-1, 16, 16)
    index = subs.abs().argmax(dim=2, keepdim=True)
    scale = torch.gather(subs, 2, index)[..., 0] / -32  # signed, as ggml picks it: q spans -32..31
    d = (scale.abs().amax(dim=1) / 127).half()
    inv_d = torch.where(d.float() > 0, 1 / d.float(), torch.zeros_like(d.float()))
    sc = torch.round(scale * inv_d[:, None]).clamp(-128, 127)
    step = d.float()[:, None] * sc
    inv = torch.where(step != 0, 1 / step, torch.zeros_like(step))
    q = (torch.round(subs * inv[..., None]).clamp(-32, 31) + 32).to(torch.uint8).reshape(-1, 2, 4, 32)
    low, high = q & 0xF, q >> 4
    ql = torch.cat([low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], dim=2)
    qh = high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)
    n = blocks.shape[0]
    return torch.cat(
        [
            ql.reshape(n, 128),
            qh.reshape(n, 64),
            sc.to(torch.int8).view(torch.uint8),
            d[:, None].view(torch.uint8),
        ],
        dim=1,
    )


def gguf_of_safetensors(source: Path | str, path: Path | str, qtype: str) -> Path:
    """The transformer of a safetensors checkpoint or transformer file written as a GGUF (write_gguf),
    its `config` metadata kept."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(source), framework="pt") as f:
        raw = (f.metadata() or {}).get("config")
    tensors = transformer_tensors(load_file(str(source)))
    return write_gguf(tensors, path, qtype, json.loads(raw) if raw else None)
