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
        ],
        [("mgpu_model", "MGPU_MODEL")],
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
        ],
        [("images", "IMAGE"), ("audio", "AUDIO")],
    ),
    "LTX2MGPUTextEncode": (
        [("s", "mgpu_model", "MGPU_MODEL"), ("w", "text_encoder"), ("w", "text"), ("w", "placement")],
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


@dataclass
class Node:
    id: int
    type: str
    values: dict
    links: dict  # input name -> (Node, output slot)
    pos: tuple[int, int]
    title: str | None = None
    models: list = field(default_factory=list)


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
    def _input_names(node: Node) -> list[str]:
        """The node's input slots: sockets, then widgets that a link drives (the frontend's order)."""
        spec = SPECS[node.type][0]
        return [s[1] for s in spec if s[0] == "s"] + [
            s[1] for s in spec if s[0] != "s" and s[1] in node.links
        ]

    def _slot(self, node: Node, name: str) -> int:
        return self._input_names(node).index(name)

    def _ui_node(self, node: Node, out_links: dict, order: int) -> dict:
        inputs_spec, outputs_spec = SPECS[node.type]
        node_links = node.values.get("__links__", {})
        inputs = [
            {"name": s[1], "type": s[2], "link": node_links.get(s[1])} for s in inputs_spec if s[0] == "s"
        ]
        for spec in inputs_spec:
            if spec[0] != "s" and spec[1] in node.links:  # a widget driven by a link, after the sockets
                kind = SPECS[node.links[spec[1]][0].type][1][node.links[spec[1]][1]][1]
                linked = {
                    "name": spec[1],
                    "type": kind,
                    "link": node_links.get(spec[1]),
                    "widget": {"name": spec[1]},
                }
                inputs.append(linked)
        widgets = []
        for spec in inputs_spec:
            if spec[0] == "w":
                widgets.append(node.values[spec[1]])
            elif spec[0] == "seed":
                widgets.extend([node.values[spec[1]], "fixed"])  # control_after_generate
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
            if node.type == "SaveVideo":  # a dynamic combo: the codec rides on the format
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
    """The MGPU twin of ComfyUI's video_ltx2_3_t2v template: its files, sizes, schedules and guidance."""
    g = Graph(
        "ltx2_3_mgpu_t2v",
        "LTX-2.3 text-to-video on all GPUs, the MGPU twin of ComfyUI's video_ltx2_3_t2v template: the distilled "
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


WORKFLOWS = (text_to_video, image_to_video, upscale_latent, upscale_video, text_to_video_23)


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
