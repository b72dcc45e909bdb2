"""MGPU Text Encode on a group that spans two "machines" (tests/machine_agents.py: this process and
`ltx2-mgpu worker --join` as a process tree of its own, with its own copies of the checkpoint and the
Gemma file), on the tiny LTX-2.3 with ComfyUI's engine: the prompt's embeddings equal CLIPTextEncode's
on ComfyUI's own LTXAVTextEncoderLoader (tests/ltx23_fixtures.py), as on one machine (opt-in:
COMFYUI_PATH). The Gemma file is a command's file like any other: checked on the other machine by size
and SHA-256, and read there from its own folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from comfyui_harness import comfyui_root
from ltx23_fixtures import comfy23  # noqa: F401
from machine_agents import Agent, listening
from test_ltx23_nodes import PROMPT, RELATIVE_TOLERANCE, relative

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui


@pytest.fixture(scope="module")
def listen() -> Iterator[str]:
    with listening() as address:
        yield address


@pytest.fixture(scope="module")
def box2_models(comfy23, tmp_path_factory) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("box2-models-ltx23")
    for path in (comfy23.files.checkpoint, comfy23.gemma):
        shutil.copy(path, folder / path.name)
    return folder


@pytest.mark.parametrize("placement", ["layers", "replicas"])
def test_text_encode_across_two_machines_matches_clip_text_encode(comfy23, listen, box2_models, placement):  # noqa: F811
    """layers: the other machine runs the second half of Gemma's layers and sends its hidden states over
    (point-to-point across the machines); replicas: each machine holds Gemma whole, this one encodes."""
    from ltx2_mgpu.nodes import text_encode

    root = check_comfyui_root(comfyui_root())
    agent = Agent(listen, box2_models)
    try:
        model = MGPUModel.create(
            comfy23.files.checkpoint, devices="cpu,box2:cpu", dtype="float32", backend="comfy",
            comfyui_root=root.path, comfyui_version=root.version,
        )  # fmt: skip
        replies: list[dict] = []
        run_job = text_encode.run_job
        with pytest.MonkeyPatch.context() as patches:  # the ranks' replies: where Gemma's layers were
            patches.setattr(
                text_encode, "run_job", lambda *a, **k: replies.extend(run_job(*a, **k)) or replies
            )
            (ours,) = text_encode.encode_prompt(model, comfy23.gemma.name, PROMPT, placement)
    finally:
        get_manager().unload()
        agent.stop()
        assert_no_leaks()
    with torch.inference_mode():
        (native,) = comfy23.nodes.CLIPTextEncode().encode(comfy23.clip, PROMPT)
    found = relative(ours[0][0], native[0][0])
    print(
        f"\n[two machines, LTX-2.3] MGPU Text Encode ({placement}) vs CLIPTextEncode: max|d| {found[0]:.2e} rel {found[1]:.2e}"
    )
    assert found[1] <= RELATIVE_TOLERANCE, found
    assert [r["placement"] for r in replies] == [placement] * 2
    if placement == "layers":  # each machine ran its own range of Gemma's layers
        (first, cut), (start, _stop) = replies[0]["layers"], replies[1]["layers"]
        assert first == 0 and cut == start > 0, replies
    assert ours[0][1].get("unprocessed_ltxav_embeds") == native[0][1].get("unprocessed_ltxav_embeds")
