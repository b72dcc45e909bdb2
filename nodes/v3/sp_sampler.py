"""SP Sampler (LTX2SPSampler): the schema; the work is nodes/sp_sampler.py sample_latent."""

from __future__ import annotations

from comfy_api.latest import io

from ...workers.wire.checks import SAMPLERS
from ..sp_sampler import sample_latent
from .common import CATEGORY, MGPUModel, cfg_input, node_id, seed_input


class LTX2SPSampler(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2SPSampler",
            display_name="SP Sampler",
            category=CATEGORY,
            description="Denoises an LTX-2 latent (video, or audio+video from LTXVConcatAVLatent) with the video "
            "tokens split over the worker group's GPUs. Same result as single-GPU sampling for the same seed.",
            inputs=[
                MGPUModel.Input("mgpu_model", tooltip="From MGPU Loader."),
                io.Latent.Input(
                    "latent",
                    tooltip="EmptyLTXVLatentVideo / LTXVImgToVideo, or LTXVConcatAVLatent for audio+video.",
                ),
                io.Sigmas.Input("sigmas", tooltip="LTXVScheduler or ManualSigmas."),
                io.Combo.Input("sampler_name", options=list(SAMPLERS), default="euler"),
                cfg_input("cfg", 4.0, "Guidance scale for the video stream."),
                cfg_input(
                    "cfg_audio",
                    4.0,
                    "Guidance scale for the audio stream. ComfyUI's CFGGuider uses one value for both: set it "
                    "equal to cfg to match a native run.",
                ),
                seed_input(),
                # Optional: a guider replaces the prompts (they were required before the guider input).
                io.Conditioning.Input(
                    "positive",
                    optional=True,
                    tooltip="LTX-2 text encoding (through LTXVConditioning for the frame rate). Leave empty when a "
                    "guider is connected.",
                ),
                io.Conditioning.Input(
                    "negative",
                    optional=True,
                    tooltip="Negative prompt; unused when both cfg values are 1. Leave empty when a guider is "
                    "connected.",
                ),
                io.Boolean.Input(
                    "add_noise",
                    default=True,
                    optional=True,
                    tooltip="Off: denoise the latent as it is (no initial noise).",
                ),
                io.Guider.Input(
                    "guider",
                    optional=True,
                    tooltip="Instead of positive / negative / cfg: a CFGGuider, LTXV Dual CFG Guider or Basic Guider "
                    "built on the MGPU Loader's MODEL (with LoRA, STG, modality or reference-audio guidance nodes on "
                    "it). Its whole loop runs in the workers.",
                ),
            ],
            outputs=[io.Latent.Output()],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*sample_latent(**inputs, node_id=node_id(cls)))
