"""The MGPU Loader's MODEL under ComfyUI's own sampling nodes (opt-in: COMFYUI_PATH).

The same graph twice, in this process: once on CheckpointLoaderSimple's MODEL (native, one process),
once on the MGPU Loader's MODEL, whose every diffusion-model call runs in 1, 2 or 3 CPU ranks with
sequence parallelism (nodes/group_model/model.py). SamplerCustomAdvanced + CFGGuider (cfg > 1: cond and
uncond share each call), LTXVImgToVideoInplace, one LTXVAddGuide keyframe cropped again by
LTXVCropGuides, STG, the dual-CFG guider, and KSampler with a scheduler computed from the MODEL. The guiders, the sampler and the conditioning run natively
in this process; only the reduction order of attention over split tokens and heads differs: at most
1e-5 of the largest native magnitude per stream, in float32.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch
from test_comfyui_native_parity import FPS, FRAMES, HEIGHT, SEED, WIDTH, comfy, errors, streams  # noqa: F401

from conftest import assert_no_leaks, tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_model import CAPTION_CHANNELS
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-5
SIGMAS = "0.909375, 0.725, 0.421875, 0.0"  # three steps: noise, CFG, masks and guides all matter
RANKS = (1, 2, 3)


@dataclass(frozen=True)
class Graph:
    guider: str = "cfg"  # "cfg" (CFGGuider) or "dual" (LTXVDualCFGGuider, video 3 / audio 7)
    sampler: str = "euler_ancestral"
    inplace_strength: float | None = None  # LTXVImgToVideoInplace on the video latent
    keyframe: bool = False  # LTXVAddGuide of one image at the last frame, LTXVCropGuides after
    guide_strength: float = 1.0  # of that keyframe guide (below 1: ComfyUI's guide attention mask)
    stg_blocks: str = ""  # LTXVSpatioTemporalGuidance on the MODEL (scale 1)
    ksampler: bool = False  # KSampler (3 steps of the "simple" scheduler) instead of SamplerCustomAdvanced
    modality_scale: float | None = None  # LTXVModalityGuidance on the MODEL
    reference_audio: float | None = None  # LTXVReferenceAudio (ID-LoRA) at this identity guidance scale
    lora: tuple[str, float] | None = None  # LoraLoaderModelOnly (file name, strength) on the MODEL
    video_guide: bool = False  # LTXVAddGuide of a 9-frame reference video at frame 0, as IC-LoRA graphs


GRAPHS = {
    "t2v-cfg3": Graph(),
    "i2v-inplace-0.8": Graph(inplace_strength=0.8),
    "keyframe-guide-cropped": Graph(keyframe=True, sampler="euler"),
    # flf2v templates guide at 0.7: the guide attention mask, applied after the head exchange under SP.
    "keyframe-guide-0.7": Graph(keyframe=True, guide_strength=0.7, sampler="euler"),
    "stg-block1": Graph(stg_blocks="1"),
    "dual-cfg": Graph(guider="dual", sampler="euler"),
    "ksampler-simple": Graph(ksampler=True),
    "modality-3": Graph(modality_scale=3.0, sampler="euler"),
    "reference-audio-2": Graph(reference_audio=2.0, sampler="euler"),
}
# Model calls per step beyond the one for cond and uncond.
EXTRA_CALLS = {"stg-block1": 1, "modality-3": 1, "reference-audio-2": 1}
_results: dict[tuple[str, int, str], list[torch.Tensor]] = {}


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}ranks")
def group_model(request, comfy, tiny):  # noqa: F811 (the imported fixture)
    """The MGPU Loader's outputs on `request.param` CPU ranks, float32."""
    from ltx2_mgpu.nodes.loader import load_model

    mgpu, model, _info = load_model(tiny.checkpoint.name, f"cpu:{request.param}", "float32")
    assert model is not None and mgpu.backend == "comfy"
    yield model
    get_manager().unload()
    assert_no_leaks()


def run_graph(comfy, model, graph: Graph, sample=None) -> list[torch.Tensor]:  # noqa: F811
    """The graph as a user wires it, on `model`; the LATENT streams it ends with. `sample(guider,
    sampler_name, sigmas, latent) -> LATENT` replaces SamplerCustomAdvanced (RandomNoise(SEED))."""
    lt, cs = comfy.lt, comfy.cs
    positive = tiny_conditioning(11, CAPTION_CHANNELS, seed=1)
    negative = tiny_conditioning(6, CAPTION_CHANNELS, seed=2)
    for cond in (positive, negative):
        del cond[0][1]["frame_rate"]
    positive, negative = lt.LTXVConditioning.execute(positive, negative, FPS)[:2]
    image = torch.rand(1, HEIGHT, WIDTH, 3, generator=torch.Generator().manual_seed(7))
    with torch.inference_mode():
        (video,) = lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
        if graph.inplace_strength is not None:
            (video,) = lt.LTXVImgToVideoInplace.execute(comfy.vae, image, video, graph.inplace_strength)
        if graph.keyframe:
            positive, negative, video = lt.LTXVAddGuide.execute(
                positive, negative, comfy.vae, video, image.flip(1), -1, graph.guide_strength
            )
        if graph.video_guide:
            clip = torch.rand(9, HEIGHT, WIDTH, 3, generator=torch.Generator().manual_seed(8))
            positive, negative, video = lt.LTXVAddGuide.execute(
                positive, negative, comfy.vae, video, clip, 0, 1.0
            )
        (audio,) = comfy.lt_audio.LTXVEmptyLatentAudio.execute(FRAMES, FPS, 1, comfy.audio_vae)
        (latent,) = lt.LTXVConcatAVLatent.execute(video, audio)
    if graph.lora is not None:
        import nodes  # ComfyUI's nodes.py

        (model,) = nodes.LoraLoaderModelOnly().load_lora_model_only(model, *graph.lora)
    if graph.stg_blocks:
        (model,) = lt.LTXVSpatioTemporalGuidance.execute(model, 1.0, graph.stg_blocks, 0.0, 1.0)
    if graph.modality_scale is not None:
        (model,) = lt.LTXVModalityGuidance.execute(model, graph.modality_scale, 0.0, 1.0)
    if graph.reference_audio is not None:
        sample_rate = getattr(comfy.audio_vae, "audio_sample_rate", 16000)
        waveform = torch.rand(1, 2, sample_rate, generator=torch.Generator().manual_seed(5)) * 2 - 1
        with torch.inference_mode():
            model, positive, negative = lt.LTXVReferenceAudio.execute(
                model, positive, negative, {"waveform": waveform, "sample_rate": sample_rate},
                comfy.audio_vae, graph.reference_audio, 0.0, 1.0,
            )  # fmt: skip
    if graph.ksampler:
        import nodes  # ComfyUI's nodes.py (its root is on sys.path while the fixture runs)

        with torch.inference_mode():
            (out,) = nodes.KSampler().sample(
                model, SEED, 3, 3.0, graph.sampler, "simple", positive, negative, latent, denoise=1.0
            )
        return streams(out["samples"])
    if graph.guider == "dual":
        (guider,) = lt.LTXVDualCFGGuider.execute(model, positive, negative, 3.0, 7.0)
    else:
        (guider,) = cs.CFGGuider.execute(model, positive, negative, 3.0)
    (noise,) = cs.RandomNoise.execute(SEED)
    (sampler,) = cs.KSamplerSelect.execute(graph.sampler)
    (sigmas,) = cs.ManualSigmas.execute(SIGMAS)
    with torch.inference_mode():
        if sample is not None:
            out = sample(guider, graph.sampler, sigmas, latent)
        else:
            out = cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]
        if graph.keyframe or graph.video_guide:
            video, audio = lt.LTXVSeparateAVLatent.execute(out)[:2]
            _, _, video = lt.LTXVCropGuides.execute(positive, negative, video)
            assert video["samples"].shape[2] == 3, "the guide frames were not cropped"
            return [video["samples"].clone(), audio["samples"].clone()]
    return streams(out["samples"])


@pytest.mark.parametrize("plan", ["sp", "auto"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_group_model_matches_native_model(comfy, group_model, name, plan):  # noqa: F811
    """plan "sp": every call over all ranks; "auto": on 2 ranks a batched cond + uncond call splits
    over 2 guidance groups (cond on one rank, uncond on the other), a lone pass (STG...) runs SP; on 3
    ranks the plan keeps plain SP."""
    graph = GRAPHS[name]
    call = group_model.model.diffusion_model.call
    ranks = call.recipe.world_size
    if ranks == 1 and plan == "auto":
        pytest.skip("one rank: nothing to split")
    t0 = time.perf_counter()
    native = run_graph(comfy, comfy.model, graph)
    t1 = time.perf_counter()
    replies = []
    recipe, run_job = call.recipe, call._run_job
    call.recipe = dataclasses.replace(recipe, guidance_groups=1 if plan == "sp" else 0)
    call._run_job = lambda request: replies.append(run_job(request)) or replies[-1]
    try:
        ours = run_graph(comfy, group_model, graph)
    finally:
        call.recipe, call._run_job = recipe, run_job
    t2 = time.perf_counter()
    model_calls = [r for r in replies if "forward_ms" in r[0]]
    found = errors(ours, native)
    report = " | ".join(f"{s} max|d| {d:.2e} rel {r:.2e}" for s, (d, r) in zip(("video", "audio"), found))
    print(
        f"\n[group MODEL] {name} {ranks} ranks, plan {plan}, {len(model_calls)} calls: {report} | native "
        f"{t1 - t0:.1f} s, ours {t2 - t1:.1f} s"
    )
    assert len(found) == 2
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), (name, ranks, found)
    # Three steps, cond and uncond in one call each (STG and the like add one cond-only call per step).
    extra = 3 * EXTRA_CALLS.get(name, 0)
    assert len(model_calls) == 3 + extra
    # auto: cond | uncond over 2 groups on 2 ranks; on 3 ranks 2 groups do not divide them (plain SP).
    grouped = sum(r[0]["guidance_groups"] > 1 for r in model_calls)
    assert grouped == (3 if plan == "auto" and ranks == 2 else 0)
    # Every call not split over groups really ran token-split over all ranks (the server's count of
    # split forwards grows by one per such call; on one rank nothing is split).
    counts = [r[0]["split_forwards"] for r in model_calls if r[0]["guidance_groups"] == 1]
    steps = [b - a for a, b in itertools.pairwise(counts)]
    assert steps == [1 if ranks > 1 else 0] * len(steps), counts
    _results[(name, ranks, plan)] = ours
    single = _results.get((name, 1, "sp"))
    if ranks > 1 and single is not None:
        assert all(rel <= RELATIVE_TOLERANCE for _, rel in errors(ours, single)), name


def split_forwards(call) -> int:
    return call.last_replies[0]["split_forwards"] if call.last_replies else 0


def foreign_attention_patch(q, k, v, extra_options):  # what another pack's attn1 patch looks like
    return q, k, v


def foreign_diffusion_wrapper(executor, *args, **kwargs):
    return executor(*args, **kwargs)


def foreign_attention_function(q, k, v, heads, **kwargs):  # another pack's attention backend
    raise AssertionError("never called: refused before any model call")


@pytest.mark.parametrize("kind", ["attn1_patch", "diffusion_model_wrapper", "attention_function"])
def test_a_foreign_patch_is_refused_with_its_name(comfy, group_model, kind):  # noqa: F811
    from comfy.patcher_extension import WrappersMP

    patched = group_model.clone()
    if kind == "attn1_patch":
        patched.set_model_attn1_patch(foreign_attention_patch)
        name = "foreign_attention_patch"
    elif kind == "attention_function":  # what a pack's own ModelAttentionBackend-like node does
        patched.set_model_optimized_attention(foreign_attention_function)
        name = "foreign_attention_function"
    else:
        patched.add_wrapper_with_key(WrappersMP.DIFFUSION_MODEL, "other_pack", foreign_diffusion_wrapper)
        name = "foreign_diffusion_wrapper"
    with pytest.raises(ValueError, match=rf"test_group_model\.{name}.*cannot run in the worker group"):
        run_graph(comfy, patched, Graph(sampler="euler"))
    # The group stays usable: the same MODEL without the patch samples again.
    assert len(run_graph(comfy, group_model, Graph(sampler="euler"))) == 2


def test_comfyuis_attention_backend_node_runs_its_function_in_the_ranks(comfy, group_model):  # noqa: F811
    """ModelAttentionBackend on the group MODEL: its function travels by its registered name and every
    rank runs it (counted in the replies), inside the head exchange under SP; the result is native's
    with the same node on CheckpointLoaderSimple's MODEL."""
    from comfy_extras.nodes_model_advanced import ModelAttentionBackend

    graph = Graph(sampler="euler")
    (native_model,) = ModelAttentionBackend().patch(comfy.model, "pytorch attention")
    (ours,) = ModelAttentionBackend().patch(group_model, "pytorch attention")
    call = group_model.model.diffusion_model.call

    def served() -> list[int]:  # attention calls each rank ran through the named function so far
        return [reply["attention_backend_calls"].get("pytorch", 0) for reply in call.last_replies]

    native = run_graph(comfy, native_model, graph)
    run_graph(comfy, group_model, graph)
    before = served()
    got = run_graph(comfy, ours, graph)
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in errors(got, native))
    after = served()
    assert len(after) == call.recipe.world_size and all(a > b for a, b in zip(after, before)), (before, after)
    run_graph(comfy, group_model, graph)  # the MODEL without the node: ComfyUI's function, none counted
    assert served() == after


def test_an_attention_backend_the_workers_lack_is_refused_by_name(comfy, group_model):  # noqa: F811
    """A registered attention function of the ComfyUI process that the workers' ComfyUI does not
    register (an extra pack's) is refused before the first model call runs, naming it and what the
    workers have; the group stays usable."""
    import comfy.ldm.modules.attention as attention

    name = "ltx2_mgpu_test_only_backend"
    attention.REGISTERED_ATTENTION_FUNCTIONS[name] = foreign_attention_function
    try:
        patched = group_model.clone()
        patched.set_model_optimized_attention(foreign_attention_function)
        with pytest.raises(ValueError, match=rf"attention backend '{name}'.*available there: .*pytorch"):
            run_graph(comfy, patched, Graph(sampler="euler"))
    finally:
        del attention.REGISTERED_ATTENTION_FUNCTIONS[name]
    assert len(run_graph(comfy, group_model, Graph(sampler="euler"))) == 2


def test_cancel_between_model_calls_stops_sampling(comfy, group_model):  # noqa: F811
    """ComfyUI's interrupt, set during a step, stops the sampler before the next model call goes out."""
    from comfy import model_management

    call = group_model.model.diffusion_model.call
    patched = group_model.clone()

    def interrupt_after_this_call(apply_model, args):
        out = apply_model(args["input"], args["timestep"], **args["c"])
        model_management.interrupt_current_processing(True)  # what the Cancel button does
        return out

    patched.set_model_unet_function_wrapper(interrupt_after_this_call)
    before = call.calls
    try:
        with pytest.raises(model_management.InterruptProcessingException):
            run_graph(comfy, patched, Graph(sampler="euler"))
    finally:
        model_management.interrupt_current_processing(False)
    assert call.calls == before + 1
    assert len(run_graph(comfy, group_model, Graph(sampler="euler"))) == 2


def test_a_restarted_group_gets_the_conditioning_again(comfy, group_model):  # noqa: F811
    """ "Unload Models" stops the workers; the same MODEL samples again (the ranks lost the cached
    context: the first call is refused as a cache miss and sent again in full), with the same result."""
    first = run_graph(comfy, group_model, Graph(sampler="euler"))
    get_manager().unload("the test unloads")
    again = run_graph(comfy, group_model, Graph(sampler="euler"))
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_the_loaders_lora_reaches_every_model_call(comfy, group_model, tiny, lora_files):  # noqa: F811
    """The loader's lora_name fuses the LoRA in the ranks before the MODEL's calls (and its text
    connectors): the same as CheckpointLoaderSimple's MODEL through LoraLoaderModelOnly."""
    import folder_paths

    import nodes  # ComfyUI's nodes.py
    from ltx2_mgpu.nodes.loader import load_model

    folder_paths.add_model_folder_path("loras", str(lora_files["lora"].parent))
    name, ranks = lora_files["lora"].name, group_model.model.diffusion_model.call.recipe.world_size
    _, ours_model, _info = load_model(
        tiny.checkpoint.name, f"cpu:{ranks}", "float32", lora_name=name, lora_strength=0.8
    )
    (native_model,) = nodes.LoraLoaderModelOnly().load_lora_model_only(comfy.model, name, 0.8)
    graph = Graph(sampler="euler")
    native, ours = run_graph(comfy, native_model, graph), run_graph(comfy, ours_model, graph)
    found = errors(ours, native)
    print(f"\n[group MODEL] LoRA 0.8, {ranks} ranks: rel {[f'{r:.2e}' for _, r in found]}")
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), found
    # The LoRA matters here: without it the result is far off.
    assert max(rel for _, rel in errors(run_graph(comfy, comfy.model, graph), native)) > 1e-3


@pytest.fixture(scope="module", autouse=True)
def _stop_group() -> Iterator[None]:
    yield
    get_manager().unload()
