"""MGPU Text Encode: Gemma 3 on the worker group's GPUs -> CONDITIONING as ComfyUI's LTX-2 encoder gives it."""

from __future__ import annotations

from pathlib import Path

import torch

from ..workers.group.client import output_slot
from ..workers.group.manager import MGPUModel
from ..workers.text.gemma_lora import text_lora_pairs
from ..workers.text.text_encoder import open_gemma_cached
from ..workers.text.text_tokenizer import load_prompt_tokenizer
from ..workers.wire.capabilities import capabilities
from ..workers.wire.file_pairing import check_text_encoder_fits
from ..workers.wire.gguf_files import is_gguf_file
from ..workers.wire.ltx_files import is_gemma4_file
from ..workers.wire.model_family import LTX2, LTX23
from ..workers.wire.model_files import read_safetensors_header
from ..workers.wire.requests import TEXT_PLACEMENTS as PLACEMENTS
from ..workers.wire.requests import EncodeGemma4, EncodeText
from . import comfy
from .job_checks import check_gemma4_prompt, prompt_ids
from .jobs import run_job
from .mgpu_lora import LORA_FOLDERS, NO_LORA

FOLDER = "text_encoders"
# projection_file's default, and where its other choices come from (LTXAVTextEncoderLoader's ckpt_name).
FROM_LOADER = "(MGPU Loader's file)"
PROJECTION_FOLDERS = ("checkpoints",)
PROJECTION_KEY = "text_embedding_projection.aggregate_embed.weight"
# LTX-2.3's projection (comfy/text_encoders/lt.py DualLinearProjection; ComfyUI's engine serves it).
DUAL_PROJECTION_KEYS = (
    "text_embedding_projection.video_aggregate_embed.weight",
    "text_embedding_projection.audio_aggregate_embed.weight",
)
# HF-style folders are listed as "<relative folder>/" (ComfyUI lists files only); how deep to look.
MAX_FOLDER_DEPTH = 2
# Room for the tokens Gemma 4's tokenizer adds around a prompt (BOS; generous).
GEMMA4_SPECIAL_TOKENS = 16


def _hf_folders(root: Path) -> list[Path]:
    patterns = ("/".join(["*"] * depth + ["config.json"]) for depth in range(1, MAX_FOLDER_DEPTH + 1))
    configs = sorted(c for pattern in patterns for c in root.glob(pattern))
    return [c.parent for c in configs if any(c.parent.glob("*.safetensors"))]


def text_encoder_choices() -> list[str]:
    """Files of ComfyUI's text_encoders folders, plus HF-style folders (config.json + safetensors) as
    "<folder>/" in place of their shard files."""
    folders: list[str] = []
    for root in comfy.folder_roots(FOLDER):
        if root.is_dir():
            folders += [f"{f.relative_to(root).as_posix()}/" for f in _hf_folders(root)]
    files = [n for n in comfy.filename_list(FOLDER) if not any(n.startswith(f) for f in folders)]
    return sorted(set(files)) + sorted(set(folders))


def resolve_text_encoder(name: str) -> Path:
    """The file or HF folder a choice names. Outside ComfyUI: a path to an existing file or folder."""
    roots = comfy.folder_roots(FOLDER)
    candidate = Path(name)
    if not roots:
        if candidate.exists():
            return candidate.resolve()
        raise ValueError(
            f"text encoder {name!r} not found (outside ComfyUI, give the path of a file or folder)"
        )
    if not name.endswith("/"):
        return comfy.full_path((FOLDER,), name)
    if candidate.is_absolute() or ".." in candidate.parts:
        raise ValueError(
            f"text encoder {name!r} points outside ComfyUI's {FOLDER} folders; pick one from the list"
        )
    for root in roots:
        if (root / candidate).is_dir():
            return root / candidate
    raise ValueError(f"{name!r} is not a folder in ComfyUI's {FOLDER} folders; pick one from the list")


def projection_source(mgpu_model: MGPUModel, projection_file: str) -> Path:
    """The file LTX's text projection is read from: the MGPU Loader's file, or `projection_file` from
    ComfyUI's checkpoints folders (as LTXAVTextEncoderLoader's ckpt_name: a GGUF or diffusion-model
    file holds the transformer only). Refused where the group's engine reads only its own file."""
    if projection_file in ("", FROM_LOADER):
        return Path(mgpu_model.checkpoint)
    caps = capabilities(mgpu_model.backend)
    if not caps.text_projection_file:
        raise ValueError(
            f"projection_file {projection_file!r} is read on ComfyUI's engine only; {caps.title} uses the projection "
            f"of the loaded checkpoint: set projection_file to {FROM_LOADER}"
        )
    return comfy.full_path(PROJECTION_FOLDERS, projection_file)


def projection_width(source: str | Path, family: str = "", from_loader: bool = True) -> int:
    """C of the conditioning [1, n, C]: the output width of the text projection in `source` (LTX-2.3's
    dual projection: video and audio widths together, as ComfyUI concatenates them). ValueError naming
    the file and the input to change when it holds none, or one of another release than `family`."""
    shapes = read_safetensors_header(source).shapes
    dual = [shapes.get(key) for key in DUAL_PROJECTION_KEYS]
    single = shapes.get(PROJECTION_KEY)
    name = Path(source).name
    pick = (
        "pick in projection_file the file LTXAVTextEncoderLoader's ckpt_name takes: the release's checkpoint "
        "or its text-projection file"
    )
    if all(shape is not None and len(shape) == 2 for shape in dual):
        found, width = LTX23, sum(int(shape[0]) for shape in dual)
    elif single is not None and len(single) == 2:
        found, width = LTX2, int(single[0])
    elif from_loader and is_gguf_file(source):
        raise ValueError(
            f"the MGPU Loader's file {name} is a GGUF, which holds the transformer only, not LTX's text projection; {pick}"
        )
    else:
        where = "the MGPU Loader's file" if from_loader else "projection_file"
        raise ValueError(f"{where} {name} has no LTX text projection (text_embedding_projection.*); {pick}")
    if family in (LTX2, LTX23) and found != family:
        raise ValueError(
            f"{name} holds {found}'s text projection but the MGPU Loader runs an {family} model; pick the {family} "
            "checkpoint or text-projection file in projection_file"
        )
    return width


def encode_gemma4(mgpu_model: MGPUModel, path: Path, text: str, node_id, placement: str = "auto") -> list:
    """CONDITIONING of LTX-2.5's Gemma 4 file, computed by ComfyUI's own encoder, whole on rank 0 or
    its layers spread over the group (workers/engine/comfy/gemma4_job.py). ComfyUI's engine only:
    ltx-core has no Gemma 4 (its capability table says so)."""
    if not capabilities(mgpu_model.backend).gemma4_text:
        raise ValueError(
            f"{path.name} is Gemma 4 (LTX-2.5's text encoder), which runs on ComfyUI's engine only; load the "
            "model inside ComfyUI with MGPU Loader mode comfyui, or encode with CLIPLoader (type ltxv) + "
            "CLIPTextEncode"
        )
    shapes = read_safetensors_header(path).shapes
    if not all(key in shapes for key in DUAL_PROJECTION_KEYS):
        raise ValueError(
            f"{path.name} is Gemma 4 without the LTX projection ({DUAL_PROJECTION_KEYS[0]}); LTX-2.5 needs "
            "the 'with-proj' text encoder file (gemma4-12b-with-proj-ltx-2.5)"
        )
    width = sum(int(shapes[key][0]) for key in DUAL_PROJECTION_KEYS)
    # Gemma's byte-fallback tokens never outnumber the prompt's UTF-8 bytes; + BOS and slack.
    max_tokens = len(text.encode("utf-8")) + GEMMA4_SPECIAL_TOKENS
    check_gemma4_prompt(mgpu_model, path, text, max_tokens, width)  # memory, before the slot
    out = output_slot((1, max_tokens, width), torch.float32)
    request = EncodeGemma4(text_encoder=str(path), text=text, outputs=[out], placement=placement)
    results = run_job(mgpu_model, request, node_id=node_id, total=1)
    tokens = int(results[0]["tokens"])
    return [[out.tensor[:, :tokens].clone(), {"pooled_output": None, "unprocessed_ltxav_embeds": True}]]


def text_lora_entry(lora_name: str, strength: float, shapes) -> list[tuple[str, float]]:
    """[(full path, strength)] for a text-encoder LoRA picked in the node (checked against the Gemma's
    shapes from headers), or [] for "None" or strength 0."""
    if lora_name == NO_LORA or float(strength) == 0.0:
        return []
    path = comfy.full_path(LORA_FOLDERS, lora_name)
    text_lora_pairs(path, shapes)
    return [(str(path), float(strength))]


def encode_prompt(
    mgpu_model: MGPUModel,
    text_encoder: str,
    text: str,
    placement: str = "auto",
    lora_name: str = NO_LORA,
    lora_strength: float = 1.0,
    projection_file: str = FROM_LOADER,
    node_id: str | None = None,
):
    """MGPU Text Encode: `text` encoded by the Gemma file or folder `text_encoder` on the group's
    GPUs, projected by the projection in `projection_file` (default: the MGPU Loader's file); returns
    (CONDITIONING,) as ComfyUI's own LTX text encoder gives it."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r} is not one of {', '.join(PLACEMENTS)}")
    path = resolve_text_encoder(text_encoder)
    is_gemma4 = path.is_file() and is_gemma4_file(path)
    check_text_encoder_fits(path, mgpu_model.checkpoint, is_gemma4)  # before any worker reads it
    from_loader = projection_file in ("", FROM_LOADER)
    if is_gemma4:
        if not from_loader:
            raise ValueError(
                f"{path.name} is Gemma 4, which carries LTX-2.5's projection itself; set projection_file to "
                f"{FROM_LOADER}"
            )
        return (encode_gemma4(mgpu_model, path, text, node_id, placement),)
    projection = projection_source(mgpu_model, projection_file)
    width = projection_width(projection, mgpu_model.family, from_loader)  # before the Gemma file is read
    gemma = open_gemma_cached(path)  # the file's own errors first, before a tokenizer is looked for
    loras = text_lora_entry(lora_name, lora_strength, gemma.shapes)
    ids = prompt_ids(mgpu_model, gemma, load_prompt_tokenizer(path), text, width)  # memory checked
    out = output_slot((1, len(ids), width), torch.float32)
    request = EncodeText(
        text_encoder=str(path), prompts=[ids], placement=placement, outputs=[out], text_loras=tuple(loras),
        projection="" if from_loader else str(projection),
    )  # fmt: skip
    run_job(mgpu_model, request, node_id=node_id, total=1)
    return ([[out.tensor, {"pooled_output": None, "unprocessed_ltxav_embeds": True}]],)
