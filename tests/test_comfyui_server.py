"""The pack inside a real ComfyUI server, black box, over HTTP (opt-in: COMFYUI_PATH).

ComfyUI runs as a subprocess (`main.py --cpu`) on a free loopback port with a temporary base
directory: our pack symlinked into its custom_nodes as a user installs it, the tiny checkpoint in
models/checkpoints and the tiny upscaler in models/latent_upscale_models. The checkout is not
modified. Checked:
- /object_info lists every node of the pack (list-driven: new nodes are checked when they appear)
  with the inputs and outputs the classes declare; file pickers list ComfyUI's model folders;
- /workflow_templates lists example_workflows/*.json (skipped while the folder is empty);
- an API-format text-to-video graph of native nodes around MGPU Loader + SP Sampler runs and
  SaveVideo writes an mp4 with the expected frames, size and an audio track;
- "Unload Models" (POST /free) stops our workers; the next prompt works with the cached
  MGPU_MODEL (the group restarts); quitting ComfyUI leaves no worker and no /dev/shm segment.

Text conditioning: the tiny checkpoint has no Gemma, so a test-only node pack written into the
temporary custom_nodes provides TinyLTX2Conditioning (random features in the form ComfyUI's LTX-2
text encoder gives them); LTXVConditioning adds the frame rate as in the official template.

Run: COMFYUI_PATH=/path/to/ComfyUI <ComfyUI's python> -m pytest tests/test_comfyui_server.py -s
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfyui_harness import (
    PACK_FOLDER,
    PACK_ROOT,
    ComfyUIServer,
    comfyui_root,
    is_live_worker,
    make_layout,
    pack_node_classes,
    saved_files,
    status_message,
    wait_until,
    worker_processes,
)

from ltx2_mgpu.workers.embedded.tiny_model import CAPTION_CHANNELS
from ltx2_mgpu.workers.wire import shm

pytestmark = pytest.mark.comfyui

# Nodes every build has; DESIGN.md lists the others, checked here as soon as they are registered.
CORE_NODES = ("LTX2MGPULoader", "LTX2SPSampler")
# Inputs that list a ComfyUI model folder's files.
FILE_PICKERS = {
    "ckpt_name",
    "upscale_model",
    "lora_name",
    "video_vae_name",
    "audio_vae_name",
    "text_encoder",
    "projection_file",
}
WORKERS = 2  # the graph asks for gpus "cpu:2"
# One prompt on 2 CPU ranks: group start ~5-10 s, load, 4 steps, decode, mp4 (~20 s measured on
# the 2-core CI box when idle); generous because CI machines are shared.
PROMPT_TIMEOUT_S = 300.0
WORKER_EXIT_TIMEOUT_S = 30.0
# Cancel: a prompt long enough to be mid-sampling when Cancel comes (tens of ms per step here), and
# how long after queueing it to press Cancel (everything before the sampler is cached by then).
LONG_STEPS = 3000
CANCEL_AFTER_S = 2.0
# A 17-frame 96x64 clip at 24 fps: video latent [1, 128, 3, 2, 3], audio latent [1, 8, 18, 16].
WIDTH, HEIGHT, FRAMES, FPS = 96, 64, 17, 24.0

TEST_PACK_FOLDER = "ltx2_mgpu_test_nodes"
TEST_PACK_SOURCE = '''"""Test-only nodes for ComfyUI-LTX2-MultiGPU's server test (written by the test, never shipped)."""
import torch


class TinyLTX2Conditioning:
    """CONDITIONING as ComfyUI's LTX-2 text encoder gives it (unprocessed features [1, T, width]),
    from random numbers: stands in for Gemma with the tiny checkpoint."""

    CATEGORY = "testing"
    RETURN_TYPES = ("CONDITIONING",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "tokens": ("INT", {"default": 8, "min": 1, "max": 4096}),
            "width": ("INT", {"default": 64, "min": 1, "max": 8192}),
            "seed": ("INT", {"default": 0, "min": 0, "max": 2**31 - 1}),
        }}

    def make(self, tokens, width, seed):
        g = torch.Generator().manual_seed(seed)
        return ([[torch.randn(1, tokens, width, generator=g), {"unprocessed_ltxav_embeds": True}]],)


NODE_CLASS_MAPPINGS = {"TinyLTX2Conditioning": TinyLTX2Conditioning}
'''


def t2v_prompt(checkpoint: str, seed: int, prefix: str, steps: int = 4) -> dict:
    """API-format graph: the official LTX-2 t2v template's stage 1 with MGPU Loader + SP Sampler in
    place of CheckpointLoaderSimple's MODEL + SamplerCustomAdvanced; everything else native."""

    def link(node: str, slot: int = 0) -> list:
        return [node, slot]

    nodes = {
        "1": ("CheckpointLoaderSimple", {"ckpt_name": checkpoint}),
        "2": ("LTXVAudioVAELoader", {"ckpt_name": checkpoint}),
        "3": ("TinyLTX2Conditioning", {"tokens": 11, "width": CAPTION_CHANNELS, "seed": 1}),
        "4": ("TinyLTX2Conditioning", {"tokens": 6, "width": CAPTION_CHANNELS, "seed": 2}),
        "5": ("LTXVConditioning", {"positive": link("3"), "negative": link("4"), "frame_rate": FPS}),
        "6": ("EmptyLTXVLatentVideo", {"width": WIDTH, "height": HEIGHT, "length": FRAMES, "batch_size": 1}),
        "7": (
            "LTXVEmptyLatentAudio",
            {"frames_number": FRAMES, "frame_rate": FPS, "batch_size": 1, "audio_vae": link("2")},
        ),
        "8": ("LTXVConcatAVLatent", {"video_latent": link("6"), "audio_latent": link("7")}),
        "9": (
            "LTXVScheduler",
            {
                "steps": steps,
                "max_shift": 2.05,
                "base_shift": 0.95,
                "stretch": True,
                "terminal": 0.1,
                "latent": link("8"),
            },
        ),
        "10": (
            "LTX2MGPULoader",
            {"ckpt_name": checkpoint, "gpus": f"cpu:{WORKERS}", "weight_dtype": "float32"},
        ),
        "11": (
            "LTX2SPSampler",
            {
                "mgpu_model": link("10"),
                "positive": link("5", 0),
                "negative": link("5", 1),
                "latent": link("8"),
                "sigmas": link("9"),
                "sampler_name": "euler_ancestral",
                "cfg": 3.0,
                "cfg_audio": 3.0,
                "seed": seed,
            },
        ),
        "12": ("LTXVSeparateAVLatent", {"av_latent": link("11")}),
        "13": (
            "VAEDecodeTiled",
            {
                "samples": link("12", 0),
                "vae": link("1", 2),
                "tile_size": 512,
                "overlap": 64,
                "temporal_size": 4096,
                "temporal_overlap": 8,
            },
        ),
        "14": ("LTXVAudioVAEDecode", {"samples": link("12", 1), "audio_vae": link("2")}),
        "15": ("CreateVideo", {"images": link("13"), "fps": FPS, "audio": link("14")}),
        "16": (
            "SaveVideo",
            {"video": link("15"), "filename_prefix": prefix, "format": "mp4", "format.codec": "h264"},
        ),
    }
    return {node_id: {"class_type": cls, "inputs": inputs} for node_id, (cls, inputs) in nodes.items()}


@pytest.fixture(scope="module")
def comfyui_server(tiny, tmp_path_factory) -> Iterator[ComfyUIServer]:
    """One server for the module (started on first use; restarted if a test stopped it)."""
    layout = make_layout(
        tmp_path_factory.mktemp("comfyui-base"),
        models={"checkpoints": [tiny.checkpoint], "latent_upscale_models": [tiny.spatial_upscaler]},
        extra_packs={TEST_PACK_FOLDER: TEST_PACK_SOURCE},
    )
    server = ComfyUIServer(comfyui_root(), layout)
    yield server
    server.stop()


@pytest.fixture
def server(comfyui_server) -> ComfyUIServer:
    if not comfyui_server.is_running:
        comfyui_server.start()
        print(f"\n[server] ComfyUI booted in {comfyui_server.boot_s:.1f} s (port {comfyui_server.port})")
    return comfyui_server


def test_object_info_lists_every_node_of_the_pack(server, tiny):
    """What ComfyUI serves is what the V3 classes declare (read here through the same comfy_api), whose
    ids, inputs and outputs tests/test_node_contract.py holds to the saved workflows' contract."""
    info = server.get("/object_info")
    classes = pack_node_classes()
    assert set(CORE_NODES) <= classes.keys()
    missing = [node for node in classes if node not in info]
    assert not missing, f"not served by ComfyUI (import failed?): {missing}\n{server.log_tail()}"
    assert "TinyLTX2Conditioning" in info
    for node_id, cls in classes.items():
        entry, schema = info[node_id], cls.GET_SCHEMA()
        assert entry["python_module"] == f"custom_nodes.{PACK_FOLDER}"
        assert (entry["display_name"], entry["category"]) == (schema.display_name, schema.category)
        assert (entry["output"], entry["output_name"]) == (list(cls.RETURN_TYPES), list(cls.RETURN_NAMES))
        # As JSON, as served. Outside ComfyUI a file picker lists only its fixed choices ("None"...), which
        # come first in the served list, the folder's files after them.
        declared = json.loads(json.dumps(cls.INPUT_TYPES()))
        assert list(entry["input"]) == list(declared), node_id  # required, optional, hidden
        assert entry["input"].get("hidden") == declared.get("hidden"), node_id  # the node id, for progress
        for section in ("required", "optional"):
            inputs, served = declared.get(section, {}), entry["input"].get(section, {})
            assert list(served) == list(inputs), (node_id, section)
            for name, (kind, options) in inputs.items():
                served_kind, served_options = served[name][0], dict(served[name][1])
                if kind == "COMBO":
                    choices, served_choices = options.pop("options"), served_options.pop("options")
                    files = served_choices[len(choices) :] if name in FILE_PICKERS else []
                    assert served_choices == choices + files, (node_id, name, served_choices)
                assert (served_kind, served_options) == (kind, options), (node_id, name)
        for name, spec in entry["input"]["required"].items():
            if name == "ckpt_name":
                assert tiny.checkpoint.name in spec[1]["options"], (node_id, spec)
            elif name == "upscale_model":
                assert tiny.spatial_upscaler.name in spec[1]["options"], (node_id, spec)
    print(f"\n[server] /object_info serves {sorted(classes)}")


def test_workflow_templates_list_the_example_workflows(server):
    examples = sorted(p.stem for p in (PACK_ROOT / "example_workflows").glob("*.json"))
    if not examples:
        pytest.skip("example_workflows/ holds no workflow yet")
    served = server.get("/workflow_templates")
    assert sorted(served.get(PACK_FOLDER, [])) == examples
    for name in examples:
        workflow = server.get(f"/api/workflow_templates/{PACK_FOLDER}/{name}.json")
        assert isinstance(workflow, dict) and "nodes" in workflow, f"{name}.json is not a UI-format workflow"


def check_mp4(path: Path) -> None:
    """The saved file: FRAMES frames of WIDTH x HEIGHT, and an audio track."""
    import av  # PyAV: a ComfyUI requirement, so present where this test runs (not in our own venv)

    assert path.suffix == ".mp4" and path.is_file() and path.stat().st_size > 0, path
    with av.open(str(path)) as container:
        assert len(container.streams.audio) == 1, "the mp4 has no audio track"
        video = container.streams.video[0]
        assert (video.codec_context.width, video.codec_context.height) == (WIDTH, HEIGHT)
        assert sum(1 for _ in container.decode(video=0)) == FRAMES


def run_t2v(server: ComfyUIServer, tiny, seed: int) -> tuple[Path, float]:
    t0 = time.monotonic()
    entry = server.run_prompt(
        t2v_prompt(tiny.checkpoint.name, seed, f"ltx2_mgpu/t2v_{seed}"), PROMPT_TIMEOUT_S
    )
    elapsed = time.monotonic() - t0
    files = saved_files(entry, server.layout.output)
    assert len(files) == 1, entry.get("outputs")
    check_mp4(files[0])
    return files[0], elapsed


def test_cancel_stops_the_sampler_and_the_group_stays_usable(server, tiny):
    pid = server.pid
    # Warm up: group started, model loaded; the long prompt then reuses every cached node output
    # up to the scheduler, so Cancel lands in the sampler.
    run_t2v(server, tiny, seed=44)
    workers = {p.pid for p in worker_processes(pid)}
    prompt_id = server.queue_prompt(t2v_prompt(tiny.checkpoint.name, 44, "ltx2_mgpu/cancelled", LONG_STEPS))
    time.sleep(CANCEL_AFTER_S)
    t0 = time.monotonic()
    server.post("/interrupt", {})  # the UI's Cancel
    entry = server.wait_done(prompt_id, PROMPT_TIMEOUT_S)
    cancel_s = time.monotonic() - t0
    interrupted = status_message(entry, "execution_interrupted")
    assert interrupted is not None, entry["status"]  # ComfyUI's interrupt, not an error
    assert interrupted["node_type"] == "LTX2SPSampler", interrupted
    assert {p.pid for p in worker_processes(pid)} == workers, "Cancel must leave the group running"
    _, after_s = run_t2v(server, tiny, seed=45)
    assert {p.pid for p in worker_processes(pid)} == workers
    print(
        f"\n[server] Cancel ended the {LONG_STEPS}-step prompt in {cancel_s:.2f} s; next prompt {after_s:.1f} s"
    )


def test_prompt_unload_rerun_and_quit_leave_nothing_behind(server, tiny):
    pid = server.pid
    video, first_s = run_t2v(server, tiny, seed=42)
    workers = worker_processes(pid)
    assert len(workers) == WORKERS, "the group should run one worker per requested CPU rank"

    t0 = time.monotonic()
    server.post("/free", {"unload_models": True})  # the UI's "Unload Models"
    assert wait_until(lambda: not worker_processes(pid), WORKER_EXIT_TIMEOUT_S), "Unload Models left workers"
    unload_s = time.monotonic() - t0  # the prompt worker unloads as soon as /free wakes it
    assert not any(is_live_worker(p) for p in workers)
    # The group unlinks its control block right after its workers exit.
    assert wait_until(lambda: not shm.list_segments(pid), WORKER_EXIT_TIMEOUT_S), (
        f"segments left in /dev/shm after Unload Models: {shm.list_segments(pid)}"
    )

    # The MGPU_MODEL output stays cached in ComfyUI: the next prompt restarts the group from it.
    _, second_s = run_t2v(server, tiny, seed=43)
    restarted = worker_processes(pid)
    assert len(restarted) == WORKERS and not {p.pid for p in restarted} & {p.pid for p in workers}

    # Quit with the model loaded (Ctrl+C): workers follow their parent, nothing stays in /dev/shm.
    t0 = time.monotonic()
    how = server.stop()
    stop_s = time.monotonic() - t0
    assert how == "sigint", f"ComfyUI needed {how} to stop\n{server.stuck}\n{server.log_tail()}"
    assert wait_until(lambda: not any(is_live_worker(p) for p in restarted), WORKER_EXIT_TIMEOUT_S), (
        "workers outlived ComfyUI"
    )
    assert shm.list_segments(pid) == [], f"the stopped ComfyUI left {shm.list_segments(pid)} in /dev/shm"
    print(
        f"\n[server] {video.name}: first prompt {first_s:.1f} s, unload {unload_s:.2f} s, "
        f"second prompt (group restart) {second_s:.1f} s, stop {stop_s:.1f} s"
    )
