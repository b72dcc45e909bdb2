"""What workers/engine/comfy/sequence_parallel.py relies on in ComfyUI's code without a hook of its own.

These fail when the ComfyUI under COMFYUI_PATH changes shape (opt-in: COMFYUI_PATH):
  - the block-replace args of LTXAVModel._process_transformer_blocks: their keys, and which of them are
    per video token (dim 1 = the video sequence);
  - CompressedTimestep's fields (TokenRangeTimestep fills them) and its expansion, which
    TokenRangeTimestep must reproduce for any token range;
  - the attention modules the pre-hooks tag (attn1, video_to_audio_attn) and how the block calls them.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from test_comfyui_native_parity import CASES, comfy, native_inputs  # noqa: F401

pytestmark = pytest.mark.comfyui

# The keys ComfyUI 0.33 passes to a ("double_block", i) replacement of an LTXAV block.
BLOCK_ARGS = {
    "img", "v_context", "a_context", "attention_mask", "v_timestep", "a_timestep", "v_pe", "a_pe",
    "v_cross_pe", "a_cross_pe", "v_cross_scale_shift_timestep", "a_cross_scale_shift_timestep",
    "v_cross_gate_timestep", "a_cross_gate_timestep", "transformer_options", "self_attention_mask",
    "v_prompt_timestep", "a_prompt_timestep",
}  # fmt: skip


def test_compressed_timestep_fields(comfy):  # noqa: F811
    from comfy.ldm.lightricks.av_model import CompressedTimestep

    assert CompressedTimestep.__slots__ == (
        "data",
        "batch_size",
        "num_frames",
        "patches_per_frame",
        "feature_dim",
    )
    params = list(inspect.signature(CompressedTimestep.expand_for_computation).parameters)
    assert params == ["self", "scale_shift_table", "batch_size", "indices"]


@pytest.mark.parametrize("patches_per_frame", [6, None])
@pytest.mark.parametrize(("start", "end"), [(0, 18), (0, 7), (7, 13), (11, 18), (5, 6)])
def test_token_range_timestep_serves_the_same_values(comfy, patches_per_frame, start, end):  # noqa: F811
    from comfy.ldm.lightricks.av_model import CompressedTimestep

    from ltx2_mgpu.workers.engine.comfy.sequence_parallel import TokenRangeTimestep, slice_tokens

    g = torch.Generator().manual_seed(0)
    frames, ppf, width = 3, 6, 4 * 9
    per_frame = torch.randn(2, frames, 1, width, generator=g)
    per_token = per_frame.expand(2, frames, ppf, width).reshape(2, frames * ppf, width)
    full = CompressedTimestep(per_token.clone(), patches_per_frame)
    local = slice_tokens(full, start, end, frames * ppf)
    assert isinstance(local, TokenRangeTimestep)
    assert torch.equal(local.expand(), full.expand()[:, start:end])
    table = torch.randn(9, 4, generator=g)
    for indices in (slice(0, 2), slice(2, 3), slice(None, None)):
        want = full.expand_for_computation(table, 2, indices)
        got = local.expand_for_computation(table, 2, indices)
        assert len(got) == len(want)
        assert all(torch.equal(a, b[:, start:end]) for a, b in zip(got, want))


def test_block_replace_args(comfy):  # noqa: F811
    """One model call with a recording replacement of block 0: ComfyUI hands over the keys above, and
    exactly the args SP slices are per video token."""
    from ltx2_mgpu.workers.engine.comfy import sampling
    from ltx2_mgpu.workers.engine.comfy.sequence_parallel import TAGGED_MODULES, VIDEO_TOKEN_ARGS

    seen: list[dict] = []

    def record(args: dict, extra: dict) -> dict:
        seen.append(args)
        return extra["original_block"](args)

    patcher = comfy.model.clone()
    patcher.set_model_patch_replace(record, "dit", "double_block", 0)
    case = CASES["i2v-strength0.6-euler_ancestral"]
    positive, negative, latent, _ = native_inputs(comfy, case)
    with torch.inference_mode():
        sampling.sample(patcher, positive, negative, latent, torch.tensor([0.5, 0.0]), "euler", 3.0, 1)
    assert seen, "ComfyUI did not call the block replacement"
    args = seen[0]
    assert set(args) == BLOCK_ARGS
    tokens = args["img"][0].shape[1]
    for key in VIDEO_TOKEN_ARGS:
        value = args[key]
        value = value[0] if isinstance(value, tuple) else value
        n = value.num_frames * value.patches_per_frame if hasattr(value, "num_frames") else value.shape[1]
        assert n == tokens, (key, n, tokens)
    block = comfy.model.model.diffusion_model.transformer_blocks[0]
    source = inspect.getsource(type(block).forward)
    for name in TAGGED_MODULES:
        assert f"self.{name}(" in source and "transformer_options=transformer_options" in source
