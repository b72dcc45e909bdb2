"""The prompts bench_e2e.py runs: ComfyUI's official LTX two-stage templates as API prompts, native and
with this pack's nodes swapped in (the `--prepare` step; runs where the templates can be downloaded).

Reuses the template tests' conversion (tests/template_graphs.py: UI -> API prompt as the frontend
queues it) and swaps (tests/test_official_templates.py: the MGPU Loader's MODEL, MGPU Text Encode,
Distributed VAE Decode). Both graphs then get the same two changes:
- the prompt enhancer off on the subgraph's face (it would generate up to 2,048 tokens with a random
  Gemma: not a property of either side);
- SaveVideo and CreateVideo give way to BENCH_Collect, an output node that keeps the decoders' inputs
  (video and audio latents) and outputs (frames, waveform) in memory: the mp4 encoding is the same CPU
  work on both sides and needs PyAV, which the GPU machine may lack.
The template files and their conversions are written to an ignored folder, never committed.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
# The template conversion and faces live with the tests (tests/template_graphs.py, test_official_templates.py):
# importable from this module whatever the current directory or the caller's sys.path.
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
COLLECT = "BENCH_Collect"
COLLECT_ID = "9900"
SCHEDULER_ID = "9901"


@dataclass(frozen=True)
class Job:
    """One benchmarked job: a template at real size (`face`) and at CPU scale (`tiny_face`); optional
    stage-1 changes (SGLang's configuration: a 30-step LTXV schedule, CFG on the dev model)."""

    template: str
    face: dict[str, Any]
    tiny_face: dict[str, Any]
    stage1_steps: int | None = None
    tiny_stage1_steps: int | None = None
    stage1_cfg: float | None = None
    distributed_vae_decode: bool = True
    notes: list[str] = field(default_factory=list)


def jobs() -> dict[str, Job]:
    from test_official_templates import FACE_23, FACE_25

    return {
        "ltx23_t2v": Job(
            "video_ltx2_3_t2v",
            {"prompt_enhance": False},
            FACE_23,
            notes=["template defaults: 1280x720, 5 s at 25 fps; prompt enhancer off"],
        ),
        "ltx25_t2v": Job(
            "video_ltx2_5_t2v",
            {"prompt_enhance": False},
            FACE_25,
            notes=["template defaults: ResolutionSelector 16:9 0.9 MP, 5 s at 24 fps; prompt enhancer off"],
        ),
        "ltx23_sglang_768x512x121": Job(
            "video_ltx2_3_t2v",
            {"width": 768, "height": 512, "duration": 5, "fps": 24, "prompt_enhance": False},
            FACE_23,
            stage1_steps=30,
            tiny_stage1_steps=3,
            stage1_cfg=4.0,
            notes=[
                "SGLang's LTX-2.3 two-stage configuration on the t2v template: 768x512, 121 frames at 24 fps; "
                "stage 1: LTXVScheduler 30 steps, CFG 4 on the checkpoint's MODEL (no distilled LoRA); "
                "stage 2: the template's distilled-LoRA 3 steps"
            ],
        ),
    }


def stage_samplers(prompt: dict) -> tuple[str, str]:
    """(stage 1, stage 2) SamplerCustomAdvanced ids: stage 2 samples the upsampled latent."""
    from template_graphs import nodes_of

    samplers = nodes_of(prompt, "SamplerCustomAdvanced")
    upsampled = [s for s in samplers if _depends_on(prompt, s, "LTXVLatentUpsampler")]
    first = [s for s in samplers if s not in upsampled]
    if len(first) != 1 or len(upsampled) != 1:
        raise ValueError(
            f"expected one sampler per stage, found {samplers} ({upsampled} after the upsampler)"
        )
    return first[0], upsampled[0]


def _depends_on(prompt: dict, node_id: str, class_type: str) -> bool:
    seen, todo = set(), [node_id]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for value in prompt[current]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and value[0] in prompt:
                if prompt[value[0]]["class_type"] == class_type:
                    return True
                todo.append(value[0])
    return False


def with_stage1(prompt: dict, steps: int | None, cfg: float | None) -> dict:
    """Stage 1 on an LTXVScheduler of `steps` (on its latent) and CFG `cfg` on the loader's MODEL
    before any LoRA node (the model the LoRA node takes)."""
    if steps is None and cfg is None:
        return prompt
    prompt = copy.deepcopy(prompt)
    first, _ = stage_samplers(prompt)
    sampler = prompt[first]["inputs"]
    if steps is not None:
        prompt[SCHEDULER_ID] = {
            "class_type": "LTXVScheduler",
            "inputs": {
                "steps": steps, "max_shift": 2.05, "base_shift": 0.95, "stretch": True, "terminal": 0.1,
                "latent": sampler["latent_image"],
            },
        }  # fmt: skip
        sampler["sigmas"] = [SCHEDULER_ID, 0]
    if cfg is not None:
        guider = prompt[sampler["guider"][0]]
        if guider["class_type"] != "CFGGuider":
            raise ValueError(f"stage 1's guider is {guider['class_type']}, not CFGGuider")
        guider["inputs"]["cfg"] = cfg
        model = prompt[guider["inputs"]["model"][0]]
        if model["class_type"] == "LoraLoaderModelOnly":
            guider["inputs"]["model"] = model["inputs"]["model"]
    return prompt


def with_collect(prompt: dict) -> dict:
    """SaveVideo and CreateVideo replaced by BENCH_Collect on the decoders' inputs and outputs."""
    from template_graphs import nodes_of

    prompt = copy.deepcopy(prompt)
    (create,) = nodes_of(prompt, "CreateVideo")
    create_inputs = prompt.pop(create)["inputs"]
    for save in nodes_of(prompt, "SaveVideo"):
        del prompt[save]
    (audio_decode,) = nodes_of(prompt, "LTXVAudioVAEDecode")
    image_source = create_inputs["images"]
    decoder = prompt[image_source[0]]
    video_latent = decoder["inputs"].get("samples", decoder["inputs"].get("latent"))
    prompt[COLLECT_ID] = {
        "class_type": COLLECT,
        "inputs": {
            "video_latent": video_latent, "audio_latent": prompt[audio_decode]["inputs"]["samples"],
            "images": image_source, "audio": create_inputs["audio"],
        },
    }  # fmt: skip
    return prompt


def swap_text_encode_any(graph: dict, loader_id: str) -> dict:
    """MGPU Text Encode for each CLIPTextEncode on the template's text encoder (2.3:
    LTXAVTextEncoderLoader's Gemma 3; 2.5: CLIPLoader's Gemma 4)."""
    from template_graphs import nodes_of

    graph = copy.deepcopy(graph)
    for node_id in nodes_of(graph, "CLIPTextEncode"):
        inputs = graph[node_id]["inputs"]
        clip = graph[inputs["clip"][0]]
        if clip["class_type"] == "LTXAVTextEncoderLoader":
            text_encoder = clip["inputs"]["text_encoder"]
        elif clip["class_type"] == "CLIPLoader":
            text_encoder = clip["inputs"]["clip_name"]
        else:
            raise ValueError(f"CLIPTextEncode {node_id} encodes with {clip['class_type']}")
        graph[node_id] = {
            "class_type": "LTX2MGPUTextEncode",
            "inputs": {"mgpu_model": [loader_id, 0], "text_encoder": text_encoder, "text": inputs["text"],
                       "placement": "auto"},
        }  # fmt: skip
    return graph


def prompts_for(job: Job, templates: Path, object_info: dict, *, tiny: bool) -> tuple[dict, dict]:
    """(native, ours) API prompts of `job` (see module docstring). Tiny: the template tests' CPU face,
    float32 weights on our loader, the bf16 transformer for LTX-2.5 (its int8 convrot parity is an
    open issue, tests/test_official_templates.py); real: the template's own files, bfloat16."""
    from template_graphs import load_template, set_face, ui_to_prompt
    from test_official_templates import LOADER_ID, bf16_transformer, swap_loader, swap_vae_decode

    workflow = load_template(templates, job.template)
    for label, value in (job.tiny_face if tiny else job.face).items():
        set_face(workflow, label, value)
    prompt = ui_to_prompt(workflow, object_info)
    if tiny:
        prompt = bf16_transformer(prompt)
    prompt = with_stage1(prompt, job.tiny_stage1_steps if tiny else job.stage1_steps, job.stage1_cfg)
    native = with_collect(prompt)
    # The SGLang configuration keeps the template's LoRA node for stage 2 only: the literal swap (the
    # ranks apply that node's patches); otherwise the distilled LoRA goes into the loader.
    ours = swap_loader(native, lora_in_loader=job.stage1_cfg is None, gpus="cpu:2" if tiny else "GPUS")
    ours[LOADER_ID]["inputs"]["weight_dtype"] = "float32" if tiny else "bfloat16"
    ours = swap_text_encode_any(ours, LOADER_ID)
    if job.distributed_vae_decode:
        ours = swap_vae_decode(ours)
        (collect,) = [k for k, v in ours.items() if v["class_type"] == COLLECT]
        ours[collect]["inputs"]["video_latent"] = ours[ours[collect]["inputs"]["images"][0]]["inputs"][
            "latent"
        ]
    return native, ours


def prepare(out: Path, comfyui_root: Path, cache: Path) -> list[Path]:
    """Download the pinned templates into `cache`, convert them with ComfyUI's node list and write
    `out`/<job>.<real|tiny>.<native|ours>.json. Returns the files written."""
    from template_graphs import TEMPLATES_VERSION, core_object_info, fetch_templates

    templates = fetch_templates(cache)
    object_info = core_object_info(comfyui_root)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, job in jobs().items():
        for size in ("real", "tiny"):
            native, ours = prompts_for(job, templates, object_info, tiny=size == "tiny")
            for side, prompt in (("native", native), ("ours", ours)):
                path = out / f"{name}.{size}.{side}.json"
                path.write_text(json.dumps(prompt, indent=1))
                written.append(path)
    (out / "manifest.json").write_text(
        json.dumps({
            "templates_package": f"comfyui-workflow-templates-json=={TEMPLATES_VERSION}",
            "jobs": {name: {"template": j.template, "face": j.face, "tiny_face": j.tiny_face,
                            "stage1_steps": j.stage1_steps, "stage1_cfg": j.stage1_cfg,
                            "distributed_vae_decode": j.distributed_vae_decode, "notes": j.notes}
                     for name, j in jobs().items()},
        }, indent=1)
    )  # fmt: skip
    return written
