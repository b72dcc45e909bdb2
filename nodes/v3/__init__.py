"""The pack's nodes as ComfyUI V3 node classes (comfy_api.latest), and the extension ComfyUI loads.

Imported only when ComfyUI loads the pack (the pack's `comfy_entrypoint`) or by a test with a
ComfyUI: every module here imports comfy_api. Each class is its schema (node id, display name,
inputs with their limits and tooltips, outputs) and an `execute` that hands its inputs to the node's
function in nodes/<name>.py, where the checks and the work are, importable and tested without
ComfyUI. `execute` takes the inputs as keywords and passes them on, so the function's signature is
the one place their defaults live; classes hold no state (ComfyUI runs clones of them).

The comfy_api names used, all present in ComfyUI 0.33 (and in 0.3.x releases before it):
ComfyExtension (on_load, get_node_list); io.ComfyNode, io.Schema, io.NodeOutput, io.Hidden.unique_id,
io.Custom; the inputs and outputs io.Boolean, io.Int, io.Float, io.String, io.Combo, io.Latent,
io.Conditioning, io.Sigmas, io.Guider, io.Image, io.Audio, io.Model.
"""

from __future__ import annotations

from comfy_api.latest import ComfyExtension, io

from ..comfy import install_process_hooks
from .loader import LTX2MGPULoader
from .mgpu_lora import LTX2MGPULoRA
from .sp_sampler import LTX2SPSampler
from .tdp_upscaler import LTX2TDPUpscaler
from .text_encode import LTX2MGPUTextEncode
from .vae_decode import LTX2DistributedVAEDecode
from .vae_encode import LTX2DistributedVAEEncode

NODES: tuple[type[io.ComfyNode], ...] = (
    LTX2MGPULoader,
    LTX2MGPULoRA,
    LTX2SPSampler,
    LTX2TDPUpscaler,
    LTX2DistributedVAEDecode,
    LTX2DistributedVAEEncode,
    LTX2MGPUTextEncode,
)


class LTX2MultiGPUExtension(ComfyExtension):
    async def on_load(self) -> None:
        install_process_hooks()

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return list(NODES)
