"""The MGPU Loader's pre-flight (workers/wire/memory_plan.py, workers/group/preflight.py): the sizes it
reads from a header, what each weights option needs per GPU, the option it recommends and the
refusals, which name the option or the max_video_tokens to change.

A made-up header with round numbers: 48 blocks of 0.875 GiB and 2 GiB outside them (44 GiB in bf16,
a 22B model's size), video width 4096; at 24,576 tokens on 2 GPUs a GPU's activations are 12,288 x 4096
x 96 bytes = 4.5 GiB. Per GPU: replicated 44 + 4.5 + 1 (runtime) = 49.5 GiB; offloaded 2 + 2 x 0.875 + 4.5
+ 1 = 9.25 GiB; sharded 2 + 21 + 1.75 + 4.5 + 1 = 30.25 GiB.
"""

from __future__ import annotations

import logging
import os

import pytest

from ltx2_mgpu.workers.group.preflight import preflight
from ltx2_mgpu.workers.wire.memory_plan import (
    GIB,
    activation_bytes,
    check_plan,
    host_bytes,
    model_shares,
    model_sizes,
    plan,
)

BLOCKS, WIDTH = 48, 4096
BLOCK_BYTES, OTHER_BYTES = 896 * 2**20, 2 * GIB
TOKENS = 24_576


def header(dtype: str = "BF16") -> tuple[dict, dict]:
    """(shapes, dtypes) of the made-up checkpoint, its block Linears stored as `dtype`."""
    shapes, dtypes = {}, {}
    q = WIDTH * WIDTH * 2  # bytes of attn1.to_q in bf16
    for i in range(BLOCKS):
        prefix = f"model.diffusion_model.transformer_blocks.{i}."
        shapes[prefix + "attn1.to_q.weight"] = (WIDTH, WIDTH)
        shapes[prefix + "ff.net.0.proj.weight"] = ((BLOCK_BYTES - q) // 2,)
        dtypes[prefix + "attn1.to_q.weight"] = dtypes[prefix + "ff.net.0.proj.weight"] = dtype
    shapes["model.diffusion_model.patchify_proj.weight"] = (OTHER_BYTES // 2,)
    dtypes["model.diffusion_model.patchify_proj.weight"] = "BF16"
    shapes["vae.decoder.conv_in.weight"] = (10**9,)  # not the diffusion model: not counted
    dtypes["vae.decoder.conv_in.weight"] = "F32"
    # LTX-2.3's text projection (2.15 GiB in the 22B checkpoint): the text encoder's, not counted
    for stream, width in (("video", 4096), ("audio", 2048)):
        shapes[f"text_embedding_projection.{stream}_aggregate_embed.weight"] = (width, 188_160)
        dtypes[f"text_embedding_projection.{stream}_aggregate_embed.weight"] = "BF16"
    return shapes, dtypes


def test_sizes_come_from_the_header_at_the_weight_dtype():
    sizes = model_sizes(*header(), "bfloat16")
    assert (sizes.blocks_bytes, sizes.largest_block_bytes, sizes.other_bytes) == (
        42 * GIB,
        BLOCK_BYTES,
        OTHER_BYTES,
    )
    assert sizes.video_width == WIDTH
    # float32 doubles the float weights; fp8 blocks keep one byte per weight
    assert model_sizes(*header(), "float32").total_bytes == 88 * GIB
    assert model_sizes(*header("F8_E4M3"), "bfloat16").blocks_bytes == 21 * GIB


def test_sharded_splits_quantized_data_and_keeps_scales_whole():
    """An fp8 file with per-row scales (as int8 convrot stores them) and ComfyUI's comfy_quant entries:
    the data counts at one byte a weight and is split over the GPUs, the scales count whole on each
    (the workers keep them so), the format entries not at all (read at load, not kept)."""
    shapes, dtypes = header("F8_E4M3")
    for i in range(BLOCKS):
        prefix = f"model.diffusion_model.transformer_blocks.{i}.attn1.to_q."
        shapes[prefix + "weight_scale"], dtypes[prefix + "weight_scale"] = (WIDTH,), "F32"
        shapes[prefix + "comfy_quant"], dtypes[prefix + "comfy_quant"] = (60,), "U8"
    sizes = model_sizes(shapes, dtypes, "bfloat16")
    scales = BLOCKS * WIDTH * 4
    assert (sizes.blocks_bytes, sizes.block_scale_bytes) == (21 * GIB + scales, scales)
    in_flight = 2 * sizes.largest_block_bytes
    assert model_shares(sizes, "sharded", 2) == (OTHER_BYTES + 21 * GIB // 2 + scales + in_flight,) * 2
    assert model_shares(sizes, "replicated", 2) == (OTHER_BYTES + 21 * GIB + scales,) * 2


def test_each_option_per_gpu_and_the_recommendation():
    sizes = model_sizes(*header(), "bfloat16")
    found = plan(sizes, ["cuda:0", "cuda:1"], [24 * GIB] * 2, "replicated", TOKENS, "bfloat16")
    totals = {o: found.needs[o][0].total_bytes / GIB for o in found.needs}
    assert totals == {"replicated": 49.5, "offloaded": 9.25, "sharded": 30.25, "layers": 33.0}
    assert not found.fits("replicated") and found.fits("offloaded")
    assert found.recommended == "offloaded"
    assert "  why: replicated needs 49.5 GiB on cuda:0, which has 24.0 GiB\n" in found.console_block() + "\n"
    with pytest.raises(ValueError, match=r"weights replicated needs cuda:\d: model 44\.0 GiB .* 49\.5 GiB of 24\.0 GiB: "
                       r"does NOT fit\. Set the loader's weights to offloaded"):  # fmt: skip
        check_plan(found, sizes, "bfloat16")
    # 48 GiB cards: replicated serves a smaller video (44 + 1 GiB leaves 3 GiB: 8,192 tokens a GPU)
    tight = plan(sizes, ["cuda:0", "cuda:1"], [48 * GIB] * 2, "replicated", TOKENS, "bfloat16")
    with pytest.raises(ValueError, match=r"49\.5 GiB of 48\.0 GiB: does NOT fit\. Set the loader's weights to "
                       r"offloaded, or keep replicated and lower max_video_tokens to 16,384 \(and the video's size"):  # fmt: skip
        check_plan(tight, sizes, "bfloat16")
    check_plan(
        plan(sizes, ["cuda:0", "cuda:1"], [48 * GIB] * 2, "replicated", 16_384, "bfloat16"), sizes, "bfloat16"
    )
    # 80 GB cards hold a copy: replicated is recommended (fastest) and passes
    roomy = plan(sizes, ["cuda:0", "cuda:1"], [80 * GIB] * 2, "replicated", TOKENS, "bfloat16")
    assert roomy.recommended == "replicated"
    check_plan(roomy, sizes, "bfloat16")


def test_sharded_is_not_offered_on_workers_that_share_a_gpu():
    sizes = model_sizes(*header(), "bfloat16")
    own = plan(sizes, ["cuda:0", "cuda:1"], [32 * GIB] * 2, "sharded", TOKENS, "bfloat16")
    assert own.fits("sharded") and "sharded" in own.available and own.recommended == "offloaded"
    check_plan(own, sizes, "bfloat16")
    assert "sharded: one GPU per worker; serves every node" in own.console_block()
    shared = plan(sizes, ["cuda:0", "cuda:0"], [32 * GIB] * 2, "offloaded", TOKENS, "bfloat16")
    assert "sharded" not in shared.available
    assert "sharded 30.2 GiB (not on shared GPUs)" in shared.console_block()
    assert (
        "why: replicated needs 49.5 GiB on cuda:0, which has 32.0 GiB; not served here: sharded (not on shared GPUs)"
        in (shared.console_block())
    )


def test_layers_holds_a_range_of_blocks_and_every_token():
    """weights layers: a GPU holds a contiguous range of blocks (blocks of one size: BLOCKS / GPUs each;
    tests/test_layer_ranges.py for blocks of different sizes) plus the layers outside them, runs every
    video token (no SP split), keeps nothing in host memory; offered on shared GPUs (gloo carries the
    hand-overs), not on one worker (it would be replicated)."""
    sizes = model_sizes(*header(), "bfloat16")
    assert sizes.num_blocks == BLOCKS and sizes.per_block_bytes == (BLOCK_BYTES,) * BLOCKS
    for world in (2, 3):
        assert model_shares(sizes, "layers", world) == (OTHER_BYTES + BLOCKS // world * BLOCK_BYTES,) * world
    found = plan(sizes, ["cuda:0", "cuda:0", "cuda:0"], [32 * GIB] * 3, "layers", TOKENS, "bfloat16")
    need = found.needs["layers"][0]
    assert need.activation_bytes == activation_bytes(sizes, TOKENS, 1, "bfloat16")  # all tokens
    assert "layers" in found.available and found.fits("layers")
    assert "layers: each GPU holds a range of the blocks" in found.console_block()
    # offloaded is recommended (it serves every node); the console says layers fits and is faster
    assert found.recommended == "offloaded"
    assert "layers fits too: faster than offloaded" in found.console_block()
    assert (
        "layers fits too"
        not in plan(sizes, ["cuda:0"] * 3, [24 * GIB] * 3, "offloaded", TOKENS, "bfloat16").console_block()
    )
    assert host_bytes(sizes, "layers") == 0
    alone = plan(sizes, ["cuda:0"], [80 * GIB], "replicated", TOKENS, "bfloat16")
    assert "layers" not in alone.available
    assert "(2 or more workers)" in alone.console_block() and not sizes.gguf


def test_a_size_nothing_fits_names_the_largest_that_does():
    sizes = model_sizes(*header(), "bfloat16")
    found = plan(sizes, ["cuda:0", "cuda:1"], [6 * GIB] * 2, "offloaded", TOKENS, "bfloat16")
    assert found.recommended is None
    # room per GPU: 6 - 3.75 - 1 = 1.25 GiB = 3,413 tokens of 4096 x 96 bytes; 6,826 over 2 GPUs, 6,656 in steps of 256
    with pytest.raises(ValueError, match=r"the largest that fits is 6,656 video tokens \(weights offloaded\): "
                       r"lower max_video_tokens to 6,656"):  # fmt: skip
        check_plan(found, sizes, "bfloat16")
    check_plan(
        plan(sizes, ["cuda:0", "cuda:1"], [6 * GIB] * 2, "offloaded", 6_656, "bfloat16"), sizes, "bfloat16"
    )
    with pytest.raises(ValueError):
        check_plan(
            plan(sizes, ["cuda:0", "cuda:1"], [6 * GIB] * 2, "offloaded", 6_912, "bfloat16"),
            sizes,
            "bfloat16",
        )


def test_gpus_too_small_for_any_share_say_so():
    sizes = model_sizes(*header(), "bfloat16")
    found = plan(sizes, ["cuda:0", "cuda:1"], [4 * GIB] * 2, "offloaded", TOKENS, "bfloat16")
    with pytest.raises(
        ValueError, match=r"No weights option fits these GPUs: even offloaded needs 9\.2 GiB per GPU"
    ):
        check_plan(found, sizes, "bfloat16")


def test_a_text_encoder_on_one_gpu_counts_there_only():
    sizes = model_sizes(*header(), "bfloat16")
    found = plan(
        sizes,
        ["cuda:0", "cuda:1"],
        [24 * GIB] * 2,
        "offloaded",
        TOKENS,
        "bfloat16",
        text_encoder_bytes=[17 * GIB, 0],
    )
    assert [n.fits for n in found.needs["offloaded"]] == [False, True]
    with pytest.raises(ValueError, match=r"cuda:0: model 3\.8 GiB \+ text encoder 17\.0 GiB"):
        check_plan(found, sizes, "bfloat16")


def test_the_console_block_and_cpu_workers(caplog):
    shapes, dtypes = header()
    with caplog.at_level(logging.INFO):
        found, reserve = preflight(shapes, dtypes, ["cpu", "cpu"], "offloaded", TOKENS, "bfloat16")
    block = found.console_block()
    assert block in caplog.text  # printed as one block
    assert block.splitlines()[0] == "pre-flight: weights offloaded, max_video_tokens 24,576, 2 CPU workers"
    assert "cpu: model 3.8 GiB + activations 4.5 GiB + runtime 0.0 GiB = 8.2 GiB host memory" in block
    assert "host memory: 44.0 GiB per worker" in block
    assert found.recommended == "replicated"  # a CPU worker's host memory is not checked
    assert reserve == int(4.5 * GIB)
    assert found.summary() == "weights offloaded: 8.2 GiB per GPU; recommended replicated"
    assert "text encoder" not in block  # CPU workers: the host's memory, nothing placed per device
    on_gpus, _ = preflight(
        shapes, dtypes, ["cuda:0", "cuda:1"], "replicated", TOKENS, "bfloat16", [80 * GIB] * 2
    )
    lines = on_gpus.console_block().splitlines()
    assert lines[1].startswith("  cuda:0: model ") and "text encoder" not in lines[1]
    assert lines[-1] == (
        "  text encoder: not counted here; MGPU Text Encode places it by the GPUs' free memory when it runs"
    )


def test_sharded_on_a_shared_gpu_and_the_ltxcore_backend_are_refused_with_what_to_set():
    from ltx2_mgpu.workers.wire.weight_placement import check_sharded_devices, check_weights

    with pytest.raises(
        ValueError, match=r"weights sharded needs one GPU per worker.*Set weights to offloaded"
    ):
        check_sharded_devices("sharded", ("cuda:0", "cuda:0"))
    check_sharded_devices("sharded", ("cuda:0", "cuda:1"))
    check_sharded_devices("offloaded", ("cuda:0", "cuda:0"))
    with pytest.raises(
        ValueError, match=r"weights offloaded runs on ComfyUI's engine .* set weights to replicated"
    ):
        check_weights("offloaded", backend_is_comfy=False)
    check_weights("offloaded", backend_is_comfy=True)


def test_the_loader_refuses_before_any_worker_starts(tiny, monkeypatch):
    """The loader's pre-flight and option checks run before any worker: GPUs too small, and offloaded on
    the ltx-core backend."""
    import ltx2_mgpu.workers.group.preflight as pf
    from conftest import worker_children
    from ltx2_mgpu.nodes.loader import load_model

    monkeypatch.setattr(pf, "gpu_capacities", lambda devices: [GIB] * len(devices))  # 1 GiB "GPUs"
    with pytest.raises(ValueError, match=r"No weights option fits these GPUs: even offloaded needs"):
        load_model(str(tiny.checkpoint), "cpu:2", "float32", weights="replicated")
    monkeypatch.setenv("LTX2_MGPU_BACKEND", "ltxcore")
    with pytest.raises(
        ValueError, match=r"weights offloaded is not served by the ltx-core engine.*replicated"
    ):
        load_model(str(tiny.checkpoint), "cpu:2", "float32", weights="offloaded")
    assert worker_children() == []


def test_sharded_on_workers_sharing_a_gpu_is_refused_before_they_start(tiny):
    from ltx2_mgpu.workers.group.manager import MGPUModel, check_fits

    model = MGPUModel(
        checkpoint=str(tiny.checkpoint), devices=("cuda:0", "cuda:0"), weights="sharded", backend="comfy",
        comfyui_root="/any/ComfyUI",
    )  # fmt: skip
    with pytest.raises(
        ValueError, match=r"weights sharded needs one GPU per worker, but the workers share GPUs"
    ):
        check_fits(model)


def test_host_memory_too_small_for_the_option_is_refused_with_what_to_set():
    """The pre-flight refuses before any worker loads. On 32 GiB GPUs (replicated does not fit): offloaded keeps the whole model (44 GiB) in each worker's
    host memory, sharded the 2 GiB outside the blocks; CPU workers are not checked (the host is their
    device)."""
    from ltx2_mgpu.workers.group.preflight import available_host_bytes

    shapes, dtypes = header()
    gpus, capacities = ["cuda:0", "cuda:1"], [32 * GIB] * 2

    def run(weights: str, host_gib: float, devices=gpus) -> None:
        on_gpus = capacities if devices is gpus else None  # CPU workers: read as having no device capacity
        preflight(shapes, dtypes, devices, weights, TOKENS, "bfloat16", on_gpus, int(host_gib * GIB))

    with pytest.raises(
        ValueError,
        match=r"weights offloaded keeps the whole diffusion model, cast in per call, in every worker's host "
        r"memory: 44.0 GiB per worker, 88.0 GiB for 2 workers, but this machine has 64.0 GiB available. "
        r"Set the loader's weights to sharded, or free host memory",
    ):
        run("offloaded", 64)
    run("offloaded", 90)
    run("sharded", 4.5)
    with pytest.raises(
        ValueError,
        match=r"weights sharded keeps the layers outside the blocks.*4.0 GiB for 2 workers.*use fewer GPUs",
    ):
        run("sharded", 3)
    run("offloaded", 1, devices=["cpu", "cpu"])
    assert 0 < available_host_bytes() <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
