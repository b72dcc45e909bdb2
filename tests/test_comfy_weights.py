"""The loader's `weights` option on the comfy backend: offloaded and sharded give replicated's numbers (opt-in:
COMFYUI_PATH).

offloaded runs ComfyUI's own partial loading with a device budget (workers/engine/comfy/weights.py).
On CPU ranks the host is the device, so the automatic budget is 0: every comfy.ops layer of the
transformer keeps its weight where it loaded and casts it per call, LoRA patches applied at that cast,
which is the path a GPU takes for the layers beyond its budget. Claims, tiny model, float32, CPU ranks:
- the path really ran: the ranks report streamed layers after loading and after sampling (the
  sampler's own load_models_gpu does not load them back), replicated reports none;
- SP Sampler on 2 and 3 ranks, the TDP Upscaler's command on 2 and 3 ranks (tiles dealt unevenly), and
  a LoRA set, its strength changed and removed: offloaded = replicated within 1e-6 of the largest
  magnitude (same arithmetic: expected bit for bit);
- sharded (torch FSDP2 over the ranks' gloo group): each rank holds 1/N of the blocks, and SP sampling,
  LoRA switching, the TDP Upscaler and guidance groups with passes that do not divide over them give
  replicated's numbers as above, the ranks with less work padding their weight gathers (counted);
- sharded on the fp8 scaled and nvfp4 files: each rank holds what the pre-flight sizes from the file's
  header (half the quantized data, the scales whole), SP sampling gives replicated's numbers bit for
  bit (nvfp4 on rows that do not split evenly is refused, naming why), and on the fp8 file a
  LoRA switched through its states gives offloaded's (ComfyUI patches a layer cast per call at the
  cast; its full load bakes the patch into the fp8 weight instead, so replicated differs there by
  ComfyUI's design). Quantized layouts not tested here are refused naming the layer. (The int8
  convrot file: tests/test_comfy_ltx25_nodes.py.)
- the ltx-core backend refuses non-replicated weights, naming the option.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_root
from rank_job import local_job
from test_comfy_tdp import stage1_inputs, tdp_args
from test_comfyui_native_parity import Case, comfy, errors, native_inputs, our_sample  # noqa: F401

from conftest import assert_no_leaks, run_ranks
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root
from ltx2_mgpu.workers.wire.memory_plan import IN_FLIGHT_BLOCKS, model_shares, model_sizes
from ltx2_mgpu.workers.wire.model_files import read_safetensors_header
from ltx2_mgpu.workers.wire.requests import LoadModel

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-6
CASE = Case("euler_ancestral", 3.0, 3.0, sigmas="manual")
SIGMAS = "0.909375, 0.725, 0.421875, 0.0"
# Every block Linear and the other comfy.ops layers of the tiny model stream on a CPU rank.
MIN_STREAMED_LAYERS = 56


@pytest.fixture(autouse=True)
def short_sigmas(monkeypatch):
    import test_comfyui_native_parity as native

    monkeypatch.setattr(native, "MANUAL_SIGMAS", SIGMAS)


@pytest.fixture(scope="module")
def recipe(tiny) -> Iterator[MGPUModel]:
    root = check_comfyui_root(comfyui_root())
    yield MGPUModel.create(
        tiny.checkpoint, devices="cpu:2", dtype="float32", backend="comfy",
        comfyui_root=root.path, comfyui_version=root.version,
    )  # fmt: skip
    get_manager().unload()
    assert_no_leaks()


def sample(comfy, model: MGPUModel, monkeypatch, inputs) -> tuple[list[torch.Tensor], list[dict]]:  # noqa: F811
    """our_sample through the SP Sampler node, with the ranks' replies."""
    import ltx2_mgpu.nodes.sp_sampler as sp

    replies: list[list[dict]] = []
    run_job = sp.run_job
    monkeypatch.setattr(sp, "run_job", lambda *a, **k: replies.append(run_job(*a, **k)) or replies[-1])
    out = our_sample(comfy, model, CASE, *inputs)
    monkeypatch.setattr(sp, "run_job", run_job)
    return out, replies[-1]


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("option", ["offloaded", "sharded"])
def test_sp_sampling_is_replicated(comfy, recipe, monkeypatch, ranks, option):  # noqa: F811
    inputs = native_inputs(comfy, CASE)
    results = {}
    for weights in ("replicated", option):
        model = replace(recipe, devices=tuple(f"cpu:{i}" for i in range(ranks)), weights=weights)
        t0 = time.perf_counter()
        results[weights], replies = sample(comfy, model, monkeypatch, inputs)
        streamed = [r["streamed_modules"] for r in replies]
        print(
            f"\n[weights] SP {ranks} ranks {weights}: {time.perf_counter() - t0:.1f} s, streamed layers {streamed}"
        )
        if weights == "replicated":
            assert streamed == [0] * ranks
            whole = replies[0]["block_bytes"]
        else:
            assert all(n >= MIN_STREAMED_LAYERS for n in streamed), streamed
            held = [r["block_bytes"] for r in replies]
            assert [r["weights"] for r in replies] == [option] * ranks
            if option == "sharded":  # each rank holds its 1/N of every block, together the whole
                assert sum(held) == whole and max(held) <= whole / ranks * 1.05, (held, whole)
    found = errors(results[option], results["replicated"])
    print(f"[weights] SP {ranks} ranks {option} vs replicated: rel {[f'{r:.2e}' for _, r in found]}")
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found


@pytest.mark.parametrize("option", ["offloaded", "sharded"])
def test_lora_switching_is_replicated(comfy, recipe, lora_files, monkeypatch, option):  # noqa: F811
    """A LoRA, its strength changed, then removed: each state samples as replicated does (the patches
    apply as the layers are cast in: to the gathered full weight when sharded), and the LoRA matters."""
    inputs = native_inputs(comfy, CASE)
    lora = str(lora_files["lora"])
    sets = {"A 1.0": ((lora, 1.0),), "A 0.5": ((lora, 0.5),), "none": ()}
    results: dict[str, dict[str, list[torch.Tensor]]] = {"replicated": {}, option: {}}
    for weights in results:  # each weights option switches through the whole sequence in turn
        for name, loras in sets.items():
            model = replace(recipe, weights=weights, loras=loras)
            results[weights][name], replies = sample(comfy, model, monkeypatch, inputs)
            if weights == option:
                assert all(r["streamed_modules"] >= MIN_STREAMED_LAYERS for r in replies)
    for name in sets:
        found = errors(results[option][name], results["replicated"][name])
        print(
            f"\n[weights] LoRA {name}, 2 ranks, {option} vs replicated: rel {[f'{r:.2e}' for _, r in found]}"
        )
        assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), (name, found)
    assert max(r for _, r in errors(results[option]["A 1.0"], results[option]["none"])) > 1e-3


# Tiles per rank count: 1x3 deals 2+1 to two ranks, 1x2 deals 1+1+0 to three (one rank without a tile).
UNEVEN_TILES = {2: (1, 3, 1, True), 3: (1, 2, 1, True)}


def _tdp_all(
    rank: int, world_size: int, init_file: str, root: str, tiny_dir: str, out_dir: str, on_gpus: bool = False
) -> None:
    """One rank: the tiny file loaded replicated, offloaded (budget 0: every layer streamed) and sharded,
    the tdp_upscale command on UNEVEN_TILES each time; every rank saves its videos, streamed layer
    counts and padding forwards. `on_gpus`: rank r on cuda:r over NCCL, else CPU over gloo."""
    import torch.distributed as dist

    from ltx2_mgpu.workers.embedded.tiny_model import CHECKPOINT_FILE_NAME, UPSCALER_FILE_NAME
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.engine.comfy.model import ComfyModel
    from ltx2_mgpu.workers.engine.comfy.weights import residency, shard_blocks
    from ltx2_mgpu.workers.rank.ops_tdp import tdp_upscale
    from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

    device = torch.device("cuda", rank) if on_gpus else torch.device("cpu")
    if on_gpus:
        torch.cuda.set_device(device)
    backend = "nccl" if on_gpus else "gloo"
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    import_comfyui(check_comfyui_root(root), device)
    saved = {}
    for weights, budget in (("replicated", None), ("offloaded", 0), ("sharded", 0)):
        model = ComfyModel.load(
            Path(tiny_dir) / CHECKPOINT_FILE_NAME,
            device,
            torch.float32,
            with_vae=False,
            resident_bytes=budget,
        )
        if weights == "sharded":
            shard_blocks(model.patcher, device, dist.group.WORLD)
        job = local_job(rank, world_size, model, device=device, backend=backend)
        args = tdp_args(stage1_inputs(), UNEVEN_TILES[world_size], Path(tiny_dir) / UPSCALER_FILE_NAME)
        result = tdp_upscale(job, args)
        saved[weights] = {
            "video": args["out_video"],
            "streamed": residency(model.patcher).streamed_modules,
            "result": result,
        }
    torch.save(saved, f"{out_dir}/tdp-{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.parametrize("ranks", [2, 3])
def test_offloaded_and_sharded_tdp_are_replicated(tiny, tmp_path, ranks):
    """Tiles dealt unevenly: under sharded the ranks with fewer tiles pad their weight gathers (NOTE
    [sharded lockstep]) and every option gives replicated's video."""
    run_ranks(
        _tdp_all,
        ranks,
        tmp_path,
        str(comfyui_root()),
        str(tiny.checkpoint.parent),
        str(tmp_path),
        timeout_s=900,
    )
    check_tdp_parity(tmp_path, ranks)


@pytest.mark.gpu
@pytest.mark.multigpu
def test_sharded_tdp_on_two_gpus_is_replicated(tiny, tmp_path):
    """As on CPU ranks, over NCCL on cuda:0 and cuda:1 (FSDP2 gathers on its own stream there)."""
    args = (str(comfyui_root()), str(tiny.checkpoint.parent), str(tmp_path), True)
    run_ranks(_tdp_all, 2, tmp_path, *args, timeout_s=900)
    check_tdp_parity(tmp_path, 2)


def check_tdp_parity(tmp_path: Path, ranks: int) -> None:
    saved = [torch.load(tmp_path / f"tdp-{rank}.pt") for rank in range(ranks)]
    b = saved[0]["replicated"]["video"]
    for option in ("offloaded", "sharded"):
        a = saved[0][option]["video"]
        rel = float((a - b).abs().max()) / float(b.abs().max())
        print(
            f"\n[weights] TDP {UNEVEN_TILES[ranks][:2]} tiles, {ranks} ranks, {option} vs replicated: rel {rel:.2e}"
        )
        assert rel <= RELATIVE_TOLERANCE, option
    assert (
        saved[0]["replicated"]["streamed"] == 0 and saved[0]["offloaded"]["streamed"] >= MIN_STREAMED_LAYERS
    )
    tiles = [s["sharded"]["result"]["tiles_on_rank"] for s in saved]
    padding = {
        option: [s[option]["result"]["padding_forwards"] for s in saved]
        for option in ("replicated", "offloaded", "sharded")
    }
    print(
        f"[weights] TDP sharded, {ranks} ranks: tiles per rank {tiles}, padding forwards {padding['sharded']}"
    )
    assert padding["replicated"] == padding["offloaded"] == [0] * ranks
    steps = saved[0]["sharded"]["result"]["steps"]
    # The ranks with the most tiles pad nothing; each other rank pads at least one forward per model call.
    for rank_tiles, padded in zip(tiles, padding["sharded"]):
        assert padded == 0 if rank_tiles == max(tiles) else padded >= steps, (tiles, padding)
    assert min(tiles) < max(tiles)


def test_the_ltxcore_backend_refuses_offloaded_weights(tiny):
    with pytest.raises(
        ValueError, match=r"weights offloaded runs on ComfyUI's engine.*set weights to replicated"
    ):
        LoadModel(checkpoint=str(tiny.checkpoint), backend="ltxcore", weights="offloaded")
    with pytest.raises(ValueError, match=r"weights 'pooled' is not one of replicated, offloaded, sharded"):
        LoadModel(checkpoint=str(tiny.checkpoint), weights="pooled")


@pytest.fixture(scope="module")
def quantized_files(lora_files, tmp_path_factory) -> dict[str, Path]:
    """The tiny checkpoint's fp8 variant and its nvfp4 one (made with comfy_kitchen, which ComfyUI
    installs: here only, where ComfyUI is present)."""
    from ltx2_mgpu.workers.embedded.tiny_variants import make_tiny_nvfp4

    nvfp4 = make_tiny_nvfp4(
        lora_files["checkpoint"], tmp_path_factory.mktemp("nvfp4") / "ltx2-tiny-nvfp4.safetensors"
    )
    return {"fp8": lora_files["fp8"], "nvfp4": nvfp4}


def header_of(path: Path) -> tuple[dict, dict]:
    header = read_safetensors_header(path)
    return header.shapes, header.dtypes


@pytest.mark.parametrize(
    "devices", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.multigpu])]
)
@pytest.mark.parametrize("file", ["fp8", "nvfp4"])
def test_sharded_quantized_file_is_replicated(comfy, recipe, quantized_files, monkeypatch, file, devices):  # noqa: F811
    """The fp8 scaled file (per-tensor scales) and the nvfp4 one (packed data, block scales) sharded on 2
    ranks: each rank holds half of the blocks' stored bytes (quantized data, float32 norms) with the
    scales whole, as the pre-flight sizes it from the file's header, and SP sampling gives replicated's
    numbers. On two GPUs (NCCL, the GPU's quantized matmuls) as on two CPU workers (gloo)."""
    inputs = native_inputs(comfy, CASE)
    results, held = {}, {}
    for weights in ("replicated", "sharded"):
        model = replace(
            recipe,
            checkpoint=str(quantized_files[file]),
            weights=weights,
            devices=(f"{devices}:0", f"{devices}:1"),
        )
        results[weights], replies = sample(comfy, model, monkeypatch, inputs)
        held[weights] = [r["block_bytes"] for r in replies]
        assert [r["weights"] for r in replies] == [weights] * 2
    # The pre-flight's figures from the file's header: replicated holds the blocks at their stored size,
    # sharded 1/2 of them with the scales whole on each
    sizes = model_sizes(*header_of(quantized_files[file]), "float32")
    assert held["replicated"] == [sizes.blocks_bytes] * 2 and sizes.block_scale_bytes > 0
    share = (
        model_shares(replace(sizes, other_bytes=0), "sharded", 2)[0]
        - IN_FLIGHT_BLOCKS * sizes.largest_block_bytes
    )
    assert all(abs(n - share) <= sizes.blocks_bytes * 1e-3 for n in held["sharded"]), (held, share)
    found = errors(results["sharded"], results["replicated"])
    print(
        f"\n[weights] {file} file, 2 ranks on {devices}, sharded vs replicated: rel {[f'{r:.2e}' for _, r in found]}"
    )
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found


def test_sharded_fp8_lora_switching_is_offloaded(comfy, recipe, lora_files, monkeypatch):  # noqa: F811
    """A LoRA on the fp8 file, its strength changed, then removed, sharded on 2 ranks: each state gives
    offloaded's numbers, ComfyUI's own path for a LoRA on a layer cast per call (the patch applies to
    the dequantized weight at the cast: to the gathered one when sharded). Replicated differs by
    ComfyUI's design: its full load bakes the patch into the fp8 weight and requantizes it (printed)."""
    inputs = native_inputs(comfy, CASE)
    lora = str(lora_files["lora"])
    sets = {"A 1.0": ((lora, 1.0),), "A 0.5": ((lora, 0.5),), "none": ()}
    results: dict[str, dict[str, list[torch.Tensor]]] = {"offloaded": {}, "sharded": {}, "replicated": {}}
    for weights in results:
        for name, loras in sets.items():
            if weights == "replicated" and name != "A 1.0":
                continue
            model = replace(recipe, checkpoint=str(lora_files["fp8"]), weights=weights, loras=loras)
            results[weights][name], _ = sample(comfy, model, monkeypatch, inputs)
    for name in sets:
        found = errors(results["sharded"][name], results["offloaded"][name])
        print(
            f"\n[weights] fp8 file, LoRA {name}, 2 ranks, sharded vs offloaded: rel {[f'{r:.2e}' for _, r in found]}"
        )
        assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), (name, found)
    baked = errors(results["replicated"]["A 1.0"], results["offloaded"]["A 1.0"])
    print(
        f"[weights] fp8 file, LoRA A 1.0, replicated (patch requantized) vs offloaded: rel {[f'{r:.2e}' for _, r in baked]}"
    )
    assert max(r for _, r in errors(results["sharded"]["A 1.0"], results["sharded"]["none"])) > 1e-3


def test_sharded_nvfp4_on_uneven_rows_is_refused(recipe, quantized_files):
    """nvfp4 packs two values a byte: FSDP2 shards that only evenly, so 3 workers on the tiny model's
    128-row layers are refused at load, naming the reason and the option to set."""
    from ltx2_mgpu.workers.wire.errors import JobInputError

    model = replace(
        recipe,
        checkpoint=str(quantized_files["nvfp4"]),
        weights="sharded",
        devices=("cpu:0", "cpu:1", "cpu:2"),
    )
    with pytest.raises(
        JobInputError,
        match=r"layout TensorCoreNVFP4Layout packs its data, and its 128 rows do not split evenly over 3 "
        r"workers at transformer_blocks\.1\..*set weights to offloaded",
    ):
        get_manager().acquire(model)


def test_sharded_refuses_untested_quantized_layouts(comfy):  # noqa: F811
    """A block layer in a layout sharded was not tested with (mxfp8 here) is refused before FSDP2
    touches the model, naming the layer, the layouts taken and the option to set."""
    from comfy.quant_ops import QuantizedTensor

    from ltx2_mgpu.workers.engine.comfy.weights import check_shardable

    layer = torch.nn.Linear(64, 64, bias=False)
    layer.weight = torch.nn.Parameter(
        QuantizedTensor.from_float(torch.randn(64, 64), "TensorCoreMXFP8Layout"), requires_grad=False
    )
    blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.LayerNorm(64), layer)])
    patcher = SimpleNamespace(
        model=SimpleNamespace(diffusion_model=SimpleNamespace(transformer_blocks=blocks))
    )
    with pytest.raises(
        ValueError,
        match=r"weights sharded cannot shard this file's quantized layers \(layout TensorCoreMXFP8Layout at "
        r"transformer_blocks\.0\.1; sharded takes .*TensorWiseINT8Layout.*\): set weights to offloaded",
    ):
        check_shardable(patcher)


def _bench_weights(argv: list[str]) -> dict:
    import importlib.util
    import sys

    bench = Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench))
    try:
        spec = importlib.util.spec_from_file_location("bench_weights", bench / "bench_weights.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.main(argv)
    finally:
        sys.path.remove(str(bench))


@pytest.mark.parametrize("weights", ["bf16", "fp8"])
def test_the_weights_bench_runs_tiny_on_cpu(tmp_path, weights):
    """bench/bench_weights.py end to end on two CPU workers: every option loads and steps, sharded
    holds half the blocks per worker (bf16; fp8 keeps each layer's scales whole on every rank), layers
    one of the two blocks per worker."""
    report = _bench_weights(["--tiny", "--repeats", "1", "--weights", weights, "--comfyui", str(comfyui_root()),
                             "--out", str(tmp_path / "w.json")])  # fmt: skip
    assert report["weight_format"] == weights
    loads = {option: result["load"] for option, result in report["options"].items()}
    assert [r["weights"] for r in loads["sharded"]] == ["sharded", "sharded"]
    halves = sum(r["block_bytes"] for r in loads["sharded"])
    whole = loads["replicated"][0]["block_bytes"]
    assert halves == whole if weights == "bf16" else whole < halves < 1.1 * whole, (halves, whole)
    # layers: each worker holds one of the two blocks, whole (its scales with it)
    assert [r["weights"] for r in loads["layers"]] == ["layers", "layers"]
    assert sum(r["block_bytes"] for r in loads["layers"]) == whole, loads["layers"]
    assert [r["layer_blocks"] for r in loads["layers"]] == [[0, 1], [1, 2]]
    assert all("ms" in row for result in report["options"].values() for row in result["sizes"].values())


def _result_path(name: str) -> Path:
    """bench/results/<name> with {card} the GPU's kind (h200, h100, ...): a run on another card keeps the
    figures of the one before it."""
    gpu = torch.cuda.get_device_name(0).lower()
    card = next((kind for kind in ("h200", "h100", "a100", "l40s", "4090") if kind in gpu), "gpu")
    return Path(__file__).resolve().parents[1] / "bench" / "results" / name.format(card=card)


@pytest.mark.gpu
def test_offloaded_22b_runs_under_a_24_gib_cap_on_one_gpu():
    """LTX-2.3 22B bf16 with two workers on one GPU, each capped at 24 GiB: offloaded steps at 6,144 and
    24,576 tokens, peak memory under the cap; replicated uncapped beside it (bench/results JSON)."""
    out = _result_path("weights_22b_{card}_shared.json")
    # The random bf16 22B is built whole on the GPU by each worker (about 39 GiB) before any placement
    # applies: two fit an H200, not an 80 GB H100 (out of memory in the second build, whatever the option).
    if torch.cuda.get_device_properties(0).total_memory < 100 * 2**30:
        pytest.skip("two random 22B bf16 builds (2 x 39 GiB) need a GPU of 100 GiB or more (H200)")
    report = _bench_weights(["--devices", "cuda:0,cuda:0", "--cap-gib", "24", "--options", "replicated", "offloaded",
                             "sharded", "--comfyui", str(comfyui_root()), "--out", str(out)])  # fmt: skip
    offloaded = report["options"]["offloaded"]
    for tokens, row in offloaded["sizes"].items():
        assert "ms" in row, (tokens, row)
        assert max(row["peak_memory_gib_per_worker"]) <= 24.0, (tokens, row)
    assert "skipped" in report["options"]["sharded"]  # two ranks on one GPU: NCCL cannot shard there


@pytest.mark.gpu
def test_offloaded_22b_fp8_runs_under_a_16_gib_cap_on_one_gpu():
    """LTX-2.3 22B in the fp8 scaled format (the 2.3 template's file, 22 GB) with two workers on one GPU,
    each capped at 16 GiB: offloaded steps at 6,144 and 24,576 tokens under the cap; replicated uncapped
    beside it (bench/results JSON)."""
    out = _result_path("weights_22b_fp8_{card}_shared.json")
    report = _bench_weights(["--devices", "cuda:0,cuda:0", "--cap-gib", "16", "--weights", "fp8",
                             "--options", "replicated", "offloaded", "--comfyui", str(comfyui_root()),
                             "--out", str(out)])  # fmt: skip
    for tokens, row in report["options"]["offloaded"]["sizes"].items():
        assert "ms" in row, (tokens, row)
        assert max(row["peak_memory_gib_per_worker"]) <= 16.0, (tokens, row)


@pytest.mark.gpu
def test_layers_22b_fp8_runs_under_a_16_gib_cap_on_one_gpu():
    """LTX-2.3 22B fp8 scaled with three workers on one GPU, each capped at 16 GiB under weights layers
    (hand-overs through gloo: the workers share the GPU) at 6,144 tokens and the 2.3 t2v template's 14,080;
    offloaded under the same cap and replicated uncapped on the same three workers beside it (sharded needs
    a GPU per worker; bench/results JSON). The ranges balance the blocks' bytes (block 0 and the last five
    are bf16, twice an fp8 block): 17 / 18 / 13 blocks, 6.5 GiB each, where the split by count (16 each)
    gave the last worker 7.6 GiB and it ran out of memory at 14,080 tokens (docs/NODES.md)."""
    out = _result_path("weights_22b_fp8_layers_{card}_shared.json")
    report = _bench_weights(["--devices", "cuda:0,cuda:0,cuda:0", "--cap-gib", "16", "--weights", "fp8",
                             "--options", "replicated", "offloaded", "layers", "--tokens", "6144", "14080",
                             "--repeats", "2", "--comfyui", str(comfyui_root()), "--out", str(out)])  # fmt: skip
    layers = report["options"]["layers"]
    assert [r["weights"] for r in layers["load"]] == ["layers"] * 3
    whole = report["options"]["replicated"]["load"][0]["block_bytes"]
    held = [r["block_bytes"] for r in layers["load"]]
    assert sum(held) == whole
    assert [r["layer_blocks"] for r in layers["load"]] == [[0, 17], [17, 35], [35, 48]], layers["load"]
    assert max(held) - min(held) < 2**30 // 2, held  # the split by count: 1.8 GiB apart
    for tokens, row in layers["sizes"].items():
        assert "ms" in row, (tokens, row)
        assert max(row["peak_memory_gib_per_worker"]) <= 16.0, (tokens, row)


def test_a_new_max_video_tokens_reloads_only_offloaded_weights(make_group, tiny):
    """The loader's max_video_tokens sets the room an offloaded GPU keeps (reserve_bytes): a replicated
    model stays loaded when it changes, an offloaded one is loaded again under its new budget; switching
    the option reloads."""
    get_manager().unload()  # the other tests' group: make_group checks that no worker is left at its end
    group = make_group("cpu:1")

    def load(weights: str, reserve_bytes: int) -> dict:
        args = {"checkpoint": str(tiny.checkpoint), "dtype": "float32", "backend": "comfy",
                "comfyui_root": str(comfyui_root()), "weights": weights, "reserve_bytes": reserve_bytes}  # fmt: skip
        return group.run("load_model", args)[0]

    assert load("replicated", 1 << 20)["reused"] is False
    assert load("replicated", 2 << 20)["reused"] is True
    assert load("offloaded", 2 << 20)["reused"] is False
    assert load("offloaded", 2 << 20)["reused"] is True
    assert load("offloaded", 3 << 20)["reused"] is False
    assert load("replicated", 3 << 20)["reused"] is False


@pytest.mark.parametrize("option", ["offloaded", "sharded"])
def test_the_loaders_model_output_is_replicated(comfy, tiny, option):  # noqa: F811
    """Native sampling on the MGPU Loader's MODEL (every model call a job on 2 workers) under each
    option gives replicated's result."""
    from test_group_model import Graph, run_graph

    from ltx2_mgpu.nodes.loader import load_model

    out = {}
    try:
        for weights in ("replicated", option):
            mgpu, model, _info = load_model(tiny.checkpoint.name, "cpu:2", "float32", weights=weights)
            assert mgpu.weights == weights and model is not None
            out[weights] = run_graph(comfy, model, Graph())
    finally:
        get_manager().unload()
    found = errors(out[option], out["replicated"])
    print(f"\n[weights] loader MODEL, 2 ranks, {option} vs replicated: rel {[f'{r:.2e}' for _, r in found]}")
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found


# (ranks, graph, passes per step): 3 passes on 2 groups (one group runs a pass fewer), 2 passes on 3
# groups (one group runs none); either way a group pads its weight gathers under sharded.
UNEVEN_PASSES = {2: ("stg-block1", 3), 3: ("t2v-cfg3", 2)}


@pytest.mark.parametrize("ranks", [2, 3])
def test_sharded_guidance_groups_are_replicated(comfy, tiny, ranks):  # noqa: F811
    """A guidance group per worker, the passes not dividing over the groups: under sharded the group
    with fewer passes pads its weight gathers each step (NOTE [sharded lockstep]) and the SP Sampler
    gives replicated's result."""
    check_guidance_parity(comfy, tiny, ranks, f"cpu:{ranks}")


@pytest.mark.gpu
@pytest.mark.multigpu
def test_sharded_guidance_groups_on_two_gpus_are_replicated(comfy, tiny):  # noqa: F811
    """As on CPU workers, over NCCL on cuda:0 and cuda:1: the gathers span both GPUs, each group's SP
    exchange stays inside it."""
    check_guidance_parity(comfy, tiny, 2, "cuda:0,cuda:1")


def check_guidance_parity(comfy, tiny, ranks: int, devices: str) -> None:  # noqa: F811
    from test_group_model import GRAPHS, run_graph
    from test_sp_sampler_guider import sp_sampler

    from ltx2_mgpu.nodes.loader import load_model

    name, passes = UNEVEN_PASSES[ranks]
    out, replies = {}, {}
    try:
        for weights in ("replicated", "sharded"):
            mgpu, model, _info = load_model(tiny.checkpoint.name, devices, "float32", weights=weights)
            mgpu = replace(mgpu, guidance_groups=ranks)
            replies[weights] = []
            out[weights] = run_graph(comfy, model, GRAPHS[name], sample=sp_sampler(mgpu, replies[weights]))
    finally:
        get_manager().unload()
    found = errors(out["sharded"], out["replicated"])
    padding = [r["padding_forwards"] for r in replies["sharded"]]
    print(
        f"\n[weights] {name}, {ranks} guidance groups of 1 worker, sharded vs replicated: rel "
        f"{[f'{r:.2e}' for _, r in found]}, padding forwards per worker {padding}"
    )
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), found
    assert all(r["guidance_groups"] == ranks and r["parallel_steps"] == 3 for r in replies["sharded"])
    assert [r["weights"] for r in replies["sharded"]] == ["sharded"] * ranks
    assert [r["padding_forwards"] for r in replies["replicated"]] == [0] * ranks
    # Group k runs passes k, k + G, ...: the groups with fewer pad one forward per step, the others none.
    runs = [len(range(k, passes, ranks)) for k in range(ranks)]
    assert padding == [3 * (max(runs) - n) for n in runs] and max(padding) > 0, (runs, padding)


def test_offloaded_gives_up_resident_layers_for_the_text_encoder_as_comfyui_does(comfy, monkeypatch):  # noqa: F811
    """NOTE [text room]: before a text encoder loads on a GPU without room for it, an offloaded model
    asks ComfyUI's model management to free what the encoder needs (native ComfyUI's move before a
    text encoder loads); replicated, sharded and layers weights stay, and a GPU with room moves nothing."""
    import comfy.model_management as mm

    from ltx2_mgpu.workers.engine.comfy import weights
    from ltx2_mgpu.workers.engine.comfy.engine import ComfyEngine

    gib = 2**30
    held = SimpleNamespace(model_loaded_weight_memory=10 * gib)
    freed: list[tuple[int, torch.device]] = []

    def free_memory(need, device, **_):
        freed.append((need, device))
        held.model_loaded_weight_memory = 4 * gib

    free = {"now": 2 * gib}
    monkeypatch.setattr(mm, "free_memory", free_memory)
    monkeypatch.setattr(mm, "get_free_memory", lambda dev=None, torch_free_too=False: free["now"])

    def accounted(option: str) -> SimpleNamespace:  # weights.residency's figures for `held`
        return SimpleNamespace(weights=option, resident_bytes=held.model_loaded_weight_memory)

    engine = ComfyEngine()
    engine.model = SimpleNamespace(patcher=SimpleNamespace(model=held))
    job = SimpleNamespace(device=torch.device("cuda", 0))
    for option in ("replicated", "sharded", "layers"):
        monkeypatch.setattr(weights, "residency", lambda patcher, option=option: accounted(option))
        assert engine.make_room(job, 8 * gib) == "" and not freed
    monkeypatch.setattr(weights, "residency", lambda patcher: accounted("offloaded"))
    moved = engine.make_room(job, 8 * gib)
    assert freed == [(8 * gib, job.device)]
    assert moved == "6.0 GiB of the transformer's resident layers moved to host memory for the text encoder"
    free["now"] = 9 * gib  # room enough: nothing moves
    assert engine.make_room(job, 8 * gib) == "" and len(freed) == 1
    assert (
        engine.make_room(SimpleNamespace(device=torch.device("cpu")), 8 * gib) == ""
    )  # host memory: ComfyUI's
