"""The loader's `weights layers` (workers/engine/comfy/layer_split.py NOTE [layers]) on CPU workers
(opt-in: COMFYUI_PATH).

The tiny LTX-2 with four transformer blocks (its two blocks and two more drawn from them, the config's
num_layers set to match, so 3 workers hold 2 + 1 + 1): each worker holds its contiguous range and
reports only that range's bytes, no layer streamed; the SP Sampler and native sampling on the loader's
MODEL on 2 and 3 workers give replicated's result on one worker (every worker runs every token, as one
worker does). The same file in the released fp8 layout (block 0 float, blocks 1-3 fp8: blocks of
different sizes) is split to balance the blocks' bytes, as the loader's pre-flight plans it, better than
by count, with the same result. The TDP Upscaler runs every tile on the whole group, with the same result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from itertools import accumulate
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_comfyui_native_parity import Case, comfy, errors, native_inputs, our_sample  # noqa: F401

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager

pytestmark = pytest.mark.comfyui

CASE = Case("euler_ancestral", 3.0, 3.0, sigmas="manual")
RELATIVE_TOLERANCE = 1e-6
BLOCKS = 4
PREFIX = "model.diffusion_model.transformer_blocks."


def four_block_checkpoint(source: Path, out: Path) -> Path:
    """`source` (two blocks) with blocks 2 and 3 drawn from blocks 0 and 1 (scaled by 0.8, so no two
    blocks are equal) and the config's num_layers set to 4."""
    with safe_open(str(source), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        metadata = dict(f.metadata())
    for key in [k for k in tensors if k.startswith(PREFIX)]:
        index, rest = key[len(PREFIX) :].split(".", 1)
        tensors[f"{PREFIX}{int(index) + 2}.{rest}"] = tensors[key] * 0.8
    config = json.loads(metadata["config"])
    config["transformer"]["num_layers"] = BLOCKS
    save_file(tensors, str(out), metadata={"config": json.dumps(config)})
    return out


@pytest.fixture(autouse=True)
def short_sigmas(monkeypatch):
    import test_comfyui_native_parity as native

    monkeypatch.setattr(native, "MANUAL_SIGMAS", "0.909375, 0.725, 0.421875, 0.0")


@pytest.fixture(scope="module")
def recipe(tiny, tmp_path_factory) -> Iterator[MGPUModel]:
    from comfyui_harness import comfyui_root

    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    root = check_comfyui_root(comfyui_root())
    path = four_block_checkpoint(
        tiny.checkpoint, tmp_path_factory.mktemp("layers") / "tiny-4-blocks.safetensors"
    )
    yield MGPUModel.create(
        path,
        devices="cpu:1",
        dtype="float32",
        backend="comfy",
        comfyui_root=root.path,
        comfyui_version=root.version,
    )
    get_manager().unload()
    assert_no_leaks()


def sample(comfy, model: MGPUModel, monkeypatch, inputs) -> tuple[list[torch.Tensor], list[dict]]:  # noqa: F811
    import ltx2_mgpu.nodes.sp_sampler as sp

    replies: list[list[dict]] = []
    run_job = sp.run_job
    monkeypatch.setattr(sp, "run_job", lambda *a, **k: replies.append(run_job(*a, **k)) or replies[-1])
    out = our_sample(comfy, model, CASE, *inputs)
    monkeypatch.setattr(sp, "run_job", run_job)
    return out, replies[-1]


@pytest.mark.parametrize("ranks", [2, 3])
def test_layers_sp_sampling_is_replicated(comfy, recipe, monkeypatch, ranks):  # noqa: F811
    inputs = native_inputs(comfy, CASE)
    reference, replies = sample(comfy, recipe, monkeypatch, inputs)
    whole = replies[0]["block_bytes"]
    model = replace(recipe, devices=tuple(f"cpu:{i}" for i in range(ranks)), weights="layers")
    ours, replies = sample(comfy, model, monkeypatch, inputs)
    assert [r["weights"] for r in replies] == ["layers"] * ranks
    assert [r["streamed_modules"] for r in replies] == [0] * ranks
    held = [r["block_bytes"] for r in replies]
    counts = [2, 2] if ranks == 2 else [2, 1, 1]  # blocks of one size: the first ranks one more
    assert held == [whole * n // BLOCKS for n in counts], (held, whole)
    assert [r["layer_blocks"] for r in replies] == [[r.start, r.stop] for r in count_split(BLOCKS, ranks)]
    assert all(r["split_forwards"] == 0 for r in replies)  # every rank runs every token
    found = errors(ours, reference)
    print(f"\n[layers] SP Sampler {ranks} ranks vs replicated on 1: rel {[f'{r:.2e}' for _, r in found]}")
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found


def test_layers_model_output_is_replicated(comfy, recipe):  # noqa: F811
    """Native sampling (CFGGuider + SamplerCustomAdvanced) on the loader's MODEL, layers on 3 workers
    against replicated on one."""
    from ltx2_mgpu.nodes.group_model.model import build_group_model

    positive, negative, latent, sigmas = native_inputs(comfy, CASE)
    results = []
    for model in (recipe, replace(recipe, devices=("cpu:0", "cpu:1", "cpu:2"), weights="layers")):
        (guider,) = comfy.cs.CFGGuider.execute(build_group_model(model), positive, negative, CASE.cfg)
        with torch.inference_mode():
            out = comfy.cs.SamplerCustomAdvanced.execute(
                comfy.cs.RandomNoise.execute(42)[0], guider, comfy.cs.KSamplerSelect.execute(CASE.sampler)[0],
                sigmas, latent,
            )[0]  # fmt: skip
        results.append([t.clone() for t in out["samples"].unbind()])
    found = errors(results[1], results[0])
    print(f"\n[layers] MODEL 3 ranks vs replicated on 1: rel {[f'{r:.2e}' for _, r in found]}")
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found


def tdp_node_runs(
    comfy,  # noqa: F811
    tiny,
    model: MGPUModel,
    monkeypatch,
) -> tuple[dict[str, list[torch.Tensor]], list[dict]]:
    """The TDP Upscaler node on `model`: the full run on 2x2 tiles with overlap (two steps), and the
    centre-tile and first-frames previews (one step); the videos and the full run's replies."""
    import folder_paths
    from test_comfy_tdp import ONE_STEP, PREVIEW_GRID, SAMPLER, SEED, stage1_inputs

    import ltx2_mgpu.nodes.tdp_upscaler as node

    folder_paths.add_model_folder_path("latent_upscale_models", str(tiny.spatial_upscaler.parent))
    inputs = stage1_inputs()
    stage1 = {"samples": comfy.NestedTensor((inputs.video, inputs.audio))}
    tiles = f"{PREVIEW_GRID[0]}x{PREVIEW_GRID[1]}"
    replies: list[list[dict]] = []
    run_job = node.run_job
    monkeypatch.setattr(node, "run_job", lambda *a, **k: replies.append(run_job(*a, **k)) or replies[-1])
    out = {}
    for preview, sigmas in (
        ("off", "0.909375, 0.725, 0.0"),
        ("centre tile", ONE_STEP),
        ("first frames", ONE_STEP),
    ):
        (latent,) = node.tdp_upscale(
            model, inputs.positive, inputs.negative, stage1, tiny.spatial_upscaler.name, SAMPLER, CASE.cfg, SEED,
            tiles, PREVIEW_GRID[2], sigmas=torch.tensor([float(x) for x in sigmas.split(",")]), preview=preview,
            preview_frames=1,
        )  # fmt: skip
        out[preview] = [t.clone() for t in latent["samples"].unbind()]
    monkeypatch.setattr(node, "run_job", run_job)
    return out, replies[0]


@pytest.mark.parametrize("ranks", [2, 3])
def test_the_tdp_upscaler_under_layers_is_replicated(comfy, tiny, recipe, monkeypatch, ranks):  # noqa: F811
    """Under layers every tile's forward runs on the whole group (each worker its range): the full run
    and both previews give one replicated worker's video, and every worker reports every tile."""
    reference, _ = tdp_node_runs(comfy, tiny, recipe, monkeypatch)
    model = replace(recipe, devices=tuple(f"cpu:{i}" for i in range(ranks)), weights="layers")
    ours, replies = tdp_node_runs(comfy, tiny, model, monkeypatch)
    assert [r["tiles_on_rank"] for r in replies] == [4] * ranks
    for preview in reference:
        found = errors(ours[preview], reference[preview])
        print(
            f"\n[layers] TDP Upscaler ({preview}) {ranks} ranks vs replicated on 1: rel {[f'{r:.2e}' for _, r in found]}"
        )
        assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), (preview, found)


@pytest.fixture(scope="module")
def mixed(recipe, tmp_path_factory) -> MGPUModel:
    """The 4-block file in the released fp8 layout: block 0 kept float (4 bytes a weight in float32),
    the Linears of blocks 1-3 in fp8 (one byte): blocks of different sizes."""
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_fp8

    folder = tmp_path_factory.mktemp("layers-fp8")
    return replace(
        recipe, checkpoint=str(make_tiny_fp8(recipe.checkpoint, folder / "tiny-4-blocks-fp8.safetensors"))
    )


@pytest.fixture(scope="module")
def mixed_reference(comfy, mixed) -> tuple[tuple, list[torch.Tensor]]:  # noqa: F811
    """The inputs and the fp8 file's result under replicated on one worker (made once for 2 and 3 ranks)."""
    inputs = native_inputs(comfy, CASE)
    return inputs, our_sample(comfy, mixed, CASE, *inputs)


def count_split(num_blocks: int, world_size: int) -> list[range]:
    """The split by count the ranges replaced: counts differing by at most one, the first ranks larger."""
    base, extra = divmod(num_blocks, world_size)
    stops = list(accumulate(base + (rank < extra) for rank in range(world_size)))
    return [range(start, stop) for start, stop in zip([0, *stops], stops)]


@pytest.mark.parametrize("ranks", [2, 3])
def test_layers_split_bytes_as_planned(comfy, mixed, mixed_reference, monkeypatch, ranks):  # noqa: F811
    """Blocks of different sizes: the loader's pre-flight (UI side, from the file's header) plans ranges
    whose largest share is smaller than the count split's; every rank holds exactly its planned range and
    bytes; the result is still replicated's on one worker."""
    from ltx2_mgpu.workers.group.preflight import preflight
    from ltx2_mgpu.workers.wire.layer_ranges import range_bytes
    from ltx2_mgpu.workers.wire.memory_plan import model_sizes
    from ltx2_mgpu.workers.wire.model_files import read_safetensors_header

    header = read_safetensors_header(mixed.checkpoint)
    each = model_sizes(header.shapes, header.dtypes, mixed.dtype).per_block_bytes
    assert len(each) == BLOCKS and each[0] > 2 * each[1] and len(set(each[1:])) == 1  # float block 0, fp8 1-3
    devices = tuple(f"cpu:{i}" for i in range(ranks))
    found, _ = preflight(header.shapes, header.dtypes, devices, "layers", mixed.max_video_tokens, mixed.dtype)
    planned = found.layer_ranges
    by_count = range_bytes(each, count_split(BLOCKS, ranks))
    assert max(range_bytes(each, planned)) < max(by_count), (planned, by_count)
    inputs, reference = mixed_reference
    ours, replies = sample(comfy, replace(mixed, devices=devices, weights="layers"), monkeypatch, inputs)
    assert [r["layer_blocks"] for r in replies] == [[r.start, r.stop] for r in planned]
    assert [r["block_bytes"] for r in replies] == list(range_bytes(each, planned))  # as the header says
    found = errors(ours, reference)
    print(
        f"\n[layers] fp8 file, {ranks} ranks, blocks {[(r.start, r.stop) for r in planned]} of bytes "
        f"{list(range_bytes(each, planned))} (by count {list(by_count)}): rel {[f'{r:.2e}' for _, r in found]}"
    )
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found
