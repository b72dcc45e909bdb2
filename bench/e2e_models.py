"""Model files for bench_e2e.py under the names the official templates load.

Tiny (`stage_tiny_models`): `ltx2-mgpu make-tiny --family 2.3` and `--family 2.5` into one models
folder (the embedded tiny files under the released names in ComfyUI's folders), as
tests/test_official_templates.py's server uses them.

Real size, random weights, on a GPU machine (writes about 55 GB for 2.3, 48 GB for 2.5):

    python bench/e2e_models.py --family 2.3 /scratch/models [--gguf Q4_0]

--gguf also writes the 2.3 transformer as a GGUF (the same random weights as the checkpoint's before
its fp8 quantization) and the checkpoint's VAEs as separate files, for bench_e2e.py --gguf.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
# The LTX-2.3 transformer as a GGUF (--gguf; bench_e2e.py --gguf runs it), and the checkpoint's VAEs as
# the separate files a GGUF user holds beside it (the loader takes them as video_vae_name / audio_vae_name).
GGUF_TYPES = ("Q4_0", "Q6_K", "Q8_0")
VIDEO_VAE_23 = "ltx-2.3-22b-video-vae.safetensors"
AUDIO_VAE_23 = "ltx-2.3-22b-audio-vae.safetensors"


def gguf_name_23(qtype: str) -> str:
    return f"ltx-2.3-22b-dev-{qtype}.gguf"


def write_gguf_files_23(models: Path, qtype: str, transformer_tensors) -> dict[str, Path]:
    """models/diffusion_models/<gguf_name_23(qtype)> from `transformer_tensors` ((name, tensor) pairs,
    no prefix, any device) with the checkpoint's config, and its VAEs split into models/vae. Skips
    files already there."""
    from ltx2_mgpu.workers.embedded.gguf_writer import write_gguf
    from ltx2_mgpu.workers.embedded.split_vaes import split_vaes

    checkpoint = models / "checkpoints" / released_names()[2]
    paths = {
        "gguf": models / "diffusion_models" / gguf_name_23(qtype),
        "video_vae": models / "vae" / VIDEO_VAE_23,
        "audio_vae": models / "vae" / AUDIO_VAE_23,
    }
    if not paths["gguf"].exists():
        from safetensors import safe_open

        with safe_open(str(checkpoint), framework="pt") as f:
            config = json.loads(f.metadata()["config"])
        write_gguf(transformer_tensors(), paths["gguf"], qtype, config)
    if not paths["video_vae"].exists():
        split_vaes(checkpoint, paths["video_vae"], paths["audio_vae"], "2.3.0")
    return paths


def released_names() -> tuple[dict, dict, str, str]:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from test_official_templates import CHECKPOINT_23, DISTILLED_LORA_23, RELEASED_23, RELEASED_25

    return RELEASED_23, RELEASED_25, CHECKPOINT_23, DISTILLED_LORA_23


def stage_tiny_models(
    models: Path, comfyui_root: Path, made: tuple[Path, ...] = (), gguf: str | None = None
) -> Path:
    """ComfyUI's models/ layout under `models`: the tiny 2.3 and 2.5 files and links under the names
    the 2.3 / 2.5 templates load. Made once (kept between runs). `made`: folders make-tiny wrote
    before (--family 2.3 and 2.5), whose files are linked instead of making them again. `gguf`: also
    the tiny 2.3 transformer as a GGUF of that type and its split VAEs (write_gguf_files_23)."""
    staged = _stage_tiny_models(models, comfyui_root, made)
    if gguf:
        from safetensors.torch import load_file

        from ltx2_mgpu.workers.embedded.gguf_writer import transformer_tensors

        checkpoint = models / "checkpoints" / released_names()[2]
        write_gguf_files_23(models, gguf, lambda: transformer_tensors(load_file(str(checkpoint))).items())
    return staged


def _stage_tiny_models(models: Path, comfyui_root: Path, made: tuple[Path, ...]) -> Path:
    from ltx2_mgpu.workers.embedded.tiny_ltx25 import make_tiny_ltx25_paths

    released_25 = released_names()[1]
    done = models / "WEIGHTS.json"
    if done.exists():
        return models
    for source in made:
        for file in sorted(p for p in source.rglob("*") if p.is_file()):
            link = models / file.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(file.resolve())
    env = {**os.environ, "COMFYUI_PATH": str(comfyui_root)}
    # make-tiny writes the released names into ComfyUI's folders
    for family in () if made else ("2.3", "2.5"):
        command = [sys.executable, "-m", "ltx2_mgpu.cli", "make-tiny", "--family", family, str(models)]
        run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if run.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed:\n{run.stderr[-3000:]}")
    tiny25 = make_tiny_ltx25_paths(models)
    # The 2.5 templates' names that make-tiny's files do not carry (the int8 transformer, the prompt
    # enhancer's Gemma): links to the files that stand in for them.
    links = {
        "latent_upscale_models": {released_25["latent_upscale_models"]: tiny25.spatial_upscaler},
        "text_encoders": {
            released_25["text_encoders"]: tiny25.text_encoder,
            released_25["prompt_enhancer"]: tiny25.text_encoder,
        },
        "diffusion_models": {released_25["diffusion_models"]: tiny25.transformer_int8},
        "vae": {released_25["video_vae"]: tiny25.video_vae, released_25["audio_vae"]: tiny25.audio_vae},
    }
    for folder, names in links.items():
        (models / folder).mkdir(parents=True, exist_ok=True)
        for name, source in names.items():
            link = models / folder / name
            if not link.exists() and link.resolve() != source.resolve():
                link.symlink_to(source.resolve())
    done.write_text(json.dumps({"kind": "tiny", "source": "ltx2-mgpu make-tiny --family 2.3 / 2.5, seed 0"}))
    return models


# ----- real size, random weights ------------------------------------------------------------------

# Assumed, not published here: the released x2 spatial upscaler's width (LTX's latent upsampler:
# 1024 mid channels, 4 res blocks per stage) and the distilled LoRA's rank (its file name says an
# average rank of 111). Both only matter at load time or in the short upsampling step.
UPSCALER_MID_CHANNELS, UPSCALER_BLOCKS = 1024, 4
LORA_RANK = 111
TEXT_LORA_RANK = 64  # gemma-3-12b-it-abliterated_lora_rank64


def real_ltx23_config(num_layers: int | None = None) -> dict:
    """The 2.3 checkpoint's metadata "config" at real size where it is known: the 22B transformer as
    ComfyUI builds it (random_model.FAMILY_CHANGES over the 19B config); the video decoder of LTX-2
    (19B; 2.3's block list is not public), tiny encoder (t2v never encodes); the tiny audio VAE and
    vocoder (their real configs are not public here). `num_layers`: fewer blocks (a check on a CPU)."""
    from bench_vae import LTX2_DECODER_BASE_CHANNELS, LTX2_DECODER_BLOCKS

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import tiny_ltx23_config
    from ltx2_mgpu.workers.engine.comfy.random_model import family_config
    from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

    config = tiny_ltx23_config()
    transformer = {**config["transformer"], **family_config(LTX2_19B_TRANSFORMER, "2.3")}
    if num_layers is not None:
        transformer["num_layers"] = num_layers
    vae = {
        **config["vae"],
        "decoder_blocks": LTX2_DECODER_BLOCKS,
        "decoder_base_channels": LTX2_DECODER_BASE_CHANNELS,
    }
    return {**config, "transformer": transformer, "vae": vae}


def write_ltx23_checkpoint(path: Path, config: dict, text_width: int, device, seed: int = 0) -> Path:
    """The LTX-2.3 checkpoint in the fp8 template file's layout: the transformer's tensors as
    random_model draws them in its fp8 scaled format (under model.diffusion_model.), the text
    projection at Gemma 3 12B's width (bf16), the VAEs and vocoder as make-tiny draws them."""
    import torch
    from safetensors.torch import save_file

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import _checkpoint_modules, draw_state, load_comfy_modules
    from ltx2_mgpu.workers.engine.comfy.random_model import (
        _quantized_state,
        parameter_shapes,
        quantized_layers,
    )

    comfy = load_comfy_modules()
    transformer = config["transformer"]
    shapes = parameter_shapes(transformer)
    layers = quantized_layers(shapes, "fp8", int(transformer["num_layers"]))
    tensors = {}
    for key, value in _quantized_state(shapes, layers, device, torch.bfloat16, seed):
        tensors[f"model.diffusion_model.{key}"] = value.cpu()
    with torch.device("meta"):
        projection = comfy["lt"].DualLinearProjection(
            text_width, transformer["cross_attention_dim"], transformer["audio_cross_attention_dim"],
            operations=comfy["ops"].disable_weight_init,
        )  # fmt: skip
    generator = torch.Generator(device=device).manual_seed(seed + 1)
    for key, value in projection.state_dict().items():
        drawn = torch.empty(value.shape, dtype=torch.bfloat16, device=device).normal_(
            0, 0.02, generator=generator
        )
        tensors[f"text_embedding_projection.{key}"] = drawn.cpu()
    tiny_parts = _checkpoint_modules(comfy, {**config, "transformer": {**transformer, "num_layers": 1}})
    for module, prefix, gain in tiny_parts:
        if prefix in ("vae.", "audio_vae.", "vocoder."):
            tensors.update(
                {k: v.to(torch.bfloat16) for k, v in draw_state(module, prefix, gain, seed).items()}
            )
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(
        {k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata={"config": json.dumps(config)}
    )
    tmp.replace(path)
    return path


def write_real_ltx23_models(
    models: Path, device, num_layers: int | None = None, seed: int = 0, gguf: str | None = None
) -> Path:
    """Every file the LTX-2.3 t2v template loads, random weights, under the released names (about
    25 GB checkpoint + 24 GB Gemma 3 12B in bf16 + LoRA + upscaler); WEIGHTS.json says what each is.
    `gguf`: also the transformer as a GGUF of that type (the same random weights before the checkpoint's
    fp8 quantization, about 12 GB as Q4_0) and the checkpoint's VAEs as separate files."""

    from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
    from ltx2_mgpu.workers.embedded.tiny_ltx23 import (
        write_gemma_lora,
    )
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_lora
    from ltx2_mgpu.workers.text.gemma3 import GemmaConfig, default_sliding_layers

    released_23, _, checkpoint_23, lora_23 = released_names()
    folders = {f: models / f for f in ("checkpoints", "text_encoders", "loras", "latent_upscale_models")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    gemma_config = GemmaConfig()
    if num_layers is not None:
        gemma_config = GemmaConfig(num_layers=num_layers, sliding_layers=default_sliding_layers(num_layers))
    config = real_ltx23_config(num_layers)
    paths = {
        "checkpoint": folders["checkpoints"] / checkpoint_23,
        "gemma": folders["text_encoders"] / released_23["text_encoders"],
        "lora": folders["loras"] / lora_23,
        "text_lora": folders["loras"] / released_23["text_loras"],
        "upscaler": folders["latent_upscale_models"] / released_23["latent_upscale_models"],
    }
    # Each file is written to a temporary name and renamed: a run stopped midway resumes with the
    # files still missing (the device allows 10 minutes per command).
    if not paths["checkpoint"].exists():
        write_ltx23_checkpoint(paths["checkpoint"], config, GemmaConfig().feature_width, device, seed)
        print(
            f"[e2e models] checkpoint {_gb(paths['checkpoint'])}, {time.monotonic() - t0:.0f} s", flush=True
        )
    if not paths["gemma"].exists():
        gemma = make_tiny_gemma(
            models / "gemma-work", seed=seed, config=gemma_config, device=str(device), vision_stand_ins=False
        )
        gemma.replace(paths["gemma"])
        gemma.parent.rmdir()
        print(f"[e2e models] Gemma 3 {_gb(paths['gemma'])}, {time.monotonic() - t0:.0f} s", flush=True)
    if not paths["lora"].exists():
        tmp = make_tiny_lora(
            paths["lora"].with_name(".lora.tmp"), paths["checkpoint"], rank=LORA_RANK, seed=seed
        )
        tmp.replace(paths["lora"])
    if not paths["text_lora"].exists():
        tmp = write_gemma_lora(
            paths["gemma"], paths["text_lora"].with_name(".text_lora.tmp"), seed + 1, LORA_RANK
        )
        tmp.replace(paths["text_lora"])
    if not paths["upscaler"].exists():
        write_x2_upscaler(paths["upscaler"], seed)
    if gguf:
        write_gguf_files_23(models, gguf, lambda: _real_transformer_tensors(config, device, seed))
        print(f"[e2e models] GGUF {gguf} {_gb(models / 'diffusion_models' / gguf_name_23(gguf))}", flush=True)
    print(f"[e2e models] all files written in {time.monotonic() - t0:.0f} s", flush=True)
    gemma_name, upscaler_name = released_23["text_encoders"], released_23["latent_upscale_models"]
    weights = {
        "kind": "random weights at real size (LTX-2.3 files only)",
        checkpoint_23: f"22B transformer ({config['transformer']['num_layers']} blocks), fp8 scaled as the template's "
        "file (random_model.py); text projection at Gemma 3 12B's width; video decoder: LTX-2 19B's block list "
        "(2.3's is not public), tiny video encoder, tiny audio VAE and vocoder (real configs not public): the "
        "audio decode time is NOT representative",
        gemma_name: f"Gemma 3 12B sizes ({gemma_config.num_layers} layers) in bf16, not the "
        "template's fp4 mixed format; make-tiny's character-level tokenizer (a prompt is as many tokens as it "
        "has characters, several times Gemma's own count; native pads each to 1,024, ours runs its own tokens)",
        lora_23: f"random LoRA rank {LORA_RANK} on every block Linear (loaded once, not in the timed run)",
        released_23[
            "text_loras"
        ]: f"random LoRA rank {TEXT_LORA_RANK} on every Gemma attention and MLP Linear",
        upscaler_name: f"x2 latent upsampler, assumed {UPSCALER_MID_CHANNELS} mid channels, "
        f"{UPSCALER_BLOCKS} blocks per stage",
        "not written": "LTX-2.5 files (write them with --family 2.5, into another folder)",
        **(
            {
                gguf_name_23(
                    gguf
                ): f"the checkpoint's transformer as a {gguf} GGUF: the same random draws before "
                "its fp8 quantization, quantized round-to-nearest per block (workers/embedded/gguf_writer.py)",
                VIDEO_VAE_23: "the checkpoint's video VAE as a separate file",
                AUDIO_VAE_23: "the checkpoint's audio VAE and vocoder as a separate file",
            }
            if gguf
            else {}
        ),
        "sizes_gb": {name: round(path.stat().st_size / 1e9, 2) for name, path in paths.items()},
    }
    (models / "WEIGHTS.json").write_text(json.dumps(weights, indent=1))
    return models


def _real_transformer_tensors(config: dict, device, seed: int):
    """The 22B transformer's tensors as write_ltx23_checkpoint draws them (same generator, same order),
    unquantized in bf16, one at a time on `device`."""
    import torch

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import load_comfy_modules
    from ltx2_mgpu.workers.engine.comfy.random_model import _quantized_state, parameter_shapes

    load_comfy_modules()
    return _quantized_state(parameter_shapes(config["transformer"]), {}, device, torch.bfloat16, seed)


def write_x2_upscaler(path: Path, seed: int) -> Path:
    """The x2 spatial latent upsampler at its assumed real width (UPSCALER_MID_CHANNELS, UPSCALER_BLOCKS),
    bf16, as LatentUpscaleModelLoader reads it (2.3's and 2.5's x2 files share the architecture)."""
    import torch
    from safetensors.torch import save_file

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import (
        draw_state,
        load_comfy_modules,
        tiny_ltx23_upsampler_config,
    )

    comfy = load_comfy_modules()
    upsampler_config = {**tiny_ltx23_upsampler_config(2.0), "mid_channels": UPSCALER_MID_CHANNELS,
                        "num_blocks_per_stage": UPSCALER_BLOCKS}  # fmt: skip
    upsampler = comfy["upsampler"].LatentUpsampler.from_config(
        upsampler_config, operations=comfy["ops"].disable_weight_init
    )
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in draw_state(upsampler, "", 1.0, seed).items()},
        str(tmp),
        metadata={"config": json.dumps(upsampler_config)},
    )
    tmp.replace(path)
    return path


def real_ltx25_config(num_layers: int | None = None, connector_layers: int | None = None) -> dict:
    """The 2.5 transformer file's metadata "config" at real size: the 22B as ComfyUI builds it
    (random_model.FAMILY_CHANGES["2.5"] over the 19B config). The keyframe position embedding is
    left out, as in the released layout (ComfyUI finds it by its key). `num_layers` /
    `connector_layers`: fewer blocks and text-connector blocks at the same widths (a check; the eight
    connector blocks are 4 of a one-block file's 5 GB)."""
    from ltx2_mgpu.workers.engine.comfy.random_model import family_config
    from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

    transformer = family_config(LTX2_19B_TRANSFORMER, "2.5")
    transformer.pop("use_keyframes_abs_pos_embedding")
    if num_layers is not None:
        transformer["num_layers"] = num_layers
    if connector_layers is not None:
        transformer["connector_num_layers"] = connector_layers
    return {"transformer": transformer}


def write_ltx25_transformer(path: Path, config: dict, device, seed: int = 0) -> Path:
    """The LTX-2.5 transformer in the released int8 convrot file's layout: every block Linear int8 per
    channel with its convrot record, the rest (text connectors included) bf16, under
    model.diffusion_model.; drawn one tensor at a time on `device` (random_model)."""
    import torch
    from safetensors.torch import save_file

    from ltx2_mgpu.workers.embedded.tiny_ltx23 import load_comfy_modules
    from ltx2_mgpu.workers.engine.comfy.random_model import (
        _quantized_state,
        parameter_shapes,
        quantized_layers,
    )

    load_comfy_modules()  # imports ComfyUI (its LTX classes give the shapes); make-tiny ran in a child
    transformer = config["transformer"]
    shapes = parameter_shapes({**transformer, "use_keyframes_abs_pos_embedding": True})
    layers = quantized_layers(shapes, "int8", int(transformer["num_layers"]))
    tensors = {
        f"model.diffusion_model.{key}": value.cpu()
        for key, value in _quantized_state(shapes, layers, device, torch.bfloat16, seed)
    }
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(
        {k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata={"config": json.dumps(config)}
    )
    tmp.replace(path)
    return path


def write_real_ltx25_models(
    models: Path,
    device,
    num_layers: int | None = None,
    seed: int = 0,
    text_encoder: bool = True,
    connector_layers: int | None = None,
) -> Path:
    """Every file the LTX-2.5 t2v template loads, under the released names: the 22B int8 convrot
    transformer (about 23 GB) and Gemma 4 12B with its projection (bf16, about 24 GB) at real size,
    the x2 upscaler at its assumed width, make-tiny's 2.5 video and audio VAEs (their real configs are
    not public here). `text_encoder=False` skips Gemma 4 (a CPU check: ComfyUI only builds the 12B)."""
    from ltx2_mgpu.workers.embedded.tiny_gemma4 import make_gemma4_12b
    from ltx2_mgpu.workers.embedded.tiny_ltx25_vae import tiny_audio_vae_25, tiny_video_vae_25

    _, released_25, _, _ = released_names()
    config = real_ltx25_config(num_layers, connector_layers)
    transformer = config["transformer"]
    paths = {
        "transformer": models / "diffusion_models" / released_25["diffusion_models"],
        "gemma4": models / "text_encoders" / released_25["text_encoders"],
        "video_vae": models / "vae" / released_25["video_vae"],
        "audio_vae": models / "vae" / released_25["audio_vae"],
        "upscaler": models / "latent_upscale_models" / released_25["latent_upscale_models"],
    }
    if not text_encoder:
        del paths["gemma4"]
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # Each file is written to a temporary name and renamed: a stopped run resumes with what is missing.
    if not paths["transformer"].exists():
        write_ltx25_transformer(paths["transformer"], config, device, seed)
        print(f"[e2e models] {_gb(paths['transformer'])}, {time.monotonic() - t0:.0f} s", flush=True)
    if text_encoder and not paths["gemma4"].exists():
        tmp = paths["gemma4"].with_name(f".{paths['gemma4'].name}.tmp")
        make_gemma4_12b(
            tmp, seed, int(transformer["cross_attention_dim"]), int(transformer["audio_cross_attention_dim"]),
            str(device),
        )  # fmt: skip
        tmp.replace(paths["gemma4"])
        print(f"[e2e models] {_gb(paths['gemma4'])}, {time.monotonic() - t0:.0f} s", flush=True)
    for key, write in (("video_vae", tiny_video_vae_25), ("audio_vae", tiny_audio_vae_25)):
        if not paths[key].exists():
            write(paths[key], seed)
    if not paths["upscaler"].exists():
        write_x2_upscaler(paths["upscaler"], seed)
    # The templates' prompt enhancer (off) names a Gemma 4 E2B file ComfyUI only checks for.
    enhancer = models / "text_encoders" / released_25["prompt_enhancer"]
    if text_encoder and not enhancer.exists():
        enhancer.symlink_to(paths["gemma4"].name)
    print(f"[e2e models] all files written in {time.monotonic() - t0:.0f} s", flush=True)
    weights = {
        "kind": "random weights at real size (LTX-2.5 files)",
        released_25[
            "diffusion_models"
        ]: f"22B transformer ({transformer['num_layers']} blocks), int8 convrot as "
        "the template's file (random_model.py), text connectors bf16",
        released_25[
            "text_encoders"
        ]: "Gemma 4 12B sizes (ComfyUI's Gemma4_12B) with the dual projection, in bf16, "
        "not the template's int8 convrot; make-tiny's character-level tokenizer (a prompt is as many tokens as "
        "it has characters, several times Gemma's own count)",
        released_25[
            "video_vae"
        ]: "make-tiny's 2.5 video VAE (diffusion decoder; the real config is not public): "
        "the decode time is NOT representative",
        released_25["audio_vae"]: "make-tiny's 2.5 audio VAE and vocoder: NOT representative",
        released_25["latent_upscale_models"]: f"x2 latent upsampler, assumed {UPSCALER_MID_CHANNELS} mid "
        f"channels, {UPSCALER_BLOCKS} blocks per stage",
        released_25[
            "prompt_enhancer"
        ]: "a link to the Gemma 4 12B file (the templates leave the enhancer off)",
        "sizes_gb": {name: round(path.stat().st_size / 1e9, 2) for name, path in paths.items()},
    }
    (models / "WEIGHTS.json").write_text(json.dumps(weights, indent=1))
    return models


def _gb(path: Path) -> str:
    return f"{path.name}: {path.stat().st_size / 1e9:.1f} GB"


def main(argv=None) -> int:
    import argparse

    import torch

    parser = argparse.ArgumentParser(description="write bench_e2e.py's real-size random LTX-2.3 or 2.5 files")
    parser.add_argument("models", type=Path, help="the ComfyUI models folder to write (about 55 / 48 GB)")
    parser.add_argument("--family", choices=("2.3", "2.5"), default="2.3", help="whose template's files")
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--layers", type=int, default=None, help="fewer transformer/Gemma layers (a check)")
    parser.add_argument(
        "--gguf", choices=GGUF_TYPES, default=None,
        help="2.3: also the transformer as a GGUF of this type and the VAEs as separate files (bench_e2e --gguf)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.family == "2.5":
        if args.gguf:
            parser.error(
                "--gguf writes the LTX-2.3 transformer (bench_e2e's 2.3 jobs run it); use --family 2.3"
            )
        write_real_ltx25_models(args.models.resolve(), torch.device(args.device), args.layers)
    else:
        write_real_ltx23_models(args.models.resolve(), torch.device(args.device), args.layers, gguf=args.gguf)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
