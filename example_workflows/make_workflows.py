"""Writes the example workflows: UI format here (ComfyUI's template browser lists *.json of this
folder), API-format twins in api/ (for POST /prompt; Export (API) in the UI gives the same graph).

    python example_workflows/make_workflows.py        # rewrite every workflow
The graphs are described once below; widget order follows each node's input order, as ComfyUI keeps
widget values by position. Model names are the released LTX-2 files with their folders and download
addresses, so ComfyUI's missing-model dialog tells users what to fetch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
HF = "https://huggingface.co/Lightricks/LTX-2/resolve/main/"
CHECKPOINT = "ltx-2-19b-dev.safetensors"
UPSCALER = "ltx-2-spatial-upscaler-x2-1.0.safetensors"
DISTILLED_LORA = "ltx-2-19b-distilled-lora-384.safetensors"
GEMMA = "gemma_3_12B_it_fp4_mixed.safetensors"
MODELS = {
    CHECKPOINT: {"url": HF + CHECKPOINT, "directory": "checkpoints"},
    UPSCALER: {"url": HF + UPSCALER, "directory": "latent_upscale_models"},
    DISTILLED_LORA: {"url": HF + DISTILLED_LORA, "directory": "loras"},
    GEMMA: {
        "url": "https://huggingface.co/Comfy-Org/ltx-2/resolve/main/split_files/text_encoders/" + GEMMA,
        "directory": "text_encoders",
    },
}
# LTX-2.3: the files ComfyUI's official video_ltx2_3_t2v template names (with its download URLs).
CHECKPOINT_23 = "ltx-2.3-22b-dev-fp8.safetensors"
UPSCALER_23 = "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"
DISTILLED_LORA_23 = "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors"
MODELS |= {
    CHECKPOINT_23: {
        "url": "https://huggingface.co/Lightricks/LTX-2.3-fp8/resolve/main/" + CHECKPOINT_23,
        "directory": "checkpoints",
    },
    UPSCALER_23: {
        "url": "https://huggingface.co/Lightricks/LTX-2.3/resolve/main/" + UPSCALER_23,
        "directory": "latent_upscale_models",
    },
    DISTILLED_LORA_23: {
        "url": "https://huggingface.co/Comfy-Org/ltx-2.3/resolve/main/split_files/loras/" + DISTILLED_LORA_23,
        "directory": "loras",
    },
}
# Every file ComfyUI's official LTX-2.3 and LTX-2.5 templates name (comfyui-workflow-templates-json
# 0.1.123, their nodes' properties.models), with the same download URLs and folders.
_RELEASED = (
    ("Lightricks/LTX-2.3-fp8/resolve/main/", "checkpoints", "ltx-2.3-22b-distilled-fp8.safetensors"),
    ("Comfy-Org/ltx-2/resolve/main/split_files/loras/", "loras", "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors"),
    ("Lightricks/LTX-2.3-22b-IC-LoRA-Union-Control/resolve/main/", "loras",
     "ltx-2.3-22b-ic-lora-union-control-ref0.5.safetensors"),
    ("Comfy-Org/ltx-2.3/resolve/main/split_files/loras/", "loras", "ltx-2.3-id-lora-talkvid-3k.safetensors"),
    ("Comfy-Org/MoGe/resolve/main/geometry_estimation/", "geometry_estimation", "moge_2_vitl_normal_fp16.safetensors"),
    ("Lightricks/LTX-2.5/resolve/main/diffusion_models/", "diffusion_models",
     "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors"),
    ("Lightricks/LTX-2.5/resolve/main/vae/", "vae", "ltx-2.5-video-vae-bf16.safetensors"),
    ("Lightricks/LTX-2.5/resolve/main/vae/", "vae", "ltx-2.5-audio-vae-bf16.safetensors"),
    ("Lightricks/LTX-2.5/resolve/main/text_encoders/", "text_encoders",
     "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors"),
    ("Comfy-Org/gemma-4/resolve/main/text_encoders/", "text_encoders", "gemma4_e2b_it_int8_convrot.safetensors"),
    ("Lightricks/LTX-2.5/resolve/main/latent_upscale_models/", "latent_upscale_models",
     "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"),
)  # fmt: skip
MODELS |= {
    name: {"url": "https://huggingface.co/" + where + name, "directory": folder}
    for where, folder, name in _RELEASED
}
# The template's two schedules: stage 1 the distilled 8 steps from pure noise, stage 2 from 0.85.
STAGE1_SIGMAS_23 = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"
STAGE2_SIGMAS_23 = "0.85, 0.7250, 0.4219, 0.0"
PROMPT = (
    "A red fox trots through fresh snow in a birch forest at dawn, breath steaming, soft golden light, "
    "the crunch of snow underfoot and distant birdsong."
)
NEGATIVE = "blurry, low quality, still frame, watermark, distorted, text"

# Input order, kinds and outputs of every node the workflows use. ("w", name) is a widget,
# ("s", name, type) a socket; "seed" widgets carry ComfyUI's extra control_after_generate value.
SPECS: dict[str, tuple[list[tuple], list[tuple[str, str]]]] = {
    "LTX2MGPULoader": (
        [
            ("w", "ckpt_name"),
            ("w", "gpus"),
            ("w", "weight_dtype"),
            ("w", "max_video_tokens"),
            ("w", "mode"),
            ("w", "lora_name"),
            ("w", "lora_strength"),
            ("w", "compile_blocks"),
            ("w", "fp8_matmul"),
            ("w", "video_vae_name"),
            ("w", "audio_vae_name"),
            ("w", "guidance_parallel"),
        ],
        [("mgpu_model", "MGPU_MODEL"), ("model", "MODEL"), ("model_info", "STRING")],
    ),
    "LTX2MGPULoRA": (
        [("s", "mgpu_model", "MGPU_MODEL"), ("w", "lora_name"), ("w", "strength")],
        [("mgpu_model", "MGPU_MODEL")],
    ),
    "LTX2SPSampler": (
        [
            ("s", "mgpu_model", "MGPU_MODEL"),
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("s", "latent", "LATENT"),
            ("s", "sigmas", "SIGMAS"),
            ("w", "sampler_name"),
            ("w", "cfg"),
            ("w", "cfg_audio"),
            ("seed", "seed"),
            ("w", "add_noise"),
        ],
        [("LATENT", "LATENT")],
    ),
    "LTX2TDPUpscaler": (
        [
            ("s", "mgpu_model", "MGPU_MODEL"),
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("s", "latent", "LATENT"),
            ("w", "upscale_model"),
            ("w", "sampler_name"),
            ("w", "cfg"),
            ("seed", "seed"),
            ("w", "tiles"),
            ("w", "overlap"),
            ("s", "sigmas", "SIGMAS"),
            ("w", "preview"),
            ("w", "preview_frames"),
        ],
        [("LATENT", "LATENT")],
    ),
    "LTX2DistributedVAEDecode": (
        [
            ("s", "mgpu_model", "MGPU_MODEL"),
            ("s", "latent", "LATENT"),
            ("w", "tile_size"),
            ("w", "overlap"),
            ("w", "temporal_size"),
            ("w", "temporal_overlap"),
            ("w", "mode"),
            ("w", "attention_chunk_mb"),
        ],
        [("images", "IMAGE"), ("audio", "AUDIO")],
    ),
    "LTX2MGPUTextEncode": (
        [
            ("s", "mgpu_model", "MGPU_MODEL"),
            ("w", "text_encoder"),
            ("w", "text"),
            ("w", "placement"),
            ("w", "lora_name"),
            ("w", "lora_strength"),
        ],
        [("CONDITIONING", "CONDITIONING")],
    ),
    "LTX2DistributedVAEEncode": (
        [("s", "mgpu_model", "MGPU_MODEL"), ("s", "pixels", "IMAGE"), ("w", "temporal_size")],
        [("latent", "LATENT")],
    ),
    "CheckpointLoaderSimple": ([("w", "ckpt_name")], [("MODEL", "MODEL"), ("CLIP", "CLIP"), ("VAE", "VAE")]),
    "LTXAVTextEncoderLoader": (
        [("w", "text_encoder"), ("w", "ckpt_name"), ("w", "device")],
        [("CLIP", "CLIP")],
    ),
    "CLIPTextEncode": ([("w", "text"), ("s", "clip", "CLIP")], [("CONDITIONING", "CONDITIONING")]),
    "LTXVConditioning": (
        [("s", "positive", "CONDITIONING"), ("s", "negative", "CONDITIONING"), ("w", "frame_rate")],
        [("positive", "CONDITIONING"), ("negative", "CONDITIONING")],
    ),
    "EmptyLTXVLatentVideo": (
        [("w", "width"), ("w", "height"), ("w", "length"), ("w", "batch_size")],
        [("LATENT", "LATENT")],
    ),
    "LTXVAudioVAELoader": ([("w", "ckpt_name")], [("Audio VAE", "VAE")]),
    "LTXVEmptyLatentAudio": (
        [("w", "frames_number"), ("w", "frame_rate"), ("w", "batch_size"), ("s", "audio_vae", "VAE")],
        [("Latent", "LATENT")],
    ),
    "LTXVConcatAVLatent": (
        [("s", "video_latent", "LATENT"), ("s", "audio_latent", "LATENT")],
        [("latent", "LATENT")],
    ),
    "LTXVScheduler": (
        [
            ("w", "steps"),
            ("w", "max_shift"),
            ("w", "base_shift"),
            ("w", "stretch"),
            ("w", "terminal"),
            ("s", "latent", "LATENT"),
        ],
        [("SIGMAS", "SIGMAS")],
    ),
    "ManualSigmas": ([("w", "sigmas")], [("SIGMAS", "SIGMAS")]),
    "LoadImage": ([("w", "image")], [("IMAGE", "IMAGE"), ("MASK", "MASK")]),
    "LTXVImgToVideo": (
        [
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("s", "vae", "VAE"),
            ("s", "image", "IMAGE"),
            ("w", "width"),
            ("w", "height"),
            ("w", "length"),
            ("w", "batch_size"),
            ("w", "strength"),
        ],
        [("positive", "CONDITIONING"), ("negative", "CONDITIONING"), ("latent", "LATENT")],
    ),
    "LoadLatent": ([("w", "latent")], [("LATENT", "LATENT")]),
    "LoadVideo": ([("w", "file")], [("VIDEO", "VIDEO")]),
    "GetVideoComponents": (
        [("s", "video", "VIDEO")],
        [("images", "IMAGE"), ("audio", "AUDIO"), ("fps", "FLOAT")],
    ),
    "VAEEncode": ([("s", "pixels", "IMAGE"), ("s", "vae", "VAE")], [("LATENT", "LATENT")]),
    "CreateVideo": (
        [("s", "images", "IMAGE"), ("w", "fps"), ("s", "audio", "AUDIO"), ("w", "bit_depth")],
        [("VIDEO", "VIDEO")],
    ),
    "SaveVideo": ([("s", "video", "VIDEO"), ("w", "filename_prefix"), ("w", "format"), ("w", "codec")], []),
}


# The other nodes of the official templates (V3 kinds: "dyn" a dynamic combo, "grow" an autogrow input).
SPECS |= {
    "CFGGuider": (
        [
            ("s", "model", "MODEL"),
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("w", "cfg"),
        ],
        [("GUIDER", "GUIDER")],
    ),
    "CLIPLoader": ([("w", "clip_name"), ("w", "type"), ("w", "device")], [("CLIP", "CLIP")]),
    "ComfyMathExpression": (
        [("w", "expression"), ("grow", "values")],
        [("FLOAT", "FLOAT"), ("INT", "INT"), ("BOOL", "BOOLEAN")],
    ),
    "ComfySwitchNode": (
        [("w", "switch"), ("s", "on_false", "*"), ("s", "on_true", "*")],
        [("output", "STRING")],
    ),
    "EmptyImage": (
        [("w", "width"), ("w", "height"), ("w", "batch_size"), ("w", "color")],
        [("IMAGE", "IMAGE")],
    ),
    "GetICLoRAParameters": ([("s", "iclora_model", "MODEL")], [("iclora_parameters", "IC_LORA_PARAMETERS")]),
    "GetImageSize": ([("s", "image", "IMAGE")], [("width", "INT"), ("height", "INT"), ("batch_size", "INT")]),
    "KSampler": (
        [
            ("s", "model", "MODEL"),
            ("seed", "seed"),
            ("w", "steps"),
            ("w", "cfg"),
            ("w", "sampler_name"),
            ("w", "scheduler"),
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("s", "latent_image", "LATENT"),
            ("w", "denoise"),
        ],
        [("LATENT", "LATENT")],
    ),
    "KSamplerSelect": ([("w", "sampler_name")], [("SAMPLER", "SAMPLER")]),
    "LTXVAddGuide": (
        [
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("s", "vae", "VAE"),
            ("s", "latent", "LATENT"),
            ("s", "image", "IMAGE"),
            ("w", "frame_idx"),
            ("w", "strength"),
            ("s", "attention_mask", "MASK"),
            ("s", "iclora_parameters", "IC_LORA_PARAMETERS"),
        ],
        [("positive", "CONDITIONING"), ("negative", "CONDITIONING"), ("latent", "LATENT")],
    ),
    "LTXVAudioVAEDecode": ([("s", "samples", "LATENT"), ("s", "audio_vae", "VAE")], [("Audio", "AUDIO")]),
    "LTXVAudioVAEEncode": (
        [("s", "audio", "AUDIO"), ("s", "audio_vae", "VAE")],
        [("Audio Latent", "LATENT")],
    ),
    "LTXVCropGuides": (
        [("s", "positive", "CONDITIONING"), ("s", "negative", "CONDITIONING"), ("s", "latent", "LATENT")],
        [("positive", "CONDITIONING"), ("negative", "CONDITIONING"), ("latent", "LATENT")],
    ),
    "LTXVDualCFGGuider": (
        [
            ("s", "model", "MODEL"),
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("w", "video_cfg"),
            ("w", "audio_cfg"),
        ],
        [("GUIDER", "GUIDER")],
    ),
    "LTXVImgToVideoInplace": (
        [
            ("s", "vae", "VAE"),
            ("s", "image", "IMAGE"),
            ("s", "latent", "LATENT"),
            ("w", "strength"),
            ("w", "bypass"),
        ],
        [("latent", "LATENT")],
    ),
    "LTXVLatentUpsampler": (
        [("s", "samples", "LATENT"), ("s", "upscale_model", "LATENT_UPSCALE_MODEL"), ("s", "vae", "VAE")],
        [("LATENT", "LATENT")],
    ),
    "LTXVPreprocess": ([("s", "image", "IMAGE"), ("w", "img_compression")], [("output_image", "IMAGE")]),
    "LTXVReferenceAudio": (
        [
            ("s", "model", "MODEL"),
            ("s", "positive", "CONDITIONING"),
            ("s", "negative", "CONDITIONING"),
            ("s", "reference_audio", "AUDIO"),
            ("s", "audio_vae", "VAE"),
            ("w", "identity_guidance_scale"),
            ("w", "start_percent"),
            ("w", "end_percent"),
        ],
        [("MODEL", "MODEL"), ("positive", "CONDITIONING"), ("negative", "CONDITIONING")],
    ),
    "LTXVSeparateAVLatent": (
        [("s", "av_latent", "LATENT")],
        [("video_latent", "LATENT"), ("audio_latent", "LATENT")],
    ),
    "LatentUpscaleModelLoader": ([("w", "model_name")], [("LATENT_UPSCALE_MODEL", "LATENT_UPSCALE_MODEL")]),
    "LoadAudio": ([("upload", "audio")], [("AUDIO", "AUDIO")]),
    "LoadMoGeModel": ([("w", "model_name")], [("MOGE_MODEL", "MOGE_MODEL")]),
    "LoraLoader": (
        [
            ("s", "model", "MODEL"),
            ("s", "clip", "CLIP"),
            ("w", "lora_name"),
            ("w", "strength_model"),
            ("w", "strength_clip"),
        ],
        [("MODEL", "MODEL"), ("CLIP", "CLIP")],
    ),
    "LoraLoaderModelOnly": (
        [("s", "model", "MODEL"), ("w", "lora_name"), ("w", "strength_model")],
        [("MODEL", "MODEL")],
    ),
    "MoGeInference": (
        [
            ("s", "moge_model", "MOGE_MODEL"),
            ("s", "image", "IMAGE"),
            ("w", "resolution_level"),
            ("w", "fov_x_degrees"),
            ("w", "batch_size"),
            ("w", "force_projection"),
            ("w", "apply_mask"),
        ],
        [("moge_geometry", "MOGE_GEOMETRY")],
    ),
    "MoGeRender": ([("s", "moge_geometry", "MOGE_GEOMETRY"), ("w", "output")], [("IMAGE", "IMAGE")]),
    "PreviewAny": ([("s", "source", "*")], [("STRING", "STRING")]),
    "PrimitiveBoolean": ([("w", "value")], [("BOOLEAN", "BOOLEAN")]),
    "PrimitiveFloat": ([("w", "value")], [("FLOAT", "FLOAT")]),
    "PrimitiveInt": ([("seed", "value")], [("INT", "INT")]),
    "PrimitiveStringMultiline": ([("w", "value")], [("STRING", "STRING")]),
    "RandomNoise": ([("seed", "noise_seed")], [("NOISE", "NOISE")]),
    "ResizeImageMaskNode": (
        [("s", "input", "*"), ("dyn", "resize_type"), ("w", "scale_method")],
        [("resized", "IMAGE")],
    ),
    "ResolutionSelector": (
        [("w", "aspect_ratio"), ("w", "megapixels"), ("w", "multiple")],
        [("width", "INT"), ("height", "INT")],
    ),
    "SamplerCustomAdvanced": (
        [
            ("s", "noise", "NOISE"),
            ("s", "guider", "GUIDER"),
            ("s", "sampler", "SAMPLER"),
            ("s", "sigmas", "SIGMAS"),
            ("s", "latent_image", "LATENT"),
        ],
        [("output", "LATENT"), ("denoised_output", "LATENT")],
    ),
    "SamplerEulerAncestral": ([("w", "eta"), ("w", "s_noise")], [("SAMPLER", "SAMPLER")]),
    "SetLatentNoiseMask": ([("s", "samples", "LATENT"), ("s", "mask", "MASK")], [("LATENT", "LATENT")]),
    "SolidMask": ([("w", "value"), ("w", "width"), ("w", "height")], [("MASK", "MASK")]),
    "TextGenerateLTX2Prompt": (
        [
            ("s", "clip", "CLIP"),
            ("w", "prompt"),
            ("w", "max_length"),
            ("dyn", "sampling_mode"),
            ("s", "image", "IMAGE"),
            ("s", "video", "IMAGE"),
            ("s", "audio", "AUDIO"),
            ("w", "thinking"),
            ("w", "use_default_template"),
        ],
        [("generated_text", "STRING")],
    ),
    "TrimAudioDuration": (
        [("s", "audio", "AUDIO"), ("w", "start_index"), ("w", "duration")],
        [("AUDIO", "AUDIO")],
    ),
    "VAELoader": ([("w", "vae_name")], [("VAE", "VAE")]),
    "Video Slice": (
        [("s", "video", "VIDEO"), ("w", "start_time"), ("w", "duration"), ("w", "strict_duration")],
        [("VIDEO", "VIDEO")],
    ),
}


@dataclass
class Node:
    id: int
    type: str
    values: dict
    links: dict  # input name -> (Node, output slot)
    pos: tuple[int, int]
    title: str | None = None
    models: list = field(default_factory=list)


def _link_type(node: Node, name: str) -> str:
    """The type of the output that feeds `name` of `node`."""
    src, slot = node.links[name]
    return SPECS[src.type][1][slot][1]


class Graph:
    def __init__(self, name: str, description: str) -> None:
        self.name, self.description = name, description
        self.nodes: list[Node] = []

    def add(
        self, type_: str, values: dict | None = None, at: tuple[int, int] = (0, 0), title=None, **links
    ) -> Node:
        node = Node(
            len(self.nodes) + 1, type_, dict(values or {}), links, at, title
        )  # a copy: ui() adds to it
        node.models = [
            {"name": v, **MODELS[v]} for v in node.values.values() if isinstance(v, str) and v in MODELS
        ]
        self.nodes.append(node)
        return node

    # ----- UI format ---------------------------------------------------------------------------
    def ui(self) -> dict:
        links, out_links = [], {}
        for node in self.nodes:
            for name, (src, slot) in node.links.items():
                link_id = len(links) + 1
                kind = SPECS[src.type][1][slot][1]
                links.append([link_id, src.id, slot, node.id, self._slot(node, name), kind])
                out_links.setdefault((src.id, slot), []).append(link_id)
                node.values.setdefault("__links__", {})[name] = link_id
        return {
            "last_node_id": len(self.nodes),
            "last_link_id": len(links),
            "nodes": [self._ui_node(n, out_links, order) for order, n in enumerate(self.nodes)],
            "links": links,
            "groups": [],
            "config": {},
            "extra": {"info": {"description": self.description}},
            "version": 0.4,
        }

    @staticmethod
    def _widgets(node: Node) -> list[tuple[str, str]]:
        """(name, kind) of the node's widgets in the frontend's order: a dynamic combo's chosen option's
        widgets ("<combo>.<input>", in the order given) right after it."""
        out = []
        for spec in SPECS[node.type][0]:
            if spec[0] in ("w", "seed", "upload"):
                out.append((spec[1], spec[0]))
            elif spec[0] == "dyn":
                out.append((spec[1], "w"))
                out += [(k, "w") for k in node.values if k.startswith(spec[1] + ".")]
        return [(name, kind) for name, kind in out if name in node.values or name in node.links]

    @staticmethod
    def _sockets(node: Node) -> list[tuple[str, str]]:
        """(name, type) of the node's sockets; an autogrow input's sockets are the ones linked."""
        out = []
        for spec in SPECS[node.type][0]:
            if spec[0] == "s":
                out.append((spec[1], spec[2]))
            elif spec[0] == "grow":
                out += [(k, "*") for k in sorted(node.links) if k.startswith(spec[1] + ".")]
        return [(name, _link_type(node, name) if kind == "*" else kind) for name, kind in out]

    @classmethod
    def _input_names(cls, node: Node) -> list[str]:
        """The node's input slots: sockets, then widgets that a link drives (the frontend's order)."""
        return [n for n, _ in cls._sockets(node)] + [n for n, _ in cls._widgets(node) if n in node.links]

    def _slot(self, node: Node, name: str) -> int:
        return self._input_names(node).index(name)

    def _ui_node(self, node: Node, out_links: dict, order: int) -> dict:
        outputs_spec = SPECS[node.type][1]
        node_links = node.values.get("__links__", {})
        inputs = [{"name": n, "type": t, "link": node_links.get(n)} for n, t in self._sockets(node)]
        for name, _ in self._widgets(node):
            if name in node.links:  # a widget driven by a link, after the sockets
                inputs.append(
                    {
                        "name": name,
                        "type": _link_type(node, name),
                        "link": node_links.get(name),
                        "widget": {"name": name},
                    }
                )
        widgets = []
        for name, kind in self._widgets(node):
            widgets.append(node.values.get(name))
            if kind == "seed":
                widgets.append("fixed")  # control_after_generate
        entry = {
            "id": node.id,
            "type": node.type,
            "pos": list(node.pos),
            # The height the frontend gives this many sockets and widgets.
            "size": [
                320,
                6 + 20 * max(len(inputs), len(outputs_spec)) + (8 + 24 * len(widgets) if widgets else 0),
            ],
            "flags": {},
            "order": order,
            "mode": 0,
            "inputs": inputs,
            "outputs": [
                {"name": n, "type": t, "links": out_links.get((node.id, i), []), "slot_index": i}
                for i, (n, t) in enumerate(outputs_spec)
            ],
            "properties": {
                "Node name for S&R": node.type,
                **({"models": node.models} if node.models else {}),
            },
            "widgets_values": widgets,
        }
        if node.title:
            entry["title"] = node.title
        return entry

    # ----- API format --------------------------------------------------------------------------
    def api(self) -> dict:
        graph = {}
        for node in self.nodes:
            inputs = {k: v for k, v in node.values.items() if k != "__links__"}
            if (
                node.type == "SaveVideo" and "format.codec" not in inputs
            ):  # a dynamic combo: the codec rides on the format
                inputs["format.codec"] = inputs.pop("codec")
            for name, (src, slot) in node.links.items():
                inputs[name] = [str(src.id), slot]
            graph[str(node.id)] = {
                "class_type": node.type,
                "inputs": inputs,
                "_meta": {"title": node.title or node.type},
            }
        return graph


# The distilled stage 2 (cfg 1, Lightricks' TDP schedule when no SIGMAS is connected).
TDP_STAGE2 = {
    "upscale_model": UPSCALER,
    "sampler_name": "euler_ancestral",
    "cfg": 1.0,
    "seed": 0,
    "tiles": "auto",
    "overlap": 5,
    "preview": "off",
    "preview_frames": 25,
}


def loader(g: Graph, at=(0, 0), ckpt_name: str = CHECKPOINT, lora: tuple[str, float] = ("None", 1.0)) -> Node:
    return g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": ckpt_name,
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "lora_name": lora[0],
            "lora_strength": lora[1],
            "compile_blocks": False,
            "fp8_matmul": False,
        },
        at,
    )


def native_text(g: Graph, frame_rate: float, at=(0, 330), cond_at=(800, 400)) -> Node:
    te = g.add(
        "LTXAVTextEncoderLoader", {"text_encoder": GEMMA, "ckpt_name": CHECKPOINT, "device": "default"}, at
    )
    pos = g.add("CLIPTextEncode", {"text": PROMPT}, (at[0] + 400, at[1]), "Positive prompt", clip=(te, 0))
    neg = g.add(
        "CLIPTextEncode", {"text": NEGATIVE}, (at[0] + 400, at[1] + 180), "Negative prompt", clip=(te, 0)
    )
    return g.add(
        "LTXVConditioning",
        {"frame_rate": frame_rate},
        cond_at,
        positive=(pos, 0),
        negative=(neg, 0),
    )


def decode_and_save(
    g: Graph, model: Node, latent: tuple, fps: float, prefix: str, at=(1600, -150), save_at=None
) -> None:
    decode = g.add(
        "LTX2DistributedVAEDecode",
        {"tile_size": 0, "overlap": 64, "temporal_size": 0, "temporal_overlap": 24},
        at,
        mgpu_model=(model, 0),
        latent=latent,
    )
    video = g.add(
        "CreateVideo",
        {"fps": fps, "bit_depth": 8},
        (at[0] + 400, at[1]),
        images=(decode, 0),
        audio=(decode, 1),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": prefix, "format": "mp4", "codec": "auto"},
        save_at or (at[0] + 800, at[1]),
        video=(video, 0),
    )


def empty_av_latent(g: Graph, ckpt_name: str, width: int, height: int, frame_rate: int) -> Node:
    """The empty 121-frame video + audio latent of the text-to-video graphs (the audio VAE from the checkpoint)."""
    video = g.add(
        "EmptyLTXVLatentVideo", {"width": width, "height": height, "length": 121, "batch_size": 1}, (400, 690)
    )
    audio_vae = g.add("LTXVAudioVAELoader", {"ckpt_name": ckpt_name}, (0, 920))
    audio = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 121, "frame_rate": frame_rate, "batch_size": 1},
        (400, 920),
        audio_vae=(audio_vae, 0),
    )
    return g.add("LTXVConcatAVLatent", {}, (800, 690), video_latent=(video, 0), audio_latent=(audio, 0))


def text_to_video() -> Graph:
    g = Graph(
        "ltx2_mgpu_t2v_two_stage",
        "LTX-2 text-to-video, two stages on all GPUs: SP Sampler at 768x512, TDP Upscaler to 1536x1024 with the "
        "distilled LoRA, Distributed VAE Decode. The shape of ComfyUI's own LTX-2 template.",
    )
    model = loader(g)
    cond = native_text(g, 24.0)
    av = empty_av_latent(g, CHECKPOINT, 768, 512, 24)
    sigmas = g.add(
        "LTXVScheduler",
        {"steps": 20, "max_shift": 2.05, "base_shift": 0.95, "stretch": True, "terminal": 0.1},
        (800, 870),
        latent=(av, 0),
    )
    stage1 = g.add(
        "LTX2SPSampler",
        {"sampler_name": "euler_ancestral", "cfg": 4.0, "cfg_audio": 4.0, "seed": 10, "add_noise": True},
        (1200, 0),
        "Stage 1: SP Sampler (half size)",
        mgpu_model=(model, 0),
        positive=(cond, 0),
        negative=(cond, 1),
        latent=(av, 0),
        sigmas=(sigmas, 0),
    )
    distilled = g.add(
        "LTX2MGPULoRA", {"lora_name": DISTILLED_LORA, "strength": 1.0}, (800, 100), mgpu_model=(model, 0)
    )
    stage2 = g.add(
        "LTX2TDPUpscaler",
        TDP_STAGE2,
        (1200, 450),
        "Stage 2: TDP Upscaler (full size)",
        mgpu_model=(distilled, 0),
        positive=(cond, 0),
        negative=(cond, 1),
        latent=(stage1, 0),
    )
    decode_and_save(g, model, (stage2, 0), 24.0, "video/LTX-2-MultiGPU")
    return g


def image_to_video() -> Graph:
    g = Graph(
        "ltx2_mgpu_i2v",
        "LTX-2 image-to-video on all GPUs: LTXVImgToVideo conditions the first frame, MGPU Text Encode runs Gemma on "
        "the worker GPUs, SP Sampler denoises audio+video, Distributed VAE Decode.",
    )
    model = loader(g)
    pos = g.add(
        "LTX2MGPUTextEncode",
        {"text_encoder": GEMMA, "text": PROMPT, "placement": "auto"},
        (400, 120),
        "Positive prompt",
        mgpu_model=(model, 0),
    )
    neg = g.add(
        "LTX2MGPUTextEncode",
        {"text_encoder": GEMMA, "text": NEGATIVE, "placement": "auto"},
        (400, 360),
        "Negative prompt",
        mgpu_model=(model, 0),
    )
    cond = g.add("LTXVConditioning", {"frame_rate": 24.0}, (800, 160), positive=(pos, 0), negative=(neg, 0))
    ckpt = g.add("CheckpointLoaderSimple", {"ckpt_name": CHECKPOINT}, (0, 620))
    image = g.add("LoadImage", {"image": "example.png"}, (0, 780))
    i2v = g.add(
        "LTXVImgToVideo",
        {"width": 768, "height": 512, "length": 121, "batch_size": 1, "strength": 1.0},
        (1200, 280),
        positive=(cond, 0),
        negative=(cond, 1),
        vae=(ckpt, 2),
        image=(image, 0),
    )
    audio_vae = g.add("LTXVAudioVAELoader", {"ckpt_name": CHECKPOINT}, (0, 960))
    audio = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 121, "frame_rate": 24, "batch_size": 1},
        (800, 960),
        audio_vae=(audio_vae, 0),
    )
    av = g.add("LTXVConcatAVLatent", {}, (1600, 560), video_latent=(i2v, 2), audio_latent=(audio, 0))
    sigmas = g.add(
        "LTXVScheduler",
        {"steps": 20, "max_shift": 2.05, "base_shift": 0.95, "stretch": True, "terminal": 0.1},
        (1600, 760),
        latent=(av, 0),
    )
    sampled = g.add(
        "LTX2SPSampler",
        {"sampler_name": "euler_ancestral", "cfg": 4.0, "cfg_audio": 4.0, "seed": 10, "add_noise": True},
        (2000, 200),
        mgpu_model=(model, 0),
        positive=(i2v, 0),
        negative=(i2v, 1),
        latent=(av, 0),
        sigmas=(sigmas, 0),
    )
    decode_and_save(g, model, (sampled, 0), 24.0, "video/LTX-2-MultiGPU-i2v", (2400, 0), save_at=(2800, 240))
    return g


def upscale_latent() -> Graph:
    g = Graph(
        "ltx2_mgpu_tdp_upscale_latent",
        "Upscale a saved stage-1 latent (LoadLatent reads .latent files from ComfyUI's input folder) with the TDP "
        "Upscaler on all GPUs, then decode.",
    )
    model = loader(g)
    cond = native_text(g, 24.0)
    latent = g.add("LoadLatent", {"latent": "stage1.latent"}, (400, 100))
    stage2 = g.add(
        "LTX2TDPUpscaler",
        TDP_STAGE2,
        (1200, 0),
        mgpu_model=(model, 0),
        positive=(cond, 0),
        negative=(cond, 1),
        latent=(latent, 0),
    )
    decode_and_save(g, model, (stage2, 0), 24.0, "video/LTX-2-MultiGPU-upscaled")
    return g


def upscale_video() -> Graph:
    g = Graph(
        "ltx2_mgpu_upscale_video",
        "Upscale a video you already have 2x with the TDP Upscaler, keeping its audio and frame rate: LoadVideo, "
        "Distributed VAE Encode, TDP Upscaler, Distributed VAE Decode. Frames 8k+1 and sides multiples of 32 encode without "
        "cropping.",
    )
    model = loader(g)
    cond = native_text(g, 24.0, cond_at=(800, 100))
    source = g.add("LoadVideo", {"file": "input.mp4"}, (400, 720))
    parts = g.add("GetVideoComponents", {}, (800, 720), video=(source, 0))
    encoded = g.add(
        "LTX2DistributedVAEEncode",
        {"temporal_size": 0},
        (1200, 500),
        mgpu_model=(model, 0),
        pixels=(parts, 0),
    )
    stage2 = g.add(
        "LTX2TDPUpscaler",
        TDP_STAGE2,
        (1600, 0),
        mgpu_model=(model, 0),
        positive=(cond, 0),
        negative=(cond, 1),
        latent=(encoded, 0),
    )
    decode = g.add(
        "LTX2DistributedVAEDecode",
        {"tile_size": 0, "overlap": 64, "temporal_size": 0, "temporal_overlap": 24},
        (2000, -150),
        mgpu_model=(model, 0),
        latent=(stage2, 0),
    )
    video = g.add(
        "CreateVideo",
        {"fps": 24.0, "bit_depth": 8},
        (2400, 300),
        images=(decode, 0),
        audio=(parts, 1),
        fps=(parts, 2),
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX-2-MultiGPU-upscaled", "format": "mp4", "codec": "auto"},
        (2800, 300),
        video=(video, 0),
    )
    return g


def text_to_video_23() -> Graph:
    """ComfyUI's video_ltx2_3_t2v template's files, sizes, schedules and guidance on the SP Sampler and
    the TDP Upscaler (its faithful twin: template_23_t2v)."""
    g = Graph(
        "ltx2_3_mgpu_t2v_tdp",
        "LTX-2.3 text-to-video on all GPUs with the SP Sampler and TDP Upscaler, after of ComfyUI's video_ltx2_3_t2v template: the distilled "
        "1.1 LoRA at 0.5 fused by the loader, MGPU Text Encode (Gemma 3 fp4 mixed; the template's Gemma LoRA needs "
        "the bf16 Gemma file and MGPU Text Encode's lora_name; no prompt enhancer), SP Sampler at 640x352 with the distilled schedule and CFG 1, "
        "TDP Upscaler with the x2 1.1 upscaler to 1280x704, Distributed VAE Decode at 25 fps.",
    )
    model = loader(g, ckpt_name=CHECKPOINT_23, lora=(DISTILLED_LORA_23, 0.5))
    texts = [
        g.add(
            "LTX2MGPUTextEncode",
            {"text_encoder": GEMMA, "text": text, "placement": "auto"},
            (0, 330 + 180 * i),
            title,
            mgpu_model=(model, 0),
        )
        for i, (text, title) in enumerate(((PROMPT, "Positive prompt"), (NEGATIVE, "Negative prompt")))
    ]
    cond = g.add(
        "LTXVConditioning", {"frame_rate": 25.0}, (400, 400), positive=(texts[0], 0), negative=(texts[1], 0)
    )
    av = empty_av_latent(g, CHECKPOINT_23, 640, 352, 25)
    stage1_sigmas = g.add("ManualSigmas", {"sigmas": STAGE1_SIGMAS_23}, (800, 870))
    stage1 = g.add(
        "LTX2SPSampler",
        {"sampler_name": "euler", "cfg": 1.0, "cfg_audio": 1.0, "seed": 42, "add_noise": True},
        (1200, 0),
        "Stage 1: SP Sampler (half size)",
        mgpu_model=(model, 0),
        positive=(cond, 0),
        negative=(cond, 1),
        latent=(av, 0),
        sigmas=(stage1_sigmas, 0),
    )
    stage2_sigmas = g.add("ManualSigmas", {"sigmas": STAGE2_SIGMAS_23}, (800, 1000))
    stage2 = g.add(
        "LTX2TDPUpscaler",
        {**TDP_STAGE2, "upscale_model": UPSCALER_23, "sampler_name": "euler", "cfg": 1.0},
        (1200, 450),
        "Stage 2: TDP Upscaler (full size)",
        mgpu_model=(model, 0),
        positive=(cond, 0),
        negative=(cond, 1),
        latent=(stage1, 0),
        sigmas=(stage2_sigmas, 0),
    )
    decode_and_save(g, model, (stage2, 0), 25.0, "video/LTX-2.3-MultiGPU")
    return g


# ----- twins of ComfyUI's official LTX-2.3 / LTX-2.5 templates --------------------------------------
# Each is the official template's graph (comfyui-workflow-templates-json 0.1.123, its subgraph flattened;
# the same nodes, values, seeds, schedules and guiders) with the heavy nodes ours: the MGPU Loader's
# MODEL into the template's own guiders and samplers (its LoRA on the checkpoint fused by the loader,
# except the IC-LoRA, whose parameters GetICLoRAParameters reads from the LoRA node), MGPU Text Encode
# for CLIPTextEncode, Distributed VAE Decode (tiled, the template's tile settings) for VAEDecodeTiled.
# The template's own loaders stay where other nodes need them (its VAE for the image guides and the
# latent upscaler, its Gemma for the prompt enhancer). tests/test_official_templates.py checks each
# twin node for node against the downloaded template and runs it on the tiny checkpoints.
_TWIN = (
    "The MGPU twin of ComfyUI's {template} template ({what}): the template's own graph and settings, with "
    "the MGPU Loader's MODEL{lora} in its guiders and samplers, MGPU Text Encode for the prompts and "
    "Distributed VAE Decode (tiled) on all GPUs."
)
DESCRIPTIONS = {
    name: _TWIN.format(template=name, what=what, lora=lora)
    for name, what, lora in (
        ("video_ltx2_3_t2v", "LTX-2.3 text-to-video, two stages", " (distilled LoRA 0.5 fused)"),
        ("video_ltx2_3_i2v", "LTX-2.3 image-to-video, two stages", " (distilled LoRA 0.5 fused)"),
        ("video_ltx2_3_ia2v", "LTX-2.3 image + audio to video", " (distilled LoRA 0.5 fused)"),
        ("video_ltx2_3_flf2v", "LTX-2.3 first and last frame to video, distilled checkpoint", ""),
        ("video_ltx2_3_ic_lora", "LTX-2.3 IC-LoRA union control from a MoGe depth video; needs the MoGe "
         "depth model", ""),
        ("video_ltx2_3_id_lora", "LTX-2.3 ID-LoRA: a reference voice and image", " (distilled LoRA fused)"),
        ("video_ltx2_5_t2v", "LTX-2.5 text-to-video, two stages, split files", ""),
        ("video_ltx2_5_i2v", "LTX-2.5 image-to-video, two stages, split files", ""),
        ("video_ltx2_5_flf2v", "LTX-2.5 first and last frame to video, split files", ""),
    )
}  # fmt: skip


def template_23_t2v() -> Graph:
    g = Graph("ltx2_3_mgpu_t2v", DESCRIPTIONS["video_ltx2_3_t2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (1660, 3660),
    )
    random_noise_2 = g.add("RandomNoise", {"noise_seed": 42}, (4720, 3750))
    random_noise_3 = g.add("RandomNoise", {"noise_seed": 810138461690240}, (3200, 3900))
    ltxv_audio_vae_loader_4 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 4140)
    )
    ksampler_select_5 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (4720, 4160))
    manual_sigmas_6 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (4720, 4340))
    ksampler_select_7 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (3200, 4350))
    primitive_int_8 = g.add("PrimitiveInt", {"value": 720}, (1160, 4530), "Height")
    comfy_math_expression_9 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2530, 5130), **{"values.a": (primitive_int_8, 0)}
    )
    primitive_int_10 = g.add("PrimitiveInt", {"value": 25}, (1160, 4680), "Frame Rate")
    comfy_math_expression_11 = g.add(
        "ComfyMathExpression",
        {"expression": "a"},
        (2530, 5270),
        "Math Expression (fps)",
        **{"values.a": (primitive_int_10, 0)},
    )
    primitive_int_12 = g.add("PrimitiveInt", {"value": 5}, (1160, 4230), "Duration")
    primitive_boolean_13 = g.add(
        "PrimitiveBoolean", {"value": True}, (1170, 4080), "Switch to Text to Video?"
    )
    manual_sigmas_14 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (3200, 4550),
    )
    latent_upscale_model_loader_15 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"},
        (1670, 4600),
    )
    primitive_int_16 = g.add("PrimitiveInt", {"value": 1280}, (1160, 4380), "Width")
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2530, 5070), **{"values.a": (primitive_int_16, 0)}
    )
    mgpu_text_encode_18 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2180, 4480),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    checkpoint_loader_simple_19 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 3660)
    )
    ltxav_text_encoder_loader_20 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "device": "default",
        },
        (1660, 4340),
    )
    primitive_string_multiline_21 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Dynamic cinematic close-up of high-tech modular machinery self-assembling in midair, precision robotic parts, magnetic connectors, and glowing circuits clicking together, subtle smoke and light flares, extremely detailed titanium textures. The final product displays a clean, clear surface with large glowing engraved text “LTX-2.3” centered and unobstructed, dramatic lighting, photorealism, 8K, sharp focus.\n"
        },
        (1160, 3680),
        "Prompt",
    )
    comfy_math_expression_22 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (2540, 5370),
        "Math Expression (length)",
        **{"values.a": (primitive_int_12, 0), "values.b": (primitive_int_10, 0)},
    )
    empty_ltxv_latent_video_23 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2980, 5200),
        **{
            "width": (comfy_math_expression_17, 1),
            "height": (comfy_math_expression_9, 1),
            "length": (comfy_math_expression_22, 1),
        },
    )
    ltxv_empty_latent_audio_24 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2970, 4970),
        **{
            "frames_number": (comfy_math_expression_22, 1),
            "frame_rate": (comfy_math_expression_11, 1),
            "audio_vae": (ltxv_audio_vae_loader_4, 0),
        },
    )
    empty_image_25 = g.add(
        "EmptyImage", {"width": 512, "height": 512, "batch_size": 1, "color": 0}, (1170, 5030)
    )
    resize_image_mask_node_26 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (1670, 5040),
        **{
            "resize_type.width": (primitive_int_16, 0),
            "resize_type.height": (primitive_int_8, 0),
            "input": (empty_image_25, 0),
        },
    )
    lora_loader_27 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (1150, 2880),
        **{"model": (mgpu_loader_1, 1), "clip": (ltxav_text_encoder_loader_20, 0)},
    )
    text_generate_ltx2_prompt_28 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1580, 2880),
        **{"prompt": (primitive_string_multiline_21, 0), "clip": (lora_loader_27, 1)},
    )
    primitive_boolean_29 = g.add(
        "PrimitiveBoolean", {"value": True}, (1150, 3360), "Boolean (Enable Prompt Enhance)"
    )
    comfy_switch_node_30 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (2110, 3290),
        **{
            "switch": (primitive_boolean_29, 0),
            "on_false": (primitive_string_multiline_21, 0),
            "on_true": (text_generate_ltx2_prompt_28, 0),
        },
    )
    mgpu_text_encode_31 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2170, 3640),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_30, 0)},
    )
    ltxv_conditioning_32 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2790, 3670),
        **{
            "frame_rate": (comfy_math_expression_11, 0),
            "positive": (mgpu_text_encode_31, 0),
            "negative": (mgpu_text_encode_18, 0),
        },
    )
    cfg_guider_33 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (3200, 4100),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_32, 0),
            "negative": (ltxv_conditioning_32, 1),
        },
    )
    preview_any_34 = g.add("PreviewAny", {}, (2420, 2900), **{"source": (comfy_switch_node_30, 0)})
    resize_image_mask_node_35 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 512, "scale_method": "lanczos"},
        (2090, 5050),
        **{"input": (resize_image_mask_node_26, 0)},
    )
    ltxv_preprocess_36 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (2100, 5270), **{"image": (resize_image_mask_node_35, 0)}
    )
    ltxv_img_to_video_inplace_37 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (3420, 4990),
        **{
            "bypass": (primitive_boolean_13, 0),
            "vae": (checkpoint_loader_simple_19, 2),
            "image": (ltxv_preprocess_36, 0),
            "latent": (empty_ltxv_latent_video_23, 0),
        },
    )
    concat_av_latent_38 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3820, 4990),
        **{
            "video_latent": (ltxv_img_to_video_inplace_37, 0),
            "audio_latent": (ltxv_empty_latent_audio_24, 0),
        },
    )
    sampler_custom_advanced_39 = g.add(
        "SamplerCustomAdvanced",
        {},
        (3620, 3990),
        **{
            "noise": (random_noise_3, 0),
            "guider": (cfg_guider_33, 0),
            "sampler": (ksampler_select_7, 0),
            "sigmas": (manual_sigmas_14, 0),
            "latent_image": (concat_av_latent_38, 0),
        },
    )
    separate_av_latent_40 = g.add(
        "LTXVSeparateAVLatent", {}, (3890, 3910), **{"av_latent": (sampler_custom_advanced_39, 0)}
    )
    ltxv_crop_guides_41 = g.add(
        "LTXVCropGuides",
        {},
        (3900, 3700),
        **{
            "positive": (ltxv_conditioning_32, 0),
            "negative": (ltxv_conditioning_32, 1),
            "latent": (separate_av_latent_40, 0),
        },
    )
    cfg_guider_42 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (4720, 3930),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_crop_guides_41, 0),
            "negative": (ltxv_crop_guides_41, 1),
        },
    )
    ltxv_latent_upsampler_43 = g.add(
        "LTXVLatentUpsampler",
        {},
        (4270, 3910),
        **{
            "samples": (separate_av_latent_40, 0),
            "upscale_model": (latent_upscale_model_loader_15, 0),
            "vae": (checkpoint_loader_simple_19, 2),
        },
    )
    ltxv_img_to_video_inplace_44 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (4280, 4150),
        **{
            "bypass": (primitive_boolean_13, 0),
            "vae": (checkpoint_loader_simple_19, 2),
            "image": (ltxv_preprocess_36, 0),
            "latent": (ltxv_latent_upsampler_43, 0),
        },
    )
    concat_av_latent_45 = g.add(
        "LTXVConcatAVLatent",
        {},
        (4730, 4520),
        **{"video_latent": (ltxv_img_to_video_inplace_44, 0), "audio_latent": (separate_av_latent_40, 1)},
    )
    sampler_custom_advanced_46 = g.add(
        "SamplerCustomAdvanced",
        {},
        (5070, 3750),
        **{
            "noise": (random_noise_2, 0),
            "guider": (cfg_guider_42, 0),
            "sampler": (ksampler_select_5, 0),
            "sigmas": (manual_sigmas_6, 0),
            "latent_image": (concat_av_latent_45, 0),
        },
    )
    separate_av_latent_47 = g.add(
        "LTXVSeparateAVLatent", {}, (5410, 3750), **{"av_latent": (sampler_custom_advanced_46, 0)}
    )
    ltxv_audio_vae_decode_48 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (5770, 3940),
        **{"samples": (separate_av_latent_47, 1), "audio_vae": (ltxv_audio_vae_loader_4, 0)},
    )
    distributed_vae_decode_49 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (5760, 3650),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (separate_av_latent_47, 0)},
    )
    create_video_50 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (5740, 4610),
        **{
            "fps": (comfy_math_expression_11, 0),
            "images": (distributed_vae_decode_49, 0),
            "audio": (ltxv_audio_vae_decode_48, 0),
        },
    )
    save_video_51 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_t2v", "format": "auto", "codec": "auto"},
        (0, 3530),
        **{"video": (create_video_50, 0)},
    )
    return g


def template_23_i2v() -> Graph:
    g = Graph("ltx2_3_mgpu_i2v", DESCRIPTIONS["video_ltx2_3_i2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (1660, 3660),
    )
    load_image_2 = g.add("LoadImage", {"image": "egyptian_queen.png"}, (-440, 3530))
    random_noise_3 = g.add("RandomNoise", {"noise_seed": 42}, (4700, 3650))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 60540193790228}, (3160, 3630))
    ltxv_audio_vae_loader_5 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 4100)
    )
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (4700, 4100))
    manual_sigmas_7 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (4700, 4290))
    ksampler_select_8 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (3160, 4040))
    primitive_int_9 = g.add("PrimitiveInt", {"value": 720}, (1190, 4650), "Height")
    comfy_math_expression_10 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2550, 4890), **{"values.a": (primitive_int_9, 0)}
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 25}, (1190, 4840), "Frame Rate")
    comfy_math_expression_12 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (2540, 5030), **{"values.a": (primitive_int_11, 0)}
    )
    primitive_int_13 = g.add("PrimitiveInt", {"value": 5}, (1190, 4280), "Duration")
    primitive_boolean_14 = g.add(
        "PrimitiveBoolean", {"value": False}, (1190, 4110), "Switch to Text to Video?"
    )
    manual_sigmas_15 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (3160, 4220),
    )
    latent_upscale_model_loader_16 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"},
        (1670, 4550),
    )
    primitive_int_17 = g.add("PrimitiveInt", {"value": 1280}, (1190, 4470), "Width")
    resize_image_mask_node_18 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (1680, 4800),
        **{
            "resize_type.width": (primitive_int_17, 0),
            "resize_type.height": (primitive_int_9, 0),
            "input": (load_image_2, 0),
        },
    )
    comfy_math_expression_19 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2540, 4830), **{"values.a": (primitive_int_17, 0)}
    )
    mgpu_text_encode_20 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2180, 4120),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    checkpoint_loader_simple_21 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (1660, 3660)
    )
    ltxav_text_encoder_loader_22 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "device": "default",
        },
        (1660, 4280),
    )
    primitive_string_multiline_23 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Egyptian royal in blue-and-gold headdress and high collar, white dress with golden embroidery and armbands, desert, robot soldiers in formation left and right. She walks steadily forward, head held level and gaze fixed ahead—no dipping or lowering of the head. The camera performs a single, smooth push-in only: starting in a wider shot of her, the robots, and the desert, it moves steadily forward until she is in a medium or medium-close frame, then holds. She stops, posture and head still upright, and says: “The old gods are silent. I am not.” Robot soldiers shift or march in place; sand and fabric move with the wind. No pull-back; the only camera move is the continuous push-in."
        },
        (1190, 3680),
        "Prompt",
    )
    comfy_math_expression_24 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1210, 5040),
        "Math Expression (length)",
        **{"values.a": (primitive_int_13, 0), "values.b": (primitive_int_11, 0)},
    )
    empty_ltxv_latent_video_25 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2870, 4940),
        **{
            "width": (comfy_math_expression_19, 1),
            "height": (comfy_math_expression_10, 1),
            "length": (comfy_math_expression_24, 1),
        },
    )
    ltxv_empty_latent_audio_26 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (3540, 4960),
        **{
            "frames_number": (comfy_math_expression_24, 1),
            "frame_rate": (comfy_math_expression_12, 1),
            "audio_vae": (ltxv_audio_vae_loader_5, 0),
        },
    )
    lora_loader_27 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (1200, 2870),
        **{"model": (mgpu_loader_1, 1), "clip": (ltxav_text_encoder_loader_22, 0)},
    )
    primitive_boolean_28 = g.add(
        "PrimitiveBoolean", {"value": False}, (1200, 3350), "Boolean (Enable Prompt Enhance)"
    )
    resize_image_mask_node_29 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "area"},
        (2090, 4810),
        **{"input": (resize_image_mask_node_18, 0)},
    )
    ltxv_preprocess_30 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (2100, 5010), **{"image": (resize_image_mask_node_29, 0)}
    )
    ltxv_img_to_video_inplace_31 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (3230, 4810),
        **{
            "bypass": (primitive_boolean_14, 0),
            "vae": (checkpoint_loader_simple_21, 2),
            "image": (ltxv_preprocess_30, 0),
            "latent": (empty_ltxv_latent_video_25, 0),
        },
    )
    concat_av_latent_32 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3860, 4830),
        **{
            "video_latent": (ltxv_img_to_video_inplace_31, 0),
            "audio_latent": (ltxv_empty_latent_audio_26, 0),
        },
    )
    text_generate_ltx2_prompt_33 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1630, 2870),
        **{
            "prompt": (primitive_string_multiline_23, 0),
            "clip": (lora_loader_27, 1),
            "image": (resize_image_mask_node_29, 0),
        },
    )
    comfy_switch_node_34 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (2160, 3280),
        **{
            "switch": (primitive_boolean_28, 0),
            "on_false": (primitive_string_multiline_23, 0),
            "on_true": (text_generate_ltx2_prompt_33, 0),
        },
    )
    mgpu_text_encode_35 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (2170, 3640),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_34, 0)},
    )
    ltxv_conditioning_36 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2800, 3810),
        **{
            "frame_rate": (comfy_math_expression_12, 0),
            "positive": (mgpu_text_encode_35, 0),
            "negative": (mgpu_text_encode_20, 0),
        },
    )
    cfg_guider_37 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (3160, 3810),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_36, 0),
            "negative": (ltxv_conditioning_36, 1),
        },
    )
    sampler_custom_advanced_38 = g.add(
        "SamplerCustomAdvanced",
        {},
        (3550, 3630),
        **{
            "noise": (random_noise_4, 0),
            "guider": (cfg_guider_37, 0),
            "sampler": (ksampler_select_8, 0),
            "sigmas": (manual_sigmas_15, 0),
            "latent_image": (concat_av_latent_32, 0),
        },
    )
    separate_av_latent_39 = g.add(
        "LTXVSeparateAVLatent", {}, (3820, 3630), **{"av_latent": (sampler_custom_advanced_38, 0)}
    )
    ltxv_crop_guides_40 = g.add(
        "LTXVCropGuides",
        {},
        (3830, 3810),
        **{
            "positive": (ltxv_conditioning_36, 0),
            "negative": (ltxv_conditioning_36, 1),
            "latent": (separate_av_latent_39, 0),
        },
    )
    cfg_guider_41 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (4700, 3850),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_crop_guides_40, 0),
            "negative": (ltxv_crop_guides_40, 1),
        },
    )
    ltxv_latent_upsampler_42 = g.add(
        "LTXVLatentUpsampler",
        {},
        (4250, 3760),
        **{
            "samples": (separate_av_latent_39, 0),
            "upscale_model": (latent_upscale_model_loader_16, 0),
            "vae": (checkpoint_loader_simple_21, 2),
        },
    )
    ltxv_img_to_video_inplace_43 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (4230, 4100),
        **{
            "bypass": (primitive_boolean_14, 0),
            "vae": (checkpoint_loader_simple_21, 2),
            "image": (ltxv_preprocess_30, 0),
            "latent": (ltxv_latent_upsampler_42, 0),
        },
    )
    concat_av_latent_44 = g.add(
        "LTXVConcatAVLatent",
        {},
        (4710, 4490),
        **{"video_latent": (ltxv_img_to_video_inplace_43, 0), "audio_latent": (separate_av_latent_39, 1)},
    )
    sampler_custom_advanced_45 = g.add(
        "SamplerCustomAdvanced",
        {},
        (5050, 3650),
        **{
            "noise": (random_noise_3, 0),
            "guider": (cfg_guider_41, 0),
            "sampler": (ksampler_select_6, 0),
            "sigmas": (manual_sigmas_7, 0),
            "latent_image": (concat_av_latent_44, 0),
        },
    )
    separate_av_latent_46 = g.add(
        "LTXVSeparateAVLatent", {}, (5390, 3650), **{"av_latent": (sampler_custom_advanced_45, 0)}
    )
    ltxv_audio_vae_decode_47 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (5760, 3970),
        **{"samples": (separate_av_latent_46, 1), "audio_vae": (ltxv_audio_vae_loader_5, 0)},
    )
    distributed_vae_decode_48 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (5750, 3610),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (separate_av_latent_46, 0)},
    )
    create_video_49 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (6050, 4490),
        **{
            "fps": (comfy_math_expression_12, 0),
            "images": (distributed_vae_decode_48, 0),
            "audio": (ltxv_audio_vae_decode_47, 0),
        },
    )
    save_video_50 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_i2v", "format": "auto", "codec": "auto"},
        (430, 3530),
        **{"video": (create_video_49, 0)},
    )
    preview_any_51 = g.add("PreviewAny", {}, (2470, 2890), **{"source": (comfy_switch_node_34, 0)})
    return g


def template_23_ia2v() -> Graph:
    g = Graph("ltx2_3_mgpu_ia2v", DESCRIPTIONS["video_ltx2_3_ia2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (870, 3410),
    )
    load_image_2 = g.add("LoadImage", {"image": "cactus_man.png"}, (-440, 3530))
    load_audio_3 = g.add("LoadAudio", {"audio": "ltx_23_audio.mp3"}, (-440, 4070))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 42}, (3970, 3430))
    random_noise_5 = g.add("RandomNoise", {"noise_seed": 225158785956033}, (2330, 3420))
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (3970, 3790))
    manual_sigmas_7 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (3970, 3960))
    ksampler_select_8 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (2340, 3790))
    manual_sigmas_9 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2340, 4000),
    )
    mgpu_text_encode_10 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1370, 3910),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 1280}, (410, 4040), "Width")
    ltxv_audio_vae_loader_12 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (870, 3790)
    )
    primitive_boolean_13 = g.add(
        "PrimitiveBoolean", {"value": False}, (420, 3890), "Switch to Text to Video?"
    )
    comfy_math_expression_14 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1760, 4620), **{"values.a": (primitive_int_11, 0)}
    )
    primitive_float_15 = g.add("PrimitiveFloat", {"value": 9}, (410, 4520), "Duration")
    primitive_int_16 = g.add("PrimitiveInt", {"value": 24}, (410, 4340), "Frame Rate")
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (1760, 4500), **{"values.a": (primitive_int_16, 0)}
    )
    comfy_math_expression_18 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1760, 4720),
        **{"values.a": (primitive_float_15, 0), "values.b": (primitive_int_16, 0)},
    )
    primitive_int_19 = g.add("PrimitiveInt", {"value": 720}, (410, 4190), "Height")
    solid_mask_20 = g.add(
        "SolidMask",
        {"value": 0, "width": 1024, "height": 1024},
        (2390, 4420),
        **{"width": (primitive_int_11, 0), "height": (primitive_int_19, 0)},
    )
    comfy_math_expression_21 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1760, 4670), **{"values.a": (primitive_int_19, 0)}
    )
    empty_ltxv_latent_video_22 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2070, 4590),
        **{
            "width": (comfy_math_expression_14, 1),
            "height": (comfy_math_expression_21, 1),
            "length": (comfy_math_expression_18, 1),
        },
    )
    trim_audio_duration_23 = g.add(
        "TrimAudioDuration",
        {"start_index": 0, "duration": 60},
        (410, 4810),
        **{"duration": (primitive_float_15, 0), "audio": (load_audio_3, 0)},
    )
    ltxv_audio_vae_encode_24 = g.add(
        "LTXVAudioVAEEncode",
        {},
        (2400, 4640),
        **{"audio": (trim_audio_duration_23, 0), "audio_vae": (ltxv_audio_vae_loader_12, 0)},
    )
    set_latent_noise_mask_25 = g.add(
        "SetLatentNoiseMask",
        {},
        (2720, 4640),
        **{"samples": (ltxv_audio_vae_encode_24, 0), "mask": (solid_mask_20, 0)},
    )
    latent_upscale_model_loader_26 = g.add(
        "LatentUpscaleModelLoader", {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"}, (880, 4160)
    )
    checkpoint_loader_simple_27 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (870, 3410)
    )
    ltxav_text_encoder_loader_28 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "device": "default",
        },
        (870, 3950),
    )
    primitive_string_multiline_29 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "The fuzzy cactus creature is talking to the viewer as it grips the steering wheel with one hand, the other hand gestures naturally as it speaks. The car is moving, revealing the sunlit coastal background, static camera fixed on character, smooth side-tracking shot matching the car speed\n\nscene: Sunlit coastal road trip, clear coastal background\ncharacter: Fuzzy cactus creature with big square sunglasses and a Hawaiian shirt\naction: One hand grips the steering wheel, the other gestures naturally while talking to the camera\ncamera: Fixed on character, smooth side-tracking shot matching car speed"
        },
        (410, 3460),
        "Prompt",
    )
    resize_image_mask_node_30 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (890, 4400),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_19, 0),
            "input": (load_image_2, 0),
        },
    )
    lora_loader_31 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (410, 2670),
        **{"model": (mgpu_loader_1, 1), "clip": (ltxav_text_encoder_loader_28, 0)},
    )
    text_generate_ltx2_prompt_32 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (840, 2670),
        **{"prompt": (primitive_string_multiline_29, 0), "clip": (lora_loader_31, 1)},
    )
    primitive_boolean_33 = g.add(
        "PrimitiveBoolean", {"value": True}, (410, 3150), "Boolean (Enable Prompt Enhance)"
    )
    comfy_switch_node_34 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1370, 3080),
        **{
            "switch": (primitive_boolean_33, 0),
            "on_false": (primitive_string_multiline_29, 0),
            "on_true": (text_generate_ltx2_prompt_32, 0),
        },
    )
    mgpu_text_encode_35 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1370, 3430),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_34, 0)},
    )
    ltxv_conditioning_36 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2000, 3600),
        **{
            "frame_rate": (comfy_math_expression_17, 0),
            "positive": (mgpu_text_encode_35, 0),
            "negative": (mgpu_text_encode_10, 0),
        },
    )
    cfg_guider_37 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (2330, 3580),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_36, 0),
            "negative": (ltxv_conditioning_36, 1),
        },
    )
    preview_any_38 = g.add("PreviewAny", {}, (1680, 2690), **{"source": (comfy_switch_node_34, 0)})
    resize_image_mask_node_39 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "lanczos"},
        (1350, 4570),
        **{"input": (resize_image_mask_node_30, 0)},
    )
    ltxv_preprocess_40 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1350, 4410), **{"image": (resize_image_mask_node_39, 0)}
    )
    ltxv_img_to_video_inplace_41 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (2060, 4410),
        **{
            "bypass": (primitive_boolean_13, 0),
            "vae": (checkpoint_loader_simple_27, 2),
            "image": (ltxv_preprocess_40, 0),
            "latent": (empty_ltxv_latent_video_22, 0),
        },
    )
    concat_av_latent_42 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3090, 4420),
        **{"video_latent": (ltxv_img_to_video_inplace_41, 0), "audio_latent": (set_latent_noise_mask_25, 0)},
    )
    sampler_custom_advanced_43 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2730, 3420),
        **{
            "noise": (random_noise_5, 0),
            "guider": (cfg_guider_37, 0),
            "sampler": (ksampler_select_8, 0),
            "sigmas": (manual_sigmas_9, 0),
            "latent_image": (concat_av_latent_42, 0),
        },
    )
    separate_av_latent_44 = g.add(
        "LTXVSeparateAVLatent", {}, (3070, 3430), **{"av_latent": (sampler_custom_advanced_43, 0)}
    )
    ltxv_crop_guides_45 = g.add(
        "LTXVCropGuides",
        {},
        (3070, 3610),
        **{
            "positive": (ltxv_conditioning_36, 0),
            "negative": (ltxv_conditioning_36, 1),
            "latent": (separate_av_latent_44, 0),
        },
    )
    cfg_guider_46 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (3970, 3580),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_crop_guides_45, 0),
            "negative": (ltxv_crop_guides_45, 1),
        },
    )
    ltxv_latent_upsampler_47 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3500, 3710),
        **{
            "samples": (separate_av_latent_44, 0),
            "upscale_model": (latent_upscale_model_loader_26, 0),
            "vae": (checkpoint_loader_simple_27, 2),
        },
    )
    ltxv_img_to_video_inplace_48 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (3520, 3870),
        **{
            "bypass": (primitive_boolean_13, 0),
            "vae": (checkpoint_loader_simple_27, 2),
            "image": (ltxv_preprocess_40, 0),
            "latent": (ltxv_latent_upsampler_47, 0),
        },
    )
    concat_av_latent_49 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3970, 4130),
        **{"video_latent": (ltxv_img_to_video_inplace_48, 0), "audio_latent": (separate_av_latent_44, 1)},
    )
    sampler_custom_advanced_50 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4310, 3440),
        **{
            "noise": (random_noise_4, 0),
            "guider": (cfg_guider_46, 0),
            "sampler": (ksampler_select_6, 0),
            "sigmas": (manual_sigmas_7, 0),
            "latent_image": (concat_av_latent_49, 0),
        },
    )
    separate_av_latent_51 = g.add(
        "LTXVSeparateAVLatent", {}, (4650, 3440), **{"av_latent": (sampler_custom_advanced_50, 0)}
    )
    ltxv_audio_vae_decode_52 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (4990, 3660),
        **{"samples": (separate_av_latent_51, 1), "audio_vae": (ltxv_audio_vae_loader_12, 0)},
    )
    distributed_vae_decode_53 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (4970, 3440),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (separate_av_latent_51, 0)},
    )
    create_video_54 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (4990, 4310),
        **{
            "fps": (comfy_math_expression_17, 0),
            "images": (distributed_vae_decode_53, 0),
            "audio": (ltxv_audio_vae_decode_52, 0),
        },
    )
    save_video_55 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_ia2v", "format": "auto", "codec": "auto"},
        (430, 3530),
        **{"video": (create_video_54, 0)},
    )
    return g


def template_23_flf2v() -> Graph:
    g = Graph("ltx2_3_mgpu_flf2v", DESCRIPTIONS["video_ltx2_3_flf2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (769, 2379),
    )
    load_image_2 = g.add("LoadImage", {"image": "low_view_classic_car.png"}, (0, 2889), "Load Last Frame")
    load_image_3 = g.add("LoadImage", {"image": "high_view_classic_car.png"}, (0, 2250), "Load First Frame")
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 315253765879496}, (1989, 2319))
    primitive_int_5 = g.add("PrimitiveInt", {"value": 5}, (760, 3650), "Duration")
    primitive_int_6 = g.add("PrimitiveInt", {"value": 25}, (760, 3800), "Frame Rate(int)")
    sampler_euler_ancestral_7 = g.add("SamplerEulerAncestral", {"eta": 0, "s_noise": 1}, (1989, 2719))
    manual_sigmas_8 = g.add(
        "ManualSigmas",
        {"sigmas": "1., 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (1989, 2909),
    )
    comfy_math_expression_9 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (760, 3970), **{"values.a": (primitive_int_6, 0)}
    )
    primitive_int_10 = g.add("PrimitiveInt", {"value": 1280}, (760, 3340), "Width")
    primitive_int_11 = g.add("PrimitiveInt", {"value": 720}, (760, 3490), "height")
    resize_image_mask_node_12 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1129, 3339),
        **{
            "resize_type.width": (primitive_int_10, 0),
            "resize_type.height": (primitive_int_11, 0),
            "input": (load_image_3, 0),
        },
    )
    ltxv_preprocess_13 = g.add(
        "LTXVPreprocess", {"img_compression": 25}, (1479, 3339), **{"image": (resize_image_mask_node_12, 0)}
    )
    get_image_size_14 = g.add("GetImageSize", {}, (1479, 3499), **{"image": (resize_image_mask_node_12, 0)})
    resize_image_mask_node_15 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1129, 3779),
        **{
            "resize_type.width": (primitive_int_10, 0),
            "resize_type.height": (primitive_int_11, 0),
            "input": (load_image_2, 0),
        },
    )
    ltxv_preprocess_16 = g.add(
        "LTXVPreprocess", {"img_compression": 25}, (1479, 3779), **{"image": (resize_image_mask_node_15, 0)}
    )
    mgpu_text_encode_17 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, wrong hand count, artifacts around text, unreadable text on shirt or hat, incorrect lettering on cap (“PNTR”), incorrect t-shirt slogan (“JUST DO IT”), missing microphone, misplaced microphone, inconsistent perspective, camera shake, incorrect depth of field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, smiling, laughing, exaggerated sadness, wrong gaze direction, eyes looking at camera, mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, off-sync audio, missing sniff sounds, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, missing door or shelves, missing shallow depth of field, flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1319, 2869),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    mgpu_text_encode_18 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "The camera move from a high position to a low position, keeping the character in the frame centered.\nMusic: Synthwave cyberpunk music with calm ambient synths and driving 80s beats.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1309, 2379),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    ltxv_conditioning_19 = g.add(
        "LTXVConditioning",
        {"frame_rate": 25},
        (2089, 3399),
        **{
            "frame_rate": (comfy_math_expression_9, 0),
            "positive": (mgpu_text_encode_18, 0),
            "negative": (mgpu_text_encode_17, 0),
        },
    )
    checkpoint_loader_simple_20 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (769, 2379)
    )
    ltxv_audio_vae_loader_21 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (769, 2659)
    )
    comfy_math_expression_22 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (760, 4020),
        **{"values.a": (primitive_int_5, 0), "values.b": (primitive_int_6, 0)},
    )
    ltxv_empty_latent_audio_23 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2089, 3819),
        **{
            "frames_number": (comfy_math_expression_22, 1),
            "frame_rate": (primitive_int_6, 0),
            "audio_vae": (ltxv_audio_vae_loader_21, 0),
        },
    )
    empty_ltxv_latent_video_24 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2089, 3579),
        **{
            "width": (get_image_size_14, 0),
            "height": (get_image_size_14, 1),
            "length": (comfy_math_expression_22, 1),
        },
    )
    ltxv_add_guide_25 = g.add(
        "LTXVAddGuide",
        {"frame_idx": 0, "strength": 0.7},
        (2749, 3429),
        **{
            "positive": (ltxv_conditioning_19, 0),
            "negative": (ltxv_conditioning_19, 1),
            "vae": (checkpoint_loader_simple_20, 2),
            "latent": (empty_ltxv_latent_video_24, 0),
            "image": (ltxv_preprocess_13, 0),
        },
    )
    ltxv_add_guide_26 = g.add(
        "LTXVAddGuide",
        {"frame_idx": -1, "strength": 0.7},
        (2749, 3699),
        **{
            "positive": (ltxv_add_guide_25, 0),
            "negative": (ltxv_add_guide_25, 1),
            "vae": (checkpoint_loader_simple_20, 2),
            "latent": (ltxv_add_guide_25, 2),
            "image": (ltxv_preprocess_16, 0),
        },
    )
    cfg_guider_27 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (1989, 2499),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_add_guide_26, 0),
            "negative": (ltxv_add_guide_26, 1),
        },
    )
    concat_av_latent_28 = g.add(
        "LTXVConcatAVLatent",
        {},
        (1989, 3089),
        **{"video_latent": (ltxv_add_guide_26, 2), "audio_latent": (ltxv_empty_latent_audio_23, 0)},
    )
    sampler_custom_advanced_29 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2459, 2329),
        **{
            "noise": (random_noise_4, 0),
            "guider": (cfg_guider_27, 0),
            "sampler": (sampler_euler_ancestral_7, 0),
            "sigmas": (manual_sigmas_8, 0),
            "latent_image": (concat_av_latent_28, 0),
        },
    )
    separate_av_latent_30 = g.add(
        "LTXVSeparateAVLatent", {}, (2459, 2579), **{"av_latent": (sampler_custom_advanced_29, 1)}
    )
    ltxv_crop_guides_31 = g.add(
        "LTXVCropGuides",
        {},
        (2819, 2449),
        **{
            "positive": (ltxv_add_guide_26, 0),
            "negative": (ltxv_add_guide_26, 1),
            "latent": (separate_av_latent_30, 0),
        },
    )
    distributed_vae_decode_32 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 64,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (2819, 2629),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (ltxv_crop_guides_31, 2)},
    )
    ltxv_audio_vae_decode_33 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (2819, 2919),
        **{"samples": (separate_av_latent_30, 1), "audio_vae": (ltxv_audio_vae_loader_21, 0)},
    )
    create_video_34 = g.add(
        "CreateVideo",
        {"fps": 24},
        (3279, 2319),
        **{
            "fps": (comfy_math_expression_9, 0),
            "images": (distributed_vae_decode_32, 0),
            "audio": (ltxv_audio_vae_decode_33, 0),
        },
    )
    save_video_35 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/ltx2.3_flf2v", "format": "auto", "codec": "auto"},
        (1129, 2259),
        **{"video": (create_video_34, 0)},
    )
    return g


def template_23_ic_lora() -> Graph:
    g = Graph("ltx2_3_mgpu_ic_lora", DESCRIPTIONS["video_ltx2_3_ic_lora"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (770, 2380),
    )
    primitive_int_2 = g.add("PrimitiveInt", {"value": 25}, (760, 3840), "Frame Rate(int)")
    comfy_math_expression_3 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (770, 4000), **{"values.a": (primitive_int_2, 0)}
    )
    primitive_int_4 = g.add("PrimitiveInt", {"value": 1280}, (760, 3340), "Width")
    primitive_int_5 = g.add("PrimitiveInt", {"value": 704}, (760, 3490), "height")
    mgpu_text_encode_6 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, wrong hand count, artifacts around text, unreadable text on shirt or hat, incorrect lettering on cap (“PNTR”), incorrect t-shirt slogan (“JUST DO IT”), missing microphone, misplaced microphone, inconsistent perspective, camera shake, incorrect depth of field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, smiling, laughing, exaggerated sadness, wrong gaze direction, eyes looking at camera, mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, off-sync audio, missing sniff sounds, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, missing door or shelves, missing shallow depth of field, flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1320, 2870),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    checkpoint_loader_simple_7 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (770, 2380)
    )
    ltxv_audio_vae_loader_8 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors"}, (770, 2590)
    )
    ltxav_text_encoder_loader_9 = g.add(
        "LTXAVTextEncoderLoader",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "ckpt_name": "ltx-2.3-22b-distilled-fp8.safetensors",
            "device": "default",
        },
        (770, 2750),
    )
    lora_loader_model_only_10 = g.add(
        "LoraLoaderModelOnly",
        {"lora_name": "ltx-2.3-22b-ic-lora-union-control-ref0.5.safetensors", "strength_model": 1},
        (750, 3020),
        **{"model": (mgpu_loader_1, 1)},
    )
    get_iclora_parameters_11 = g.add(
        "GetICLoRAParameters", {}, (1590, 3630), **{"iclora_model": (lora_loader_model_only_10, 0)}
    )
    lora_loader_12 = g.add(
        "LoraLoader",
        {
            "lora_name": "gemma-3-12b-it-abliterated_lora_rank64_bf16.safetensors",
            "strength_model": 1,
            "strength_clip": 1,
        },
        (770, 1570),
        **{"model": (mgpu_loader_1, 1), "clip": (ltxav_text_encoder_loader_9, 0)},
    )
    primitive_boolean_13 = g.add(
        "PrimitiveBoolean", {"value": False}, (770, 2050), "Boolean (Enable Prompt Enhance)"
    )
    load_video_14 = g.add("LoadVideo", {"file": "stone_ruins.mp4"}, (-660, 3030))
    load_image_15 = g.add("LoadImage", {"image": "the_forgotten_gate.png"}, (-660, 2320))
    text_generate_ltx2_prompt_16 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "A slow forward dolly shot on a bright, sunlit day in a lush jungle ruin. A lone figure in nature-themed armor stands before a weathered stone arch overgrown with ivy. A textured marble sphere wrapped in twisting vines levitates in the arch’s center, spinning slowly. As the camera glides forward, vines sway softly, leaves flutter in the light breeze. Strong golden sunlight streams through the canopy, illuminating the mossy ruins with bright, clear light. The scene feels vibrant and peaceful, with subtle natural motion.",
            "max_length": 2048,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.05,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1200, 1570),
        **{"clip": (lora_loader_12, 1), "image": (load_image_15, 0)},
    )
    prompt_text_17 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "A slow forward dolly shot on a bright, sunlit day in a lush jungle ruin. A lone figure in nature-themed armor stands before a weathered stone arch overgrown with ivy. A textured marble sphere wrapped in twisting vines levitates in the arch’s center, spinning slowly. As the camera glides forward, vines sway softly, leaves flutter in the light breeze. Strong golden sunlight streams through the canopy, illuminating the mossy ruins with bright, clear light. The scene feels vibrant and peaceful, with subtle natural motion."
        },
        (1330, 1980),
        "Prompt",
    )
    comfy_switch_node_17 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1730, 1980),
        **{
            "switch": (primitive_boolean_13, 0),
            "on_true": (text_generate_ltx2_prompt_16, 0),
            "on_false": (prompt_text_17, 0),
        },
    )
    mgpu_text_encode_18 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1310, 2380),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_17, 0)},
    )
    ltxv_conditioning_19 = g.add(
        "LTXVConditioning",
        {"frame_rate": 25},
        (1180, 3350),
        **{
            "frame_rate": (comfy_math_expression_3, 0),
            "positive": (mgpu_text_encode_18, 0),
            "negative": (mgpu_text_encode_6, 0),
        },
    )
    preview_any_20 = g.add("PreviewAny", {}, (2040, 1590), **{"source": (comfy_switch_node_17, 0)})
    video_slice_21 = g.add(
        "Video Slice",
        {"start_time": 0, "duration": 5, "strict_duration": False},
        (-100, 3030),
        **{"video": (load_video_14, 0)},
    )
    load_moge_model_22 = g.add(
        "LoadMoGeModel", {"model_name": "moge_2_vitl_normal_fp16.safetensors"}, (-4180, 4880)
    )
    get_video_components_23 = g.add("GetVideoComponents", {}, (-4920, 5490), **{"video": (video_slice_21, 0)})
    get_image_size_24 = g.add("GetImageSize", {}, (-4980, 4910), **{"image": (get_video_components_23, 0)})
    comfy_math_expression_25 = g.add(
        "ComfyMathExpression",
        {"expression": "a > 2048"},
        (-4720, 4910),
        **{"values.a": (get_image_size_24, 0)},
    )
    resize_image_mask_node_26 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 2048, "scale_method": "area"},
        (-4600, 5250),
        **{"input": (get_video_components_23, 0)},
    )
    comfy_switch_node_27 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (-4180, 5060),
        **{
            "switch": (comfy_math_expression_25, 2),
            "on_false": (get_video_components_23, 0),
            "on_true": (resize_image_mask_node_26, 0),
        },
    )
    comfy_switch_node_28 = g.add(
        "ComfySwitchNode",
        {"switch": True},
        (-4160, 5340),
        **{"on_false": (get_video_components_23, 0), "on_true": (comfy_switch_node_27, 0)},
    )
    moge_inference_29 = g.add(
        "MoGeInference",
        {
            "resolution_level": 9,
            "fov_x_degrees": 0,
            "batch_size": 4,
            "force_projection": True,
            "apply_mask": True,
        },
        (-3790, 5180),
        **{"moge_model": (load_moge_model_22, 0), "image": (comfy_switch_node_28, 0)},
    )
    moge_render_30 = g.add(
        "MoGeRender", {"output": "depth"}, (-3430, 5030), **{"moge_geometry": (moge_inference_29, 0)}
    )
    get_image_size_31 = g.add("GetImageSize", {}, (770, 3640), **{"image": (moge_render_30, 0)})
    ltxv_empty_latent_audio_32 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (1180, 3800),
        **{
            "frames_number": (get_image_size_31, 2),
            "frame_rate": (primitive_int_2, 0),
            "audio_vae": (ltxv_audio_vae_loader_8, 0),
        },
    )
    empty_ltxv_latent_video_33 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (1180, 3550),
        **{"width": (primitive_int_4, 0), "height": (primitive_int_5, 0), "length": (get_image_size_31, 2)},
    )
    ltxv_img_to_video_inplace_34 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (1590, 3380),
        **{
            "vae": (checkpoint_loader_simple_7, 2),
            "image": (load_image_15, 0),
            "latent": (empty_ltxv_latent_video_33, 0),
        },
    )
    ltxv_add_guide_35 = g.add(
        "LTXVAddGuide",
        {"frame_idx": 0, "strength": 1},
        (2030, 3360),
        **{
            "positive": (ltxv_conditioning_19, 0),
            "negative": (ltxv_conditioning_19, 1),
            "vae": (checkpoint_loader_simple_7, 2),
            "latent": (ltxv_img_to_video_inplace_34, 0),
            "image": (moge_render_30, 0),
            "iclora_parameters": (get_iclora_parameters_11, 0),
        },
    )
    concat_av_latent_36 = g.add(
        "LTXVConcatAVLatent",
        {},
        (2030, 2390),
        **{"video_latent": (ltxv_add_guide_35, 2), "audio_latent": (ltxv_empty_latent_audio_32, 0)},
    )
    ksampler_37 = g.add(
        "KSampler",
        {
            "seed": 0,
            "steps": 8,
            "cfg": 1,
            "sampler_name": "euler_ancestral",
            "scheduler": "linear_quadratic",
            "denoise": 1,
        },
        (2030, 2570),
        **{
            "model": (lora_loader_model_only_10, 0),
            "positive": (ltxv_add_guide_35, 0),
            "negative": (ltxv_add_guide_35, 1),
            "latent_image": (concat_av_latent_36, 0),
        },
    )
    separate_av_latent_38 = g.add("LTXVSeparateAVLatent", {}, (2040, 3010), **{"av_latent": (ksampler_37, 0)})
    ltxv_crop_guides_39 = g.add(
        "LTXVCropGuides",
        {},
        (2430, 2450),
        **{
            "positive": (ltxv_add_guide_35, 0),
            "negative": (ltxv_add_guide_35, 1),
            "latent": (separate_av_latent_38, 0),
        },
    )
    distributed_vae_decode_40 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 64,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (2430, 2630),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (ltxv_crop_guides_39, 2)},
    )
    ltxv_audio_vae_decode_41 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (2430, 2920),
        **{"samples": (separate_av_latent_38, 1), "audio_vae": (ltxv_audio_vae_loader_8, 0)},
    )
    create_video_42 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (2890, 2900),
        **{
            "fps": (comfy_math_expression_3, 0),
            "images": (distributed_vae_decode_40, 0),
            "audio": (ltxv_audio_vae_decode_41, 0),
        },
    )
    save_video_43 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/ltx2.3_ic_lora", "format": "auto", "codec": "auto"},
        (1150, 2300),
        **{"video": (create_video_42, 0)},
    )
    return g


def template_23_id_lora() -> Graph:
    g = Graph("ltx2_3_mgpu_id_lora", DESCRIPTIONS["video_ltx2_3_id_lora"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "ltx_2.3_22b_distilled_1.1_lora_dynamic_fro09_avg_rank_111_bf16.safetensors",
            "lora_strength": 0.5,
            "video_vae_name": "(from the checkpoint)",
            "audio_vae_name": "(from the checkpoint)",
        },
        (880, 3440),
    )
    load_image_2 = g.add("LoadImage", {"image": "vintage_thinker.png"}, (-440, 3530))
    load_audio_3 = g.add("LoadAudio", {"audio": "ltx23_reference_audio.mp3"}, (-440, 4070))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 42}, (4230, 3420))
    random_noise_5 = g.add("RandomNoise", {"noise_seed": 597157848195547}, (2590, 3420))
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (4230, 3760))
    manual_sigmas_7 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (4240, 3900))
    ksampler_select_8 = g.add("KSamplerSelect", {"sampler_name": "euler"}, (2600, 3800))
    manual_sigmas_9 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2610, 4020),
    )
    mgpu_text_encode_10 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1400, 3910),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 1280}, (410, 3890), "Width")
    ltxv_audio_vae_loader_12 = g.add(
        "LTXVAudioVAELoader", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (890, 4110)
    )
    comfy_math_expression_13 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2310, 4490), **{"values.a": (primitive_int_11, 0)}
    )
    primitive_float_14 = g.add("PrimitiveFloat", {"value": 10}, (410, 4420), "Duration")
    primitive_int_15 = g.add("PrimitiveInt", {"value": 25}, (410, 4240), "Frame Rate")
    comfy_math_expression_16 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (2290, 4320), **{"values.a": (primitive_int_15, 0)}
    )
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (2310, 4590),
        **{"values.a": (primitive_float_14, 0), "values.b": (primitive_int_15, 0)},
    )
    primitive_int_18 = g.add("PrimitiveInt", {"value": 720}, (410, 4070), "Height")
    comfy_math_expression_19 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (2310, 4540), **{"values.a": (primitive_int_18, 0)}
    )
    empty_ltxv_latent_video_20 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2600, 4510),
        **{
            "width": (comfy_math_expression_13, 1),
            "height": (comfy_math_expression_19, 1),
            "length": (comfy_math_expression_17, 1),
        },
    )
    latent_upscale_model_loader_21 = g.add(
        "LatentUpscaleModelLoader", {"model_name": "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"}, (890, 4570)
    )
    checkpoint_loader_simple_22 = g.add(
        "CheckpointLoaderSimple", {"ckpt_name": "ltx-2.3-22b-dev-fp8.safetensors"}, (880, 3440)
    )
    primitive_string_multiline_23 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "[VISUAL]: Opens with a medium shot, camera slowly pushes in toward the character. A man with short dark hair and round glasses, wearing a retro orange floral shirt, looks directly at the camera, his mouth opens and closes naturally as he speaks, tilts his head playfully.\n[SPEECH]: Hey, what do you think of this vibe? Feels like we’re back in the 90s.\n[SOUNDS]: Playful and upbeat tone, moderate volume, close to the microphone. "
        },
        (400, 3460),
        "Prompt",
    )
    mgpu_text_encode_24 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma_3_12B_it_fp4_mixed.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1400, 3430),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (primitive_string_multiline_23, 0)},
    )
    resize_image_mask_node_25 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 1920,
            "resize_type.height": 1088,
            "resize_type.crop": "center",
            "scale_method": "lanczos",
        },
        (1430, 4300),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_18, 0),
            "input": (load_image_2, 0),
        },
    )
    lora_loader_model_only_26 = g.add(
        "LoraLoaderModelOnly",
        {"lora_name": "ltx-2.3-id-lora-talkvid-3k.safetensors", "strength_model": 1},
        (880, 3870),
        **{"model": (mgpu_loader_1, 1)},
    )
    ltxv_empty_latent_audio_27 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2930, 4520),
        **{
            "frames_number": (comfy_math_expression_17, 1),
            "frame_rate": (comfy_math_expression_16, 1),
            "audio_vae": (ltxv_audio_vae_loader_12, 0),
        },
    )
    ltxv_reference_audio_28 = g.add(
        "LTXVReferenceAudio",
        {"identity_guidance_scale": 3, "start_percent": 0, "end_percent": 1},
        (2170, 3560),
        **{
            "model": (lora_loader_model_only_26, 0),
            "positive": (mgpu_text_encode_24, 0),
            "negative": (mgpu_text_encode_10, 0),
            "reference_audio": (load_audio_3, 0),
            "audio_vae": (ltxv_audio_vae_loader_12, 0),
        },
    )
    ltxv_conditioning_29 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (2180, 3880),
        **{
            "frame_rate": (comfy_math_expression_16, 0),
            "positive": (ltxv_reference_audio_28, 1),
            "negative": (ltxv_reference_audio_28, 2),
        },
    )
    cfg_guider_30 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (2590, 3580),
        **{
            "model": (ltxv_reference_audio_28, 0),
            "positive": (ltxv_conditioning_29, 0),
            "negative": (ltxv_conditioning_29, 1),
        },
    )
    resize_image_mask_node_31 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "lanczos"},
        (1820, 4300),
        **{"input": (resize_image_mask_node_25, 0)},
    )
    ltxv_preprocess_32 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1820, 4520), **{"image": (resize_image_mask_node_31, 0)}
    )
    ltxv_img_to_video_inplace_33 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (2600, 4290),
        **{
            "vae": (checkpoint_loader_simple_22, 2),
            "image": (ltxv_preprocess_32, 0),
            "latent": (empty_ltxv_latent_video_20, 0),
        },
    )
    concat_av_latent_34 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3340, 4280),
        **{
            "video_latent": (ltxv_img_to_video_inplace_33, 0),
            "audio_latent": (ltxv_empty_latent_audio_27, 0),
        },
    )
    sampler_custom_advanced_35 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2990, 3420),
        **{
            "noise": (random_noise_5, 0),
            "guider": (cfg_guider_30, 0),
            "sampler": (ksampler_select_8, 0),
            "sigmas": (manual_sigmas_9, 0),
            "latent_image": (concat_av_latent_34, 0),
        },
    )
    separate_av_latent_36 = g.add(
        "LTXVSeparateAVLatent", {}, (3330, 3430), **{"av_latent": (sampler_custom_advanced_35, 0)}
    )
    ltxv_crop_guides_37 = g.add(
        "LTXVCropGuides",
        {},
        (3330, 3610),
        **{
            "positive": (ltxv_conditioning_29, 0),
            "negative": (ltxv_conditioning_29, 1),
            "latent": (separate_av_latent_36, 0),
        },
    )
    cfg_guider_38 = g.add(
        "CFGGuider",
        {"cfg": 1},
        (4230, 3570),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_crop_guides_37, 0),
            "negative": (ltxv_crop_guides_37, 1),
        },
    )
    ltxv_latent_upsampler_39 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3750, 3430),
        **{
            "samples": (separate_av_latent_36, 0),
            "upscale_model": (latent_upscale_model_loader_21, 0),
            "vae": (checkpoint_loader_simple_22, 2),
        },
    )
    ltxv_img_to_video_inplace_40 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (3770, 3930),
        **{
            "vae": (checkpoint_loader_simple_22, 2),
            "image": (ltxv_preprocess_32, 0),
            "latent": (ltxv_latent_upsampler_39, 0),
        },
    )
    concat_av_latent_41 = g.add(
        "LTXVConcatAVLatent",
        {},
        (4240, 4050),
        **{"video_latent": (ltxv_img_to_video_inplace_40, 0), "audio_latent": (separate_av_latent_36, 1)},
    )
    sampler_custom_advanced_42 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4570, 3440),
        **{
            "noise": (random_noise_4, 0),
            "guider": (cfg_guider_38, 0),
            "sampler": (ksampler_select_6, 0),
            "sigmas": (manual_sigmas_7, 0),
            "latent_image": (concat_av_latent_41, 0),
        },
    )
    separate_av_latent_43 = g.add(
        "LTXVSeparateAVLatent", {}, (4600, 3780), **{"av_latent": (sampler_custom_advanced_42, 0)}
    )
    ltxv_audio_vae_decode_44 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (3830, 4580),
        **{"samples": (separate_av_latent_43, 1), "audio_vae": (ltxv_audio_vae_loader_12, 0)},
    )
    distributed_vae_decode_45 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 768,
            "overlap": 64,
            "temporal_size": 4096,
            "temporal_overlap": 4,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (3840, 4310),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (separate_av_latent_43, 0)},
    )
    create_video_46 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (4560, 4400),
        **{
            "fps": (comfy_math_expression_16, 0),
            "images": (distributed_vae_decode_45, 0),
            "audio": (ltxv_audio_vae_decode_44, 0),
        },
    )
    save_video_47 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.3_id_lora", "format": "auto", "codec": "auto"},
        (430, 3530),
        **{"video": (create_video_46, 0)},
    )
    return g


def template_25_t2v() -> Graph:
    g = Graph("ltx2_5_mgpu_t2v", DESCRIPTIONS["video_ltx2_5_t2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "ltx-2.5-video-vae-bf16.safetensors",
            "audio_vae_name": "ltx-2.5-audio-vae-bf16.safetensors",
        },
        (640, 6190),
    )
    manual_sigmas_2 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (3700, 6930))
    ksampler_select_3 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (3710, 6560))
    random_noise_4 = g.add("RandomNoise", {"noise_seed": 42}, (3710, 6150))
    manual_sigmas_5 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2190, 6910),
    )
    ksampler_select_6 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (2190, 6730))
    random_noise_7 = g.add("RandomNoise", {"noise_seed": 558811532553686}, (2190, 6300))
    mgpu_text_encode_8 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1170, 6880),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    latent_upscale_model_loader_9 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"},
        (630, 6980),
    )
    vae_loader_10 = g.add("VAELoader", {"vae_name": "ltx-2.5-video-vae-bf16.safetensors"}, (640, 6420))
    vae_loader_11 = g.add("VAELoader", {"vae_name": "ltx-2.5-audio-vae-bf16.safetensors"}, (640, 6590))
    primitive_int_12 = g.add("PrimitiveInt", {"value": 24}, (150, 7070), "Frame Rate")
    comfy_math_expression_13 = g.add(
        "ComfyMathExpression",
        {"expression": "a"},
        (660, 7670),
        "Math Expression (fps)",
        **{"values.a": (primitive_int_12, 0)},
    )
    primitive_int_14 = g.add("PrimitiveInt", {"value": 5}, (150, 6510), "Duration")
    comfy_math_expression_15 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (670, 7770),
        "Math Expression (length)",
        **{"values.a": (primitive_int_14, 0), "values.b": (primitive_int_12, 0)},
    )
    ltxv_empty_latent_audio_16 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (1190, 7660),
        **{
            "frames_number": (comfy_math_expression_15, 1),
            "frame_rate": (comfy_math_expression_13, 1),
            "audio_vae": (vae_loader_11, 0),
        },
    )
    primitive_string_multiline_17 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": 'A close-up of an Arctic hunter\'s face, his eyes fixed straight ahead, narrowed and locked on something in the far distance directly in front of him, frost dusting his dark beard, one hand slowly reaching toward the rifle slung on his back, his breath quick and shallow, the tension in his jaw visible even through the scarf. The camera slowly pulls back, revealing him crouched at the edge of an ice floe, and ahead of him, in the exact direction of his gaze, a polar bear moves slowly along a distant ice ridge, its pale coat blending into the white haze, facing toward him. The pull-back continues, the hunter in the foreground and the bear far ahead, the two facing each other across the dark lead of water, the ice field and grey sea stretching around them, seabirds wheeling overhead. Midway through the shot, the complete title "LTX-2.5" fades in large and centered, plain white sans-serif letters with wide spacing, no glow, no shadow, no ornament, the lettering large enough to dominate the center of the frame, emerging slowly from the mist, resting still and blending into the snowscape, with the hunter and the bear still visible below on either side of the title, staying through the end of the scene. The wind carries the distant sound of shifting ice, a single low growl rolling across the water.'
        },
        (150, 6080),
        "Prompt",
    )
    clip_loader_18 = g.add(
        "CLIPLoader",
        {"clip_name": "gemma4_e2b_it_int8_convrot.safetensors", "type": "ltxv", "device": "default"},
        (120, 5290),
    )
    text_generate_ltx2_prompt_19 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 600,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.15,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (570, 5280),
        **{"prompt": (primitive_string_multiline_17, 0), "clip": (clip_loader_18, 0)},
    )
    primitive_boolean_20 = g.add(
        "PrimitiveBoolean", {"value": False}, (140, 5760), "Boolean (Enable Prompt Enhance)"
    )
    comfy_switch_node_21 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1100, 5690),
        **{
            "switch": (primitive_boolean_20, 0),
            "on_false": (primitive_string_multiline_17, 0),
            "on_true": (text_generate_ltx2_prompt_19, 0),
        },
    )
    mgpu_text_encode_22 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1160, 6040),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_21, 0)},
    )
    ltxv_conditioning_23 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (1780, 6070),
        **{
            "frame_rate": (comfy_math_expression_13, 0),
            "positive": (mgpu_text_encode_22, 0),
            "negative": (mgpu_text_encode_8, 0),
        },
    )
    dual_cfg_guider_24 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (3710, 6310),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_23, 0),
            "negative": (ltxv_conditioning_23, 1),
        },
    )
    dual_cfg_guider_25 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (2190, 6490),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_23, 0),
            "negative": (ltxv_conditioning_23, 1),
        },
    )
    preview_any_26 = g.add("PreviewAny", {}, (1410, 5300), **{"source": (comfy_switch_node_21, 0)})
    resolution_selector_27 = g.add(
        "ResolutionSelector",
        {"aspect_ratio": "16:9 (Widescreen)", "megapixels": 0.9, "multiple": 32},
        (2140, 6810),
    )
    primitive_int_28 = g.add(
        "PrimitiveInt", {"value": 720}, (150, 6880), "Height", **{"value": (resolution_selector_27, 1)}
    )
    comfy_math_expression_29 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (660, 7530), **{"values.a": (primitive_int_28, 0)}
    )
    primitive_int_30 = g.add(
        "PrimitiveInt", {"value": 1280}, (150, 6690), "Width", **{"value": (resolution_selector_27, 0)}
    )
    comfy_math_expression_31 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (660, 7470), **{"values.a": (primitive_int_30, 0)}
    )
    empty_ltxv_latent_video_32 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (1200, 7360),
        **{
            "width": (comfy_math_expression_31, 1),
            "height": (comfy_math_expression_29, 1),
            "length": (comfy_math_expression_15, 1),
        },
    )
    concat_av_latent_33 = g.add(
        "LTXVConcatAVLatent",
        {},
        (1630, 7490),
        **{"video_latent": (empty_ltxv_latent_video_32, 0), "audio_latent": (ltxv_empty_latent_audio_16, 0)},
    )
    sampler_custom_advanced_34 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2870, 6300),
        **{
            "noise": (random_noise_7, 0),
            "guider": (dual_cfg_guider_25, 0),
            "sampler": (ksampler_select_6, 0),
            "sigmas": (manual_sigmas_5, 0),
            "latent_image": (concat_av_latent_33, 0),
        },
    )
    separate_av_latent_35 = g.add(
        "LTXVSeparateAVLatent", {}, (2870, 6670), **{"av_latent": (sampler_custom_advanced_34, 0)}
    )
    ltxv_latent_upsampler_36 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3250, 6470),
        **{
            "samples": (separate_av_latent_35, 0),
            "upscale_model": (latent_upscale_model_loader_9, 0),
            "vae": (vae_loader_10, 0),
        },
    )
    concat_av_latent_37 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3710, 6760),
        **{"video_latent": (ltxv_latent_upsampler_36, 0), "audio_latent": (separate_av_latent_35, 1)},
    )
    sampler_custom_advanced_38 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4090, 6150),
        **{
            "noise": (random_noise_4, 0),
            "guider": (dual_cfg_guider_24, 0),
            "sampler": (ksampler_select_3, 0),
            "sigmas": (manual_sigmas_2, 0),
            "latent_image": (concat_av_latent_37, 0),
        },
    )
    separate_av_latent_39 = g.add(
        "LTXVSeparateAVLatent", {}, (4400, 6150), **{"av_latent": (sampler_custom_advanced_38, 0)}
    )
    ltxv_audio_vae_decode_40 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (4750, 6350),
        **{"samples": (separate_av_latent_39, 1), "audio_vae": (vae_loader_11, 0)},
    )
    distributed_vae_decode_41 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 512,
            "overlap": 64,
            "temporal_size": 64,
            "temporal_overlap": 16,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (4750, 6050),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (separate_av_latent_39, 0)},
    )
    create_video_42 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (4730, 7010),
        **{
            "fps": (comfy_math_expression_13, 0),
            "images": (distributed_vae_decode_41, 0),
            "audio": (ltxv_audio_vae_decode_40, 0),
        },
    )
    save_video_43 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX_2.5_t2v", "format": "auto", "codec": "auto"},
        (3000, 6550),
        **{"video": (create_video_42, 0)},
    )
    return g


def template_25_i2v() -> Graph:
    g = Graph("ltx2_5_mgpu_i2v", DESCRIPTIONS["video_ltx2_5_i2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "ltx-2.5-video-vae-bf16.safetensors",
            "audio_vae_name": "ltx-2.5-audio-vae-bf16.safetensors",
        },
        (650, 6200),
    )
    load_image_2 = g.add("LoadImage", {"image": "neon_cyborg_portrait.png"}, (1420, 6400), "Load First Frame")
    clip_loader_3 = g.add(
        "CLIPLoader",
        {"clip_name": "gemma4_e2b_it_int8_convrot.safetensors", "type": "ltxv", "device": "default"},
        (120, 5290),
    )
    primitive_boolean_4 = g.add(
        "PrimitiveBoolean", {"value": False}, (140, 5760), "Boolean (Enable Prompt Enhance)"
    )
    primitive_string_multiline_5 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Use the provided start image as the first frame. The cybernetic figure slowly turns his head to the right, his glowing blue eyes scanning the horizon, mechanical joints in his neck whirring faintly. The camera follows his gaze, panning across the rooftop to reveal the city beyond: a river of light winding between dark towers, a flying vehicle gliding past between the buildings, its lights streaking. He watches it pass, then his eyes narrow slightly. The camera settles on his profile against the city glow, distant hover traffic humming, wind gusting across the rooftop. No text, no black frames."
        },
        (150, 6080),
        "Prompt",
    )
    primitive_int_6 = g.add("PrimitiveInt", {"value": 5}, (150, 6630), "Duration")
    primitive_boolean_7 = g.add("PrimitiveBoolean", {"value": False}, (160, 6480), "Switch to Text to Video?")
    vae_loader_8 = g.add("VAELoader", {"vae_name": "ltx-2.5-video-vae-bf16.safetensors"}, (650, 6410))
    vae_loader_9 = g.add("VAELoader", {"vae_name": "ltx-2.5-audio-vae-bf16.safetensors"}, (650, 6560))
    mgpu_text_encode_10 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "text": "pc game, console game, video game, cartoon, childish, ugly",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1170, 6880),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    ksampler_select_11 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (2190, 6750))
    random_noise_12 = g.add("RandomNoise", {"noise_seed": 875362541677469}, (2190, 6300))
    manual_sigmas_13 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (2170, 6920),
    )
    primitive_int_14 = g.add("PrimitiveInt", {"value": 24}, (150, 7080), "Frame Rate")
    latent_upscale_model_loader_15 = g.add(
        "LatentUpscaleModelLoader",
        {"model_name": "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"},
        (650, 6930),
    )
    resize_image_mask_node_16 = g.add(
        "ResizeImageMaskNode",
        {"resize_type": "scale longer dimension", "resize_type.longer_size": 1536, "scale_method": "lanczos"},
        (190, 7480),
        **{"input": (load_image_2, 0)},
    )
    ltxv_preprocess_17 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (620, 7480), **{"image": (resize_image_mask_node_16, 0)}
    )
    text_generate_ltx2_prompt_18 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 600,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.15,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (570, 5280),
        **{
            "prompt": (primitive_string_multiline_5, 0),
            "clip": (clip_loader_3, 0),
            "image": (ltxv_preprocess_17, 0),
        },
    )
    comfy_switch_node_19 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1100, 5690),
        **{
            "switch": (primitive_boolean_4, 0),
            "on_false": (primitive_string_multiline_5, 0),
            "on_true": (text_generate_ltx2_prompt_18, 0),
        },
    )
    mgpu_text_encode_20 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1160, 6040),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_19, 0)},
    )
    preview_any_21 = g.add("PreviewAny", {}, (1410, 5300), **{"source": (comfy_switch_node_19, 0)})
    comfy_math_expression_22 = g.add(
        "ComfyMathExpression",
        {"expression": "a"},
        (1170, 7670),
        "Math Expression (fps)",
        **{"values.a": (primitive_int_14, 0)},
    )
    ltxv_conditioning_23 = g.add(
        "LTXVConditioning",
        {"frame_rate": 24},
        (1810, 6480),
        **{
            "frame_rate": (comfy_math_expression_22, 0),
            "positive": (mgpu_text_encode_20, 0),
            "negative": (mgpu_text_encode_10, 0),
        },
    )
    dual_cfg_guider_24 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (2200, 6460),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_23, 0),
            "negative": (ltxv_conditioning_23, 1),
        },
    )
    comfy_math_expression_25 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1180, 7770),
        "Math Expression (length)",
        **{"values.a": (primitive_int_6, 0), "values.b": (primitive_int_14, 0)},
    )
    ltxv_empty_latent_audio_26 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (1620, 7370),
        **{
            "frames_number": (comfy_math_expression_25, 1),
            "frame_rate": (comfy_math_expression_22, 1),
            "audio_vae": (vae_loader_9, 0),
        },
    )
    random_noise_27 = g.add("RandomNoise", {"noise_seed": 42}, (3710, 6150))
    manual_sigmas_28 = g.add("ManualSigmas", {"sigmas": "0.85, 0.7250, 0.4219, 0.0"}, (3710, 6980))
    dual_cfg_guider_29 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (3710, 6310),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_conditioning_23, 0),
            "negative": (ltxv_conditioning_23, 1),
        },
    )
    ksampler_select_30 = g.add("KSamplerSelect", {"sampler_name": "euler_ancestral"}, (3710, 6560))
    resolution_selector_31 = g.add(
        "ResolutionSelector",
        {"aspect_ratio": "16:9 (Widescreen)", "megapixels": 0.9, "multiple": 32},
        (1550, 7210),
    )
    primitive_int_32 = g.add(
        "PrimitiveInt", {"value": 1280}, (150, 6780), "Width", **{"value": (resolution_selector_31, 0)}
    )
    primitive_int_33 = g.add(
        "PrimitiveInt", {"value": 720}, (150, 6930), "Height", **{"value": (resolution_selector_31, 1)}
    )
    comfy_math_expression_34 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1170, 7470), **{"values.a": (primitive_int_32, 0)}
    )
    comfy_math_expression_35 = g.add(
        "ComfyMathExpression", {"expression": "a/2"}, (1170, 7530), **{"values.a": (primitive_int_33, 0)}
    )
    empty_ltxv_latent_video_36 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (1630, 7600),
        **{
            "width": (comfy_math_expression_34, 1),
            "height": (comfy_math_expression_35, 1),
            "length": (comfy_math_expression_25, 1),
        },
    )
    ltxv_img_to_video_inplace_37 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 0.7, "bypass": False},
        (2070, 7390),
        **{
            "bypass": (primitive_boolean_7, 0),
            "vae": (vae_loader_8, 0),
            "image": (ltxv_preprocess_17, 0),
            "latent": (empty_ltxv_latent_video_36, 0),
        },
    )
    concat_av_latent_38 = g.add(
        "LTXVConcatAVLatent",
        {},
        (2470, 7390),
        **{
            "video_latent": (ltxv_img_to_video_inplace_37, 0),
            "audio_latent": (ltxv_empty_latent_audio_26, 0),
        },
    )
    sampler_custom_advanced_39 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2610, 6510),
        **{
            "noise": (random_noise_12, 0),
            "guider": (dual_cfg_guider_24, 0),
            "sampler": (ksampler_select_11, 0),
            "sigmas": (manual_sigmas_13, 0),
            "latent_image": (concat_av_latent_38, 0),
        },
    )
    separate_av_latent_40 = g.add(
        "LTXVSeparateAVLatent", {}, (2890, 6520), **{"av_latent": (sampler_custom_advanced_39, 0)}
    )
    ltxv_latent_upsampler_41 = g.add(
        "LTXVLatentUpsampler",
        {},
        (3260, 6410),
        **{
            "samples": (separate_av_latent_40, 0),
            "upscale_model": (latent_upscale_model_loader_15, 0),
            "vae": (vae_loader_8, 0),
        },
    )
    ltxv_img_to_video_inplace_42 = g.add(
        "LTXVImgToVideoInplace",
        {"strength": 1, "bypass": False},
        (3270, 6620),
        **{
            "bypass": (primitive_boolean_7, 0),
            "vae": (vae_loader_8, 0),
            "image": (ltxv_preprocess_17, 0),
            "latent": (ltxv_latent_upsampler_41, 0),
        },
    )
    concat_av_latent_43 = g.add(
        "LTXVConcatAVLatent",
        {},
        (3710, 6760),
        **{"video_latent": (ltxv_img_to_video_inplace_42, 0), "audio_latent": (separate_av_latent_40, 1)},
    )
    sampler_custom_advanced_44 = g.add(
        "SamplerCustomAdvanced",
        {},
        (4070, 6500),
        **{
            "noise": (random_noise_27, 0),
            "guider": (dual_cfg_guider_29, 0),
            "sampler": (ksampler_select_30, 0),
            "sigmas": (manual_sigmas_28, 0),
            "latent_image": (concat_av_latent_43, 0),
        },
    )
    separate_av_latent_45 = g.add(
        "LTXVSeparateAVLatent", {}, (4370, 6500), **{"av_latent": (sampler_custom_advanced_44, 0)}
    )
    distributed_vae_decode_46 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 512,
            "overlap": 64,
            "temporal_size": 64,
            "temporal_overlap": 16,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (4760, 6360),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (separate_av_latent_45, 0)},
    )
    ltxv_audio_vae_decode_47 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (4760, 6650),
        **{"samples": (separate_av_latent_45, 1), "audio_vae": (vae_loader_9, 0)},
    )
    create_video_48 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (5200, 6460),
        **{
            "fps": (comfy_math_expression_22, 0),
            "images": (distributed_vae_decode_46, 0),
            "audio": (ltxv_audio_vae_decode_47, 0),
        },
    )
    save_video_49 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/LTX-2.5_i2v", "format": "auto", "codec": "auto"},
        (2540, 6400),
        **{"video": (create_video_48, 0)},
    )
    return g


def template_25_flf2v() -> Graph:
    g = Graph("ltx2_5_mgpu_flf2v", DESCRIPTIONS["video_ltx2_5_flf2v"])
    mgpu_loader_1 = g.add(
        "LTX2MGPULoader",
        {
            "ckpt_name": "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors",
            "gpus": "all",
            "weight_dtype": "bfloat16",
            "max_video_tokens": 32768,
            "mode": "comfyui",
            "compile_blocks": False,
            "fp8_matmul": False,
            "guidance_parallel": "off",
            "lora_name": "None",
            "lora_strength": 1.0,
            "video_vae_name": "ltx-2.5-video-vae-bf16.safetensors",
            "audio_vae_name": "ltx-2.5-audio-vae-bf16.safetensors",
        },
        (690, 1970),
    )
    load_image_2 = g.add("LoadImage", {"image": "robot_hand_energy.png"}, (1300, 2950), "Load Last Frame")
    manual_sigmas_3 = g.add(
        "ManualSigmas",
        {"sigmas": "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"},
        (1900, 2460),
    )
    sampler_euler_ancestral_4 = g.add("SamplerEulerAncestral", {"eta": 0, "s_noise": 1}, (1910, 2240))
    random_noise_5 = g.add("RandomNoise", {"noise_seed": 873293130933086}, (1910, 1840))
    mgpu_text_encode_6 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "text": "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, wrong hand count, artifacts around text, unreadable text on shirt or hat, incorrect lettering on cap (“PNTR”), incorrect t-shirt slogan (“JUST DO IT”), missing microphone, misplaced microphone, inconsistent perspective, camera shake, incorrect depth of field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, smiling, laughing, exaggerated sadness, wrong gaze direction, eyes looking at camera, mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, off-sync audio, missing sniff sounds, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, missing door or shelves, missing shallow depth of field, flat lighting, inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts.",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1220, 2450),
        **{"mgpu_model": (mgpu_loader_1, 0)},
    )
    vae_loader_7 = g.add("VAELoader", {"vae_name": "ltx-2.5-video-vae-bf16.safetensors"}, (690, 2130))
    vae_loader_8 = g.add("VAELoader", {"vae_name": "ltx-2.5-audio-vae-bf16.safetensors"}, (690, 2280))
    clip_loader_9 = g.add(
        "CLIPLoader",
        {"clip_name": "gemma4_e2b_it_int8_convrot.safetensors", "type": "ltxv", "device": "default"},
        (670, 1110),
    )
    primitive_boolean_10 = g.add(
        "PrimitiveBoolean", {"value": False}, (690, 1580), "Boolean (Enable Prompt Enhance)"
    )
    primitive_int_11 = g.add("PrimitiveInt", {"value": 1280}, (1180, 2860), "Width")
    primitive_int_12 = g.add("PrimitiveInt", {"value": 720}, (1180, 3010), "height")
    resize_image_mask_node_13 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1560, 3300),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_12, 0),
            "input": (load_image_2, 0),
        },
    )
    ltxv_preprocess_14 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1910, 3300), **{"image": (resize_image_mask_node_13, 0)}
    )
    primitive_int_15 = g.add("PrimitiveInt", {"value": 5}, (1180, 3160), "Duration")
    primitive_int_16 = g.add("PrimitiveInt", {"value": 24}, (1180, 3320), "Frame Rate(int)")
    comfy_math_expression_17 = g.add(
        "ComfyMathExpression", {"expression": "a"}, (1180, 3490), **{"values.a": (primitive_int_16, 0)}
    )
    comfy_math_expression_18 = g.add(
        "ComfyMathExpression",
        {"expression": "a * b + 1"},
        (1180, 3550),
        **{"values.a": (primitive_int_15, 0), "values.b": (primitive_int_16, 0)},
    )
    ltxv_empty_latent_audio_19 = g.add(
        "LTXVEmptyLatentAudio",
        {"frames_number": 97, "frame_rate": 25, "batch_size": 1},
        (2380, 3350),
        **{
            "frames_number": (comfy_math_expression_18, 1),
            "frame_rate": (primitive_int_16, 0),
            "audio_vae": (vae_loader_8, 0),
        },
    )
    primitive_string_multiline_20 = g.add(
        "PrimitiveStringMultiline",
        {
            "value": "Use the provided start image as the first frame and the provided end image as the final frame anchor. The video opens on the back of the robotic hand, four fingers slightly curled, joints glowing faintly in the darkness, a low electrical hum filling the space. The hand rotates slowly at the wrist, turning from the back view toward the palm side, the four visible fingers uncurling gently one by one, starting with the index finger, then the middle, ring, and pinky, each joint clicking softly. As the palm turns upward, the thumb swings out from the side of the hand into view, clearly separate from the four fingers, all five fingers spreading open. A blue energy crystal fades into existence above the palm, its hum rising into a resonant tone, thin energy threads coiling around it, particles crackling softly as they spiral away like sparks. The crystal rotates slowly, hovering above the fully open hand, light spilling between the five spread fingers, the crystal's steady hum filling the silence as the video ends on the open palm with the glowing crystal.\n"
        },
        (690, 2870),
        "Prompt",
    )
    load_image_21 = g.add("LoadImage", {"image": "robot_hand.png"}, (1300, 2310), "Load First Frame")
    resize_image_mask_node_22 = g.add(
        "ResizeImageMaskNode",
        {
            "resize_type": "scale dimensions",
            "resize_type.width": 640,
            "resize_type.height": 360,
            "resize_type.crop": "center",
            "scale_method": "nearest-exact",
        },
        (1560, 2860),
        **{
            "resize_type.width": (primitive_int_11, 0),
            "resize_type.height": (primitive_int_12, 0),
            "input": (load_image_21, 0),
        },
    )
    get_image_size_23 = g.add("GetImageSize", {}, (1910, 3020), **{"image": (resize_image_mask_node_22, 0)})
    empty_ltxv_latent_video_24 = g.add(
        "EmptyLTXVLatentVideo",
        {"width": 768, "height": 512, "length": 97, "batch_size": 1},
        (2380, 3110),
        **{
            "width": (get_image_size_23, 0),
            "height": (get_image_size_23, 1),
            "length": (comfy_math_expression_18, 1),
        },
    )
    ltxv_preprocess_25 = g.add(
        "LTXVPreprocess", {"img_compression": 18}, (1910, 2860), **{"image": (resize_image_mask_node_22, 0)}
    )
    text_generate_ltx2_prompt_26 = g.add(
        "TextGenerateLTX2Prompt",
        {
            "prompt": "",
            "max_length": 600,
            "sampling_mode": "on",
            "sampling_mode.temperature": 0.7,
            "sampling_mode.top_k": 64,
            "sampling_mode.top_p": 0.95,
            "sampling_mode.min_p": 0.05,
            "sampling_mode.repetition_penalty": 1.15,
            "sampling_mode.seed": 0,
            "sampling_mode.presence_penalty": 0,
            "thinking": False,
            "use_default_template": True,
        },
        (1120, 1100),
        **{
            "prompt": (primitive_string_multiline_20, 0),
            "clip": (clip_loader_9, 0),
            "image": (ltxv_preprocess_25, 0),
        },
    )
    comfy_switch_node_27 = g.add(
        "ComfySwitchNode",
        {"switch": False},
        (1650, 1510),
        **{
            "switch": (primitive_boolean_10, 0),
            "on_false": (primitive_string_multiline_20, 0),
            "on_true": (text_generate_ltx2_prompt_26, 0),
        },
    )
    mgpu_text_encode_28 = g.add(
        "LTX2MGPUTextEncode",
        {
            "text_encoder": "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors",
            "placement": "auto",
            "lora_name": "None",
            "lora_strength": 1.0,
        },
        (1200, 1880),
        **{"mgpu_model": (mgpu_loader_1, 0), "text": (comfy_switch_node_27, 0)},
    )
    ltxv_conditioning_29 = g.add(
        "LTXVConditioning",
        {"frame_rate": 25},
        (2380, 2930),
        **{
            "frame_rate": (comfy_math_expression_17, 0),
            "positive": (mgpu_text_encode_28, 0),
            "negative": (mgpu_text_encode_6, 0),
        },
    )
    ltxv_add_guide_30 = g.add(
        "LTXVAddGuide",
        {"frame_idx": 0, "strength": 0.7},
        (2760, 2930),
        **{
            "positive": (ltxv_conditioning_29, 0),
            "negative": (ltxv_conditioning_29, 1),
            "vae": (vae_loader_7, 0),
            "latent": (empty_ltxv_latent_video_24, 0),
            "image": (ltxv_preprocess_25, 0),
        },
    )
    ltxv_add_guide_31 = g.add(
        "LTXVAddGuide",
        {"frame_idx": -1, "strength": 0.7},
        (2760, 3250),
        **{
            "positive": (ltxv_add_guide_30, 0),
            "negative": (ltxv_add_guide_30, 1),
            "vae": (vae_loader_7, 0),
            "latent": (ltxv_add_guide_30, 2),
            "image": (ltxv_preprocess_14, 0),
        },
    )
    concat_av_latent_32 = g.add(
        "LTXVConcatAVLatent",
        {},
        (2260, 2610),
        **{"video_latent": (ltxv_add_guide_31, 2), "audio_latent": (ltxv_empty_latent_audio_19, 0)},
    )
    dual_cfg_guider_33 = g.add(
        "LTXVDualCFGGuider",
        {"video_cfg": 1, "audio_cfg": 1},
        (1910, 2000),
        **{
            "model": (mgpu_loader_1, 1),
            "positive": (ltxv_add_guide_31, 0),
            "negative": (ltxv_add_guide_31, 1),
        },
    )
    sampler_custom_advanced_34 = g.add(
        "SamplerCustomAdvanced",
        {},
        (2380, 1850),
        **{
            "noise": (random_noise_5, 0),
            "guider": (dual_cfg_guider_33, 0),
            "sampler": (sampler_euler_ancestral_4, 0),
            "sigmas": (manual_sigmas_3, 0),
            "latent_image": (concat_av_latent_32, 0),
        },
    )
    separate_av_latent_35 = g.add(
        "LTXVSeparateAVLatent", {}, (2380, 2100), **{"av_latent": (sampler_custom_advanced_34, 1)}
    )
    ltxv_audio_vae_decode_36 = g.add(
        "LTXVAudioVAEDecode",
        {},
        (2740, 2440),
        **{"samples": (separate_av_latent_35, 1), "audio_vae": (vae_loader_8, 0)},
    )
    ltxv_crop_guides_37 = g.add(
        "LTXVCropGuides",
        {},
        (2750, 1950),
        **{
            "positive": (ltxv_add_guide_31, 0),
            "negative": (ltxv_add_guide_31, 1),
            "latent": (separate_av_latent_35, 0),
        },
    )
    distributed_vae_decode_38 = g.add(
        "LTX2DistributedVAEDecode",
        {
            "tile_size": 512,
            "overlap": 64,
            "temporal_size": 64,
            "temporal_overlap": 16,
            "mode": "tiled",
            "attention_chunk_mb": 0,
        },
        (2740, 2150),
        **{"mgpu_model": (mgpu_loader_1, 0), "latent": (ltxv_crop_guides_37, 2)},
    )
    create_video_39 = g.add(
        "CreateVideo",
        {"fps": 24, "bit_depth": 8},
        (3200, 1840),
        **{
            "fps": (comfy_math_expression_17, 0),
            "images": (distributed_vae_decode_38, 0),
            "audio": (ltxv_audio_vae_decode_36, 0),
        },
    )
    save_video_40 = g.add(
        "SaveVideo",
        {"filename_prefix": "video/ltx2.5_flf2v", "format": "auto", "codec": "auto"},
        (2510, 2300),
        **{"video": (create_video_39, 0)},
    )
    preview_any_41 = g.add("PreviewAny", {}, (1960, 1120), **{"source": (comfy_switch_node_27, 0)})
    return g


TWINS = (
    template_23_t2v, template_23_i2v, template_23_ia2v, template_23_flf2v, template_23_ic_lora, template_23_id_lora,
    template_25_t2v, template_25_i2v, template_25_flf2v,
)  # fmt: skip
WORKFLOWS = (text_to_video, image_to_video, upscale_latent, upscale_video, text_to_video_23, *TWINS)


def main() -> None:
    (HERE / "api").mkdir(exist_ok=True)
    for make in WORKFLOWS:
        graph = make()
        (HERE / f"{graph.name}.json").write_text(json.dumps(graph.ui(), indent=1) + "\n")
        graph = make()  # fresh: ui() records link ids on the nodes
        (HERE / "api" / f"{graph.name}.json").write_text(json.dumps(graph.api(), indent=1) + "\n")
        print(graph.name)


if __name__ == "__main__":
    main()
