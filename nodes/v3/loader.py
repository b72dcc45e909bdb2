"""MGPU Loader (LTX2MGPULoader): the schema; the work is nodes/loader.py load_model."""

from __future__ import annotations

from comfy_api.latest import io

from ...workers.wire.checks import DTYPES, ForwardMode
from ...workers.wire.constants import DEFAULT_MAX_VIDEO_TOKENS
from ...workers.wire.weight_placement import WEIGHT_PLACEMENTS, WEIGHTS_REPLICATED
from .. import comfy
from ..loader import FROM_CHECKPOINT, GUIDANCE_CHOICES, load_model, model_file_choices
from ..mgpu_lora import NO_LORA
from .common import CATEGORY, MGPUModel, node_id, strength_input


class LTX2MGPULoader(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LTX2MGPULoader",
            display_name="MGPU Loader",
            category=CATEGORY,
            description="Starts one worker process per GPU (or reuses the running ones) and loads the LTX "
            "checkpoint in each (LTX-2, LTX-2.3). Connect its MGPU_MODEL to the SP Sampler, TDP Upscaler and "
            "Distributed VAE Decode. The release and weight format it found are shown under the node and on the "
            "console. Its MODEL goes to ComfyUI's own samplers (KSampler, SamplerCustomAdvanced with any guider): "
            "every model call then runs on the worker group, split over its GPUs.",
            inputs=[
                io.Combo.Input(
                    "ckpt_name",
                    options=model_file_choices(),
                    tooltip="The LTX checkpoint (ComfyUI's checkpoints or diffusion_models folder): LTX-2 19B or "
                    "LTX-2.3 22B, bf16 or fp8; or LTX-2.5's diffusion model (with its VAE files in video_vae_name / "
                    "audio_vae_name); or a transformer .gguf (needs the ComfyUI-GGUF pack). The release and weight "
                    "format found are shown under the node.",
                ),
                io.String.Input(
                    "gpus",
                    default="all",
                    tooltip="Which GPUs run workers: 'all', a count such as '2', or ids such as '0,1,3'; another "
                    "machine's after this one's, as '0,1,box2:0-3' (docs/MACHINES.md). Saved workflows keep 'all' "
                    "or the count, so they run on machines with other GPU counts.",
                ),
                io.Combo.Input(
                    "weight_dtype",
                    options=list(DTYPES),
                    default="bfloat16",
                    tooltip="Dtype of the weights in every worker.",
                ),
                # Optional from here on; new inputs are appended at the end (tests/test_node_contract.py).
                io.Int.Input(
                    "max_video_tokens",
                    default=DEFAULT_MAX_VIDEO_TOKENS,
                    min=256,
                    max=262144,
                    step=256,
                    optional=True,
                    tooltip="Refuse latents with more video tokens than this (frames/8 x height/32 x width/32).",
                ),
                io.Combo.Input(
                    "mode",
                    options=[m.value for m in ForwardMode],
                    default=ForwardMode.COMFYUI.value,
                    optional=True,
                    tooltip="comfyui: compute exactly what native ComfyUI computes for LTX-2 (same video as the "
                    "native nodes). reference: Lightricks' ltx-core forward (differs in video-to-audio attention).",
                ),
                io.Combo.Input(
                    "lora_name",
                    options=[NO_LORA, *comfy.filename_list("loras")],
                    default=NO_LORA,
                    optional=True,
                    tooltip="A LoRA fused into the model for every node that uses this output. For one branch only "
                    "(stage 2's distilled LoRA), use MGPU LoRA after this node instead.",
                ),
                strength_input(
                    "lora_strength", "Strength of lora_name; 0 leaves the model unchanged.", optional=True
                ),
                io.Boolean.Input(
                    "compile_blocks",
                    default=False,
                    optional=True,
                    tooltip="torch.compile the transformer blocks in every worker. The first run at a new "
                    "resolution compiles first (17-23 s for LTX-2 19B on an H200 machine); later steps run a few percent faster in bf16 (measured figures in "
                    "the pack's docs/PERFORMANCE.md; slower for fp8 scaled files at small sizes). Same results "
                    "within float rounding. Weights replicated only; not for GGUF files.",
                ),
                io.Boolean.Input(
                    "fp8_matmul",
                    default=False,
                    optional=True,
                    tooltip="Keep the transformer blocks' linear layers in fp8 and multiply in fp8 (Hopper/Ada "
                    "GPUs, weight_dtype bfloat16): 16 GB less memory per GPU for the 19B, and faster together with "
                    "compile_blocks. Results differ slightly from bf16 (fp8 rounding). For bf16/fp16/fp32 files "
                    "(not fp8, int8, fp4 or GGUF files, which run their own format).",
                ),
                io.Combo.Input(
                    "video_vae_name",
                    options=[FROM_CHECKPOINT, *comfy.filename_list("vae")],
                    default=FROM_CHECKPOINT,
                    optional=True,
                    tooltip="The video VAE file when it is separate from the model (LTX-2.5: ltx-2.5-video-vae), "
                    "for Distributed VAE Decode/Encode and the TDP Upscaler.",
                ),
                io.Combo.Input(
                    "audio_vae_name",
                    options=[FROM_CHECKPOINT, *comfy.filename_list("vae")],
                    default=FROM_CHECKPOINT,
                    optional=True,
                    tooltip="The audio VAE file when it is separate from the model (LTX-2.5: ltx-2.5-audio-vae), "
                    "for the audio of Distributed VAE Decode.",
                ),
                io.Combo.Input(
                    "guidance_parallel",
                    options=list(GUIDANCE_CHOICES),
                    default="off",
                    optional=True,
                    tooltip="How the SP Sampler (and this MODEL's batched calls) spread a step's guidance passes "
                    "(cond, uncond, STG, modality) over the GPUs: off = every pass over all GPUs in turn; 2 / 4 / 8 "
                    "= that many groups, each running its passes over its share of the GPUs (e.g. 4 GPUs: 2 groups "
                    "x 2); auto = the plan printed on the console. Same video either way.",
                ),
                io.Combo.Input(
                    "weights",
                    options=list(WEIGHT_PLACEMENTS),
                    default=WEIGHTS_REPLICATED,
                    optional=True,
                    tooltip="Where each GPU keeps the diffusion model: replicated = a whole copy per GPU "
                    "(fastest); offloaded = each GPU keeps what fits and casts the other layers in from host memory "
                    "per step (for GPUs too small for a copy; slower; needs host memory for a copy per GPU); "
                    "sharded = each GPU keeps 1/N of every block and gathers a block just before it runs (one GPU "
                    "per worker; every node); layers = each GPU holds a range of the blocks and hands the "
                    "activations on once per range (no peer access needed, any format incl. GGUF; no sequence "
                    "parallelism: one GPU's speed; not the TDP Upscaler). The console's pre-flight shows what "
                    "fits. Same video either way.",
                ),
            ],
            # MODEL comes after MGPU_MODEL: saved workflows link outputs by position.
            outputs=[
                MGPUModel.Output(
                    "mgpu_model", tooltip="For this pack's nodes (SP Sampler, TDP Upscaler, Distributed VAE)."
                ),
                io.Model.Output(
                    "model",
                    tooltip="For ComfyUI's samplers and guiders: the diffusion model runs in the worker group "
                    "(LoRAs: lora_name).",
                ),
                io.String.Output(
                    "model_info",
                    tooltip="What was detected: the LTX release, the weight format and where the VAEs come from.",
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, **inputs) -> io.NodeOutput:
        return io.NodeOutput(*load_model(**inputs, node_id=node_id(cls)))
