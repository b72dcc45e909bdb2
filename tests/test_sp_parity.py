"""Sequence parallelism: the same numbers as one process, whatever the number of ranks.

Tolerance (issue): max abs error at most 1e-5 of the output's largest magnitude, fp32 on CPU.
"""

from __future__ import annotations

import time

import pytest
import torch

from conftest import NestedStandIn, tiny_conditioning
from ltx2_mgpu.nodes import sp_sampler as sp_sampler_node
from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.workers.engine.ltxcore.model_forward import ForwardMode
from ltx2_mgpu.workers.engine.ltxcore.reference import load_in_process, relative_error, sample_in_process
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire.checks import format_sigmas, validate_sigmas

TOLERANCE = 1e-5
CAPTION = 64  # the tiny model's caption channels


def latent_inputs(shape, seed=0, audio_frames=7, with_audio=True, with_mask=False):
    g = torch.Generator().manual_seed(seed)
    video = torch.randn(shape, generator=g)
    audio = torch.randn(shape[0], 8, audio_frames, 16, generator=g) if with_audio else None
    mask = None
    if with_mask:  # image-to-video: first latent frame kept (strength 1), others denoised
        mask = torch.ones(shape[0], 1, shape[2], 1, 1)
        mask[:, :, 0] = 0.0
    return video, audio, mask


def forward_args(video, audio, mask, positive, sigma=0.7):
    return {
        "video": video,
        "audio": audio,
        "video_mask": mask,
        "sigma": sigma,
        "positive": {"tensor": positive[0][0], "unprocessed": True},
        "negative": None,
        "frame_rate": 24.0,
    }


# Divisible by 2, 3 and 4 (2*3*4 = 24 tokens) and by none of 2 and 4 (3*3*3 = 27 tokens).
SHAPES = [(1, 128, 2, 3, 4), (1, 128, 3, 3, 3)]


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", [ForwardMode.COMFYUI, ForwardMode.REFERENCE])
def test_transformer_forward_matches_single_process(manager, tiny_path, ranks, mode):
    reference = load_in_process(tiny_path, mode)
    model = MGPUModel.create(tiny_path, devices=f"cpu:{ranks}", dtype="float32", mode=mode.value)
    positive = tiny_conditioning(9, CAPTION, seed=3)
    from ltx2_mgpu.workers.engine.ltxcore.reference import denoiser

    worst = 0.0
    for shape in SHAPES:
        for with_audio in (False, True):
            for with_mask in (False, True):
                video, audio, mask = latent_inputs(shape, with_audio=with_audio, with_mask=with_mask)
                out_v = output_slot((1, video[0, 0].numel(), 128), torch.float32)
                out_a = None if audio is None else output_slot((1, audio.shape[2], 128), torch.float32)
                args = {**forward_args(video, audio, mask, positive), "out_video": out_v, "out_audio": out_a}
                result = manager.run(model, "forward", args)
                assert result[0]["exchange"] == ("none" if ranks == 1 else "torch.distributed")
                den = denoiser(reference, video, audio, positive, None, 1.0, 1.0, frame_rate=24.0)
                xs = [video] + ([] if audio is None else [audio])
                with torch.inference_mode():
                    (_, ref_v), ref_a = den.velocity(xs, 0.7, [mask] + [None] * (len(xs) - 1))
                err_v = relative_error(out_v.tensor, ref_v)
                assert err_v <= TOLERANCE, (shape, with_audio, with_mask, err_v)
                if ranks == 1:  # one worker runs the very forward of this process: bit for bit
                    assert torch.equal(out_v.tensor, ref_v.float())
                worst = max(worst, err_v)
                if audio is not None:
                    err_a = relative_error(out_a.tensor, ref_a[1])
                    assert err_a <= TOLERANCE, (shape, with_mask, err_a)
                    worst = max(worst, err_a)
    print(f"ranks={ranks} mode={mode.value} worst relative error {worst:.2e}")


def test_reference_mode_equals_plain_ltx_core_forward(tiny_path):
    """One rank in reference mode is ltx-core's own LTXModel.forward (same Modality in, same out)."""
    from ltx2_mgpu.workers.engine.ltxcore.reference import denoiser

    model = load_in_process(tiny_path, ForwardMode.REFERENCE)
    positive = tiny_conditioning(9, CAPTION, seed=3)
    video, audio, mask = latent_inputs(SHAPES[1], with_mask=True)
    den = denoiser(model, video, audio, positive, None, 1.0, 1.0)
    captured = {}
    original = model.transformer.model.forward

    def spy(v, a, p):
        captured["inputs"] = (v, a)
        return original(v, a, p)

    model.transformer.model.forward = spy
    with torch.inference_mode():
        (_, ours_v), (_, ours_a) = den.velocity([video, audio], 0.5, [mask, None])
        plain_v, plain_a = original(*captured["inputs"], None)
    assert torch.equal(ours_v, plain_v) and torch.equal(ours_a, plain_a)


def sampler_inputs():
    video, audio, mask = latent_inputs((1, 128, 3, 2, 3), seed=5, audio_frames=9, with_mask=True)
    positive = tiny_conditioning(11, CAPTION, seed=1)
    negative = tiny_conditioning(6, CAPTION, seed=2)
    sigmas = torch.tensor([1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0])  # 8 steps
    return video, audio, mask, positive, negative, sigmas


@pytest.mark.parametrize("sampler", ["euler", "euler_ancestral"])
def test_sp_sampler_node_two_ranks_equals_one_rank_and_in_process_loop(
    manager, tiny_path, fake_comfy, sampler
):
    video, audio, mask, positive, negative, sigmas = sampler_inputs()
    latent = {
        "samples": NestedStandIn([video, audio]),
        "noise_mask": NestedStandIn([mask, torch.ones_like(audio)]),
    }
    results = {}
    for ranks in (1, 2):
        model = MGPUModel.create(tiny_path, devices=f"cpu:{ranks}", dtype="float32")
        (out,) = sample_latent(model, positive, negative, latent, sigmas, sampler, 3.0, 3.0, seed=42)
        results[ranks] = [t.clone() for t in out["samples"].tensors]
    reference = sample_in_process(
        load_in_process(tiny_path), video, audio, mask, positive, negative, sigmas, sampler, 3.0, seed=42
    )
    for i in range(2):
        assert relative_error(results[2][i], results[1][i]) <= TOLERANCE
        assert relative_error(results[1][i], reference[i]) <= TOLERANCE
    # The conditioned first frame stays the input latent (i2v); the rest moved away from it.
    assert torch.allclose(results[2][0][:, :, 0], video[:, :, 0], atol=1e-6)
    assert not torch.allclose(results[2][0][:, :, 1:], video[:, :, 1:], atol=1e-2)


def test_cancel_mid_run_raises_comfy_interrupt_and_next_run_works(manager, tiny_path, fake_comfy):
    state, interrupt = fake_comfy
    video, _audio, _mask, positive, negative, _ = sampler_inputs()
    latent = {"samples": video}
    sigmas = torch.linspace(1.0, 0.0, 400)
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    sample_latent(
        model, positive, negative, {"samples": video}, torch.tensor([1.0, 0.0]), "euler", 3.0, 3.0, seed=1
    )

    import threading

    timer = threading.Timer(1.0, lambda: state.__setitem__("interrupt", True))
    timer.start()
    with pytest.raises(interrupt):
        sample_latent(model, positive, negative, latent, sigmas, "euler", 3.0, 3.0, seed=1)
    timer.cancel()
    assert manager.group is not None and manager.group.is_alive
    (out,) = sample_latent(
        model, positive, negative, latent, torch.tensor([1.0, 0.5, 0.0]), "euler", 3.0, 3.0, seed=1
    )
    assert torch.isfinite(out["samples"]).all()


def test_limits_say_what_to_change_and_group_keeps_working(manager, tiny_path, fake_comfy):
    video, _audio, _mask, positive, negative, sigmas = sampler_inputs()
    small = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32", max_video_tokens=10)
    with pytest.raises(
        ValueError, match=r"18 tokens .* over the limit of 10\. Lower the resolution or the frame count"
    ):
        sample_latent(small, positive, negative, {"samples": video}, sigmas, "euler", 3.0, 3.0, seed=1)
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    with pytest.raises(ValueError, match="has 64 channels; LTX-2 video latents have 128"):
        sample_latent(
            model, positive, negative, {"samples": torch.zeros(1, 64, 3, 2, 3)}, sigmas, "euler", 3.0, 3.0, 1
        )
    wide = tiny_conditioning(5, CAPTION * 3, seed=0)
    with pytest.raises(ValueError, match="192 wide but this checkpoint takes text-encoder features 64 wide"):
        sample_latent(model, wide, negative, {"samples": video}, sigmas, "euler", 3.0, 3.0, seed=1)
    nan_video = video.clone()
    nan_video[0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        sample_latent(model, positive, negative, {"samples": nan_video}, sigmas, "euler", 3.0, 3.0, seed=1)
    with pytest.raises(ValueError, match="must not increase"):
        sample_latent(
            model, positive, negative, {"samples": video}, torch.tensor([0.5, 0.9, 0.0]), "euler", 3.0, 3.0, 1
        )
    with pytest.raises(ValueError, match="one prompt per input"):
        sample_latent(
            model, positive + positive, negative, {"samples": video}, sigmas, "euler", 3.0, 3.0, seed=1
        )
    (out,) = sample_latent(
        model, positive, negative, {"samples": video}, sigmas[-3:], "euler", 3.0, 3.0, seed=1
    )
    assert out["samples"].shape == video.shape


def test_sigma_errors_print_the_values_as_typed():
    """Issue 20 item 7: the list printed float32 noise (-0.30000001192092896 for -0.3)."""
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\], got -0\.3, 0\.909375, 0$"):
        validate_sigmas(torch.tensor([-0.3, 0.909375, 0.0]))
    with pytest.raises(
        ValueError, match=r"must not increase from one step to the next, got 0\.5, 0\.9, 0\.1$"
    ):
        validate_sigmas(torch.tensor([0.5, 0.9, 0.1]))
    assert (
        format_sigmas(torch.tensor([0.725, 1 / 3, 1e-3], dtype=torch.float64)) == "0.725, 0.33333334, 0.001"
    )


@pytest.mark.usefixtures("fake_comfy")
def test_fewer_video_tokens_than_workers_is_refused_at_once_and_keeps_the_group(
    manager, tiny_path, monkeypatch
):
    """A 1-token latent on 2 workers left one rank with no token: it failed alone, the group was stopped
    after 10 s and the model reloaded. Now the node refuses it, and so does every rank alike when the
    node's check is bypassed: within 1 s, same workers, no reload."""
    model = MGPUModel.create(tiny_path, devices="cpu:2", dtype="float32")
    positive, negative = tiny_conditioning(5, CAPTION, seed=1), tiny_conditioning(4, CAPTION, seed=2)
    sigmas = torch.tensor([0.5, 0.0])

    def sample(shape):
        return sample_latent(
            model, positive, negative, {"samples": torch.randn(shape)}, sigmas, "euler", 3.0, 3.0, 1
        )

    sample((1, 128, 1, 1, 2))  # 2 tokens: one each; starts the group and loads the model
    group, pids, ops = manager.group, manager.group.pids, []
    real_run = group.run
    monkeypatch.setattr(group, "run", lambda op, *a, **k: ops.append(op) or real_run(op, *a, **k))
    refused = r"the video latent has 1 token \(1 x 1 x 1 latent cells.* for 2 workers; .* use at most 1 GPU\."
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=refused):
        sample((1, 128, 1, 1, 1))
    assert time.monotonic() - t0 < 1.0 and ops == [], "refused by the node before any job"
    monkeypatch.setattr(sp_sampler_node, "check_splittable", lambda *_: None)  # as if the node missed it
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=refused):
        sample((1, 128, 1, 1, 1))
    error_s = time.monotonic() - t0
    print(f"rank-side refusal of 1 token on 2 workers: {error_s:.3f} s")
    assert error_s < 1.0 and ops == ["sample"]
    sample((1, 128, 1, 1, 2))
    assert manager.group is group and group.pids == pids, "the workers were restarted"
    assert ops == ["sample", "sample"], f"the model was loaded again: {ops}"
