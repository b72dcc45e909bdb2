"""Distributed VAE Decode / Encode on the comfy backend through a real worker group (opt-in: COMFYUI_PATH).

Our node classes on an MGPU_MODEL whose backend is "comfy" (1 and 2 CPU ranks, float32) against ComfyUI's
own nodes on the same tiny checkpoint in this process (CheckpointLoaderSimple's VAE, LTXVAudioVAELoader).
The ranks load the VAE from the file on their first decode or encode (ComfyModel.checkpoint_vae).
Tolerances: exact decode 1e-5 of the IMAGE range (bit for bit on AVX2 CPUs; see tests/test_comfy_vae.py),
audio bit-exact; encode 1e-5 of the latent's largest magnitude.
And the point of serving the VAE on this backend: SP Sampler then Distributed VAE Decode loads the file
once (before, the decode switched the group to ltx-core and loaded it again).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from comfyui_harness import comfyui_root
from test_comfyui_native_parity import CASES, comfy, native_inputs, our_sample  # noqa: F401

from conftest import assert_no_leaks, rank_threads
from ltx2_mgpu.workers.group import client
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.wire.comfyui_root import check_comfyui_root

pytestmark = pytest.mark.comfyui

ENCODE_TOLERANCE = 1e-5
VIDEO_LATENT = (1, 128, 3, 12, 16)  # 17 frames of 384 x 512; slabs of 12 or 6 + 6 rows
AUDIO_LATENT = (1, 8, 13, 16)
ENCODE_PIXELS = (17, 128, 96, 3)  # frames, H, W, C: 4 x 3 cells, 3 latent frames


def comfy_model(checkpoint, world_size: int) -> MGPUModel:
    root = check_comfyui_root(comfyui_root())
    return MGPUModel.create(
        checkpoint,
        devices=f"cpu:{world_size}",
        dtype="float32",
        backend="comfy",
        comfyui_root=root.path,
        comfyui_version=root.version,
    )


@pytest.fixture
def ops_run(monkeypatch) -> list[tuple[str, list[dict]]]:
    """(command, the ranks' replies) for every command the group ran during the test."""
    calls: list[tuple[str, list[dict]]] = []
    run = client.WorkerGroup.run

    def recording(self, op, *args, **kwargs):
        replies = run(self, op, *args, **kwargs)
        calls.append((op, replies))
        return replies

    monkeypatch.setattr(client.WorkerGroup, "run", recording)
    return calls


@pytest.fixture(scope="module", params=(1, 2), ids=lambda n: f"{n}ranks")
def group_model(request, tiny, comfy) -> Iterator[MGPUModel]:  # noqa: F811 (the imported fixture)
    yield comfy_model(tiny.checkpoint, request.param)
    get_manager().unload()
    assert_no_leaks()


def test_decode_equals_vae_decode_and_audio_vae_decode(comfy, group_model, ops_run):  # noqa: F811
    import nodes  # ComfyUI's nodes.py (the comfy fixture put its root first on sys.path)
    from ltx2_mgpu.nodes.vae_decode import decode_latent

    generator = torch.Generator().manual_seed(3)
    video = torch.randn(VIDEO_LATENT, generator=generator)
    audio = torch.randn(AUDIO_LATENT, generator=generator)
    with (
        torch.inference_mode(),
        rank_threads(group_model.world_size),
    ):  # inference_mode: as ComfyUI's executor runs nodes
        (native_image,) = nodes.VAEDecode().decode(comfy.vae, {"samples": video})
        (native_audio,) = comfy.lt_audio.LTXVAudioVAEDecode.execute({"samples": audio}, comfy.audio_vae)
    (latent,) = comfy.lt.LTXVConcatAVLatent.execute({"samples": video}, {"samples": audio})
    image, ours_audio = decode_latent(group_model, latent, mode="exact")
    replies = dict(ops_run)["vae_decode"]
    print(
        f"\n[comfy vae decode] {group_model.world_size} rank(s): image max|d| "
        f"{(image - native_image).abs().max().item():.2e}, audio max|d| "
        f"{(ours_audio['waveform'] - native_audio['waveform']).abs().max().item():.2e}, VAE load "
        f"{max(r['vae_load_s'] for r in replies):.2f} s, decode {max(r['total_s'] for r in replies):.2f} s"
    )
    assert [r["backend"] for r in replies] == ["comfy"] * group_model.world_size
    assert {r["mode"] for r in replies} == {"exact"}
    assert image.shape == native_image.shape
    assert torch.equal(image, native_image)
    assert torch.equal(ours_audio["waveform"], native_audio["waveform"])
    assert ours_audio["sample_rate"] == native_audio["sample_rate"]


def test_encode_equals_vae_encode(comfy, group_model, ops_run):  # noqa: F811
    import nodes
    from ltx2_mgpu.nodes.vae_encode import encode_pixels

    pixels = torch.rand(ENCODE_PIXELS, generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        (native,) = nodes.VAEEncode().encode(comfy.vae, pixels)
    (ours,) = encode_pixels(group_model, pixels)
    replies = dict(ops_run)["vae_encode"]
    relative = (ours["samples"] - native["samples"]).abs().max().item() / native["samples"].abs().max().item()
    print(f"\n[comfy vae encode] {group_model.world_size} rank(s): relative error {relative:.2e}")
    assert [r["backend"] for r in replies] == ["comfy"] * group_model.world_size
    assert ours["samples"].shape == native["samples"].shape
    assert relative <= ENCODE_TOLERANCE


def test_sampler_then_decode_loads_the_file_once(comfy, tiny, ops_run):  # noqa: F811
    import nodes
    from ltx2_mgpu.nodes.vae_decode import decode_latent

    get_manager().unload()  # a fresh group: every load of this workflow is counted
    model = comfy_model(tiny.checkpoint, 2)
    case = CASES["t2v-video_only-euler-cfg3"]
    try:
        (samples,) = our_sample(comfy, model, case, *native_inputs(comfy, case))
        image, audio = decode_latent(model, {"samples": samples}, mode="exact")
        image = image.clone()  # (ComfyUI's VAEDecode below runs in this process, not in the group)
    finally:
        get_manager().unload()
    assert_no_leaks()
    ops = [op for op, _ in ops_run]
    print(f"\n[comfy sampler -> decode] commands: {ops}")
    assert ops.count("load_model") == 1, ops  # before: a second load_model (ltx-core) before vae_decode
    # (the manager may sync the LoRA set in between: set_loras / lora_state load nothing)
    assert [op for op in ops if op not in ("set_loras", "lora_state")] == [
        "load_model",
        "sample",
        "vae_decode",
    ]
    replies = dict(ops_run)
    assert [r["backend"] for r in replies["load_model"]] == ["comfy", "comfy"]
    assert [r["backend"] for r in replies["vae_decode"]] == ["comfy", "comfy"]
    assert audio is None
    with torch.inference_mode():
        (native,) = nodes.VAEDecode().decode(comfy.vae, {"samples": samples})
    assert (image - native).abs().max() <= 1e-5  # the IMAGE is in [0, 1]


def test_file_without_vae_is_refused_by_name(comfy, tiny, tmp_path):  # noqa: F811
    """A file with the transformer only: the decode says which file lacks its VAE and what to load, alike
    on every rank, and the group stays up (the same request is refused again, not a fatal error)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from ltx2_mgpu.nodes.vae_decode import decode_latent

    stripped = tmp_path / "transformer-only.safetensors"
    with safe_open(str(tiny.checkpoint), framework="pt") as f:
        weights = {k: f.get_tensor(k) for k in f.keys() if not k.startswith("vae.")}
        save_file(weights, str(stripped), metadata=f.metadata())
    model = comfy_model(stripped, 2)
    latent = {"samples": torch.randn(VIDEO_LATENT, generator=torch.Generator().manual_seed(5))}
    try:
        for _ in range(2):
            with pytest.raises(
                ValueError, match=r"transformer-only\.safetensors holds no video VAE \(vae\.\*"
            ):
                decode_latent(model, latent, mode="exact")
        assert get_manager().group is not None and get_manager().group.is_alive
    finally:
        get_manager().unload()
    assert_no_leaks()
