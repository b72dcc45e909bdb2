"""The SP Sampler on the comfy backend (ComfyUI's own model and samplers in the ranks) against native
ComfyUI sampling in this process, on the same file, inputs and seed (opt-in: COMFYUI_PATH).

Native side as in tests/test_comfyui_native_parity.py (ComfyUI's nodes, SamplerCustomAdvanced with
CFGGuider / LTXVDualCFGGuider). Ours: LTX2SPSampler on an MGPU_MODEL whose backend is "comfy", with 1,
2 and 3 CPU ranks in float32. Since the ranks run ComfyUI's forward, noise, packing, CFG and sampler,
the only difference left is the reduction order of attention over split heads and tokens:
at most 1e-5 of the largest magnitude, per stream; N ranks against 1 rank at the same bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
from comfyui_harness import comfyui_root
from test_comfyui_native_parity import Case, comfy, errors, native_inputs, native_sample, our_sample  # noqa: F401

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5
# Stage 2's distilled sigmas (three steps): enough for the noise, CFG and mask paths, quick on CPU.
SIGMAS = "0.909375, 0.725, 0.421875, 0.0"
CASES = {
    "t2v-av-euler_ancestral-cfg3": Case("euler_ancestral", 3.0, 3.0, sigmas="manual"),
    "i2v-av-strength0.6": Case("euler_ancestral", 3.0, 3.0, i2v_strength=0.6, sigmas="manual"),
    "t2v-video_only-euler": Case("euler", 3.0, 3.0, sigmas="manual", audio=False),
    "t2v-av-dual_cfg-video3-audio7": Case("euler", 3.0, 7.0, sigmas="manual"),
}
RANKS = (1, 2, 3)
_results: dict[tuple[str, int], list[torch.Tensor]] = {}


@pytest.fixture(autouse=True)
def short_sigmas(monkeypatch):
    import test_comfyui_native_parity as native

    monkeypatch.setattr(native, "MANUAL_SIGMAS", SIGMAS)


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}ranks")
def comfy_group(request, tiny, comfy) -> Iterator[MGPUModel]:  # noqa: F811 (the imported fixture)
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint,
        devices=f"cpu:{request.param}",
        dtype="float32",
        backend="comfy",
        comfyui_root=root.path,
        comfyui_version=root.version,
    )
    yield model
    get_manager().unload()
    assert_no_leaks()


@pytest.mark.parametrize("name", list(CASES))
def test_comfy_backend_matches_native(comfy, comfy_group, name):  # noqa: F811
    case = CASES[name]
    inputs = native_inputs(comfy, case)
    t0 = time.perf_counter()
    native = native_sample(comfy, case, *inputs)
    t1 = time.perf_counter()
    ours = our_sample(comfy, comfy_group, case, *inputs)
    t2 = time.perf_counter()
    ranks = comfy_group.world_size
    found = errors(ours, native)
    _results[(name, ranks)] = ours
    report = " | ".join(f"{s} max|d| {d:.2e} rel {r:.2e}" for s, (d, r) in zip(("video", "audio"), found))
    print(f"\n[comfy backend] {name} {ranks} ranks: {report} | native {t1 - t0:.1f} s, ours {t2 - t1:.1f} s")
    assert len(found) == (2 if case.audio else 1)
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), (name, ranks, found)
    single = _results.get((name, 1))
    if ranks > 1 and single is not None:
        vs_one = errors(ours, single)
        print(f"[comfy backend] {name} {ranks} ranks vs 1 rank: rel {[f'{r:.2e}' for _, r in vs_one]}")
        assert all(rel <= RELATIVE_TOLERANCE for _, rel in vs_one), (name, ranks, vs_one)


def test_ranks_report_the_comfy_backend(comfy, tiny, monkeypatch):  # noqa: F811
    """The sample command really ran on ComfyUI's stack, not on ltx-core: the ranks' replies say so."""
    import ltx2_mgpu.nodes.sp_sampler as sp

    replies: list[list[dict]] = []
    run_job = sp.run_job
    monkeypatch.setattr(sp, "run_job", lambda *a, **k: replies.append(run_job(*a, **k)) or replies[-1])
    root = check_comfyui_root(comfyui_root())
    model = MGPUModel.create(
        tiny.checkpoint, devices="cpu:2", dtype="float32", backend="comfy", comfyui_root=root.path,
        guidance_groups=1,  # every pass over both ranks (auto would put cond and uncond on one each)
    )  # fmt: skip
    case = CASES["t2v-video_only-euler"]
    try:
        our_sample(comfy, model, case, *native_inputs(comfy, case))
    finally:
        get_manager().unload()
    assert [reply["backend"] for reply in replies[0]] == ["comfy", "comfy"]
    # Three steps, cond and uncond batched: every model call went through the token split.
    assert [reply["split_forwards"] for reply in replies[0]] == [3, 3]
