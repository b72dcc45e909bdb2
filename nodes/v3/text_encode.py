"""MGPU Text Encode (LTX2MGPUTextEncode): the schema; the work is nodes/text_encode.py encode_prompt."""

from __future__ import annotations

from comfy_api.latest import io

from ...workers.wire.requests import TEXT_PLACEMENTS
from .. import comfy
from ..mgpu_lora import NO_LORA
from ..text_encode import FROM_LOADER, encode_prompt, text_encoder_choices
from .common import CATEGORY, MGPUModel, node_id, strength_input


class LTX2MGPUTextEncode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2MGPUTextEncode",
            display_name="MGPU Text Encode",
            category=CATEGORY,
            description="Encodes a prompt with Gemma 3 (the LTX-2 text encoder) on the worker group's GPUs: layers "
            "spread over the GPUs, or a full copy on each. Gives the same CONDITIONING as LTXAVTextEncoderLoader + "
            "CLIPTextEncode, so LTXVConditioning, the SP Sampler and native samplers take it. The weights stay "
            "loaded until the models are unloaded.",
            inputs=[
                MGPUModel.Input(
                    "mgpu_model",
                    tooltip="From MGPU Loader; its checkpoint supplies the text projection unless projection_file "
                    "names another file.",
                ),
                io.Combo.Input(
                    "text_encoder",
                    options=text_encoder_choices(),
                    tooltip="Gemma 3 12B: the file LTXAVTextEncoderLoader takes (e.g. gemma_3_12B_it.safetensors), "
                    "or a google/gemma-3-12b-it folder (listed as 'name/'). LTX-2.5: the Gemma 4 file CLIPLoader "
                    "takes (gemma4-12b-with-proj-ltx-2.5), run by ComfyUI's own encoder on one GPU or with its "
                    "layers spread over the GPUs.",
                ),
                io.String.Input(
                    "text",
                    multiline=True,
                    dynamic_prompts=True,
                    tooltip="One prompt, as in CLIPTextEncode (new lines are part of it).",
                ),
                io.Combo.Input(
                    "placement",
                    options=list(TEXT_PLACEMENTS),
                    default="auto",
                    tooltip="layers: Gemma's layers split over the GPUs by free memory. replicas: a full copy on "
                    "every GPU. auto: replicas when a copy fits each GPU comfortably, else layers. Gemma 4 (LTX-2.5): "
                    "replicas runs it on the first GPU; auto does so when it fits there.",
                ),
                io.Combo.Input(
                    "lora_name",
                    options=[NO_LORA, *comfy.filename_list("loras")],
                    default=NO_LORA,
                    optional=True,
                    tooltip="A LoRA on the text encoder, as LoraLoader's CLIP side applies it (the LTX-2.3 templates' "
                    "Gemma LoRA). Needs the bf16 Gemma file; model LoRAs go on the MGPU Loader.",
                ),
                strength_input(
                    "lora_strength",
                    "Strength of lora_name on the text encoder (LoraLoader's strength_clip).",
                    optional=True,
                ),
                io.Combo.Input(
                    "projection_file",
                    options=[FROM_LOADER, *comfy.filename_list("checkpoints")],
                    default=FROM_LOADER,
                    optional=True,
                    tooltip="The file holding LTX's text projection, as LTXAVTextEncoderLoader's ckpt_name takes it: by "
                    "default the MGPU Loader's own file. When the loader runs a GGUF or another transformer-only file, "
                    "pick the LTX-2 / 2.3 checkpoint or its text-projection file here. Not used with Gemma 4 (LTX-2.5).",
                ),
            ],
            outputs=[io.Conditioning.Output()],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*encode_prompt(**inputs, node_id=node_id(cls)))
