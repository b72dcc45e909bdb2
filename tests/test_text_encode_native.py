"""MGPU Text Encode vs ComfyUI's own LTX-2 text encoding (opt-in: COMFYUI_PATH, ComfyUI's venv).

ComfyUI's LTXAVTEModel (comfy/text_encoders/lt.py over llama.py's Gemma 3) is built at the tiny
Gemma's size and loaded from the same files its LTXAVTextEncoderLoader reads: the tiny Gemma (bf16
weights, and a copy with nvfp4 / fp8 layers as ComfyUI's quantized files have them) and the tiny
checkpoint's text projection. It gets the same token ids (its Gemma tokenizer needs a SentencePiece
model, which the tiny Gemma does not have; tokenization is tested in test_text_encode.py). Our node
runs on a 2-rank CPU group in bf16, as ComfyUI holds a bf16 Gemma.

Tolerance: max |ours - ComfyUI| <= 1e-5 x max |ComfyUI| (float32 activations in both; kernels and
fusion differ slightly; measured 0 for 54 tokens, 1.1e-6 to 2.2e-6 for 1,101).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root
from safetensors.torch import load_file
from test_text_encode import LONG, SHORT, write_quantized

from conftest import assert_no_leaks
from ltx2_mgpu.nodes.text_encode import PROJECTION_KEY, encode_prompt
from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
from ltx2_mgpu.workers.engine.ltxcore.reference import relative_error
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager
from ltx2_mgpu.workers.text.text_encoder import open_gemma
from ltx2_mgpu.workers.text.text_tokenizer import load_prompt_tokenizer, padded_length

pytestmark = pytest.mark.comfyui
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def files(tiny):
    gemma = make_tiny_gemma(tiny.checkpoint.parent)
    mixed = write_quantized(gemma, gemma.with_name("gemma3-tiny-mixed.safetensors"))
    return {"bf16": gemma, "nvfp4+fp8": mixed}


@pytest.fixture(scope="module")
def native(tiny, files) -> Iterator:
    """encode(path, ids) -> [1, n, 64] from ComfyUI's LTXAVTEModel at the tiny Gemma's size."""
    config = open_gemma(files["bf16"]).config
    sizes = {
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
    }
    projection = load_file(str(tiny.checkpoint))[PROJECTION_KEY]
    with comfyui_in_process(comfyui_root()):
        import comfy.clip_model
        import comfy.text_encoders.llama as llama
        import comfy.utils
        import folder_paths
        from comfy.text_encoders.lt import LTXAVTEModel

        # The node resolves names as in ComfyUI: files of the text_encoders folders.
        folder_paths.add_model_folder_path("text_encoders", str(files["bf16"].parent))

        patches = pytest.MonkeyPatch()
        # The 12B vision tower is not on the text path and would take minutes to build on the CPU.
        patches.setattr(comfy.clip_model, "CLIPVision", lambda *a, **k: torch.nn.Module())
        patches.setattr(llama, "Gemma3MultiModalProjector", lambda *a, **k: torch.nn.Module())
        patches.setattr(llama.Gemma3_12B_Config, "head_dim", config.head_dim)  # a class constant there

        def encode(path, ids: list[int]) -> torch.Tensor:
            sd, metadata = comfy.utils.load_torch_file(str(path), safe_load=True, return_metadata=True)
            sd, _ = comfy.utils.convert_old_quants(sd, model_prefix="", metadata=metadata)
            # sd1_clip reads "<model_name>_model_config" from the options; the Gemma model has no name.
            options = {"_model_config": dict(sizes)}
            quant = comfy.utils.detect_layer_quantization(sd, "")
            if quant is not None:
                options["llama_quantization_metadata"] = quant
            dtype = sd["model.norm.weight"].dtype  # what ComfyUI's llama_detect picks
            model = LTXAVTEModel(
                dtype_llama=dtype, device="cpu", dtype=dtype, video_projection_dim=64, model_options=options
            )
            model.load_sd({**sd, PROJECTION_KEY: projection})
            model.set_clip_options({"execution_device": torch.device("cpu")})
            tokens = [(0, 1.0)] * (padded_length(len(ids)) - len(ids)) + [(t, 1.0) for t in ids]
            with torch.inference_mode():
                out, _, extra = model.encode_token_weights({"gemma3_12b": [tokens]})
            assert extra == {"unprocessed_ltxav_embeds": True}
            return out

        try:
            yield encode
        finally:
            patches.undo()


@pytest.fixture(scope="module")
def mgpu(tiny) -> Iterator[MGPUModel]:
    yield MGPUModel.create(tiny.checkpoint, devices="cpu:2", dtype="bfloat16")
    get_manager().unload()
    assert_no_leaks()


@pytest.mark.parametrize("kind", ["bf16", "nvfp4+fp8"])
@pytest.mark.parametrize("placement", ["layers", "replicas"])
def test_node_matches_native_comfyui_encoding(native, mgpu, files, kind, placement):
    path = files[kind]
    tokenizer = load_prompt_tokenizer(path)
    for text in (SHORT, LONG):
        (cond,) = encode_prompt(mgpu, path.name, text, placement)
        expected = native(path, tokenizer.token_ids(text))
        assert cond[0][0].shape == expected.shape and cond[0][0].dtype == expected.dtype
        error = relative_error(cond[0][0], expected)
        print(f"{kind} {placement} {expected.shape[1]} tokens: relative error vs ComfyUI {error:.2e}")
        assert error <= TOLERANCE
