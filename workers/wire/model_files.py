"""What a model file declares, read from its safetensors header alone: no tensor data, no
ltx-core, never pickle. The UI side checks files with it before any worker starts; the engines
read the same description when they load.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .constants import AUDIO_HOP_LENGTH, AUDIO_LATENT_DOWNSAMPLE, AUDIO_SAMPLE_RATE_HZ, VIDEO_LATENT_CHANNELS
from .file_info import SafetensorsHeader
from .file_metadata import config_section, metadata_config, nested
from .gguf_files import is_gguf_file

PathLike = str | Path

# safetensors' own reader refuses headers above 100 MB (safetensors/src/tensor.rs MAX_HEADER_SIZE).
SAFETENSORS_MAX_HEADER_BYTES = 100_000_000


def read_safetensors_header(path: PathLike) -> SafetensorsHeader:
    """Parse the header of `path`, proving it is a safetensors file. Never unpickles anything.

    Raises ValueError naming the file when it is missing, a pickle / torch.save archive, or
    otherwise not safetensors. A GGUF file's header comes back in the same shape
    (gguf_checks.gguf_model_header: GGML type names as dtypes).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist or is not a file")
    if is_gguf_file(path):
        from .gguf_checks import gguf_model_header

        return gguf_model_header(path)
    size_bytes = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        (header_bytes,) = struct.unpack("<Q", prefix) if len(prefix) == 8 else (0,)
        fits = header_bytes <= min(SAFETENSORS_MAX_HEADER_BYTES, size_bytes - 8)
        raw_header = f.read(header_bytes) if fits else b""
    # The magic bytes of pickle (0x80) and zip (PK) are also valid low bytes of a safetensors header
    # length (a 0x..80-byte header): only a file with no JSON header after them is a pickle.
    if not raw_header.startswith(b"{") and (prefix[:1] == b"\x80" or prefix[:2] == b"PK"):
        raise ValueError(
            f"{path} is a pickle / torch.save checkpoint; only .safetensors files are loaded "
            "(pickle can run code). Convert it with safetensors.torch.save_file."
        )
    if len(prefix) < 8:
        raise ValueError(f"{path} is not a safetensors file: {size_bytes} bytes is too short for a header")
    if not fits:
        raise ValueError(
            f"{path} is not a safetensors file: the first 8 bytes announce a {header_bytes}-byte header "
            f"in a {size_bytes}-byte file"
        )
    try:
        header = json.loads(raw_header)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a safetensors file: its header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a safetensors file: its header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, str] = {}
    data_end = 0
    for key, entry in header.items():
        if not isinstance(entry, dict) or "shape" not in entry or "dtype" not in entry:
            raise ValueError(f"{path} is not a safetensors file: header entry {key!r} has no shape/dtype")
        shapes[key] = tuple(int(d) for d in entry["shape"])
        dtypes[key] = str(entry["dtype"])
        data_end = max([data_end, *(int(o) for o in entry.get("data_offsets", ()))])
    _check_complete(path, size_bytes, 8 + header_bytes + data_end)
    return SafetensorsHeader(path=path, shapes=shapes, dtypes=dtypes, metadata=dict(metadata))


def _check_complete(path: Path, size_bytes: int, declared_bytes: int) -> None:
    """A file shorter than its header declares is a download or copy cut short; safetensors itself
    would only say "incomplete metadata, file not fully covered", without the file's name."""
    if size_bytes < declared_bytes:
        raise ValueError(
            f"{path} is incomplete: its header describes {declared_bytes:,} bytes but the file has "
            f"{size_bytes:,} ({declared_bytes - size_bytes:,} missing). The download or copy was cut short; "
            "download the file again (or wait until the copy finishes)."
        )


def read_checkpoint_config(path: PathLike) -> dict[str, Any]:
    """The JSON config a checkpoint carries in its safetensors metadata under "config".

    Full checkpoints have sections "transformer", "vae", "audio_vae", "vocoder"; upsampler files
    have their keys at the top level. Raises ValueError when the file has no parsable config.
    """
    header = read_safetensors_header(path)
    return config_from_header(header)


def config_from_header(header: SafetensorsHeader) -> dict[str, Any]:
    raw = header.metadata.get("config")
    if raw is None:
        raise ValueError(
            f"{header.path} has no 'config' in its safetensors metadata; LTX-2 checkpoints carry their "
            "architecture there (re-download the file or write the config with make_tiny)"
        )
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{header.path}: metadata 'config' is not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{header.path}: metadata 'config' is a {type(config).__name__}, expected an object")
    return config


@dataclass(frozen=True)
class ModelDescription:
    """The key numbers of a full checkpoint, resolved with ltx-core's defaults for absent keys.

    Inner dims are heads x head_dim. Latent shapes: video [B, video_latent_channels, F', H', W'] with
    F' = (frames - 1) // temporal_compression + 1, H' = H // spatial_compression; audio
    [B, audio_latent_channels, T, audio_latent_mel_bins] at audio_latent_rate_hz latent frames per second.
    """

    num_layers: int
    video_num_heads: int
    video_head_dim: int
    audio_num_heads: int
    audio_head_dim: int
    cross_attention_dim: int
    audio_cross_attention_dim: int
    caption_channels: int
    rope_type: str
    video_in_channels: int
    audio_in_channels: int
    video_latent_channels: int
    spatial_compression: int
    temporal_compression: int
    audio_latent_channels: int
    audio_latent_mel_bins: int
    audio_sample_rate_hz: int
    audio_hop_length: int
    audio_latent_rate_hz: float

    @property
    def video_inner_dim(self) -> int:
        return self.video_num_heads * self.video_head_dim

    @property
    def audio_inner_dim(self) -> int:
        return self.audio_num_heads * self.audio_head_dim


# ltx-core's VideoDecoder block names and the (t, h, w) upsampling each applies.
_DECODER_BLOCK_STRIDES = {"compress_all": (2, 2, 2), "compress_space": (1, 2, 2), "compress_time": (2, 1, 1)}


def describe_config(config: Mapping[str, Any]) -> ModelDescription:
    """Resolve a full checkpoint config to its key numbers (defaults as ltx-core 1.0.0 applies them).

    Any section may be absent, null or partial (a split transformer file says `"vae": null`): its
    numbers then take the defaults (NOTE [file metadata] in file_metadata.py)."""
    tr = config_section(config, "transformer")
    vae = config_section(config, "vae")
    audio_vae = config_section(config, "audio_vae")
    params = nested(audio_vae, "model", "params")
    ddconfig = nested(params, "ddconfig")
    stft = nested(audio_vae, "preprocessing", "stft")
    mel = nested(audio_vae, "preprocessing", "mel")
    time_stride, space_stride = 1, 1
    for block_name in _block_names(vae.get("decoder_blocks")):
        t, h, _w = _DECODER_BLOCK_STRIDES.get(block_name, (1, 1, 1))
        time_stride, space_stride = time_stride * t, space_stride * h
    mel_bins = _number(ddconfig, "mel_bins", 0) or _number(mel, "n_mel_channels", 0) or 64
    sample_rate = _number(params, "sampling_rate", AUDIO_SAMPLE_RATE_HZ)
    hop_length = _number(stft, "hop_length", AUDIO_HOP_LENGTH)
    ch_mult = ddconfig.get("ch_mult")
    levels = len(ch_mult) if isinstance(ch_mult, list | tuple) and ch_mult else 3
    return ModelDescription(
        num_layers=_number(tr, "num_layers", 48),
        video_num_heads=_number(tr, "num_attention_heads", 32),
        video_head_dim=_number(tr, "attention_head_dim", 128),
        audio_num_heads=_number(tr, "audio_num_attention_heads", 32),
        audio_head_dim=_number(tr, "audio_attention_head_dim", 64),
        cross_attention_dim=_number(tr, "cross_attention_dim", 4096),
        audio_cross_attention_dim=_number(tr, "audio_cross_attention_dim", 2048),
        caption_channels=_number(tr, "caption_channels", 3840),
        rope_type=str(tr.get("rope_type") or "interleaved"),
        video_in_channels=_number(tr, "in_channels", 128),
        audio_in_channels=_number(tr, "audio_in_channels", 128),
        video_latent_channels=_number(vae, "latent_channels", VIDEO_LATENT_CHANNELS),
        spatial_compression=_number(vae, "patch_size", 4) * space_stride,
        temporal_compression=time_stride,
        audio_latent_channels=_number(ddconfig, "z_channels", 8),
        audio_latent_mel_bins=mel_bins // 2 ** (levels - 1),
        audio_sample_rate_hz=sample_rate,
        audio_hop_length=hop_length,
        audio_latent_rate_hz=sample_rate / hop_length / AUDIO_LATENT_DOWNSAMPLE,
    )


def _number(section: Mapping[str, Any], key: str, default: int) -> int:
    """section[key] as a positive int; `default` when absent, null or not a positive whole number."""
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or value != int(value):
        return default
    return int(value)


def _block_names(blocks: object) -> list[str]:
    """The names of a VAE config's block list ([["compress_all", {...}], ...]); [] for anything else."""
    if not isinstance(blocks, list):
        return []
    return [b[0] for b in blocks if isinstance(b, list | tuple) and b and isinstance(b[0], str)]


def describe_header(header: SafetensorsHeader) -> ModelDescription:
    """`describe_config` of the config in a header's metadata; the defaults where it has none."""
    return describe_config(metadata_config(header.metadata))


def describe_checkpoint(path: PathLike) -> ModelDescription:
    """`describe_config` of the config stored in `path`'s metadata."""
    return describe_config(read_checkpoint_config(path))
