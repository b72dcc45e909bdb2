"""The MGPU Loader's checks of the files a user picked, from their headers, before any worker starts.

One call for the node: the model file is one ComfyUI reads (format, file_pairing.check_comfy_readable),
an LTX transformer (else: what it is and where it goes), one ComfyUI's own loader accepts
(comfy_refusals), and the VAE files are VAEs of the right kind for their slot and, where the files
state it or ComfyUI's detection sees it, of the transformer's release (ltx_files.check_vae_files).
What only a layout hints at is a warning, never a refusal (NOTE [file metadata]).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .comfy_refusals import check_audio_vae_header, check_transformer_header, check_video_vae_header
from .file_pairing import check_comfy_readable, check_vae_is_not_a_checkpoint
from .ltx_files import AUDIO_VAE, check_stated_release, check_vae_files, read_model_file_info, read_vae_kind
from .model_family import ModelFamily, detect_model_family
from .model_files import SafetensorsHeader, read_safetensors_header


@dataclass(frozen=True)
class LoaderFiles:
    """The checked files: the model's header, its family as ComfyUI's detection reads it, and the
    warnings to show (one line each)."""

    header: SafetensorsHeader
    family: ModelFamily
    warnings: tuple[str, ...]


def check_loader_files(path: Path, video_vae: str, audio_vae: str) -> LoaderFiles:
    """ValueError (one line naming the file, what it is and what to pick) for a pick that ComfyUI's
    loaders refuse or that does not fit; the header, family and warnings otherwise. `video_vae` /
    `audio_vae`: paths of separate VAE files, "" for the checkpoint's own."""
    header = check_comfy_readable(path)
    info = read_model_file_info(path)  # refuses a file that is no LTX transformer, saying what it is
    check_transformer_header(header)
    found = detect_model_family(header.shapes, header.dtypes, header.metadata)
    for role, vae in (("video", video_vae), ("audio", audio_vae)):
        check_vae_is_not_a_checkpoint(path, found.family, vae, role)
    warnings = [
        *check_stated_release(info, dict(header.metadata)),
        *check_vae_files(info, video_vae, audio_vae),
    ]
    for vae in (video_vae, audio_vae):
        if vae:
            vae_header = check_comfy_readable(vae)
            if read_vae_kind(vae) == AUDIO_VAE:
                check_audio_vae_header(vae_header)
            else:
                check_video_vae_header(vae_header)
    return LoaderFiles(header=header, family=found, warnings=tuple(warnings))


def check_model_header(path: Path) -> SafetensorsHeader:
    """The header of a model file the group is about to load, refused (ValueError) as ComfyUI's loader
    would refuse it; for every path into the group (the loader checks more, see check_loader_files)."""
    header = read_safetensors_header(path)
    check_transformer_header(header)
    return header
