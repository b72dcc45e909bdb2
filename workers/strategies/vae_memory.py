"""What a distributed VAE encode or decode will take, from its plan, before anything is allocated
(checked by wire/job_memory.py). Pure arithmetic; no ComfyUI, no model.

Per worker, a decode or encode holds its part of the frames as copies and the decoder's or encoder's
activations at the full-resolution level, `elements_per_pixel` values a pixel (conv_in's channels
over the patch area for the encoder, conv_out's input channels over it for the decoder: 8 for LTX-2's
VAE, 128 channels per 4 x 4 patch), for the frames of one time chunk (ComfyUI's Encoder and Decoder
cut time so a chunk's activation stays near MAX_CHUNK_BYTES). Against the peaks measured on the CPU
with the tiny model (2 workers, float32, 9 frames; estimate / measured): encode 0.7 (512 x 768) to 1.4
(1024 x 1024), exact decode 0.6-0.8, tiled decode 0.7-0.9 (tests/test_decode_input_grid.py keeps them
within 0.5-2). Not measured on LTX-2's own VAE (a GPU run: docs/NODES.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..wire.job_memory import JobNeed
from .native_tiles import TiledDecodeArgs, tile_grid
from .vae_encode_plan import EncodePlan
from .vae_tiles import FRAMES_PER_CELL, PIXELS_PER_CELL

# ComfyUI's LTX VAE chunk budget on a GPU of 24 GB or more, and on a CPU (causal_video_autoencoder.py
# get_max_chunk_size: MAX_CHUNK_SIZE); the encoder doubles it. Smaller GPUs cut smaller chunks.
MAX_CHUNK_BYTES = 128 * 2**20
# Tensors of the full-resolution level alive at once: a res block's input, its norm, a convolution's
# output and the residual sum (the tiny model, whose first level has no res block, peaked at ~3).
LIVE_TENSORS = 4
# A worker's copies of its input pixels per pixel and channel: two float32 temporaries of the IMAGE
# mapped to [-1, 1] and two in the VAE's dtype (ops_vae_encode.slab_input), bytes = 2 * 4 + 2 * dtype.
INPUT_COPIES_F32, INPUT_COPIES_VAE = 2, 2
# A decoded chunk on its way to the IMAGE, per pixel: IMAGE values (float32, 3 channels), and in the
# VAE's dtype conv_out's output, its unpatchified copy and the mapping's input (comfy_vae._ImageWriter).
OUTPUT_F32_CHANNELS = 3
OUTPUT_VAE_COPIES = 3
# A tiled decode keeps VAEDecodeTiled's whole output, its weight sum, the mapped IMAGE values and their
# channels-last copy on every worker (float32): 3 + 1 + 3 + 3 channels (comfy_vae_tiled.decode_tiled,
# comfy_vae._decode_tiled).
TILED_WHOLE_CHANNELS = 10
RGB = 3
# LTX-2's VAE, when the file does not say (8 = 128 channels per 4 x 4 patch).
DEFAULT_ELEMENTS_PER_PIXEL = 8.0


@dataclass(frozen=True)
class VaeWidths:
    """Values a pixel at the full-resolution level: encoder (after conv_in), decoder (before conv_out)."""

    encoder: float = DEFAULT_ELEMENTS_PER_PIXEL
    decoder: float = DEFAULT_ELEMENTS_PER_PIXEL


def vae_widths(shapes: Mapping[str, Sequence[int]]) -> VaeWidths:
    """From a safetensors header's shapes: conv_in [out, 3 * patch^2, ...] of the encoder and conv_out
    [3 * patch^2, in, ...] of the decoder, under any prefix (checkpoint "vae.", a VAE file none).
    LTX-2's figures where a key is missing (LTX-2.5's diffusion decoder has no conv_out)."""
    encoder = decoder = DEFAULT_ELEMENTS_PER_PIXEL
    for key, shape in shapes.items():
        if len(shape) != 5:
            continue
        if key.endswith("encoder.conv_in.conv.weight") and shape[1] % RGB == 0:
            encoder = shape[0] / (shape[1] // RGB)
        elif key.endswith("decoder.conv_out.conv.weight") and shape[0] % RGB == 0:
            decoder = shape[1] / (shape[0] // RGB)
    return VaeWidths(encoder, decoder)


def chunk_frames(frame_bytes: int, max_chunk_bytes: int) -> int:
    """Frames per time chunk after frame 0 for an encoder input frame of `frame_bytes` (after conv_in's
    channel growth): Encoder.forward_orig's rule (2, 4, or a multiple of 8 frames)."""
    frames = max(2, max_chunk_bytes // frame_bytes)
    if frames < 4:
        return 2
    if frames < 8:
        return 4
    return frames // 8 * 8


def _frames(latent_frames: int) -> int:
    return 1 + (latent_frames - 1) * FRAMES_PER_CELL


def _chunk(frames: int, frame_pixels: int, elements: float, vae_bytes: int, budget: int) -> int:
    """Frames of one time chunk, as ComfyUI's chunk rule sizes it for the whole frame."""
    frame_bytes = max(1, int(frame_pixels * elements * vae_bytes))
    return min(frames, chunk_frames(frame_bytes, budget))


def encode_need(plan: EncodePlan, pixel_bytes: int, vae_bytes: int, widths: VaeWidths, what: str) -> JobNeed:
    """A distributed encode of `plan` (comfy backend: each worker encodes its whole slab, time in
    ComfyUI's chunks). pixel_bytes: the IMAGE's element size; vae_bytes: the VAE's dtype's."""
    f, h, w = plan.latent_fhw
    frames, height, width = _frames(f), h * PIXELS_PER_CELL, w * PIXELS_PER_CELL
    thickest = max(b - a for a, b in plan.slabs) * PIXELS_PER_CELL
    slab_pixels = thickest * (width if plan.axis == "height" else height)
    copies = RGB * (INPUT_COPIES_F32 * 4 + INPUT_COPIES_VAE * vae_bytes)
    chunk = _chunk(frames - 1 or 1, height * width, widths.encoder, vae_bytes, 2 * MAX_CHUNK_BYTES)
    activations = LIVE_TENSORS * widths.encoder * vae_bytes * slab_pixels * (chunk + 1)
    shared = frames * height * width * RGB * pixel_bytes + 4 * math.prod((1, 128, f, h, w))
    return JobNeed(
        what=what,
        lower="the frame count or the resolution of the IMAGE (or encode it in parts)",
        shared_bytes=shared,
        worker_bytes=int(slab_pixels * frames * copies + activations),
    )


def decode_need(
    latent_fhw: tuple[int, int, int],
    world_size: int,
    vae_bytes: int,
    widths: VaeWidths,
    tiles: TiledDecodeArgs | None,
    audio_bytes: int,
    what: str,
) -> JobNeed:
    """A distributed decode: exact (tiles None: each worker decodes a band of rows of every frame) or
    VAEDecodeTiled's tiles. audio_bytes: the waveform's shared bytes."""
    f, h, w = latent_fhw
    frames, height, width = _frames(f), h * PIXELS_PER_CELL, w * PIXELS_PER_CELL
    image = frames * height * width
    per_pixel = LIVE_TENSORS * widths.decoder * vae_bytes
    if tiles is None:
        band = -(-max(h, w) // max(1, min(world_size, max(h, w)))) * PIXELS_PER_CELL
        band_pixels = band * (width if h >= w else height)
        chunk = _chunk(frames, height * width, widths.decoder, vae_bytes, MAX_CHUNK_BYTES)
        output = OUTPUT_F32_CHANNELS * 4 + OUTPUT_VAE_COPIES * RGB * vae_bytes
        worker = band_pixels * chunk * (per_pixel + output)
    else:
        grid = tile_grid(latent_fhw, tiles)
        largest = [max(cells for _, cells in spans) for spans in grid]
        tile_pixels = _frames(largest[0]) * largest[1] * largest[2] * PIXELS_PER_CELL**2
        worker = image * TILED_WHOLE_CHANNELS * 4 + tile_pixels * per_pixel
    return JobNeed(
        what=what,
        lower="the frame count or the resolution of the video (decode it in parts), or use tiled mode with a smaller tile_size"
        if tiles is None
        else "tile_size, the frame count or the resolution of the video (decode it in parts)",
        shared_bytes=image * RGB * 4 + audio_bytes,
        worker_bytes=int(worker),
    )
