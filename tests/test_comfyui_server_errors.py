"""What a user sees in a real ComfyUI server when something goes wrong (opt-in: COMFYUI_PATH).

Issue 20: errors from inside the workers reached ComfyUI's error dialog as raw library text, typed as
a file path (".../ComfyUI-LTX2-MultiGPU.workers.errors.JobError"). Checked here over HTTP, as the
dialog gets them (the execution_error event of /history):
- a command that fails alike on every worker: the type reads `LTX2MultiGPU.JobError`, the message
  names the command, the cause and what to do, the traceback is in the console (the server log) and
  not in the message, and the group with its loaded model is kept (same worker processes);
- a checkpoint cut short: refused before any worker starts, naming the file and what to do;
- the template browser's category for our example workflows reads as the README names it.

A test-only node (tests/comfyui_test_shims/error_drill.py, which the shared workflow server installs
into its temporary custom_nodes) runs a worker command of the pack's fault drills on the group of an
MGPU_MODEL; nothing in the pack is changed for the test.
"""

from __future__ import annotations

import re
import time

import pytest
from comfyui_harness import (
    PACK_FOLDER,
    PACK_ROOT,
    ComfyUIServer,
    link_models,
    status_message,
    worker_processes,
)

pytestmark = pytest.mark.comfyui

PROMPT_TIMEOUT_S = 300.0
# The name the README gives the pack in ComfyUI (node category and template browser).
README_NAME = "LTX-2 MultiGPU"


@pytest.fixture(scope="module")
def truncated(tiny, tmp_path_factory):
    data = tiny.checkpoint.read_bytes()
    path = tmp_path_factory.mktemp("truncated") / "ltx-2-cut-short.safetensors"
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.fixture(scope="module")
def server(workflow_server, tiny, truncated, tmp_path_factory) -> ComfyUIServer:
    """The session's shared server (tests/workflow_server.py: it carries the fault drill node), with
    the tiny checkpoint and the cut-short one linked in under their own names."""
    link_models(workflow_server.layout, {"checkpoints": [tiny.checkpoint, truncated]})
    return workflow_server


def drill_prompt(checkpoint: str, kind: str) -> dict:
    return {
        "1": {
            "class_type": "LTX2MGPULoader",
            "inputs": {"ckpt_name": checkpoint, "gpus": "cpu:2", "weight_dtype": "float32"},
        },
        "2": {"class_type": "LTX2MGPUFaultDrill", "inputs": {"mgpu_model": ["1", 0], "kind": kind}},
    }


def run_to_error(server: ComfyUIServer, prompt: dict) -> tuple[dict, float]:
    t0 = time.monotonic()
    entry = server.wait_done(server.queue_prompt(prompt), PROMPT_TIMEOUT_S)
    error = status_message(entry, "execution_error")
    assert error is not None, entry["status"]
    return error, time.monotonic() - t0


def test_a_worker_error_shows_a_short_type_a_message_to_act_on_and_keeps_the_group(server, tiny):
    server.run_prompt(drill_prompt(tiny.checkpoint.name, "ping"), PROMPT_TIMEOUT_S)  # group up, model loaded
    workers = {p.pid for p in worker_processes(server.pid)}
    assert len(workers) == 2
    error, error_s = run_to_error(server, drill_prompt(tiny.checkpoint.name, "raise_all"))
    print(f"\n[server] {error['exception_type']}: {error['exception_message'].strip()} ({error_s:.2f} s)")
    assert error["exception_type"] == "LTX2MultiGPU.JobError"
    message = error["exception_message"]
    assert message.startswith(
        "the workers' 'fault' command failed on every worker with RuntimeError: raised on purpose on every rank."
    )
    assert "the traceback is in the console" in message and "Traceback" not in message
    log = server.log_tail(200_000)
    assert re.search(r"rank [01] \(cpu\): command 'fault' failed:\nTraceback \(most recent call last\)", log)
    t0 = time.monotonic()
    server.run_prompt(drill_prompt(tiny.checkpoint.name, "ping"), PROMPT_TIMEOUT_S)
    assert {p.pid for p in worker_processes(server.pid)} == workers, "the group was restarted"
    print(f"[server] next prompt on the same workers in {time.monotonic() - t0:.2f} s")


def test_a_checkpoint_cut_short_is_named_with_what_to_do(server, truncated):
    error, error_s = run_to_error(server, drill_prompt(truncated.name, "ping"))
    print(f"\n[server] {error['exception_type']}: {error['exception_message'].strip()} ({error_s:.2f} s)")
    assert error["exception_type"] == "ValueError" and error["node_type"] == "LTX2MGPULoader"
    message = error["exception_message"]
    assert f"{truncated.name} is incomplete" in message and "download the file again" in message
    assert "SafetensorError" not in message


def test_the_template_browser_names_the_example_workflows_as_the_readme_does(server):
    assert server.get("/workflow_templates").get(PACK_FOLDER), "example_workflows/ are not served"
    categories = server.get("/i18n")["en"]["templateWorkflows"]["category"]
    assert categories[PACK_FOLDER] == README_NAME
    readme = (PACK_ROOT / "README.md").read_text()
    assert f"template browser (**{README_NAME}**" in readme
