"""The whole official two-stage job, this pack's nodes against the native template graph (issue 23).

Jobs (bench/e2e_graphs.py): ComfyUI's video_ltx2_3_t2v and video_ltx2_5_t2v templates
(comfyui-workflow-templates-json 0.1.123) at their own sizes, and SGLang's LTX-2.3 configuration
(768x512, 121 frames, 30-step stage 1 with CFG) on the 2.3 template. Per job and side: text encode,
stage 1, the upscale stage (latent upsampler + stage-2 sampling), decode with audio, their total, and
the peak device memory per GPU; the final latents of the two sides compared (what makes the times
comparable). JSON into --out.

Both sides run in this process through ComfyUI's own executor (execution.PromptExecutor with a
stand-in server that timestamps each node's start, after a CUDA sync): native = the template graph
as the frontend queues it; ours = the same graph with the MGPU Loader's MODEL, MGPU Text Encode and
Distributed VAE Decode (worker group on --gpus). Each side runs the job twice on one executor: a
warm-up (prompt text and seed changed, so nothing of the timed run is cached; includes loading, reported
as `warmup`) and the timed run (loaders cached, as a user's next job). The native side's models are
unloaded before ours start; ours' workers are stopped at the end.

Steps:
  1. here (needs the package index and a ComfyUI):
       COMFYUI_PATH=... python bench/bench_e2e.py --prepare out/e2e
     writes out/e2e/prompts/*.json (ignored folder; the template conversions are never committed).
  2. --tiny (CPU, the embedded tiny files of `ltx2-mgpu make-tiny` under the released names, two CPU
     workers, float32 both sides): a smoke test, a couple of minutes:
       COMFYUI_PATH=... python bench/bench_e2e.py --prompts out/e2e/prompts --tiny --out x.json
  3. real size on GPUs, models with random weights written by bench/e2e_models.py (see there):
       COMFYUI_PATH=... python bench/bench_e2e.py --prompts out/e2e/prompts --models /scratch/models \\
           --gpus 0 --jobs ltx23_t2v --out bench/results/e2e_ltx23_h200.json
  4. small cards on a large one: our side once per `--ours` variant, the loader's weights option with
     each worker held to @GiB (LTX2_MGPU_GPU_MEMORY_GIB), three workers sharing GPU 0; `--gguf Q4_0` runs
     the transformer GGUF `e2e_models.py --gguf Q4_0` wrote (LTX2_MGPU_COMFYUI_GGUF: the ComfyUI-GGUF pack):
       COMFYUI_PATH=... python bench/bench_e2e.py --prompts out/e2e/prompts --models /scratch/models \\
           --gpus 0,0,0 --jobs ltx23_t2v --sides ours --ours replicated layers@16 offloaded@16 \\
           --max-video-tokens 14080 [--gguf Q4_0] --out x.json
     The first variant is "ours"; each other one reports its speed and latents against it (or against
     native when native runs too), and every run its peak memory per GPU and, where nvidia-smi lists
     them, per process (the workers apart).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from e2e_graphs import COLLECT  # noqa: E402
from e2e_models import GGUF_TYPES  # noqa: E402

GIB = 2**30
STAGES = ("text_encode", "stage1", "upscale_stage", "decode")
SIDES = ("native", "ours")
LOADERS = frozenset({
    "CheckpointLoaderSimple", "UNETLoader", "VAELoader", "CLIPLoader", "LTXAVTextEncoderLoader",
    "LTXVAudioVAELoader", "LatentUpscaleModelLoader", "LoraLoaderModelOnly", "LoraLoader", "LTX2MGPULoader",
})  # fmt: skip
TEXT = frozenset({"CLIPTextEncode", "LTX2MGPUTextEncode", "LTXVConditioning"})
DECODE = frozenset({"VAEDecodeTiled", "VAEDecode", "LTXVAudioVAEDecode", "LTX2DistributedVAEDecode", COLLECT})
WARMUP_SUFFIX = " (warm-up run)"
MEMORY_POLL_S = 0.05
PROCESS_POLL_EVERY = 10  # nvidia-smi per process every 0.5 s (it takes tens of ms)
COLLECTED: dict[str, Any] = {}
# What the template graphs need beyond comfy/'s own imports (torch, torchvision, torchsde, PIL, ...):
# PyAV (comfy_extras/nodes_lt.py imports it; LTXVPreprocess runs it), simpleeval (ComfyMathExpression),
# kornia (comfy_extras/nodes_post_processing.py: ResizeImageMaskNode).
GRAPH_REQUIREMENTS = {"av": "av", "simpleeval": "simpleeval", "kornia": "kornia kornia_rs"}


class BenchCollect:
    """Output node: keeps the decoders' inputs and outputs of the run in COLLECTED."""

    OUTPUT_NODE = True
    RETURN_TYPES = ()
    FUNCTION = "collect"
    CATEGORY = "testing"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"video_latent": ("LATENT",), "audio_latent": ("LATENT",), "images": ("IMAGE",),
                             "audio": ("AUDIO",)}}  # fmt: skip

    def collect(self, video_latent, audio_latent, images, audio):
        COLLECTED.update(
            video=video_latent["samples"].float().cpu(), audio=audio_latent["samples"].float().cpu(),
            frames=tuple(images.shape), waveform=tuple(audio["waveform"].shape),
        )  # fmt: skip
        return {}


class StandInServer:
    """What PromptExecutor needs of ComfyUI's PromptServer: records each node's start time."""

    def __init__(self, sync) -> None:
        self.client_id = "bench"
        self.last_node_id = None
        self.last_prompt_id = None
        self.sync = sync
        self.events: list[tuple[float, str]] = []
        self.errors: list[dict] = []

    def send_sync(self, event, data, sid=None) -> None:
        if event == "executing" and data.get("node") is not None:
            self.sync()
            self.events.append((time.perf_counter(), str(data["node"])))
        elif event == "execution_error":
            self.errors.append(data)

    def send_progress_text(self, *args, **kwargs) -> None:
        pass

    def queue_updated(self) -> None:
        pass


class MemoryPoller:
    """Peak device memory in use per GPU (cudaMemGetInfo, all processes: this one and the workers), and
    per process where nvidia-smi lists them (`process_peak`: "PID name" -> bytes; the workers sharing
    a GPU apart; empty where nvidia-smi is missing or cannot see the processes)."""

    def __init__(self, devices: list[int]) -> None:
        self.devices = devices
        self.peak = {d: 0 for d in devices}
        self.process_peak: dict[str, int] = {}
        self._smi = shutil.which("nvidia-smi") if devices else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _used(self, device: int) -> int:
        import torch

        free, total = torch.cuda.mem_get_info(device)
        return total - free

    def _processes(self) -> None:
        query = [self._smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
        try:
            rows = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            return
        for row in rows:
            pid, _, mib = (part.strip() for part in row.partition(","))
            if pid.isdigit() and mib.isdigit():
                try:
                    name = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    name = "?"
                key = f"{pid} {name}"
                self.process_peak[key] = max(self.process_peak.get(key, 0), int(mib) * 2**20)

    def _run(self) -> None:
        polls = 0
        while not self._stop.is_set():
            for d in self.devices:
                self.peak[d] = max(self.peak[d], self._used(d))
            if self._smi and polls % PROCESS_POLL_EVERY == 0:
                self._processes()
            polls += 1
            time.sleep(MEMORY_POLL_S)

    def __enter__(self) -> MemoryPoller:
        if self.devices:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self.devices:
            self._thread.join()
            for d in self.devices:
                self.peak[d] = max(self.peak[d], self._used(d))

    def process_peaks_gib(self) -> dict[str, float]:
        return {k: round(v / GIB, 2) for k, v in sorted(self.process_peak.items())}


# ----- ComfyUI in this process -------------------------------------------------------------------


def import_comfyui(root: Path, *, tiny: bool) -> None:
    """ComfyUI's modules configured as main.py would: tiny = `--cpu --fp32-unet --fp32-text-enc`
    (the template tests' settings, for float32 parity); otherwise main.py's defaults, with its CUDA
    allocator choice (the workers inherit it, as they would from ComfyUI)."""
    sys.path.insert(0, str(root))
    from comfy.cli_args import args

    if tiny:
        args.cpu = True
        args.fp32_unet = True
        args.fp32_text_enc = True
        args.use_pytorch_cross_attention = True
    else:
        import cuda_malloc  # noqa: F401  as main.py: cudaMallocAsync on CUDA builds (before torch loads)
    import comfy.model_management  # noqa: F401

    import nodes

    asyncio.run(nodes.init_extra_nodes(init_custom_nodes=False, init_api_nodes=False))
    import ltx2_mgpu

    asyncio.run(register_pack(nodes, ltx2_mgpu))
    nodes.NODE_CLASS_MAPPINGS[COLLECT] = BenchCollect


async def register_pack(nodes, pack) -> None:
    """The pack's nodes in ComfyUI's registry, as ComfyUI's loader takes them from its extension."""
    extension = await pack.comfy_entrypoint()
    await extension.on_load()
    for cls in await extension.get_node_list():
        nodes.NODE_CLASS_MAPPINGS[cls.GET_SCHEMA().node_id] = cls


def import_gguf_pack(root: Path) -> Path:
    """The ComfyUI-GGUF pack imported as ComfyUI imports a custom node (the workers' own import,
    engine/comfy/gguf.py): it registers the `unet_gguf` folder the MGPU Loader lists .gguf files from.
    SystemExit when missing."""
    from ltx2_mgpu.workers.engine.comfy.gguf import import_gguf_pack as import_pack
    from ltx2_mgpu.workers.wire.gguf_pack import GGUF_PACK_ENV, find_gguf_pack

    folder = find_gguf_pack(root)
    if folder is None:
        raise SystemExit(
            f"--gguf needs the ComfyUI-GGUF pack (city96/ComfyUI-GGUF): set {GGUF_PACK_ENV} to its folder or put it "
            f"in {root / 'custom_nodes'}"
        )
    import_pack(folder)
    return folder


def check_requirements() -> None:
    import importlib.util

    missing = [pip for module, pip in GRAPH_REQUIREMENTS.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise SystemExit(
            f"the template graphs need {', '.join(missing)} (pip install {' '.join(missing)}; ComfyUI's "
            "requirements.txt pins them): without them ComfyUI drops the LTX / math / resize nodes"
        )


def use_models(models: Path) -> None:
    import folder_paths

    for folder in sorted(p.name for p in models.iterdir() if p.is_dir()):
        folder_paths.add_model_folder_path(folder, str(models / folder), is_default=True)


def load_tiny_shim(models: Path, scratch: Path) -> None:
    """The template tests' shim: ComfyUI's Gemma loaders build the tiny Gemma 3 / 4 sizes."""
    import importlib.util

    sys.path.insert(0, str(BENCH.parent / "tests"))
    from e2e_models import released_names
    from ltx23_fixtures import tiny_gemma_sizes
    from test_official_templates import SHIM_SOURCE, tiny_gemma4_config

    shim = scratch / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    gemma = models / "text_encoders" / released_names()[0]["text_encoders"]  # make-tiny's, released name
    (shim / "tiny_gemma_sizes.json").write_text(json.dumps(tiny_gemma_sizes(gemma)))
    (shim / "tiny_gemma4.json").write_text(json.dumps(tiny_gemma4_config()))
    (shim / "shim.py").write_text(SHIM_SOURCE.read_text())
    spec = importlib.util.spec_from_file_location("bench_e2e_tiny_shim", shim / "shim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def make_executor(server: StandInServer):
    import execution

    return execution.PromptExecutor(
        server, cache_type=execution.CacheType.CLASSIC, cache_args={"lru": 0, "ram": 0, "ram_inactive": 0}
    )


def run_prompt(executor, server: StandInServer, prompt: dict, label: str) -> dict:
    """Execute `prompt` once; {"total_s", "nodes": [(id, class, seconds)], "latents"}."""
    import execution

    valid = asyncio.run(execution.validate_prompt(label, prompt, None))
    if not valid[0]:
        raise RuntimeError(f"{label}: ComfyUI refused the prompt: {valid[1]} {json.dumps(valid[3])[:3000]}")
    COLLECTED.clear()
    server.events.clear()
    server.errors.clear()
    t0 = time.perf_counter()
    executor.execute(prompt, label, {"client_id": server.client_id}, valid[2])
    server.sync()
    t1 = time.perf_counter()
    if not executor.success or server.errors:
        detail = server.errors[-1] if server.errors else {}
        raise RuntimeError(
            f"{label}: node {detail.get('node_id')} ({detail.get('node_type')}) failed: "
            f"{detail.get('exception_message')}\n{''.join(detail.get('traceback', []))[-3000:]}"
        )
    times = [*(t for t, _ in server.events), t1]
    durations = [
        (node, prompt[node]["class_type"], times[i + 1] - t) for i, (t, node) in enumerate(server.events)
    ]
    return {"total_s": t1 - t0, "nodes": durations, "latents": dict(COLLECTED)}


def stage_times(prompt: dict, nodes: list[tuple[str, str, float]]) -> dict[str, float]:
    """Seconds per stage: loaders ("load"), text encoding, stage 1 (up to its sampler), the upscale stage
    (upsampler to the stage-2 sampler), decode with audio; graph glue between them in "other"."""
    from e2e_graphs import stage_samplers

    first, second = stage_samplers(prompt)
    out = dict.fromkeys(("load", *STAGES, "other"), 0.0)
    for node, class_type, seconds in nodes:
        if class_type in LOADERS:
            stage = "load"
        elif class_type in TEXT:
            stage = "text_encode"
        elif node == first:
            stage = "stage1"
        elif node == second or class_type == "LTXVLatentUpsampler":
            stage = "upscale_stage"
        elif class_type in DECODE:
            stage = "decode"
        else:
            stage = "other"
        out[stage] += seconds
    return {k: round(v, 4) for k, v in out.items()}


def warmup_variant(prompt: dict) -> dict:
    """The same job with other text and seeds: a warm-up that leaves nothing of the timed run cached."""
    import copy

    prompt = copy.deepcopy(prompt)
    for node in prompt.values():
        inputs = node["inputs"]
        if node["class_type"] in ("CLIPTextEncode", "LTX2MGPUTextEncode") and isinstance(inputs["text"], str):
            inputs["text"] += WARMUP_SUFFIX
        if node["class_type"] == "PrimitiveStringMultiline" and isinstance(inputs.get("value"), str):
            inputs["value"] += WARMUP_SUFFIX
        if node["class_type"] == "RandomNoise":
            inputs["noise_seed"] = int(inputs["noise_seed"]) + 1
    return prompt


class ConsoleLines(logging.Handler):
    """The pack's console lines (logger "ltx2_mgpu": loads, LoRA switches, fallbacks) during a run,
    kept for the result: what the workers chose is part of what a time means."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> list[str]:
        log = logging.getLogger("ltx2_mgpu")
        self.level = log.level
        log.setLevel(logging.INFO)
        log.addHandler(self)
        return self.lines

    def __exit__(self, *exc) -> None:
        log = logging.getLogger("ltx2_mgpu")
        log.removeHandler(self)
        log.setLevel(self.level)


def run_side(prompt: dict, label: str, sync, devices: list[int], runs: int, trace=None) -> dict:
    if trace is not None:
        trace.start(label)
    server = StandInServer(sync)
    executor = make_executor(server)
    with MemoryPoller(devices) as warm_memory, ConsoleLines() as warm_lines:
        warm = run_prompt(executor, server, warmup_variant(prompt), f"{label}-warmup")
    timed_runs = []
    for i in range(runs):
        with MemoryPoller(devices) as memory, ConsoleLines() as lines:
            timed = run_prompt(executor, server, prompt, f"{label}-{i}")
        timed_runs.append((timed, memory))
        timed["console"] = lines
    best, memory = min(timed_runs, key=lambda r: r[0]["total_s"])
    result = {
        "total_s": round(best["total_s"], 4),
        "stages_s": stage_times(prompt, best["nodes"]),
        "all_totals_s": [round(r["total_s"], 4) for r, _ in timed_runs],
        "peak_device_memory_gib": {f"cuda:{d}": round(v / GIB, 2) for d, v in memory.peak.items()},
        "peak_process_memory_gib": memory.process_peaks_gib(),
        "warmup": {
            "total_s": round(warm["total_s"], 4),
            "stages_s": stage_times(prompt, warm["nodes"]),
            "peak_device_memory_gib": {f"cuda:{d}": round(v / GIB, 2) for d, v in warm_memory.peak.items()},
            "console": warm_lines,
        },
        "console": best["console"],  # the pack's console lines during the timed run
        "nodes_s": [(n, c, round(s, 4)) for n, c, s in best["nodes"]],
        "frames_shape": best["latents"].get("frames"),
        "waveform_shape": best["latents"].get("waveform"),
    }
    if trace is not None:  # every call of the warm-up and the timed runs, in order
        result["trace"] = json.loads(json.dumps(trace.summary()))
    del executor
    gc.collect()
    return result, best["latents"]


def free_everything() -> None:
    import comfy.model_management

    from ltx2_mgpu.workers.group.manager import get_manager

    get_manager().unload("benchmark side done")
    gc.collect()
    comfy.model_management.unload_all_models()
    comfy.model_management.cleanup_models_gc()
    comfy.model_management.soft_empty_cache()


def relative_error(ours, native) -> float:
    return float((ours - native).abs().max() / native.abs().max())


@dataclass(frozen=True)
class OursVariant:
    """One run of our side: the MGPU Loader's `weights` option, and each worker's GPU memory cap in GiB
    (LTX2_MGPU_GPU_MEMORY_GIB; None: the whole GPU). Written WEIGHTS or WEIGHTS@GIB."""

    weights: str
    gpu_memory_gib: float | None = None

    @staticmethod
    def parse(text: str) -> OursVariant:
        from ltx2_mgpu.workers.wire.weight_placement import WEIGHT_PLACEMENTS

        weights, _, gib = text.partition("@")
        if weights not in WEIGHT_PLACEMENTS:
            raise argparse.ArgumentTypeError(
                f"{text!r}: the weights option is one of {', '.join(WEIGHT_PLACEMENTS)} (then @GiB for a cap)"
            )
        try:
            cap = float(gib) if gib else None
        except ValueError:
            cap = None
        if gib and not (cap and cap > 0):
            raise argparse.ArgumentTypeError(
                f"{text!r}: after @ comes the cap per worker in GiB, e.g. layers@16"
            )
        return OursVariant(weights, cap)

    def __str__(self) -> str:
        return self.weights + (f"@{self.gpu_memory_gib:g}" if self.gpu_memory_gib else "")


def ours_graph(
    prompt: dict, variant: OursVariant, gguf: str | None, max_video_tokens: int | None = None
) -> dict:
    """Our side's graph with the loader's weights option; with `gguf`, the loader runs the LTX-2.3
    transformer GGUF e2e_models.py wrote (its VAEs from their split files) and MGPU Text Encode reads the
    text projection from the template's checkpoint, as a GGUF user's workflow does. `max_video_tokens`:
    the loader's, as a user on a small card lowers it to the job's largest stage (the pre-flight plans
    the activations with it)."""
    from e2e_models import AUDIO_VAE_23, VIDEO_VAE_23, gguf_name_23

    graph = copy.deepcopy(prompt)
    (loader,) = [n for n in graph.values() if n["class_type"] == "LTX2MGPULoader"]
    loader["inputs"]["weights"] = variant.weights
    if max_video_tokens:
        loader["inputs"]["max_video_tokens"] = max_video_tokens
    if gguf:
        checkpoint = loader["inputs"]["ckpt_name"]
        if not checkpoint.startswith("ltx-2.3"):
            raise ValueError(f"--gguf runs the LTX-2.3 jobs; this job's loader takes {checkpoint}")
        loader["inputs"].update(
            ckpt_name=gguf_name_23(gguf), video_vae_name=VIDEO_VAE_23, audio_vae_name=AUDIO_VAE_23
        )
        for node in graph.values():
            if node["class_type"] == "LTX2MGPUTextEncode":
                node["inputs"]["projection_file"] = checkpoint
    return graph


@contextlib.contextmanager
def gpu_memory_cap(gib: float | None):
    """LTX2_MGPU_GPU_MEMORY_GIB for the workers the run starts (and the loader's plan); the earlier value after."""
    from ltx2_mgpu.workers.wire.gpu_memory import GPU_MEMORY_ENV

    before = os.environ.get(GPU_MEMORY_ENV)
    if gib:
        os.environ[GPU_MEMORY_ENV] = f"{gib:g}"
    else:
        os.environ.pop(GPU_MEMORY_ENV, None)
    try:
        yield
    finally:
        os.environ.pop(GPU_MEMORY_ENV, None)
        if before is not None:
            os.environ[GPU_MEMORY_ENV] = before


def latent_parity(ours: dict, reference: dict) -> dict:
    parity = {}
    for kind in ("video", "audio"):
        a, b = ours[kind], reference[kind]
        parity[f"{kind}_latent_shape"] = list(b.shape)
        parity[f"{kind}_latent_max_rel_error"] = None if a.shape != b.shape else relative_error(a, b)
    return parity


def run_job(
    name: str,
    prompts: Path,
    size: str,
    gpus: str,
    sync,
    devices: list[int],
    runs: int,
    trace=None,
    sides: tuple[str, ...] = SIDES,
    variants: tuple[OursVariant, ...] = (OursVariant("replicated"),),
    gguf: str | None = None,
    max_video_tokens: int | None = None,
) -> dict:
    """Native, then our side once per variant (the first is "ours", the others "ours <variant>"), each
    after the last one's workers stopped. Latents compared with native's, or with the first variant's
    when native is not run."""
    native = json.loads((prompts / f"{name}.{size}.native.json").read_text())
    ours = json.loads((prompts / f"{name}.{size}.ours.json").read_text())
    for node in ours.values():
        if node["class_type"] == "LTX2MGPULoader" and size != "tiny":
            node["inputs"]["gpus"] = gpus
    result, latents = {}, {}
    if "native" in sides:
        print(f"[e2e] {name}: native", flush=True)
        result["native"], latents["native"] = run_side(native, f"{name}-native", sync, devices, runs, trace)
        free_everything()
    labels = []
    for i, variant in enumerate(variants if "ours" in sides else ()):
        label = "ours" if i == 0 else f"ours {variant}"
        print(
            f"[e2e] {name}: {label} ({gpus}, weights {variant}{', GGUF ' + gguf if gguf else ''})", flush=True
        )
        variant_info = {"weights": variant.weights, "gpu_memory_gib": variant.gpu_memory_gib, "gguf": gguf}
        with gpu_memory_cap(variant.gpu_memory_gib):
            try:
                result[label], latents[label] = run_side(
                    ours_graph(ours, variant, gguf, max_video_tokens),
                    f"{name}-{label}",
                    sync,
                    devices,
                    runs,
                    trace,
                )
            except RuntimeError as e:  # a variant that fails (out of memory under its cap) is a result too
                if len(variants) == 1:
                    raise
                result[label] = {"error": str(e)[:4000], "variant": variant_info}
                print(f"[e2e] {name}: {label} failed: {str(e)[:600]}", flush=True)
                continue
            finally:
                free_everything()  # its workers stop: the next variant's start with its own cap
        result[label]["variant"] = variant_info
        labels.append(label)
        print(f"[e2e] {name}: {label} {json.dumps(side_summary(result[label]))}", flush=True)
    reference = "native" if "native" in result else (labels[0] if labels else None)
    for label in labels:
        if label == reference:
            continue
        result[label]["final_latents_vs_" + reference] = latent_parity(latents[label], latents[reference])
        result[label]["speed_vs_" + reference] = round(
            result[reference]["total_s"] / result[label]["total_s"], 3
        )
    if reference == "native" and "ours" in labels:  # the names the README's table and tests read
        result["final_latents_ours_vs_native"] = result["ours"]["final_latents_vs_native"]
        result["speedup_total"] = result["ours"]["speed_vs_native"]
    print(
        json.dumps(
            {name: {k: v["total_s"] for k, v in result.items() if isinstance(v, dict) and "total_s" in v}}
        )
    )
    return result


def side_summary(side: dict) -> dict:
    """One side's figures in a line: what a run cut short by its time limit still leaves in the log."""
    keys = ("total_s", "stages_s", "peak_device_memory_gib", "peak_process_memory_gib")
    return {k: side.get(k) for k in keys} | {"warmup_s": side.get("warmup", {}).get("total_s")}


def machine() -> dict:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "platform": platform.platform()}  # fmt: skip
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = torch.version.cuda
    return info


def markdown_table(report: dict) -> str:
    """The README's table for one result file: per job and side, the stage times, total and peak memory."""
    gpus = report.get("machine", {}).get("gpus") or ["CPU"]
    lines = [
        f"{report['size']} size, {len(gpus)} x {gpus[0]}, our workers on {report['gpus']}; {report['templates']}",
        "",
        "| job | side | text encode | stage 1 | upscale stage | decode + audio | total | speed-up | peak memory per GPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, job in report["jobs"].items():
        for side in (k for k in job if k in SIDES or k.startswith("ours ")):
            result = job[side]
            stages = " | ".join(f"{result['stages_s'][s]:.2f} s" for s in STAGES)
            memory = ", ".join(f"{v:.1f} GiB" for v in result["peak_device_memory_gib"].values()) or "-"
            speedup = f"{result['speed_vs_native']:.2f}x" if "speed_vs_native" in result else ""
            lines.append(f"| {name} | {side} | {stages} | {result['total_s']:.2f} s | {speedup} | {memory} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prepare", type=Path, help="write the prompts into DIR/prompts and stop")
    parser.add_argument("--templates-cache", type=Path, default=None, help="download folder for --prepare")
    parser.add_argument("--prompts", type=Path, help="the folder --prepare wrote (DIR/prompts)")
    parser.add_argument("--models", type=Path, help="ComfyUI models folder (real size: bench/e2e_models.py)")
    parser.add_argument("--tiny", action="store_true", help="CPU, tiny files written into --scratch")
    parser.add_argument("--scratch", type=Path, default=Path("out/e2e/scratch"))
    parser.add_argument(
        "--tiny-made", nargs="+", default=(), metavar="DIR",
        help="with --tiny: folders `ltx2-mgpu make-tiny --family 2.3` / `2.5` wrote (linked, not made again)",
    )  # fmt: skip
    parser.add_argument("--gpus", default="0", help="our worker group's GPUs, as the loader takes them")
    parser.add_argument("--jobs", nargs="+", default=None, help="which jobs (default: all prepared)")
    parser.add_argument("--runs", type=int, default=1, help="timed runs per side (the fastest is reported)")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=list(SIDES),
        help="one side alone: no comparison, no speed-up",
    )
    parser.add_argument(
        "--ours", nargs="+", type=OursVariant.parse, default=[OursVariant("replicated")], metavar="WEIGHTS[@GIB]",
        help="our side once per variant: the loader's weights option, with @GIB each worker held to that much GPU "
        "memory (LTX2_MGPU_GPU_MEMORY_GIB), e.g. replicated layers@16 offloaded@16 (default: replicated)",
    )  # fmt: skip
    parser.add_argument(
        "--gguf", choices=GGUF_TYPES, default=None,
        help="our side runs the LTX-2.3 transformer GGUF of this type that e2e_models.py --gguf wrote (needs the "
        "ComfyUI-GGUF pack: LTX2_MGPU_COMFYUI_GGUF or ComfyUI's custom_nodes)",
    )  # fmt: skip
    parser.add_argument(
        "--max-video-tokens", type=int, default=None,
        help="our loader's max_video_tokens (default: the template graph's); the 2.3 t2v job's largest stage "
        "is 14,080 tokens, what a 16 GiB card's pre-flight plans layers with",
    )  # fmt: skip
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--trace", action="store_true", help="time every model call and decode (e2e_trace.py)"
    )
    parser.add_argument(
        "--profile-calls",
        default="",
        help="FOLDER:I,J,...: torch.profiler tables of model calls I, J (per side, from 0), here and in the ranks",
    )
    parser.add_argument("--table", type=Path, help="print a result file as the README's table and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_table(json.loads(args.table.read_text())))
        return 0

    root = os.environ.get("COMFYUI_PATH")
    if not root or not (Path(root) / "comfy").is_dir():
        parser.error(
            "set COMFYUI_PATH to a ComfyUI checkout (the folder holding comfy/, nodes.py, execution.py)"
        )
    if args.prepare:
        from e2e_graphs import prepare

        cache = args.templates_cache or args.prepare / "templates"
        for path in prepare(args.prepare / "prompts", Path(root), cache):
            print(path)
        return 0
    if not args.prompts or not args.out:
        parser.error("--prompts and --out are needed (or --prepare)")

    check_requirements()
    manifest = json.loads((args.prompts / "manifest.json").read_text())
    names = args.jobs or list(manifest["jobs"])
    size = "tiny" if args.tiny else "real"
    models = args.models
    profile_dir, profile_calls = None, set()
    if args.profile_calls:
        from ltx2_mgpu.workers.rank.call_profile import ENV, parse_setting

        setting = parse_setting(args.profile_calls)
        if setting is None:
            parser.error("--profile-calls takes DIR:N,M (model call indices, from 0)")
        profile_dir, profile_calls = setting
        calls = ",".join(map(str, sorted(profile_calls)))
        os.environ[ENV] = f"{profile_dir.resolve()}:{calls}"  # the workers inherit it
    if args.tiny:
        from e2e_models import stage_tiny_models

        made = tuple(Path(m).resolve() for m in args.tiny_made)
        models = stage_tiny_models(args.scratch / "models", Path(root), made, gguf=args.gguf)
    elif models is None:
        parser.error("--models: the folder bench/e2e_models.py wrote")
    models = models.resolve()  # the workers resolve model paths from another working directory
    import_comfyui(Path(root), tiny=args.tiny)
    if args.gguf:
        print(f"[e2e] ComfyUI-GGUF pack: {import_gguf_pack(Path(root))}", flush=True)
    use_models(models)
    if args.tiny:
        load_tiny_shim(models, args.scratch)

    import torch

    cuda = torch.cuda.is_available() and not args.tiny
    devices = list(range(torch.cuda.device_count())) if cuda else []  # memory of every visible GPU
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    trace = None
    if args.trace or profile_dir is not None:
        from e2e_trace import CallTrace

        trace = CallTrace(sync, profile_calls, profile_dir)
        trace.install()
    sides = tuple(s for s in SIDES if s in args.sides)
    results = {}
    for name in names:
        results[name] = run_job(
            name,
            args.prompts,
            size,
            args.gpus,
            sync,
            devices,
            args.runs,
            trace,
            sides,
            tuple(args.ours),
            args.gguf,
            args.max_video_tokens,
        )
        results[name]["job"] = manifest["jobs"][name]
    report = {
        "benchmark": "bench_e2e: official two-stage template jobs, ours vs native, same process and run",
        "size": size,
        "gpus": args.gpus if cuda else "cpu:2",
        "templates": manifest["templates_package"],
        "timing": "the fastest of --runs timed runs per side after one warm-up run (other text and seeds, "
        "loading included: `warmup`); stage times from the executor's node starts after a CUDA sync",
        "memory": "peak device memory in use per GPU (cudaMemGetInfo polled every 50 ms: this process and "
        "the workers, CUDA contexts included)",
        "weights": json.loads((models / "WEIGHTS.json").read_text())
        if (models / "WEIGHTS.json").exists()
        else None,
        "machine": machine(),
        "jobs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"[e2e] wrote {args.out}")
    with contextlib.suppress(Exception):
        free_everything()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
