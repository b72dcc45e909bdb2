"""MGPU LoRA (LTX2MGPULoRA): the schema; the work is nodes/mgpu_lora.py add_lora."""

from __future__ import annotations

from comfy_api.latest import io

from .. import comfy
from ..mgpu_lora import add_lora
from .common import CATEGORY, MGPUModel, strength_input


class LTX2MGPULoRA(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2MGPULoRA",
            display_name="MGPU LoRA",
            category=CATEGORY,
            description="Adds a LoRA (ComfyUI's loras folder) to an MGPU_MODEL for the nodes that take this output, "
            "e.g. the distilled LoRA for stage 2 while stage 1 runs without it. The base stays loaded once: before a "
            "job with another LoRA set the workers restore the clean weights from the checkpoint and fuse the new "
            "set.",
            inputs=[
                MGPUModel.Input("mgpu_model", tooltip="From MGPU Loader (or another MGPU LoRA)."),
                io.Combo.Input(
                    "lora_name",
                    options=comfy.filename_list("loras"),
                    tooltip="An LTX-2 LoRA, e.g. ltx-2-19b-distilled-lora-384 for stage 2.",
                ),
                strength_input("strength", "How strongly the LoRA changes the model; 0 leaves it unchanged."),
            ],
            outputs=[MGPUModel.Output("mgpu_model")],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*add_lora(**inputs))
