"""Our SP Sampler against native ComfyUI sampling, in one process, on the same inputs (opt-in).

Native side: ComfyUI's own nodes on our tiny checkpoint, exactly as a user wires them:
CheckpointLoaderSimple + LTXVAudioVAELoader, LTXVConditioning (frame rate), EmptyLTXVLatentVideo or
LTXVImgToVideo (image-to-video noise mask), LTXVEmptyLatentAudio, LTXVConcatAVLatent, LTXVScheduler
or ManualSigmas, RandomNoise + KSamplerSelect + CFGGuider / LTXVDualCFGGuider -> SamplerCustomAdvanced.
Ours: LTX2SPSampler on an MGPU_MODEL of the same file, 2 CPU ranks, float32, same LATENT,
CONDITIONING, SIGMAS and seed objects. Both use SDPA attention (ComfyUI's GPU path).

Tolerance: the largest difference per stream, relative to the largest native magnitude, at most
1e-4. Measured in docs/COMFYUI_LTX2_PARITY.md (check C): ltx-core patched to ComfyUI's block order
stays within 2-3e-6 of ComfyUI's forward after 5 steps; 1e-4 leaves room for reduction order over
ranks while a real mistake (the reference block order, a position or timestep slip) is >= 1e-3
(see test_reference_block_order_is_caught).

Run: COMFYUI_PATH=/path/to/ComfyUI <ComfyUI's python> -m pytest tests/test_comfyui_native_parity.py -s
(docs/DEVELOPERS.md). The numbers are printed per case.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root

from conftest import assert_no_leaks, tiny_conditioning
from ltx2_mgpu.workers.embedded.tiny_model import CAPTION_CHANNELS
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager

pytestmark = pytest.mark.comfyui

RELATIVE_TOLERANCE = 1e-4
# A 17-frame 96x64 clip at 24 fps: video latent [1, 128, 3, 2, 3] (18 tokens), audio latent
# [1, 8, 18, 16]. Big enough for positions and masks to matter, small enough for seconds on CPU.
WIDTH, HEIGHT, FRAMES, FPS = 96, 64, 17, 24.0
# Different token counts for the two prompts (both reach the connectors' 1024 after registers).
POSITIVE_TOKENS, NEGATIVE_TOKENS = 11, 6
SEED = 42
SCHEDULER_STEPS = 8
# LTX-2's distilled sigmas; the official template's stage 2 uses the last four of them.
MANUAL_SIGMAS = "1.0, 0.99375, 0.909375, 0.725, 0.421875, 0.0"


@dataclass(frozen=True)
class Case:
    sampler: str
    cfg: float
    cfg_audio: float
    i2v_strength: float | None = None  # None: text-to-video (empty video latent)
    sigmas: str = "scheduler"  # "scheduler" (LTXVScheduler) or "manual" (MANUAL_SIGMAS)
    audio: bool = True  # False: a video-only latent (no LTXVConcatAVLatent)


CASES = {
    "t2v-euler_ancestral-cfg3": Case("euler_ancestral", 3.0, 3.0),
    "t2v-euler-cfg4-manual_sigmas": Case("euler", 4.0, 4.0, sigmas="manual"),
    "i2v-strength1-euler_ancestral": Case("euler_ancestral", 3.0, 3.0, i2v_strength=1.0),
    "i2v-strength0.6-euler_ancestral": Case("euler_ancestral", 3.0, 3.0, i2v_strength=0.6),
    "t2v-dual_cfg-video3-audio7": Case("euler_ancestral", 3.0, 7.0),
    "t2v-video_only-euler-cfg3": Case("euler", 3.0, 3.0, audio=False),
}


@pytest.fixture(scope="module")
def comfy(tiny) -> Iterator[SimpleNamespace]:
    """ComfyUI imported in this process, with our tiny checkpoint loaded by its own loaders."""
    with comfyui_in_process(comfyui_root()):
        import comfy.nested_tensor
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_lt as lt
        from comfy_extras import nodes_lt_audio as lt_audio

        import nodes  # ComfyUI's nodes.py (its root is first on sys.path), not our nodes/ package

        folder_paths.add_model_folder_path("checkpoints", str(tiny.checkpoint.parent))
        name = tiny.checkpoint.name
        model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(name)
        (audio_vae,) = lt_audio.LTXVAudioVAELoader.execute(name)
        yield SimpleNamespace(
            cs=cs, lt=lt, lt_audio=lt_audio, NestedTensor=comfy.nested_tensor.NestedTensor,
            model=model, vae=vae, audio_vae=audio_vae,
        )  # fmt: skip


@pytest.fixture(scope="module")
def mgpu(tiny, comfy) -> Iterator[MGPUModel]:
    """One 2-rank CPU group for the whole module (stopped and leak-checked at the end)."""
    yield MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32")
    get_manager().unload()
    assert_no_leaks()


def native_inputs(comfy, case: Case) -> tuple[list, list, dict, torch.Tensor]:
    """positive, negative, the LATENT (audio+video unless case.audio is off) and SIGMAS, all made by
    ComfyUI's nodes."""
    positive = tiny_conditioning(POSITIVE_TOKENS, CAPTION_CHANNELS, seed=1)
    negative = tiny_conditioning(NEGATIVE_TOKENS, CAPTION_CHANNELS, seed=2)
    for cond in (positive, negative):
        del cond[0][1]["frame_rate"]  # as the text encoder gives it; LTXVConditioning adds it
    positive, negative = comfy.lt.LTXVConditioning.execute(positive, negative, FPS)[:2]
    if case.i2v_strength is None:
        (video,) = comfy.lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
    else:
        image = torch.rand(1, HEIGHT, WIDTH, 3, generator=torch.Generator().manual_seed(7))
        with torch.inference_mode():
            positive, negative, video = comfy.lt.LTXVImgToVideo.execute(
                positive, negative, image, comfy.vae, WIDTH, HEIGHT, FRAMES, 1, case.i2v_strength
            )
    latent = video
    if case.audio:
        (audio,) = comfy.lt_audio.LTXVEmptyLatentAudio.execute(FRAMES, FPS, 1, comfy.audio_vae)
        (latent,) = comfy.lt.LTXVConcatAVLatent.execute(video, audio)
    if case.sigmas == "manual":
        (sigmas,) = comfy.cs.ManualSigmas.execute(MANUAL_SIGMAS)
    else:
        (sigmas,) = comfy.lt.LTXVScheduler.execute(SCHEDULER_STEPS, 2.05, 0.95, True, 0.1, latent)
    return positive, negative, latent, sigmas


def native_sample(comfy, case: Case, positive, negative, latent, sigmas) -> list[torch.Tensor]:
    if case.cfg_audio == case.cfg:
        (guider,) = comfy.cs.CFGGuider.execute(comfy.model, positive, negative, case.cfg)
    else:
        (guider,) = comfy.lt.LTXVDualCFGGuider.execute(
            comfy.model, positive, negative, case.cfg, case.cfg_audio
        )
    (noise,) = comfy.cs.RandomNoise.execute(SEED)
    (sampler,) = comfy.cs.KSamplerSelect.execute(case.sampler)
    with torch.inference_mode():
        out = comfy.cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]
    return streams(out["samples"])


def streams(samples) -> list[torch.Tensor]:
    return [t.clone() for t in (samples.unbind() if samples.is_nested else [samples])]


def our_sample(comfy, mgpu, case: Case, positive, negative, latent, sigmas) -> list[torch.Tensor]:
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    (out,) = sample_latent(
        mgpu, positive, negative, latent, sigmas, case.sampler, case.cfg, case.cfg_audio, SEED
    )
    if case.audio:
        assert isinstance(out["samples"], comfy.NestedTensor), "AV output must be ComfyUI's NestedTensor"
    return streams(out["samples"])


def errors(ours: list[torch.Tensor], native: list[torch.Tensor]) -> list[tuple[float, float]]:
    """(max abs, max abs relative to the largest native magnitude) per stream."""
    out = []
    for a, b in zip(ours, native):
        assert a.shape == b.shape
        diff = float((a.float() - b.float()).abs().max())
        out.append((diff, diff / float(b.abs().max())))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_sp_sampler_matches_native_sampling(comfy, mgpu, name):
    case = CASES[name]
    inputs = native_inputs(comfy, case)
    t0 = time.perf_counter()
    native = native_sample(comfy, case, *inputs)
    t1 = time.perf_counter()
    ours = our_sample(comfy, mgpu, case, *inputs)
    t2 = time.perf_counter()
    found = errors(ours, native)
    report = " | ".join(
        f"{stream} max|d| {diff:.2e} rel {rel:.2e}" for stream, (diff, rel) in zip(("video", "audio"), found)
    )
    print(f"\n[parity] {name}: {report} | native {t1 - t0:.2f} s, ours (2 CPU ranks) {t2 - t1:.2f} s")
    assert len(found) == (2 if case.audio else 1)
    assert all(rel <= RELATIVE_TOLERANCE for _, rel in found), (name, found)
    if case.i2v_strength == 1.0:
        # The conditioned first frame stays the encoded image, as natively.
        assert torch.equal(ours[0][:, :, 0], streams(inputs[2]["samples"])[0][:, :, 0])


def test_reference_block_order_is_caught(comfy, tiny):
    """The comparison can fail: Lightricks' reference forward (ltx-core block order) differs from native
    ComfyUI by design (docs/COMFYUI_LTX2_PARITY.md section 7) and must land far outside the tolerance."""
    case = CASES["t2v-euler_ancestral-cfg3"]
    inputs = native_inputs(comfy, case)
    native = native_sample(comfy, case, *inputs)
    reference = MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="float32", mode="reference")
    try:
        ours = our_sample(comfy, reference, case, *inputs)
    finally:
        get_manager().unload()
    (_, v_rel), (_, a_rel) = errors(ours, native)
    print(f"\n[parity] reference mode vs native: video rel {v_rel:.2e} | audio rel {a_rel:.2e}")
    assert max(v_rel, a_rel) > 10 * RELATIVE_TOLERANCE
