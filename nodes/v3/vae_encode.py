"""Distributed VAE Encode (LTX2DistributedVAEEncode): the schema; the work is nodes/vae_encode.py
encode_pixels."""

from __future__ import annotations

from comfy_api.latest import io

from ...workers.wire.constants import VIDEO_FRAMES_PER_CELL
from ...workers.wire.requests import AUTO
from ..vae_encode import MAX_TEMPORAL_FRAMES, encode_pixels
from .common import CATEGORY, MGPUModel, node_id


class LTX2DistributedVAEEncode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2DistributedVAEEncode",
            display_name="Distributed VAE Encode",
            category=CATEGORY,
            description="Encodes frames (IMAGE) into an LTX-2 video LATENT with the frame split into bands over "
            "the worker group's GPUs. Neighbouring GPUs swap the rows each layer needs, so the latent is the "
            "single-GPU encode's (up to float rounding), whatever the GPU count. Takes what VAEEncode takes and "
            "crops the same way: sides to multiples of 32 (centred), frames to 8k+1 (the last ones dropped).",
            inputs=[
                MGPUModel.Input("mgpu_model", tooltip="From MGPU Loader (its checkpoint's VAE encodes)."),
                io.Image.Input("pixels", tooltip="Frames in 0..1, e.g. from LoadVideo + GetVideoComponents."),
                io.Int.Input(
                    "temporal_size",
                    default=AUTO,
                    min=0,
                    max=MAX_TEMPORAL_FRAMES,
                    step=VIDEO_FRAMES_PER_CELL,
                    tooltip="Frames each GPU encodes at a time (multiple of 8); less uses less memory. The result "
                    "does not depend on it. 0: about 2 GB of activations per GPU.",
                ),
            ],
            outputs=[
                io.Latent.Output(
                    "latent",
                    tooltip="The video latent [1, 128, (frames-1)/8+1, H/32, W/32], as VAEEncode returns it.",
                )
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*encode_pixels(**inputs, node_id=node_id(cls)))
