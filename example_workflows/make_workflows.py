"""Writes the example workflows: UI format here (ComfyUI's template browser lists *.json of this
folder), API-format twins in api/ (for POST /prompt; Export (API) in the UI gives the same graph).

    python example_workflows/make_workflows.py        # rewrite every workflow
The graphs are described once, in code: the pack's own examples below, the twins of ComfyUI's official
LTX-2.3 / LTX-2.5 templates in twins_ltx23.py / twins_ltx25.py, all written with workflow_graph.Graph.
"""

from __future__ import annotations

import json
from pathlib import Path

from twins_ltx23 import TWINS_23
from twins_ltx25 import TWINS_25
from workflow_graph import (
    CHECKPOINT,
    CHECKPOINT_23,
    DISTILLED_LORA,
    DISTILLED_LORA_23,
    GEMMA,
    TEMPORAL_UPSCALER_23,
    UPSCALER,
    UPSCALER_23,
    UPSCALER_X15_23,
    Graph,
    Node,
)

HERE = Path(__file__).resolve().parent
# The template's two schedules: stage 1 the distilled 8 steps from pure noise, stage 2 from 0.85.
STAGE1_SIGMAS_23 = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"
STAGE2_SIGMAS_23 = "0.85, 0.7250, 0.4219, 0.0"
PROMPT = (
    "A red fox trots through fresh snow in a birch forest at dawn, breath steaming, soft golden light, "
    "the crunch of snow underfoot and distant birdsong."
)
NEGATIVE = "blurry, low quality, still frame, watermark, distorted, text"
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
    "time_tiles": 0,
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
    upscale_decode_save(
        g, model, cond, (encoded, 0), parts, (parts, 2), TDP_STAGE2, 1600, "video/LTX-2-MultiGPU-upscaled"
    )
    return g


def upscale_decode_save(
    g: Graph, model: Node, cond: Node, latent: tuple, parts: Node, fps: tuple, tdp: dict, x: int, prefix: str,
    **tdp_links: tuple,
) -> None:
    """The upscale-a-video graphs' tail from x: TDP Upscaler -> Distributed VAE Decode -> CreateVideo with
    the source's audio (GetVideoComponents `parts`) at the frame rate `fps` -> SaveVideo."""
    upscaled = g.add(
        "LTX2TDPUpscaler", tdp, (x, 0), mgpu_model=(model, 0), positive=(cond, 0), negative=(cond, 1),
        latent=latent, **tdp_links,
    )  # fmt: skip
    decode = g.add(
        "LTX2DistributedVAEDecode",
        {"tile_size": 0, "overlap": 64, "temporal_size": 0, "temporal_overlap": 24},
        (x + 400, -150),
        mgpu_model=(model, 0),
        latent=(upscaled, 0),
    )
    video = g.add(
        "CreateVideo",
        {"fps": 24.0, "bit_depth": 8},
        (x + 800, 300),
        images=(decode, 0),
        audio=(parts, 1),
        fps=fps,
    )
    g.add(
        "SaveVideo",
        {"filename_prefix": prefix, "format": "mp4", "codec": "auto"},
        (x + 1200, 300),
        video=(video, 0),
    )


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


# LTX-2.5's files, as its official templates name them (twins_ltx25.py).
TRANSFORMER_25 = "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors"
VIDEO_VAE_25 = "ltx-2.5-video-vae-bf16.safetensors"
AUDIO_VAE_25 = "ltx-2.5-audio-vae-bf16.safetensors"
GEMMA4_25 = "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors"
UPSCALER_25 = "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"
UPSCALE_PROMPT = "A red fox trots through fresh snow in a birch forest at dawn, sharp detail, natural motion."


def upscale_video_22b(
    name: str, description: str, model_values: dict, text_encoder: str, upscaler: str, sampler: str, fps: str
) -> Graph:
    """LoadVideo -> Distributed VAE Encode -> TDP Upscaler (the templates' stage-2 schedule on a ManualSigmas
    the artist can lower) -> Distributed VAE Decode -> SaveVideo with the source's audio; `fps` is the
    expression that gives the result's frame rate from the source's ("a", or "a * 2" for twice the frames)."""
    g = Graph(name, description)
    model = loader(g)
    model.values.update(model_values)
    source = g.add("LoadVideo", {"file": "input.mp4"}, (0, 700))
    parts = g.add("GetVideoComponents", {}, (400, 700), video=(source, 0))
    rate = g.add(
        "ComfyMathExpression",
        {"expression": fps},
        (800, 820),
        "Frame rate of the result",
        **{"values.a": (parts, 2)},
    )
    texts = [
        g.add(
            "LTX2MGPUTextEncode",
            {"text_encoder": text_encoder, "text": text, "placement": "auto", "lora_name": "None", "lora_strength": 1.0},
            (400, 100 + 260 * i),
            title,
            mgpu_model=(model, 0),
        )
        for i, (text, title) in enumerate(((UPSCALE_PROMPT, "What the video shows"), (NEGATIVE, "Negative prompt")))
    ]
    cond = g.add(
        "LTXVConditioning", {"frame_rate": 24.0}, (800, 200), positive=(texts[0], 0), negative=(texts[1], 0),
        frame_rate=(rate, 0),
    )  # fmt: skip
    encoded = g.add(
        "LTX2DistributedVAEEncode", {"temporal_size": 0}, (800, 520), mgpu_model=(model, 0), pixels=(parts, 0)
    )
    sigmas = g.add(
        "ManualSigmas", {"sigmas": STAGE2_SIGMAS_23}, (800, 1000), "Stage-2 schedule (a lower first sigma keeps more)"
    )
    upscale_decode_save(
        g, model, cond, (encoded, 0), parts, (rate, 0),
        {**TDP_STAGE2, "upscale_model": upscaler, "sampler_name": sampler, "cfg": 1.0}, 1200, f"video/{name}",
        sigmas=(sigmas, 0),
    )  # fmt: skip
    return g


_UPSCALE_23 = {"ckpt_name": CHECKPOINT_23, "lora_name": DISTILLED_LORA_23, "lora_strength": 0.5}


def upscale_video_23() -> Graph:
    return upscale_video_22b(
        "ltx2_3_mgpu_upscale_video",
        "Upscale a video you already have with LTX-2.3 on all GPUs, keeping its audio and frame rate: Distributed VAE "
        f"Encode, TDP Upscaler with the x2 1.1 upscaler (or the x1.5 one: {UPSCALER_X15_23}), the distilled LoRA at "
        "0.5, Distributed VAE Decode. Lower the schedule's first sigma to keep more of the source; change tiles, "
        "overlap, seed or preview and queue again: nothing reloads. For twice the frames use "
        "ltx2_3_mgpu_upscale_video_temporal.",
        _UPSCALE_23,
        GEMMA,
        UPSCALER_23,
        "euler",
        "a",
    )


def upscale_video_23_temporal() -> Graph:
    return upscale_video_22b(
        "ltx2_3_mgpu_upscale_video_temporal",
        "Twice the frames of a video you already have with LTX-2.3's temporal x2 upscaler on all GPUs (2N - 1 "
        "frames at twice the frame rate, same length in seconds, its audio kept): Distributed VAE Encode, TDP "
        "Upscaler, Distributed VAE Decode. The frame-rate node doubles the source's rate for the conditioning and "
        "the saved video.",
        _UPSCALE_23,
        GEMMA,
        TEMPORAL_UPSCALER_23,
        "euler",
        "a * 2",
    )


def upscale_video_25() -> Graph:
    return upscale_video_22b(
        "ltx2_5_mgpu_upscale_video",
        "Upscale a video you already have 2x with LTX-2.5 on all GPUs, keeping its audio and frame rate: the "
        "distilled transformer with its two VAE files, MGPU Text Encode with Gemma 4, Distributed VAE Encode, TDP "
        "Upscaler with the x2 latent upscaler, Distributed VAE Decode. Lower the schedule's first sigma to keep more "
        "of the source; change tiles, overlap, seed or preview and queue again: nothing reloads.",
        {"ckpt_name": TRANSFORMER_25, "video_vae_name": VIDEO_VAE_25, "audio_vae_name": AUDIO_VAE_25},
        GEMMA4_25,
        UPSCALER_25,
        "euler_ancestral",
        "a",
    )


WORKFLOWS = (
    text_to_video,
    image_to_video,
    upscale_latent,
    upscale_video,
    text_to_video_23,
    upscale_video_23,
    upscale_video_23_temporal,
    upscale_video_25,
    *TWINS_23,
    *TWINS_25,
)


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
