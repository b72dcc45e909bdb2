"""The graph description behind the example workflows: Graph writes one graph in ComfyUI's UI format
(what the template browser opens) and as an API prompt (POST /prompt), from nodes added in code.

Widget order follows each node's input order, as ComfyUI keeps widget values by position (SPECS). Model
names are the released files with their folders and download addresses (MODELS), so ComfyUI's
missing-models dialog tells users what to fetch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
# LTX-2.3's other latent upscalers: x1.5 in space, x2 in time (twice the frames).
UPSCALER_X15_23 = "ltx-2.3-spatial-upscaler-x1.5-1.0.safetensors"
TEMPORAL_UPSCALER_23 = "ltx-2.3-temporal-upscaler-x2-1.0.safetensors"
MODELS |= {
    name: {"url": "https://huggingface.co/Lightricks/LTX-2.3/resolve/main/" + name, "directory": "latent_upscale_models"}
    for name in (UPSCALER_X15_23, TEMPORAL_UPSCALER_23)
}
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
            ("w", "time_tiles"),
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
            widgets.append(node.values.get(name, ""))  # a linked text widget saved without a value
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
