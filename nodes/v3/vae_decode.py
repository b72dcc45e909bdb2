"""Distributed VAE Decode (LTX2DistributedVAEDecode): the schema; the work is nodes/vae_decode.py
decode_latent."""

from __future__ import annotations

from comfy_api.latest import io

from ...workers.wire.requests import (
    AUTO,
    DEFAULT_OVERLAP_PX,
    DEFAULT_TEMPORAL_OVERLAP_FRAMES,
    OVERLAP_PX_RANGE,
    TEMPORAL_FRAMES_RANGE,
    TEMPORAL_OVERLAP_FRAMES_RANGE,
    TILE_PX_RANGE,
)
from ..vae_decode import DECODE_MODES, MAX_ATTENTION_CHUNK_MB, decode_latent
from .common import CATEGORY, MGPUModel, node_id


def _setting(
    name: str, default: int, step: int, maximum: int, tooltip: str, optional: bool = False
) -> io.Int.Input:
    return io.Int.Input(
        name, default=default, min=0, max=maximum, step=step, tooltip=tooltip, optional=optional
    )


class LTX2DistributedVAEDecode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2DistributedVAEDecode",
            display_name="Distributed VAE Decode",
            category=CATEGORY,
            description="Decodes an LTX-2 latent (video, or audio+video from LTXVConcatAVLatent) with the video "
            "tiles spread over the worker group's GPUs. Returns the frames as IMAGE and, when the latent holds "
            "audio, the AUDIO decoded by the checkpoint's audio VAE and vocoder (connect both to CreateVideo).",
            inputs=[
                MGPUModel.Input("mgpu_model", tooltip="From MGPU Loader."),
                io.Latent.Input(
                    "latent", tooltip="A video latent, or the audio+video latent of the sampler."
                ),
                # VAEDecodeTiled's steps and maxima (TileSettings), so its settings paste in as they are.
                _setting(
                    "tile_size",
                    AUTO,
                    TILE_PX_RANGE[2],
                    TILE_PX_RANGE[1],
                    "Long side of a spatial tile in pixels (the short side follows the frame's aspect). 0: chosen "
                    "from the number of GPUs, at most 512. Smaller tiles use less memory per GPU.",
                ),
                _setting(
                    "overlap",
                    DEFAULT_OVERLAP_PX,
                    OVERLAP_PX_RANGE[2],
                    OVERLAP_PX_RANGE[1],
                    "Pixels shared by neighbouring tiles.",
                ),
                _setting(
                    "temporal_size",
                    AUTO,
                    TEMPORAL_FRAMES_RANGE[2],
                    TEMPORAL_FRAMES_RANGE[1],
                    "Frames per temporal chunk (at least 8; ltx-core's tiles: a multiple of 8, at least 16). 0: "
                    "the whole clip in one chunk.",
                ),
                _setting(
                    "temporal_overlap",
                    DEFAULT_TEMPORAL_OVERLAP_FRAMES,
                    TEMPORAL_OVERLAP_FRAMES_RANGE[2],
                    TEMPORAL_OVERLAP_FRAMES_RANGE[1],
                    "Frames shared by neighbouring chunks (ltx-core's tiles: a multiple of 8).",
                ),
                io.Combo.Input(
                    "mode",
                    options=list(DECODE_MODES),
                    default=DECODE_MODES[0],
                    optional=True,
                    tooltip="exact: the frames VAEDecode gives (each GPU decodes a band of rows and swaps edge rows "
                    "with its neighbours; the tile settings are not used). tiled: the frames VAEDecodeTiled gives "
                    "with these tile settings (0 = its defaults, 512 px and 64 frames). With the ltx-core backend "
                    "both decode ltx-core's tiles.",
                ),
                _setting(
                    "attention_chunk_mb",
                    0,
                    64,
                    MAX_ATTENTION_CHUNK_MB,
                    "LTX-2.5's diffusion VAE decoder, exact mode: the most MiB one neighbourhood attention call may "
                    "hold on a GPU (its queries, keys, values and output for a run of rows). 0: each GPU's whole "
                    "band at once. Smaller uses less memory, same frames, slower.",
                    optional=True,
                ),
            ],
            outputs=[
                io.Image.Output("images", tooltip="The frames, as VAEDecodeTiled returns them."),
                io.Audio.Output("audio", tooltip="None when the latent holds no audio."),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*decode_latent(**inputs, node_id=node_id(cls)))
