"""GGUF transformers through the ComfyUI-GGUF pack, native against ours (opt-in: COMFYUI_PATH; the pinned
pack beside the checkout, as CI lays it, or LTX2_MGPU_COMFYUI_GGUF).

Files: the tiny LTX-2.3 checkpoint's and the tiny LTX-2.5 transformer's weights written with the `gguf`
package in the layout the pack reads (workers/embedded/gguf_writer.py), as Q8_0 and as Q6_K (a K-quant;
its rows of 256 values are Q6_K, the narrower ones fall back to Q8_0 as llama.cpp's quantizer does).

Native: ComfyUI in this process with the pack imported as ComfyUI imports a custom node, its
UnetLoaderGGUF node's MODEL through CFGGuider 3 and SamplerCustomAdvanced (euler_ancestral). The pinned
pack (795e451) passes no metadata to ComfyUI and so builds LTX-2's layout for a 2.3 / 2.5 file, which
does not load (test_the_pinned_loader_alone_cannot_build_23); its releases since January 2026 pass the
file's fields: the native side here is UnetLoaderGGUF with those fields passed as those releases pass
them, and so are ours (workers/engine/comfy/gguf.py).
Ours: the MGPU Loader on the same .gguf name, its MODEL through the same graph and the SP Sampler
(cfg 3 / audio cfg 3), on 1, 2 and 3 CPU workers: at most 1e-5 of the largest native magnitude per
stream, float32.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root
from ltx23_fixtures import comfyui_loads_tiny_gemma

from conftest import assert_no_leaks, tiny_conditioning
from ltx2_mgpu.workers.embedded.gguf_writer import gguf_of_safetensors
from ltx2_mgpu.workers.group.manager import get_manager
from ltx2_mgpu.workers.wire.gguf_pack import GGUF_PACK_ENV

pytestmark = pytest.mark.comfyui

PINNED_PACK = Path(__file__).resolve().parents[2] / "shared" / "comfyui-gguf"
RELATIVE_TOLERANCE = 1e-5
SEED = 42
CFG = 3.0
SIGMAS = "0.909375, 0.725, 0.0"
WIDTH, HEIGHT, FRAMES, FPS = 96, 64, 17, 24.0
QTYPES = ("Q8_0", "Q6_K")
FAMILIES = ("2.3", "2.5")


def pack_folder() -> Path:
    import os

    named = os.environ.get(GGUF_PACK_ENV)
    folder = Path(named) if named else PINNED_PACK
    if not (folder / "nodes.py").is_file():
        pytest.skip(f"the ComfyUI-GGUF pack is not at {folder} (set {GGUF_PACK_ENV})")
    return folder


def import_pack_as_comfyui_does(folder: Path):
    """The pack as ComfyUI's custom-node loader imports it: its folder a package named after it."""
    spec = importlib.util.spec_from_file_location(
        folder.name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[folder.name] = module
    spec.loader.exec_module(module)
    return sys.modules[f"{folder.name}.nodes"]


@pytest.fixture(scope="module")
def native(tmp_path_factory, tiny25) -> Iterator[SimpleNamespace]:
    folder = pack_folder()
    out = tmp_path_factory.mktemp("gguf")
    patches = pytest.MonkeyPatch()
    patches.setenv(GGUF_PACK_ENV, str(folder))  # the workers find the pack where the user said
    with comfyui_in_process(comfyui_root()):
        import comfy.sd
        import folder_paths
        from comfy_extras import nodes_custom_sampler as cs
        from comfy_extras import nodes_lt as lt
        from comfy_extras import nodes_lt_audio as lt_audio

        import nodes
        from ltx2_mgpu.workers.embedded.tiny_ltx23 import make_tiny_ltx23
        from ltx2_mgpu.workers.wire.gguf_checks import gguf_model_header

        tiny23 = make_tiny_ltx23(out / "checkpoints")
        sources = {"2.3": tiny23.checkpoint, "2.5": tiny25.transformer}
        files = {
            (family, q): gguf_of_safetensors(
                source, out / "diffusion_models" / f"ltx{family}-tiny-{q}.gguf", q
            )
            for family, source in sources.items()
            for q in QTYPES
        }
        for kind, path in (("checkpoints", tiny23.checkpoint), ("vae", tiny25.audio_vae)):
            folder_paths.add_model_folder_path(kind, str(path.parent))
        folder_paths.add_model_folder_path("diffusion_models", str(out / "diffusion_models"))
        gguf_nodes = import_pack_as_comfyui_does(folder)
        load_state_dict = comfy.sd.load_diffusion_model_state_dict

        def with_the_files_fields(sd, model_options={}, metadata=None, **kwargs):  # noqa: B006
            return load_state_dict(sd, model_options, metadata or fields, **kwargs)

        models = {}
        for key, path in files.items():
            fields = dict(gguf_model_header(path).metadata)
            patches.setattr(comfy.sd, "load_diffusion_model_state_dict", with_the_files_fields)
            (models[key],) = gguf_nodes.UnetLoaderGGUF().load_unet(path.name)
            patches.setattr(comfy.sd, "load_diffusion_model_state_dict", load_state_dict)
        audio_vaes = {
            "2.3": lt_audio.LTXVAudioVAELoader.execute(tiny23.checkpoint.name)[0],
            "2.5": nodes.VAELoader().load_vae(tiny25.audio_vae.name)[0],
        }
        try:
            yield SimpleNamespace(
                cs=cs, lt=lt, lt_audio=lt_audio, sd=comfy.sd, gguf_nodes=gguf_nodes, files=files, models=models,
                audio_vaes=audio_vaes, tiny25=tiny25, checkpoint23=tiny23.checkpoint, nodes=nodes, results={},
            )  # fmt: skip
        finally:
            patches.undo()


def inputs(c, family: str) -> tuple:
    """CONDITIONING as each release's text encoding gives it (2.3: projected by the encoder; 2.5:
    unprocessed, projected by the transformer's own), the AV LATENT, SIGMAS."""
    model = c.models[(family, "Q8_0")].model.diffusion_model
    width = model.cross_attention_dim + model.audio_cross_attention_dim
    positive, negative = tiny_conditioning(11, width, seed=1), tiny_conditioning(6, width, seed=2)
    for cond in (positive, negative):
        del cond[0][1]["frame_rate"]
        if family == "2.3":
            del cond[0][1]["unprocessed_ltxav_embeds"]
    positive, negative = c.lt.LTXVConditioning.execute(positive, negative, FPS)[:2]
    (video,) = c.lt.EmptyLTXVLatentVideo.execute(WIDTH, HEIGHT, FRAMES, 1)
    (audio,) = c.lt_audio.LTXVEmptyLatentAudio.execute(FRAMES, FPS, 1, c.audio_vaes[family])
    (latent,) = c.lt.LTXVConcatAVLatent.execute(video, audio)
    (sigmas,) = c.cs.ManualSigmas.execute(SIGMAS)
    return positive, negative, latent, sigmas


def cfg_sample(c, model, positive, negative, latent, sigmas, sampler="euler_ancestral") -> list[torch.Tensor]:
    (guider,) = c.cs.CFGGuider.execute(model, positive, negative, CFG)
    with torch.inference_mode():
        out = c.cs.SamplerCustomAdvanced.execute(
            c.cs.RandomNoise.execute(SEED)[0], guider, c.cs.KSamplerSelect.execute(sampler)[0],
            sigmas, latent,
        )[0]  # fmt: skip
    return [t.clone() for t in out["samples"].unbind()]


def native_result(c, family: str, qtype: str) -> list[torch.Tensor]:
    key = (family, qtype)
    if key not in c.results:
        c.results[key] = cfg_sample(c, c.models[key], *inputs(c, family))
    return c.results[key]


def relative(ours: torch.Tensor, native: torch.Tensor) -> float:
    assert ours.shape == native.shape
    return float((ours.float() - native.float()).abs().max() / native.float().abs().max())


def test_the_pinned_loader_alone_cannot_build_23(native):
    """Why the file's fields are passed: without them ComfyUI builds LTX-2's layout for a 2.3 GGUF."""
    path = native.files[("2.3", "Q8_0")]
    pack = sys.modules[native.gguf_nodes.__name__.rsplit(".", 1)[0] + ".loader"]
    ops = sys.modules[native.gguf_nodes.__name__.rsplit(".", 1)[0] + ".ops"].GGMLOps()
    with pytest.raises(RuntimeError, match="size mismatch"):
        native.sd.load_diffusion_model_state_dict(pack.gguf_sd_loader(str(path)), {"custom_operations": ops})


@pytest.fixture(scope="module", params=(1, 2, 3), ids=lambda n: f"{n}ranks")
def ranks(request, native) -> Iterator[int]:
    yield request.param
    get_manager().unload()
    assert_no_leaks()


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("family", FAMILIES)
def test_gguf_matches_unetloadergguf(native, ranks, family, qtype):
    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    path = native.files[(family, qtype)]
    vae = {"video_vae_name": native.tiny25.video_vae.name} if family == "2.5" else {}
    mgpu, model, info = load_model(path.name, f"cpu:{ranks}", "float32", guidance_parallel="off", **vae)
    assert f"LTX-{family}" in info and f"GGUF {qtype}" in info, info
    expected = native_result(native, family, qtype)
    args = inputs(native, family)
    (out,) = sample_latent(mgpu, *args[:2], args[2], args[3], "euler_ancestral", CFG, CFG, SEED)
    results = {
        "SP Sampler": [t.clone() for t in out["samples"].unbind()],
        "MODEL": cfg_sample(native, model, *args),
    }
    for what, ours in results.items():
        found = [relative(a, b) for a, b in zip(ours, expected)]
        print(f"\n[GGUF {qtype}] LTX-{family} {what}, {ranks} ranks: rel {[f'{r:.2e}' for r in found]}")
        assert len(found) == 2 and max(found) <= RELATIVE_TOLERANCE, (what, found)


def test_gguf_under_weights_layers_matches_unetloadergguf(native, ranks):
    """Any weight format under weights layers: the tiny 2.3 Q6_K GGUF, each of 2 workers holding one of
    its two blocks (the pack's GGML layers among them), the SP Sampler against UnetLoaderGGUF's MODEL."""
    if ranks != 2:
        pytest.skip("the tiny transformers have two blocks: weights layers runs on 2 workers")
    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    path = native.files[("2.3", "Q6_K")]
    mgpu, _model, info = load_model(path.name, "cpu:2", "float32", weights="layers")
    assert "weights layers" in info, info
    args = inputs(native, "2.3")
    (out,) = sample_latent(mgpu, *args[:2], args[2], args[3], "euler_ancestral", CFG, CFG, SEED)
    found = [relative(a, b) for a, b in zip(out["samples"].unbind(), native_result(native, "2.3", "Q6_K"))]
    print(f"\n[GGUF Q6_K] LTX-2.3 SP Sampler, weights layers on 2: rel {[f'{r:.2e}' for r in found]}")
    assert len(found) == 2 and max(found) <= RELATIVE_TOLERANCE, found


def test_gguf_with_the_loaders_lora_matches_lora_loader_on_unetloadergguf(native, ranks, tiny23):
    """The 2.3 template's distilled LoRA in the MGPU Loader on a GGUF (whose keys carry no checkpoint
    prefix) against LoraLoaderModelOnly on UnetLoaderGGUF's MODEL: the SP Sampler's result. The LoRA was
    refused as changing nothing before the key mapping followed the file."""
    if ranks != 2:
        pytest.skip("LoRA patching per worker does not depend on the worker count: 2 workers")
    import folder_paths

    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    folder_paths.add_model_folder_path("loras", str(tiny23.lora.parent))
    (patched,) = native.nodes.LoraLoaderModelOnly().load_lora_model_only(
        native.models[("2.3", "Q8_0")], tiny23.lora.name, 1.0
    )
    args = inputs(native, "2.3")
    expected = cfg_sample(native, patched, *args)
    path = native.files[("2.3", "Q8_0")]
    mgpu, _model, _info = load_model(
        path.name, "cpu:2", "float32", lora_name=tiny23.lora.name, lora_strength=1.0
    )
    (out,) = sample_latent(mgpu, *args[:2], args[2], args[3], "euler_ancestral", CFG, CFG, SEED)
    found = [relative(a, b) for a, b in zip(out["samples"].unbind(), expected)]
    changed = [relative(a, b) for a, b in zip(expected, native_result(native, "2.3", "Q8_0"))]
    print(f"\n[GGUF Q8_0] LTX-2.3 + distilled LoRA, SP Sampler on 2: rel {[f'{r:.2e}' for r in found]}")
    assert min(changed) > 1e-3, changed  # the LoRA changes the result: the comparison can fail
    assert len(found) == 2 and max(found) <= RELATIVE_TOLERANCE, found


PROMPT = "A heron lifts off the river at dusk, mist over the water."


def test_text_encode_on_a_gguf_group_takes_the_projection_from_projection_file(native, ranks, tiny, tiny23):
    """A GGUF holds the transformer only: MGPU Text Encode on an LTX-2.3 GGUF group asks for the file with
    LTX's text projection, and given it (the checkpoint, or a file of the projection alone, as users
    download it) equals LTXAVTextEncoderLoader on that file + CLIPTextEncode. Another release's
    projection, and Gemma 4 with a projection file, are refused before any work."""
    if ranks != 2:
        pytest.skip("the file choices do not depend on the worker count: 2 workers")
    import folder_paths
    from safetensors import safe_open
    from safetensors.torch import save_file

    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.text_encode import encode_prompt
    from ltx2_mgpu.workers.group.manager import MGPUModel

    folder = native.checkpoint23.parent
    projection_only = folder.parent / "projections" / "ltx-2.3-text-projection.safetensors"
    projection_only.parent.mkdir(exist_ok=True)
    with safe_open(str(native.checkpoint23), framework="pt") as f:
        save_file(
            {k: f.get_tensor(k) for k in f.keys() if k.startswith("text_embedding_projection.")},
            str(projection_only),
        )
    for path in (projection_only, tiny.checkpoint):
        folder_paths.add_model_folder_path("checkpoints", str(path.parent))
    folder_paths.add_model_folder_path("text_encoders", str(tiny23.gemma.parent))
    gemma = tiny23.gemma.name

    mgpu, _model, _info = load_model(native.files[("2.3", "Q8_0")].name, "cpu:2", "float32")
    with pytest.raises(
        ValueError,
        match=r"the MGPU Loader's file ltx2\.3-tiny-Q8_0\.gguf is a GGUF, which holds the transformer only.*"
        r"pick in projection_file the file LTXAVTextEncoderLoader's ckpt_name takes",
    ):
        encode_prompt(mgpu, gemma, PROMPT)
    with pytest.raises(
        ValueError, match=r"holds LTX-2's text projection but the MGPU Loader runs an LTX-2\.3 model"
    ):
        encode_prompt(mgpu, gemma, PROMPT, projection_file=tiny.checkpoint.name)
    for projection in (native.checkpoint23.name, projection_only.name):
        with comfyui_loads_tiny_gemma(tiny23.gemma), torch.inference_mode():
            (clip,) = native.lt_audio.LTXAVTextEncoderLoader.execute(gemma, projection)
            (expected,) = native.nodes.CLIPTextEncode().encode(clip, PROMPT)
        (ours,) = encode_prompt(mgpu, gemma, PROMPT, projection_file=projection)
        found = relative(ours[0][0], expected[0][0])
        print(f"\n[GGUF Q8_0] LTX-2.3 MGPU Text Encode, projection from {projection}: rel {found:.2e}")
        assert found <= RELATIVE_TOLERANCE

    ltx25 = MGPUModel(
        checkpoint=str(native.files[("2.5", "Q8_0")]), backend="comfy", comfyui_root="/any/ComfyUI"
    )
    folder_paths.add_model_folder_path("text_encoders", str(native.tiny25.text_encoder.parent))
    with pytest.raises(
        ValueError, match=r"is Gemma 4, which carries LTX-2\.5's projection itself; set projection_file"
    ):
        encode_prompt(ltx25, native.tiny25.text_encoder.name, PROMPT, projection_file=projection_only.name)
    reference = MGPUModel(checkpoint=str(tiny.checkpoint), backend="ltxcore", family="LTX-2")
    with pytest.raises(ValueError, match=r"projection_file .* is read on ComfyUI's engine only"):
        encode_prompt(reference, gemma, PROMPT, projection_file=projection_only.name)


GPU_TOLERANCE = 1e-3  # float32 on CUDA against the CPU (kernel order, cuDNN's TF32 convolutions)


@pytest.mark.gpu
@pytest.mark.parametrize("weights", ["replicated", "layers"])
def test_gguf_on_gpu_workers_matches_unetloadergguf(native, weights):
    """The pack's GGML layers dequantizing on CUDA in the workers: the tiny 2.3 Q6_K GGUF on two workers
    sharing GPU 0 (sequence parallelism over them, or each holding one block under weights layers), the SP
    Sampler against UnetLoaderGGUF's MODEL on the CPU. Euler, not ancestral: an ancestral sampler draws its
    noise from a generator on the latent's device, and CUDA's stream is not the CPU's."""
    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.sp_sampler import sample_latent

    path = native.files[("2.3", "Q6_K")]
    try:
        mgpu, _model, info = load_model(path.name, "cuda:0,cuda:0", "float32", weights=weights)
        assert f"weights {weights}" in info and "GGUF Q6_K" in info, info
        args = inputs(native, "2.3")
        (out,) = sample_latent(mgpu, *args[:2], args[2], args[3], "euler", CFG, CFG, SEED)
        expected = cfg_sample(native, native.models[("2.3", "Q6_K")], *args, sampler="euler")
        found = [relative(a.cpu(), b) for a, b in zip(out["samples"].unbind(), expected)]
        print(f"\n[GGUF Q6_K] LTX-2.3 SP Sampler, 2 workers on cuda:0, weights {weights}: rel {found}")
        assert len(found) == 2 and max(found) <= GPU_TOLERANCE, found
    finally:
        get_manager().unload()
        assert_no_leaks()
