"""Sequence parallelism on ComfyUI's LTXAVModel, attached at ComfyUI's own extension points.

ComfyUI's forward runs unchanged; three things attach to it (strategy: workers/strategies/sp_attention.py):
  - the block-replace hook, model_options["transformer_options"]["patches_replace"]["dit"]
    [("double_block", i)], which LTXAVModel._process_transformer_blocks calls with every per-token
    tensor in `args`. Each replacement hands the original block this rank's contiguous share of
    the video tokens and of the per-token args (positions, timesteps); block 0 cuts the video
    stream, the last block all-gathers it, so ComfyUI's _process_output sees the full sequence.
  - transformer_options["optimized_attention_override"], called by comfy.ldm.modules.attention for
    every attention. Video self-attention and video->audio attention go through the head exchange
    with ComfyUI's own attention function inside; every other attention runs locally.
  - forward pre-hooks on each block's attn1 and video_to_audio_attn, which tag the transformer_options
    those modules pass down, because the override cannot tell from its arguments which attention it
    serves. The hooks do nothing unless the options carry this module's marker, so native calls of
    the same model are untouched.
Where ComfyUI's shapes are relied on without a hook (the block args keys, CompressedTimestep's fields),
tests/test_comfy_sp_contract.py fails when they change.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from comfy.ldm.lightricks.av_model import CompressedTimestep
from comfy.ldm.lightricks.model import GuideAttentionMask

from ....kernels import HeadExchange, even_split, offsets
from ...strategies.sp_attention import SequenceSplit, SplitAttention, SplitState
from ...wire.model_call import ATTENTION_BACKEND_KEY
from . import attention_backend

# Keys of transformer_options this module owns.
SP_KEY = "ltx2_mgpu_sp"  # the SequenceParallel serving this call
ROLE_KEY = "ltx2_mgpu_attention"  # which attention a call serves (set by the pre-hooks)
SELF_ATTENTION, VIDEO_TO_AUDIO = "video_self", "video_to_audio"
TAGGED_MODULES = {"attn1": SELF_ATTENTION, "video_to_audio_attn": VIDEO_TO_AUDIO}
# The block args LTXAVModel passes whose token axis (dim 1) is the video sequence.
VIDEO_TOKEN_ARGS = (
    "v_timestep",
    "v_pe",
    "v_cross_pe",
    "v_cross_scale_shift_timestep",
    "v_cross_gate_timestep",
)
_HOOKED_ATTR = "_ltx2_mgpu_sp_hooks"


class TokenRangeTimestep(CompressedTimestep):
    """A CompressedTimestep that serves the video tokens [start, end) only.

    The per-frame rows stay compressed; only this range is expanded (at 24,576 tokens the expanded
    table of every AdaLN value would take GBs). Same values as the full expansion, sliced.
    """

    __slots__ = ("token_frames",)

    def __init__(self, full: CompressedTimestep, start: int, end: int) -> None:
        ppf = full.patches_per_frame
        first, last = start // ppf, (end - 1) // ppf + 1
        self.batch_size, self.feature_dim, self.patches_per_frame = full.batch_size, full.feature_dim, ppf
        self.data = full.data[:, first:last]
        self.num_frames = last - first
        # Which kept frame row each local token reads.
        self.token_frames = torch.arange(start, end, device=full.data.device) // ppf - first

    def expand(self) -> torch.Tensor:
        return self.data.index_select(1, self.token_frames)

    def expand_for_computation(
        self, scale_shift_table: torch.Tensor, batch_size: int, indices: slice = slice(None, None)
    ) -> tuple[torch.Tensor, ...]:
        rows = self.data.reshape(batch_size, self.num_frames, scale_shift_table.shape[0], -1)[
            :, :, indices, :
        ]
        table = (
            scale_shift_table[indices]
            .unsqueeze(0)
            .unsqueeze(0)
            .to(device=self.data.device, dtype=self.data.dtype)
        )
        return tuple(value.index_select(1, self.token_frames) for value in (table + rows).unbind(dim=2))


def slice_tokens(value: Any, start: int, end: int, total: int) -> Any:
    """This rank's share [start, end) of a per-token block argument; anything not per token is kept."""
    if isinstance(value, CompressedTimestep):
        if value.num_frames * value.patches_per_frame != total:
            return value  # one row for every token (a scalar timestep)
        return TokenRangeTimestep(value, start, end)
    if isinstance(value, tuple) and value and isinstance(value[0], torch.Tensor):
        # Positions: (rotation matrix [B, T, H, D/2, 2, 2], split mode).
        return (slice_tokens(value[0], start, end, total), *value[1:])
    if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[1] == total:
        # Contiguous (once per forward, then shared by every block): fused rope kernels expect it.
        return value[:, start:end].contiguous()
    return value


class SequenceParallel:
    """Serves one model's forwards split over the exchange's ranks. Collective per forward.

    Every rank calls the model with the same full inputs (the sampler runs replicated); each block
    sees this rank's share of the video tokens; the output is the full, identical result on all ranks.
    """

    def __init__(self, exchange: HeadExchange, video_heads: int, audio_heads: int) -> None:
        self.exchange = exchange
        self.state = SplitState()
        self.self_attention = SplitAttention.video_self(None, exchange, self.state, video_heads)
        # video->audio attention runs on the audio width: its queries are audio tokens.
        self.video_to_audio = SplitAttention.video_to_audio(None, exchange, self.state, audio_heads)
        self._local: dict[int, Any] = {}  # id(full arg) -> its local share, for the running forward
        self.guide_mask: GuideAttentionMask | None = None  # the running forward's (LTXVAddGuide strength < 1)
        self.split_forwards = 0  # forwards served split (reported to the client; tests check it)
        self.backend_calls: dict[str, int] = {}  # attention calls served by a named backend, by name

    @staticmethod
    def for_model(exchange: HeadExchange, model: torch.nn.Module) -> SequenceParallel:
        """The SP of ComfyUI's LTXAVModel `model` (its head counts read from the first block this rank
        holds: under weights layers the others are stand-ins, layer_split.py)."""
        block = next(b for b in model.transformer_blocks if hasattr(b, "attn1"))
        v2a = getattr(block, "video_to_audio_attn", None)
        return SequenceParallel(
            exchange, block.attn1.heads, v2a.heads if v2a is not None else block.attn1.heads
        )

    def patch(self, patcher: Any) -> Any:
        """A clone of `patcher` (comfy ModelPatcher) whose forwards run sequence-parallel (on one rank:
        ComfyUI's forward as it is, with the attention function the call names, NOTE [attention backend])."""
        clone = patcher.clone()
        if self.exchange.world_size == 1:
            options = clone.model_options.setdefault("transformer_options", {})
            options["optimized_attention_override"] = self.attention  # never split: the backend only
            return clone
        model = patcher.model.diffusion_model
        install_attention_tags(model)
        last = len(model.transformer_blocks) - 1
        for index in range(last + 1):
            clone.set_model_patch_replace(self._block(index, last), "dit", "double_block", index)
        options = clone.model_options.setdefault("transformer_options", {})
        options[SP_KEY] = self
        options["optimized_attention_override"] = self.attention
        return clone

    def _block(self, index: int, last: int) -> Callable[[dict, dict], dict]:
        def run(args: dict, extra: dict) -> dict:
            vx, ax = args["img"]
            if index == 0:
                self._begin(args, vx)
            split = self.state.current()
            start = offsets(split.token_counts)[self.exchange.rank]
            end = start + split.token_counts[self.exchange.rank]
            local = dict(args)
            if self.guide_mask is not None:
                # The guide mask is over all video tokens: applied after the head exchange (attention()).
                local["self_attention_mask"] = None
            for key in VIDEO_TOKEN_ARGS:
                full = args.get(key)
                if id(full) not in self._local:
                    self._local[id(full)] = slice_tokens(full, start, end, split.total)
                local[key] = self._local[id(full)]
            if index == 0:
                vx = vx[:, start:end].contiguous()  # blocks update it in place
            local["img"] = (vx, ax)
            vx, ax = extra["original_block"](local)["img"]
            if index == last:
                vx = self.exchange.all_gather_tokens(vx.contiguous(), split.token_counts)
                self.state.split = None
                self.guide_mask = None
                self._local.clear()
            return {"img": (vx, ax)}

        return run

    def _begin(self, args: dict, vx: torch.Tensor) -> None:
        mask = args.get("self_attention_mask")
        self.guide_mask = mask if isinstance(mask, GuideAttentionMask) else None
        self._local.clear()
        self.state.split = SequenceSplit(even_split(vx.shape[1], self.exchange.world_size))
        self.split_forwards += 1

    def count_replayed_forward(self) -> None:
        """A forward replayed from a CUDA graph (NOTE [call graphs]) ran split without this object's Python:
        counted as it would have been."""
        self.split_forwards += 1

    def attention(self, func: Callable[..., torch.Tensor], q, k, v, heads, *args, **kwargs) -> torch.Tensor:
        """ComfyUI's optimized_attention_override: the exchange around `func` where a call is tagged."""
        options = kwargs.get("transformer_options") or {}
        backend = attention_backend.chosen(options)  # NOTE [attention backend]
        if backend is not None:
            func = backend
            name = options[ATTENTION_BACKEND_KEY]
            self.backend_calls[name] = self.backend_calls.get(name, 0) + 1
        role = options.get(ROLE_KEY)
        if role is None or self.state.split is None:
            return func(q, k, v, heads, *args, **kwargs)
        if args or kwargs.get("skip_reshape") or kwargs.get("skip_output_reshape"):
            raise NotImplementedError("sequence-parallel attention expects q, k, v as [B, T, heads * D]")
        mask = kwargs.pop("mask", None)

        def inner(q_h, k_h, v_h, h_local, inner_mask):
            return func(q_h, k_h, v_h, h_local, mask=inner_mask, **kwargs)

        if role == SELF_ATTENTION and self.guide_mask is not None:
            inner = guided(func, self.guide_mask, kwargs)
        served = self.self_attention if role == SELF_ATTENTION else self.video_to_audio
        return served.run(inner, q, k, v, heads, mask)


def guided(func: Callable[..., torch.Tensor], guide: GuideAttentionMask, kwargs: dict) -> Callable:
    """The head-local attention with LTXVAddGuide's strength mask (strength < 1), as ComfyUI's
    _attention_with_guide_mask computes it: the queries in three groups (noisy tokens, tracked guide
    tokens, the rest), each with its own additive mask over the keys. After the head exchange every
    rank holds all video tokens in order for its heads, so the mask's token positions are global as
    ComfyUI built them, and every head's attention is the native one."""
    start, end = guide.guide_start, guide.guide_start + guide.tracked_count
    masked = {**kwargs, "low_precision_attention": False}  # as ComfyUI: masks and sage attention disagree

    def inner(q_h, k_h, v_h, h_local, _mask):
        out = torch.empty_like(q_h)
        if start > 0:
            out[:, :start] = func(q_h[:, :start], k_h, v_h, h_local, mask=guide.noisy_mask, **masked)
        out[:, start:end] = func(q_h[:, start:end], k_h, v_h, h_local, mask=guide.tracked_mask, **masked)
        if end < q_h.shape[1]:
            out[:, end:] = func(q_h[:, end:], k_h, v_h, h_local, **kwargs)
        return out

    return inner


def install_attention_tags(model: torch.nn.Module) -> None:
    """Forward pre-hooks on each block's attn1 / video_to_audio_attn (once per model): under SP they
    pass on a copy of transformer_options that names the attention."""
    if getattr(model, _HOOKED_ATTR, False):
        return
    for block in model.transformer_blocks:
        for name, role in TAGGED_MODULES.items():
            module = getattr(block, name, None)
            if module is not None:
                module.register_forward_pre_hook(_tagger(role), with_kwargs=True)
    setattr(model, _HOOKED_ATTR, True)


def _tagger(role: str) -> Callable:
    def tag(_module, args: tuple, kwargs: dict):
        options = kwargs.get("transformer_options")
        if not options or SP_KEY not in options:
            return None
        return args, {**kwargs, "transformer_options": {**options, ROLE_KEY: role}}

    return tag
