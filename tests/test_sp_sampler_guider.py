"""The SP Sampler with a native GUIDER, and guidance passes spread over groups of ranks (opt-in:
COMFYUI_PATH).

The graphs of test_group_model (CFGGuider, the dual-CFG guider, STG, modality guidance, reference
audio's identity guidance, LTXVImgToVideoInplace, a keyframe guide cropped after) are sampled twice in
this process: natively by SamplerCustomAdvanced on CheckpointLoaderSimple's MODEL, and by our SP
Sampler with the same guider built on the MGPU Loader's MODEL, its loop run in 2 or 3 CPU ranks
(nodes/guider_spec.py rebuilds the guider there). With guidance groups the step's passes run on
separate groups of ranks (workers/engine/comfy/guidance_parallel.py): the same result as the passes
one after another, within the attention reduction-order bound of 1e-5 of the largest native
magnitude per stream, in float32.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest
import torch
from test_comfyui_native_parity import SEED, comfy, errors, streams  # noqa: F401
from test_group_model import EXTRA_CALLS, GRAPHS, RELATIVE_TOLERANCE, Graph, run_graph

from conftest import assert_no_leaks
from ltx2_mgpu.workers.group.manager import get_manager
from ltx2_mgpu.workers.wire import shm

pytestmark = pytest.mark.comfyui

_native: dict[str, list[torch.Tensor]] = {}


@pytest.fixture(scope="module", params=(2, 3), ids=lambda n: f"{n}ranks")
def loader(request, comfy, tiny):  # noqa: F811 (the imported fixture)
    """The MGPU Loader's (MGPU_MODEL, MODEL) on `request.param` CPU ranks, float32."""
    from ltx2_mgpu.nodes.loader import load_model

    mgpu, model, _info = load_model(tiny.checkpoint.name, f"cpu:{request.param}", "float32")
    assert model is not None and mgpu.backend == "comfy"
    yield mgpu, model
    get_manager().unload()
    assert_no_leaks()


def sp_sampler(mgpu, replies: list):
    """SamplerCustomAdvanced's place taken by the SP Sampler with the guider (RandomNoise(SEED))."""
    from ltx2_mgpu.nodes import sp_sampler as node

    def sample(guider, sampler_name, sigmas, latent):
        run_job = node.run_job

        def recording(*args, **kwargs):
            replies[:] = run_job(*args, **kwargs)
            return replies

        node.run_job = recording
        try:
            (out,) = node.sample_latent(
                mgpu, latent=latent, sigmas=sigmas, sampler_name=sampler_name, cfg=1.0, cfg_audio=1.0,
                seed=SEED, guider=guider,
            )  # fmt: skip
        finally:
            node.run_job = run_job
        return out

    return sample


def native(comfy, name: str) -> list[torch.Tensor]:  # noqa: F811
    if name not in _native:
        _native[name] = run_graph(comfy, comfy.model, GRAPHS[name])
    return _native[name]


GUIDED = ["t2v-cfg3", "dual-cfg", "stg-block1", "modality-3", "reference-audio-2", "i2v-inplace-0.8",
          "keyframe-guide-cropped", "keyframe-guide-0.7"]  # fmt: skip


@pytest.mark.parametrize("groups", [1, 0, -1], ids=["sp-only", "auto-groups", "a-group-per-rank"])
@pytest.mark.parametrize("name", GUIDED)
def test_sp_sampler_runs_the_guider_as_native(comfy, loader, name, groups):  # noqa: F811
    """groups 1: every pass over all ranks; 0: the plan's choice; -1: one group per rank, whatever the
    pass count (3 passes on 2 groups: one group runs two; 2 passes on 3 groups: one group idles)."""
    mgpu, model = loader
    groups = mgpu.world_size if groups < 0 else groups
    mgpu = dataclasses.replace(mgpu, guidance_groups=groups)
    replies: list[dict] = []
    ours = run_graph(comfy, model, GRAPHS[name], sample=sp_sampler(mgpu, replies))
    found = errors(ours, native(comfy, name))
    reply = replies[0]
    print(
        f"\n[SP Sampler + GUIDER] {name} {mgpu.world_size} ranks, {reply['guidance']}: "
        + " | ".join(f"{s} rel {r:.2e}" for s, (_, r) in zip(("video", "audio"), found))
    )
    assert len(found) == 2 and all(rel <= RELATIVE_TOLERANCE for _, rel in found), (name, found)
    passes = 2 + EXTRA_CALLS.get(name, 0)  # cond and uncond, and the guidance node's pass
    if groups == 1:
        assert reply["guidance_groups"] == 1 and reply["parallel_steps"] == 0
        # Every forward of the 3 steps ran split over all ranks: cond and uncond batched in one.
        assert reply["split_forwards"] == 3 * (passes - 1)
    elif groups == 0:
        # auto: 2 passes on 2 ranks -> 2 groups; 3 passes on 3 ranks -> 3 groups; 2 passes on 3 -> SP.
        expected = mgpu.world_size if passes % mgpu.world_size == 0 else 1
        assert reply["guidance_groups"] == expected, reply["guidance"]
        assert reply["parallel_steps"] == (3 if expected > 1 else 0)
    else:
        assert reply["guidance_groups"] == mgpu.world_size and reply["parallel_steps"] == 3


@pytest.mark.parametrize(
    ("name", "off"),
    [
        ("modality-3", {"modality_scale": 1.0}),
        ("reference-audio-2", {"reference_audio": 0.0}),
        ("keyframe-guide-0.7", {"guide_strength": 1.0}),  # the guide attention mask takes part
    ],
)
def test_the_extra_passes_change_the_result(comfy, name, off):  # noqa: F811
    """The parity above would hold for a term (or mask) the ranks ignored if it changed nothing: it does."""
    without = run_graph(comfy, comfy.model, dataclasses.replace(GRAPHS[name], **off))
    assert all(rel > 1e-3 for _, rel in errors(without, native(comfy, name)))


def test_basic_guider_and_a_lora_node_on_the_model(comfy, loader, tiny, lora_files):  # noqa: F811
    """BasicGuider (cfg 1, one pass) with LoraLoaderModelOnly on both MODELs."""
    import folder_paths

    import nodes  # ComfyUI's nodes.py

    mgpu, model = loader
    folder_paths.add_model_folder_path("loras", str(lora_files["lora"].parent))
    name = lora_files["lora"].name
    (native_model,) = nodes.LoraLoaderModelOnly().load_lora_model_only(comfy.model, name, 0.8)
    (group_model,) = nodes.LoraLoaderModelOnly().load_lora_model_only(model, name, 0.8)
    graph = Graph(sampler="euler")
    from ltx2_mgpu.nodes import sp_sampler as node  # noqa: F401

    def basic(sample):
        def run(guider, sampler_name, sigmas, latent):
            positive = guider.original_conds["positive"]
            conditioning = [
                [entry["cross_attn"], {k: v for k, v in entry.items() if k not in ("cross_attn", "uuid")}]
                for entry in positive
            ]
            (plain,) = comfy.cs.BasicGuider.execute(guider.model_patcher, conditioning)
            if sample is not None:
                return sample(plain, sampler_name, sigmas, latent)
            (noise,) = comfy.cs.RandomNoise.execute(SEED)
            (sampler,) = comfy.cs.KSamplerSelect.execute(sampler_name)
            return comfy.cs.SamplerCustomAdvanced.execute(noise, plain, sampler, sigmas, latent)[0]

        return run

    want = run_graph(comfy, native_model, graph, sample=basic(None))
    replies: list[dict] = []
    ours = run_graph(comfy, group_model, graph, sample=basic(sp_sampler(mgpu, replies)))
    found = errors(ours, want)
    print(f"\n[SP Sampler + BasicGuider + LoRA node] {mgpu.world_size} ranks: {found}")
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), found
    assert replies[0]["split_forwards"] == 3  # one pass per step


@pytest.mark.parametrize("groups", [1, -1], ids=["sp-only", "a-group-per-rank"])
def test_an_attention_backend_node_on_the_guiders_model(comfy, loader, groups):  # noqa: F811
    """ModelAttentionBackend on the MODEL the guider is built on: every rank runs the named function
    (counted in its reply) inside SP and in guidance groups, with native's result."""
    from comfy_extras.nodes_model_advanced import ModelAttentionBackend

    mgpu, model = loader
    mgpu = dataclasses.replace(mgpu, guidance_groups=mgpu.world_size if groups < 0 else groups)
    (native_model,) = ModelAttentionBackend().patch(comfy.model, "pytorch attention")
    (group_model,) = ModelAttentionBackend().patch(model, "pytorch attention")
    graph = GRAPHS["t2v-cfg3"]
    want = run_graph(comfy, native_model, graph)
    replies: list[dict] = []
    ours = run_graph(comfy, group_model, graph, sample=sp_sampler(mgpu, replies))
    found = errors(ours, want)
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), found
    assert len(replies) == mgpu.world_size
    served = [reply["attention_backend_calls"].get("pytorch", 0) for reply in replies]
    # A group per rank: cond and uncond on two of them; with 3 ranks the third group idles.
    assert sum(n > 0 for n in served) == (2 if groups < 0 else mgpu.world_size), served


def test_ic_lora_graph(comfy, loader, lora_files):  # noqa: F811
    """IC-LoRA's shape: a LoRA node on the MODEL and a reference video guided in at frame 0 (cropped
    after), CFGGuider, on the SP Sampler with the guider and on the MODEL under SamplerCustomAdvanced."""
    import folder_paths

    mgpu, model = loader
    folder_paths.add_model_folder_path("loras", str(lora_files["lora"].parent))
    graph = Graph(sampler="euler", lora=(lora_files["lora"].name, 0.7), video_guide=True)
    want = run_graph(comfy, comfy.model, graph)
    replies: list[dict] = []
    ours = run_graph(comfy, model, graph, sample=sp_sampler(mgpu, replies))
    on_model = run_graph(comfy, model, graph)
    for label, got in (("SP Sampler + GUIDER", ours), ("MODEL", on_model)):
        found = errors(got, want)
        print(f"\n[IC-LoRA graph] {label}, {mgpu.world_size} ranks: {found}")
        assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), (label, found)
    without_lora = run_graph(comfy, comfy.model, dataclasses.replace(graph, lora=None))
    assert all(rel > 1e-4 for _, rel in errors(without_lora, want)), "the LoRA changed nothing"


def test_progress_and_cancel_with_a_guider(comfy, loader, monkeypatch):  # noqa: F811
    """The progress bar moves per step; Cancel after the first step stops every rank at the next step
    boundary (guidance groups on 2 ranks, plain SP on 3) and the loaded group serves the next run."""
    import comfy.model_management as mm

    from ltx2_mgpu.nodes import comfy as ui

    mgpu, model = loader
    mgpu = dataclasses.replace(mgpu, guidance_groups=0)  # auto: 2 groups on 2 ranks, plain SP on 3
    steps: list[tuple[int, int]] = []
    cancel_at: list[int] = []

    class Recording:
        def __init__(self, total, node_id):
            pass

        def update(self, step, total, message=None):
            steps.append((step, total))
            if cancel_at and step >= cancel_at[0]:
                mm.interrupt_current_processing(True)

    monkeypatch.setattr(ui, "Progress", Recording)
    replies: list[dict] = []
    run_graph(comfy, model, GRAPHS["t2v-cfg3"], sample=sp_sampler(mgpu, replies))
    assert steps and steps[-1] == (3, 3), steps
    steps.clear()
    cancel_at.append(1)
    try:
        with pytest.raises(mm.InterruptProcessingException):
            run_graph(comfy, model, GRAPHS["t2v-cfg3"], sample=sp_sampler(mgpu, replies))
    finally:
        mm.interrupt_current_processing(False)
    assert max(step for step, _ in steps) < 3, steps  # stopped before the last step
    cancel_at.clear()
    ours = run_graph(comfy, model, GRAPHS["t2v-cfg3"], sample=sp_sampler(mgpu, replies))
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in errors(ours, native(comfy, "t2v-cfg3")))


def test_guider_errors_name_what_to_change(comfy, loader):  # noqa: F811
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    mgpu, model = loader
    lt, cs = comfy.lt, comfy.cs
    captured = {}

    def keep(guider, sampler_name, sigmas, latent):
        captured.update(guider=guider, sigmas=sigmas, latent=latent)
        return {"samples": latent["samples"]}

    run_graph(comfy, comfy.model, Graph(), sample=keep)
    native_guider, sigmas, latent = captured["guider"], captured["sigmas"], captured["latent"]
    positive = [[native_guider.original_conds["positive"][0]["cross_attn"], {}]]
    cases = [
        (dict(guider=native_guider), "is not the MGPU Loader's MODEL"),
        (dict(guider=native_guider, positive=positive), "not both"),
        (dict(guider=cs.CFGGuider.execute(lt.ModelSamplingLTXV.execute(model, 2.0, 1.0)[0], positive, positive, 3.0)[0]),
         "object patches ['model_sampling']"),
        (dict(positive=positive), "connect the negative input"),
    ]  # fmt: skip
    before = shm.list_segments(os.getpid())  # the group's own (kept between jobs)
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            sample_latent(mgpu, latent=latent, sigmas=sigmas, **kwargs)
    assert shm.list_segments(os.getpid()) == before, "a refused input left segments in /dev/shm"


@pytest.fixture(scope="module", autouse=True)
def _stop_group() -> Iterator[None]:
    yield
    get_manager().unload()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["t2v-cfg3", "stg-block1"])
def test_guidance_groups_on_one_gpu_through_the_kernel(comfy, tiny, name):  # noqa: F811
    """Two ranks sharing one GPU, the head exchange and the per-step gather on the IPC kernel
    (LTX2_MGPU_ALL2ALL=kernel makes a fallback an error): groups = plain SP = native, float32.
    Sampled with euler: an ancestral sampler draws its per-step noise from a generator on the
    latent's device, so GPU ranks and the CPU reference add different noise (as native ComfyUI on a
    GPU would differ from itself on a CPU)."""
    from ltx2_mgpu.nodes.loader import load_model

    get_manager().unload()
    os.environ["LTX2_MGPU_ALL2ALL"] = "kernel"
    get_manager().env["LTX2_MGPU_ALL2ALL"] = "kernel"
    try:
        mgpu, model, _ = load_model(tiny.checkpoint.name, "cuda:0,cuda:0", "float32")
        graph = dataclasses.replace(GRAPHS[name], sampler="euler")
        results = {}
        for groups in (1, 2):
            replies: list[dict] = []
            recipe = dataclasses.replace(mgpu, guidance_groups=groups)
            results[groups] = run_graph(comfy, model, graph, sample=sp_sampler(recipe, replies))
            assert replies[0]["exchange"] == "ipc-kernel" and replies[0]["guidance_groups"] == groups
        want = run_graph(comfy, comfy.model, graph)
        for groups, ours in results.items():
            found = errors([t.cpu() for t in ours], [t.cpu() for t in want])
            print(f"\n[GPU guidance groups] {name} groups {groups}: {found}")
            assert all(rel <= 1e-4 for _, rel in found), (groups, found)  # TF32 may be on natively
        found = errors(results[2], results[1])
        assert all(rel <= 1e-4 for _, rel in found), found
    finally:
        get_manager().unload()
        os.environ.pop("LTX2_MGPU_ALL2ALL", None)
        get_manager().env.pop("LTX2_MGPU_ALL2ALL", None)
