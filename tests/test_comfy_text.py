"""MGPU Text Encode on the comfy backend vs ComfyUI's own LTX-2 text encoding (issue 17).

On the comfy backend the ranks run Gemma 3 as on ltx-core (layers split rank to rank, or one replica
per prompt) and hand its hidden states to ComfyUI's LTXAVTEModel, whose own code normalises and
projects them with the checkpoint's projection: "single_linear" (LTX-2, the tiny checkpoint) and
"dual_linear" (LTX-2.3, a copy of the tiny checkpoint with a video and an audio projection).

Reference: ComfyUI's LTXAVTEModel over ComfyUI's own Gemma 3 at the tiny Gemma's sizes, loaded from the
same files (its loader nodes build only the 12B; see test_text_encode_native.py). Same token ids.
Tolerance: max |ours - ComfyUI| <= 1e-5 x max |ComfyUI| (float32 activations in both).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from comfyui_harness import comfyui_in_process, comfyui_root
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from test_text_encode import LONG, SHORT

from ltx2_mgpu.nodes.text_encode import PROJECTION_KEY, projection_width
from ltx2_mgpu.workers.embedded.tiny_gemma import make_tiny_gemma
from ltx2_mgpu.workers.engine.ltxcore.reference import relative_error
from ltx2_mgpu.workers.group.client import output_slot
from ltx2_mgpu.workers.text.text_encoder import open_gemma
from ltx2_mgpu.workers.text.text_tokenizer import load_prompt_tokenizer, padded_length

pytestmark = pytest.mark.comfyui
TOLERANCE = 1e-5
DUAL_VIDEO, DUAL_AUDIO = 64, 32  # the tiny model's video and audio caption widths


def with_dual_projection(checkpoint: Path, path: Path) -> Path:
    """`checkpoint` with LTX-2.3's projection layout in place of LTX-2's single one (random, seeded);
    its metadata (the model config ComfyUI's detection reads) kept."""
    with safe_open(str(checkpoint), framework="pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(checkpoint))
    width = tensors.pop(PROJECTION_KEY).shape[1]
    g = torch.Generator().manual_seed(5)
    for name, out in (("video", DUAL_VIDEO), ("audio", DUAL_AUDIO)):
        prefix = f"text_embedding_projection.{name}_aggregate_embed."
        tensors[prefix + "weight"] = (torch.randn(out, width, generator=g) / width**0.5).to(torch.bfloat16)
        tensors[prefix + "bias"] = (torch.randn(out, generator=g) * 0.1).to(torch.bfloat16)
    save_file(tensors, str(path), metadata=metadata)
    return path


@pytest.fixture(scope="module")
def files(tiny) -> dict[str, Path]:
    folder = tiny.checkpoint.parent
    return {
        "gemma": make_tiny_gemma(folder),
        "single_linear": tiny.checkpoint,
        "dual_linear": with_dual_projection(tiny.checkpoint, folder / "ltx23-tiny-dual.safetensors"),
    }


@pytest.fixture(scope="module")
def native(files) -> Iterator:
    """encode(checkpoint, ids) -> [1, n, C] from ComfyUI's LTXAVTEModel and Gemma at the tiny sizes."""
    config = open_gemma(files["gemma"]).config
    sizes = {
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
    }
    with comfyui_in_process(comfyui_root()):
        import comfy.clip_model
        import comfy.text_encoders.llama as llama
        import comfy.utils
        from comfy.text_encoders import lt

        patches = pytest.MonkeyPatch()
        # The 12B vision tower is not on the text path and would take minutes to build on the CPU.
        patches.setattr(comfy.clip_model, "CLIPVision", lambda *a, **k: torch.nn.Module())
        patches.setattr(llama, "Gemma3MultiModalProjector", lambda *a, **k: torch.nn.Module())
        patches.setattr(llama.Gemma3_12B_Config, "head_dim", config.head_dim)  # a class constant there

        def encode(checkpoint: Path, ids: list[int]) -> torch.Tensor:
            sd = comfy.utils.load_torch_file(str(files["gemma"]), safe_load=True)
            projection = {
                k: v for k, v in load_file(str(checkpoint)).items() if k.startswith("text_embedding_")
            }
            dtype = sd["model.norm.weight"].dtype  # what ComfyUI's llama_detect picks
            model = lt.LTXAVTEModel(
                dtype_llama=dtype,
                device="cpu",
                dtype=dtype,
                model_options={"_model_config": dict(sizes)},
                **lt.sd_detect([projection]),
            )
            model.load_sd({**sd, **projection})
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


def encode_in_group(
    group, gemma: Path, checkpoint: Path, texts: list[str], placement: str
) -> list[torch.Tensor]:
    tokenizer = load_prompt_tokenizer(gemma)
    prompts = [tokenizer.token_ids(text) for text in texts]
    outputs = [output_slot((1, len(ids), projection_width(checkpoint)), torch.float32) for ids in prompts]
    args = {"text_encoder": str(gemma), "prompts": prompts, "placement": placement, "outputs": outputs}
    group.run("encode_text", args)
    return [out.tensor.clone() for out in outputs]


def load_comfy(group, checkpoint: Path) -> None:
    args = {
        "checkpoint": str(checkpoint),
        "dtype": "bfloat16",
        "backend": "comfy",
        "comfyui_root": str(comfyui_root()),
    }
    group.run("load_model", args)


@pytest.mark.parametrize("projection", ["single_linear", "dual_linear"])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_comfy_backend_encodes_as_native_comfyui(make_group, files, native, workers, projection):
    checkpoint, gemma = files[projection], files["gemma"]
    tokenizer = load_prompt_tokenizer(gemma)
    expected = [native(checkpoint, tokenizer.token_ids(text)) for text in (SHORT, LONG)]
    group = make_group(f"cpu:{workers}")
    load_comfy(group, checkpoint)
    for placement in ("layers", "replicas") if workers > 1 else ("auto",):
        ours = encode_in_group(group, gemma, checkpoint, [SHORT, LONG], placement)
        for got, want in zip(ours, expected, strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            error = relative_error(got, want)
            print(
                f"{projection} {workers} workers {placement} {want.shape[1]} tokens: vs ComfyUI {error:.2e}"
            )
            assert error <= TOLERANCE


def test_a_gemma_that_does_not_fit_the_projection_is_refused(make_group, files, tmp_path):
    from ltx2_mgpu.workers.wire.errors import JobInputError

    tensors = load_file(str(files["single_linear"]))
    tensors[PROJECTION_KEY] = tensors[PROJECTION_KEY][:, :-4].contiguous()  # for a Gemma of another size
    other = tmp_path / "other-projection.safetensors"
    with safe_open(str(files["single_linear"]), framework="pt") as f:
        save_file(tensors, str(other), metadata=f.metadata())
    group = make_group("cpu:1")
    load_comfy(group, other)
    with pytest.raises(JobInputError, match="pick the Gemma that belongs to this checkpoint"):
        encode_in_group(group, files["gemma"], other, [SHORT], "auto")
