"""MGPU Text Encode on the tiny LTX-2.5 Gemma 4 file with its layers spread over 2 and 3 CPU workers
(placement "layers": ComfyUI's own layer loop with relays between ranks), against native
CLIPTextEncode on the same file in this process (opt-in: COMFYUI_PATH).

Each rank must hold exactly its block of layers (the replies list the layers whose weights a rank
holds, read from its model), the blocks must cover Gemma's 48 layers once, ranks > 0 must hold
nothing else of size (rank 0 alone runs the embedding and the LTX projection), and the CONDITIONING
must be native's (bound 1e-5 of its largest magnitude; on one device type it is bit for bit).
Run: COMFYUI_PATH=... python -m pytest -s tests/test_comfy_ltx25_text_split.py
"""

from __future__ import annotations

import pytest
import torch
from test_comfy_ltx25_nodes import RELATIVE_TOLERANCE, load_ours, relative
from test_tiny_ltx25 import native25  # noqa: F401

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui

PROMPT = "A red fox runs through fresh snow at dawn, cinematic."
GEMMA4_LAYERS = 48  # the tiny file keeps 12B's layer count


def keep_replies(monkeypatch) -> list[list[dict]]:
    """The node's jobs' replies (one dict per rank), kept as the node runs them."""
    from ltx2_mgpu.nodes import text_encode

    replies: list[list[dict]] = []
    run_job = text_encode.run_job

    def run_and_keep(*args, **kwargs) -> list[dict]:
        replies.append(run_job(*args, **kwargs))
        return replies[-1]

    monkeypatch.setattr(text_encode, "run_job", run_and_keep)
    return replies


@pytest.mark.parametrize("ranks", (2, 3))
def test_gemma4_layer_split_matches_clip_text_encode(native25, tiny25, ranks, monkeypatch):  # noqa: F811
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    replies = keep_replies(monkeypatch)
    with torch.inference_mode():
        (native,) = native25.nodes.CLIPTextEncode().encode(native25.clip, PROMPT)
    model, _ = load_ours(tiny25, ranks, tiny25.transformer)
    try:
        (ours,) = encode_prompt(model, tiny25.text_encoder.name, PROMPT, placement="layers")
        (again,) = encode_prompt(model, tiny25.text_encoder.name, PROMPT, placement="auto")
    finally:
        get_manager().unload()
        assert_no_leaks()
    rel = relative(ours[0][0], native[0][0])
    blocks = [(r["layers"][0], r["layers"][-1] + 1) if r["layers"] else () for r in replies[0]]
    others = [r["weight_bytes"]["other"] for r in replies[0]]
    print(
        f"\n[LTX-2.5 Gemma 4 layer split, {ranks} ranks] rel {rel:.2e}, {ours[0][0].shape[1]} tokens, "
        f"layers {blocks}, bytes outside layers {others}"
    )
    assert rel <= RELATIVE_TOLERANCE
    # "auto" keeps the resident split (it would fit rank 0 whole) and encodes the same again.
    assert torch.equal(again[0][0], ours[0][0])
    assert ours[0][1]["unprocessed_ltxav_embeds"] is True
    for reply in replies:
        assert [r["placement"] for r in reply] == ["layers"] * ranks
        held = [r["layers"] for r in reply]
        assert all(held), held  # every rank holds layers, a block each, in rank order
        assert [i for block in held for i in block] == list(range(GEMMA4_LAYERS)), held
        sizes = [r["weight_bytes"] for r in reply]
        # Ranks > 0 hold their layers and the final norm only (no embedding, projection, media embedders).
        assert all(s["layers"] > 0 and s["other"] * 100 < sizes[0]["other"] for s in sizes[1:]), sizes
    assert replies[0][0]["tokens"] == ours[0][0].shape[1]


def test_gemma4_auto_runs_whole_on_rank0_when_it_fits(native25, tiny25, monkeypatch):  # noqa: F811
    """The tiny file fits rank 0 with room to spare: "auto" runs it there, the other rank holds none."""
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    replies = keep_replies(monkeypatch)
    with torch.inference_mode():
        (native,) = native25.nodes.CLIPTextEncode().encode(native25.clip, PROMPT)
    model, _ = load_ours(tiny25, 2, tiny25.transformer)
    try:
        (ours,) = encode_prompt(model, tiny25.text_encoder.name, PROMPT, placement="auto")
    finally:
        get_manager().unload()
        assert_no_leaks()
    assert relative(ours[0][0], native[0][0]) <= RELATIVE_TOLERANCE
    assert [(r["placement"], r["layers"]) for r in replies[0]] == [
        ("rank 0", list(range(GEMMA4_LAYERS))),
        ("rank 0", []),
    ]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "devices", ["cuda:0,cuda:0", pytest.param("cuda:0,cuda:1", marks=pytest.mark.multigpu)]
)
def test_gemma4_layer_split_on_gpus_equals_whole_on_one(native25, tiny25, monkeypatch, devices):  # noqa: F811
    """On GPUs (two workers sharing one GPU: gloo through the host; two GPUs: NCCL send/recv): the
    split gives bit for bit what the whole encoder gives on the first GPU (ComfyUI's bf16 projection
    on GPUs makes both differ from the CPU's native run)."""
    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    replies = keep_replies(monkeypatch)
    model, _native_model, _info = load_model(
        tiny25.transformer.name,
        devices,
        "float32",
        video_vae_name=tiny25.video_vae.name,
        audio_vae_name=tiny25.audio_vae.name,
    )
    try:
        encoder = tiny25.text_encoder.name
        (whole,) = encode_prompt(model, encoder, PROMPT, placement="replicas")
        (split,) = encode_prompt(model, encoder, PROMPT, placement="layers")
    finally:
        get_manager().unload()
        assert_no_leaks()
    print(
        f"\n[LTX-2.5 Gemma 4 on {devices}] split vs whole: max abs {float((split[0][0] - whole[0][0]).abs().max()):.2e}"
    )
    assert [r["placement"] for r in replies[0]] == ["rank 0", "rank 0"]
    assert [r["placement"] for r in replies[1]] == ["layers", "layers"]
    assert torch.equal(split[0][0], whole[0][0])


@pytest.mark.gpu
def test_gemma4_12b_layer_split_on_one_gpu_equals_whole(tiny25, monkeypatch):
    """Gemma 4 at its released sizes (random weights, written on the GPU): the ranks' 12B branch
    (load_clip's steps with relays in place of the layers a rank does not hold) on two workers
    sharing one GPU gives bit for bit what ComfyUI's own load_clip gives whole on rank 0, each rank
    holding its half of the 48 layers."""
    import subprocess
    import sys

    from safetensors import safe_open

    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.text_encode import encode_prompt

    with safe_open(str(tiny25.text_encoder), "pt") as f:  # the tiny transformer's stream widths
        widths = [f.get_slice(f"text_embedding_projection.{s}_aggregate_embed.weight").get_shape()[0]
                  for s in ("video", "audio")]  # fmt: skip
    path = tiny25.text_encoder.with_name("gemma4-12b-random-real-size.safetensors")
    write = (
        "import sys; from ltx2_mgpu.workers.embedded.tiny_gemma4 import make_gemma4_12b; "
        "make_gemma4_12b(sys.argv[1], 0, int(sys.argv[2]), int(sys.argv[3]), 'cuda:0')"
    )
    # A subprocess: it imports ComfyUI's model code, which must not stay in this process.
    done = subprocess.run(
        [sys.executable, "-c", write, str(path), *map(str, widths)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    replies = keep_replies(monkeypatch)
    model, _native_model, _info = load_model(
        tiny25.transformer.name, "cuda:0,cuda:0", "float32",
        video_vae_name=tiny25.video_vae.name, audio_vae_name=tiny25.audio_vae.name,
    )  # fmt: skip
    try:
        (whole,) = encode_prompt(model, path.name, PROMPT, placement="replicas")
        (split,) = encode_prompt(model, path.name, PROMPT, placement="layers")
    finally:
        get_manager().unload()
        path.unlink()
        assert_no_leaks()
    held = [r["layers"] for r in replies[1]]
    sizes = [r["weight_bytes"] for r in replies[1]]
    print(
        f"\n[Gemma 4 12B, real size, cuda:0,cuda:0] split vs whole: max abs "
        f"{float((split[0][0] - whole[0][0]).abs().max()):.2e}, {split[0][0].shape[1]} tokens, "
        f"layers {[(h[0], h[-1] + 1) for h in held]}, GB per rank {[round(sum(s.values()) / 1e9, 2) for s in sizes]}, "
        f"whole on rank 0 {round(sum(replies[0][0]['weight_bytes'].values()) / 1e9, 2)} GB"
    )
    assert [r["placement"] for r in replies[0]] == ["rank 0", "rank 0"]
    assert [r["placement"] for r in replies[1]] == ["layers", "layers"]
    assert [i for block in held for i in block] == list(range(GEMMA4_LAYERS)) and all(held), held
    assert sizes[1]["other"] * 100 < sizes[0]["other"], (
        sizes
    )  # rank 1: its layers, no embedding or projection
    assert torch.isfinite(whole[0][0]).all() and whole[0][0].abs().max() > 0
    assert torch.equal(split[0][0], whole[0][0])
