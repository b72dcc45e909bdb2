"""What the VAE and text nodes check before any work: every input a worker could fail on, from the plan
the workers use (strategies/), and the memory the job will take (wire/job_memory.py). ValueError naming
the node, the input and what to change; nothing is allocated and no worker is asked before these pass.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ..workers.group.manager import MGPUModel
from ..workers.group.preflight import machine_capacity
from ..workers.strategies.decode_limits import NO_PADDING, REFLECT, check_decodable
from ..workers.strategies.native_tiles import check_native_tiles, tiled_decode_args
from ..workers.strategies.vae_encode_plan import EncodePlan
from ..workers.strategies.vae_memory import VaeWidths, decode_need, encode_need, vae_widths
from ..workers.strategies.vae_tiles import check_ltxcore_tiles
from ..workers.text.gemma3 import GemmaConfig
from ..workers.text.prompt_memory import prompt_need
from ..workers.text.text_encoder import GemmaFiles
from ..workers.text.text_tokenizer import PromptTokenizer, load_prompt_tokenizer
from ..workers.wire.backend import BACKEND_COMFY
from ..workers.wire.job_memory import JobNeed, check_need
from ..workers.wire.model_files import read_safetensors_header
from ..workers.wire.requests import VAE_DECODE_MODES, TileSettings

TILED = VAE_DECODE_MODES[1]
# ComfyUI detects LTX-2.5's diffusion VAE decoder by this key (comfy/sd.py, VAE.__init__); a VAE file
# of its own carries it without the checkpoint's "vae." prefix.
DIFFUSION_DECODER_KEY = "decoder.conv_in_x_t.weight"


def vae_file(model: MGPUModel) -> Path:
    """The file the workers take the video VAE from: LTX-2.5's own VAE file, else the checkpoint."""
    return Path(getattr(model, "video_vae", "") or model.checkpoint)


def _vae_header(model: MGPUModel) -> tuple[str, VaeWidths]:
    """(the decoder's edge padding, decode_limits.py; the VAE's widths, vae_memory.py) from the VAE
    file's header. A file that cannot be read gives LTX-2's figures: the workers name its problem."""
    try:
        shapes = read_safetensors_header(vae_file(model)).shapes
    except ValueError:
        return REFLECT, VaeWidths()
    diffusion = any(key.endswith(DIFFUSION_DECODER_KEY) for key in shapes)
    return (NO_PADDING if diffusion else REFLECT), vae_widths(shapes)


def vae_bytes(model: MGPUModel) -> int:
    """The VAE's element size in the workers: ComfyUI runs LTX's VAE in float32 on CPUs and for a
    float32 model, else in bfloat16."""
    return 4 if model.dtype == "float32" or any(d == "cpu" for d in model.devices) else 2


def check_decode(
    model: MGPUModel, video: torch.Tensor, settings: TileSettings, mode: str, audio_bytes: int
) -> None:
    """Distributed VAE Decode's checks: the latent decodes, the tiles of tiled mode are wide enough for
    the decoder, and the frames fit in memory."""
    latent_fhw = tuple(int(n) for n in video.shape[2:])
    padding, widths = _vae_header(model)
    try:
        check_decodable(tuple(video.shape), padding)
        tiles = None
        if model.backend == BACKEND_COMFY and mode == TILED:
            check_native_tiles(latent_fhw, settings, padding)
            tiles = tiled_decode_args(settings)
        elif model.backend != BACKEND_COMFY:
            check_ltxcore_tiles(settings)
    except ValueError as exc:
        raise ValueError(f"Distributed VAE Decode: {exc}") from None
    frames = 1 + (latent_fhw[0] - 1) * 8
    what = (
        f"Distributed VAE Decode ({mode}) of {video.shape[0]} x {frames} frames of "
        f"{latent_fhw[2] * 32} x {latent_fhw[1] * 32} px"
    )
    need = decode_need(latent_fhw, model.world_size, vae_bytes(model), widths, tiles, audio_bytes, what)
    _check_memory(model, need)


def check_encode(model: MGPUModel, frames: torch.Tensor, plan: EncodePlan) -> None:
    """Distributed VAE Encode's memory check for the cropped frames [F, H, W, 3] and its band plan."""
    _, widths = _vae_header(model)
    count, height, width = frames.shape[:3]
    what = f"Distributed VAE Encode of {count} frames of {width} x {height} px"
    need = encode_need(plan, frames.element_size(), vae_bytes(model), widths, what)
    _check_memory(model, need)


def prompt_ids(
    model: MGPUModel, gemma: GemmaFiles, tokenizer: PromptTokenizer, text: str, width: int
) -> list[int]:
    """MGPU Text Encode's prompt as token ids, once its memory is known to fit (output width `width`; a
    GPU holds at least its share of the text encoder's weights, split by layers). A prompt whose
    fewest possible tokens (tokenizer.min_tokens) already do not fit is refused without tokenizing."""
    capacity = machine_capacity(model.devices)
    resident = gemma.size_bytes(torch.bfloat16) // model.world_size

    def check(num_tokens: int, at_least: bool = False) -> None:
        need = prompt_need(gemma.config, num_tokens, width, "MGPU Text Encode", at_least)
        check_need(replace(need, resident_bytes=resident), capacity)

    check(tokenizer.min_tokens(text), at_least=True)
    ids = tokenizer.token_ids(text)
    check(len(ids))
    return ids


def check_gemma4_prompt(model: MGPUModel, path: Path, text: str, slot_tokens: int, width: int) -> None:
    """The same for LTX-2.5's Gemma 4 (12B: Gemma 3 12B's widths and heads, GemmaConfig's defaults),
    whose output slot is sized from the prompt's bytes (`slot_tokens`, an upper bound on its tokens).
    The workers' part is estimated from that bound, and when it does not fit, from the prompt's fewest
    possible and then its real tokens (ComfyUI's tokenizer runs in the workers; the file's own counts
    here)."""
    capacity = machine_capacity(model.devices)
    resident = path.stat().st_size // model.world_size

    def check(num_tokens: int, at_least: bool = False) -> None:
        need = prompt_need(GemmaConfig(), num_tokens, width, "MGPU Text Encode", at_least)
        check_need(replace(need, shared_bytes=slot_tokens * width * 4, resident_bytes=resident), capacity)

    try:
        check(slot_tokens)
        return
    except ValueError as bound_error:
        try:
            tokenizer = load_prompt_tokenizer(path)
        except ValueError:  # no tokenizer in the file: the bound's refusal stands
            raise bound_error from None
    check(tokenizer.min_tokens(text), at_least=True)
    check(len(tokenizer.token_ids(text)))


def _check_memory(model: MGPUModel, need: JobNeed) -> None:
    if model.backend != BACKEND_COMFY:  # ltx-core's tiles and chunks bound a worker's part
        need = JobNeed(need.what, need.lower, need.shared_bytes, 0)
    check_need(need, machine_capacity(model.devices))
