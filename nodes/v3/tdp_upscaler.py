"""TDP Upscaler (LTX2TDPUpscaler): the schema; the work is nodes/tdp_upscaler.py tdp_upscale."""

from __future__ import annotations

from comfy_api.latest import io

from ...workers.wire.checks import SAMPLERS
from ...workers.wire.requests import DEFAULT_PREVIEW_FRAMES, PREVIEW_MODES, PREVIEW_OFF
from .. import comfy
from ..tdp_upscaler import (
    AUTO,
    DEFAULT_OVERLAP_CELLS,
    MAX_FRAMES,
    MAX_OVERLAP_CELLS,
    MAX_TIME_TILES,
    TILE_CHOICES,
    tdp_upscale,
)
from .common import CATEGORY, MGPUModel, cfg_input, node_id, seed_input

DESCRIPTION = (
    "Tiled data parallelism (TDP) for the upscale stage: each GPU runs the whole transformer on its own tiles of "
    "the 2x upscaled latent, and the overlaps are blended. Each tile stays at a size the model was trained on, "
    "which lets LTX-2 refine video past its training resolution, and the GPUs work independently. Tiles see "
    "only their own region, so start from the stage-1 result re-noised to a moderate sigma (default 0.625, 0.4, "
    "0.0): from pure noise (sigma 1.0) the tiles would invent unrelated content, and the node refuses it. The "
    "audio of the output is the stage-1 audio, unchanged."
)
PREVIEW_TOOLTIP = (
    "A quick look before the full run. 'centre tile': only the tile nearest the frame's centre, all GPUs on it; "
    "returns that tile's region as a small video at full detail. 'first frames': the whole frame, only the first "
    "preview_frames frames (audio cut to match). Same seed, noise and positions as the full run, so what you see "
    "is what the full run makes there, up to the blending with neighbouring tiles."
)


class LTX2TDPUpscaler(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2TDPUpscaler",
            display_name="TDP Upscaler",
            category=CATEGORY,
            description=DESCRIPTION,
            inputs=[
                MGPUModel.Input(
                    "mgpu_model", tooltip="From MGPU Loader (with the distilled LoRA for stage 2)."
                ),
                io.Conditioning.Input("positive", tooltip="The stage-1 prompt (through LTXVConditioning)."),
                io.Conditioning.Input("negative", tooltip="Negative prompt; unused at cfg 1."),
                io.Latent.Input(
                    "latent",
                    tooltip="The stage-1 result: video, or audio+video from the SP Sampler. A noise mask is "
                    "dropped, as LTXVLatentUpsampler does; the audio passes through unchanged.",
                ),
                io.Combo.Input(
                    "upscale_model",
                    options=comfy.filename_list("latent_upscale_models"),
                    tooltip="The spatial x2 latent upscaler (ltx-2-spatial-upscaler-x2) of this checkpoint.",
                ),
                io.Combo.Input("sampler_name", options=list(SAMPLERS), default="euler_ancestral"),
                cfg_input("cfg", 1.0, "Guidance scale. 1 (no negative pass) for the distilled stage 2."),
                seed_input(),
                io.Combo.Input(
                    "tiles",
                    options=list(TILE_CHOICES),
                    default="auto",
                    tooltip="Tile grid, rows x columns. auto: from the video's size only, tiles of at most 768 px "
                    "plus overlap (1536x1024: 2x2), so the result does not depend on the GPU count. More tiles than "
                    "GPUs run in turns.",
                ),
                io.Int.Input(
                    "overlap",
                    default=DEFAULT_OVERLAP_CELLS,
                    min=0,
                    max=MAX_OVERLAP_CELLS,
                    step=1,
                    tooltip="Latent cells (32 px each) shared by neighbouring tiles and blended. More hides seams "
                    "better and costs more tokens per tile.",
                ),
                io.Sigmas.Input(
                    "sigmas",
                    optional=True,
                    tooltip="Stage-2 schedule; 0.625, 0.4, 0.0 when not connected. Must start below 1.",
                ),
                # Appended after every older input: saved workflows keep their widget values by position.
                io.Combo.Input(
                    "preview",
                    options=list(PREVIEW_MODES),
                    default=PREVIEW_OFF,
                    optional=True,
                    tooltip=PREVIEW_TOOLTIP,
                ),
                io.Int.Input(
                    "preview_frames",
                    default=DEFAULT_PREVIEW_FRAMES,
                    min=1,
                    max=MAX_FRAMES,
                    step=8,
                    optional=True,
                    tooltip="Frames a 'first frames' preview makes (8k + 1; 25 = one second at 24 fps).",
                ),
                io.Int.Input(
                    "time_tiles",
                    default=AUTO,
                    min=0,
                    max=MAX_TIME_TILES,
                    step=1,
                    optional=True,
                    tooltip="Spans of frames a long clip is cut into, overlapping by `overlap` latent frames (8 "
                    "video frames each) and blended, each span hearing its own part of the audio. 0 (auto): one "
                    "span up to 64 latent frames (20 seconds at 25 fps, the longest clip LTX generates in one go), "
                    "more beyond. Previews use one span.",
                ),
            ],
            outputs=[io.Latent.Output()],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*tdp_upscale(**inputs, node_id=node_id(cls)))
