"""The MGPU Loader's MODEL on the tiny LTX-2.5 split files (opt-in: COMFYUI_PATH).

The loader takes the diffusion_models transformer file (with its video and audio VAE files) as the
video_ltx2_5_t2v template's UNETLoader does; its MODEL goes through SamplerCustomAdvanced with
LTXVDualCFGGuider (the template's guider) and CFGGuider, against the same graph on UNETLoader's MODEL
of the same file in this process: at most 1e-5 of the largest native magnitude per stream, float32,
1 and 2 CPU ranks. ComfyUI's detection of the file (no checkpoint prefix; its metadata) gives the
loader's MODEL the model config UNETLoader's has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_comfy_ltx25_nodes import RELATIVE_TOLERANCE, inputs, native_sample, relative
from test_group_model import split_forwards
from test_tiny_ltx25 import SEED, native25  # noqa: F401

from conftest import assert_no_leaks, rank_threads
from ltx2_mgpu.workers.group.manager import get_manager

pytestmark = pytest.mark.comfyui

RANKS = (1, 2)
GUIDERS = ("dual", "cfg")
PREFIX = "model.diffusion_model."


def load_model(tiny25, ranks: int, transformer):
    """The MGPU Loader's MODEL for `transformer` with the tiny 2.5 VAE files, float32 on CPU ranks."""
    from ltx2_mgpu.nodes.loader import load_model

    _mgpu, model, _info = load_model(
        transformer.name,
        f"cpu:{ranks}",
        "float32",
        video_vae_name=tiny25.video_vae.name,
        audio_vae_name=tiny25.audio_vae.name,
        guidance_parallel="off",  # every call token-split over the ranks (checked)
    )
    assert model is not None, "the loader gave no MODEL for the LTX-2.5 transformer"
    return model


@pytest.fixture(scope="module", params=RANKS, ids=lambda n: f"{n}ranks")
def group_model25(request, native25, tiny25) -> Iterator:  # noqa: F811
    yield load_model(tiny25, request.param, tiny25.transformer)
    get_manager().unload()
    assert_no_leaks()


def sample(native25, model, guider: str) -> list[torch.Tensor]:  # noqa: F811
    """test_comfy_ltx25_nodes' native sampling (dual-CFG or CFGGuider) on `model`, from its tiny inputs."""
    return native_sample(native25, model, *inputs(native25), guider=guider)


def test_the_model_config_is_the_one_unetloader_detects(native25, group_model25):  # noqa: F811
    ours, native = group_model25.model.model_config, native25.model.model.model_config
    assert type(ours) is type(native)
    assert ours.unet_config == native.unet_config
    assert type(native25.model.model) in type(group_model25.model).__mro__  # model_base.LTXAV
    assert (ours.quant_config, native.quant_config) == (None, None)


@pytest.mark.parametrize("guider", GUIDERS)
def test_group_model_matches_unetloader_model(native25, group_model25, guider):  # noqa: F811
    native = sample(native25, native25.model, guider)
    call = group_model25.model.diffusion_model.call
    before, split_before = call.calls, split_forwards(call)
    ours = sample(native25, group_model25, guider)
    found = [relative(a, b) for a, b in zip(ours, native)]
    ranks = call.recipe.world_size
    print(f"\n[group MODEL] LTX-2.5 {guider} {ranks} ranks, {call.calls - before} calls: rel {found}")
    assert len(found) == 2 and max(found) <= RELATIVE_TOLERANCE, found
    assert call.calls - before == 2  # two steps, cond and uncond in one call each
    # On 2 ranks every call really ran token-split (workers/engine/comfy/sequence_parallel.py).
    assert split_forwards(call) - split_before == (2 if ranks > 1 else 0)


@pytest.fixture(scope="module")
def unprefixed(native25, tiny25, tmp_path_factory):  # noqa: F811
    """The tiny 2.5 transformer stored without the "model.diffusion_model." prefix (diffusion_models
    files come both ways), registered where UNETLoader and the MGPU Loader look."""
    import folder_paths

    folder = tmp_path_factory.mktemp("unprefixed") / "diffusion_models"
    folder.mkdir()
    path = folder / "ltx-2.5-tiny-transformer-unprefixed.safetensors"
    with safe_open(str(tiny25.transformer), framework="pt") as f:
        tensors = {key.removeprefix(PREFIX): f.get_tensor(key) for key in f.keys()}
        metadata = f.metadata()
    assert not any(key.startswith("model.") for key in tensors)
    save_file(tensors, str(path), metadata=metadata)
    folder_paths.add_model_folder_path("diffusion_models", str(folder))
    return path


def test_a_file_without_the_checkpoint_prefix(native25, tiny25, unprefixed):  # noqa: F811
    """Detected as UNETLoader detects it (same config as the prefixed file), and sampled alike."""
    import nodes  # ComfyUI's nodes.py

    with torch.inference_mode():
        (native_model,) = nodes.UNETLoader().load_unet(unprefixed.name, "default")
    model = load_model(tiny25, 2, unprefixed)
    try:
        ours, native = model.model.model_config, native_model.model.model_config
        assert type(ours) is type(native) and ours.unet_config == native.unet_config
        assert ours.unet_config == native25.model.model.model_config.unet_config
        found = [
            relative(a, b)
            for a, b in zip(sample(native25, model, "dual"), sample(native25, native_model, "dual"))
        ]
    finally:
        get_manager().unload()
        assert_no_leaks()
    print(f"\n[group MODEL] LTX-2.5 unprefixed file, 2 ranks: rel {found}")
    assert len(found) == 2 and max(found) <= RELATIVE_TOLERANCE, found


def write_nvfp4_transformer(tiny25, path: Path) -> Path:
    """The tiny 2.5 transformer with its blocks' Linears in ComfyUI's nvfp4 mixed format (packed
    e2m1 `weight`, e4m3 block `weight_scale`, per-tensor `weight_scale_2`, a `comfy_quant` entry per
    layer), quantized by ComfyUI's own layout from the bf16 values. Needs ComfyUI in this process."""
    from comfy.quant_ops import QuantizedTensor

    from ltx2_mgpu.workers.embedded.tiny_ltx25 import is_convrot_layer

    conf = torch.frombuffer(bytearray(json.dumps({"format": "nvfp4"}).encode()), dtype=torch.uint8)
    out = {}
    with safe_open(str(tiny25.transformer), framework="pt") as f:
        for key in f.keys():
            value = f.get_tensor(key)
            if not is_convrot_layer(key, value):  # the same block Linears the int8 file quantizes
                out[key] = value
                continue
            q = QuantizedTensor.from_float(value.to(torch.bfloat16), "TensorCoreNVFP4Layout")
            layer = key.removesuffix(".weight")
            out[key], out[f"{layer}.weight_scale"] = q._qdata, q._params.block_scale
            out[f"{layer}.weight_scale_2"], out[f"{layer}.comfy_quant"] = q._params.scale, conf.clone()
        metadata = f.metadata()
    save_file({k: v.contiguous() for k, v in out.items()}, str(path), metadata=metadata)
    return path


@pytest.mark.parametrize("weights", ["int8 convrot", "nvfp4"])
def test_a_quantized_transformer_as_comfyui_reads_it(native25, tiny25, tmp_path, weights):  # noqa: F811
    """The int8 convrot file (as released) and an nvfp4 mixed one, as ComfyUI reads them (its
    mixed-precision ops in every rank; on CPU ComfyUI emulates nvfp4 by dequantizing, as native does),
    against UNETLoader's MODEL of the same file; the UI side's config carries the same quant_config."""
    import folder_paths

    import nodes  # ComfyUI's nodes.py

    if weights == "nvfp4":
        (tmp_path / "diffusion_models").mkdir()
        path = write_nvfp4_transformer(
            tiny25, tmp_path / "diffusion_models" / "ltx-2.5-tiny-nvfp4.safetensors"
        )
        folder_paths.add_model_folder_path("diffusion_models", str(path.parent))
        with torch.inference_mode():  # as ComfyUI's executor loads it (quantized layers move only so)
            (native_model,) = nodes.UNETLoader().load_unet(path.name, "default")
    else:
        path, native_model = tiny25.transformer_int8, native25.model_int8
    model = load_model(tiny25, 2, path)
    try:
        ours, native = model.model.model_config, native_model.model.model_config
        assert ours.unet_config == native.unet_config
        assert ours.quant_config == native.quant_config is not None
        with rank_threads(2):  # int8 convrot: bit-level or nothing (test_comfy_ltx25_nodes' NOTE)
            native_out = sample(native25, native_model, "dual")
        found = [relative(a, b) for a, b in zip(sample(native25, model, "dual"), native_out)]
    finally:
        get_manager().unload()
        assert_no_leaks()
    print(f"\n[group MODEL] LTX-2.5 {weights}, 2 ranks: rel {found}")
    assert len(found) == 2 and max(found) <= RELATIVE_TOLERANCE, found
    # The quantization matters here: the bf16 file's result is far from it.
    bf16 = sample(native25, native25.model, "dual")
    assert max(relative(a, b) for a, b in zip(bf16, native_out)) > 1e-4


@pytest.mark.gpu
def test_int8_convrot_model_calls_with_and_without_cuda_graphs(native25, tiny25):  # noqa: F811
    """The released int8 convrot layout on one GPU worker through the loader's MODEL, CUDA graphs on
    and off (NOTE [call graphs]). comfy_kitchen's int8 matmul falls back to a cuBLAS call that a graph
    cannot capture for some shapes (the 22B's on an H200): such a forward must run again eagerly, its
    key then stays eager. Either way every call returns, and graphs on equals graphs off bit for bit."""
    from ltx2_mgpu.nodes.loader import load_model

    manager = get_manager()
    outputs, counts = {}, {}
    try:
        for graphs in ("1", "0"):
            manager.env["LTX2_MGPU_CUDA_GRAPHS"] = graphs
            _mgpu, model, _info = load_model(
                tiny25.transformer_int8.name, "cuda:0", "bfloat16",
                video_vae_name=tiny25.video_vae.name, audio_vae_name=tiny25.audio_vae.name,
            )  # fmt: skip
            call = model.model.diffusion_model.call
            replies, run_job = [], call._run_job
            call._run_job = lambda request, run=run_job, kept=replies: kept.append(run(request)) or kept[-1]
            outputs[graphs] = sample(native25, model, "dual")
            counts[graphs] = [r[0]["cuda_graphs"] for r in replies if "forward_ms" in r[0]]
            manager.unload()
    finally:
        manager.env.pop("LTX2_MGPU_CUDA_GRAPHS", None)
        manager.unload()
    assert_no_leaks()
    print(f"\n[call graphs] LTX-2.5 int8 convrot: [replays, captures, eager keys] per call {counts['1']}")
    assert set(counts["0"]) == {None}
    _replays, captures, eager_keys = counts["1"][-1]
    assert captures + eager_keys >= 1, counts["1"]  # the second call with a key captured or fell back
    for a, b in zip(outputs["1"], outputs["0"]):
        assert torch.equal(a, b), float((a - b).abs().max())


@pytest.fixture(scope="module", autouse=True)
def _stop_group() -> Iterator[None]:
    yield
    get_manager().unload()
