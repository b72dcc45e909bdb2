"""Sequence parallelism on ltx-core's LTXModel: video tokens split over ranks, heads exchanged.

Each rank holds a contiguous slice of the video tokens (NOTE [partition] in kernels/partition.py).
Everything per-token (patchify projection, AdaLN, feed-forward, text cross-attention, audio->video
attention whose keys are the replicated audio) runs on the local slice unchanged. Two attentions see
every video token and are routed through the head exchange:
  - video self-attention (attn1): q, k, v go tokens->heads (send_recv_heads), attention runs over all
    tokens for this rank's heads, the output goes heads->tokens (gather_heads);
  - video->audio attention: the audio queries (replicated) are sliced to this rank's heads, the video
    keys/values go tokens->heads, and the outputs are all-gathered over heads, so every rank holds the
    identical audio stream.
Audio and text run replicated. The output tokens are all-gathered at the end.

Why an uneven split instead of padding to a multiple of the world size (Lightricks' choice): with
contiguous shares that differ by at most one token there is no padding, so no attention needs a key
mask; a mask would push SDPA off its flash kernel on Hopper and, on video->audio, Lightricks leaves
padding unmasked. Both exchange backends support uneven token counts.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from ltx_core.model.transformer.attention import (
    Attention,
    AttentionCallable,
    AttentionFunction,
    FlashAttention3,
    PytorchAttention,
    XFormersAttention,
    memory_efficient_attention,
)
from ltx_core.model.transformer.modality import Modality
from ltx_core.model.transformer.model import LTXModel

from ....kernels import HeadExchange, even_split, offsets
from ...strategies.sp_attention import SequenceSplit, SplitAttention, SplitState
from ...wire.checks import ForwardMode, check_compilable
from .model_forward import comfyui_block_forward, run_transformer

__all__ = ["SequenceParallelModel", "SplitAttention"]

# Exchange wait timeout while the ranks may still be compiling the blocks (first call of a shape).
COMPILE_EXCHANGE_TIMEOUT_S = 900.0


class SequenceParallelModel(torch.nn.Module):
    """Wraps an LTXModel in place: same call signature, same outputs as the unwrapped model.

    forward is collective over the exchange's group: every rank passes the same full-length video and
    audio Modality (replicated inputs) and gets the same full-length outputs.
    """

    def __init__(
        self, model: LTXModel, exchange: HeadExchange, mode: ForwardMode = ForwardMode.COMFYUI
    ) -> None:
        super().__init__()
        self.model = model
        self.exchange = exchange
        self.mode = mode
        self._state = SplitState()
        self.compiled = False
        self._block_forward = comfyui_block_forward
        self._compiled_shapes: set[tuple] = set()  # inputs already run compiled (no compile pending)
        resolve_attention_functions(model)
        if exchange.world_size == 1:
            return  # nothing to exchange: the plain model runs unchanged
        # One wrapper object per kind, shared by every block: blocks are alike, and a compiled block
        # function would otherwise see 48 different objects and recompile for each.
        shared: dict[tuple, object] = {}
        for block in model.transformer_blocks:
            for name, make in (
                ("attn1", SplitAttention.video_self),
                ("video_to_audio_attn", SplitAttention.video_to_audio),
            ):
                attn = getattr(block, name, None)
                if isinstance(attn, Attention):
                    key = (name, attn.attention_function, attn.heads)
                    if key not in shared:
                        shared[key] = make(attn.attention_function, exchange, self._state, attn.heads)
                    attn.attention_function = shared[key]

    def set_compiled(self, enabled: bool) -> None:
        """Run the transformer blocks through torch.compile (inductor) or eagerly.

        One compiled function serves all blocks (parameters are graph inputs), so the first step pays
        one compilation per new shape. Only the "comfyui" forward: ltx-core's own blocks read their
        index and would recompile per block.
        """
        if enabled:
            check_compilable(self.mode)
        if enabled != self.compiled:
            self._block_forward = torch.compile(comfyui_block_forward) if enabled else comfyui_block_forward
            self.compiled = enabled
            self._compiled_shapes = set()

    def _set_exchange_timeout(self, timeout_s: float | None) -> float | None:
        """Set the IPC kernel's wait timeout; returns the previous one (None: backend has none)."""
        if timeout_s is None or not hasattr(self.exchange, "set_timeout"):
            return None
        previous = self.exchange.timeout_s
        self.exchange.set_timeout(timeout_s)
        return previous

    def forward(
        self, video: Modality | None, audio: Modality | None, perturbations: object | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if perturbations is not None:
            raise NotImplementedError("perturbed (STG) forwards are not supported by the worker path")
        if video is None or self.exchange.world_size == 1:
            return run_transformer(self.model, video, audio, self.mode, block_forward=self._block_forward)
        if video.attention_mask is not None:
            raise NotImplementedError(
                "video self-attention masks are not supported under sequence parallelism"
            )
        split = SequenceSplit(even_split(video.latent.shape[1], self.exchange.world_size))
        start = offsets(split.token_counts)[self.exchange.rank]
        local = slice_video_tokens(video, start, start + split.token_counts[self.exchange.rank])
        self._state.split = split
        first = self.compiled and _input_shapes(video, audio) not in self._compiled_shapes
        if first:
            # Each rank compiles on its own and may reach the first exchange minutes before its peer.
            saved_timeout = self._set_exchange_timeout(COMPILE_EXCHANGE_TIMEOUT_S)
        try:
            # The audio gate sees the largest video timestep of the whole batch, not of this slice.
            video_out, audio_out = run_transformer(
                self.model,
                local,
                audio,
                self.mode,
                video_timestep_max=video.timesteps.max(),
                block_forward=self._block_forward,
            )
        finally:
            self._state.split = None
            if first:
                self._set_exchange_timeout(saved_timeout)
        if first:
            self._compiled_shapes.add(_input_shapes(video, audio))
        video_out = self.exchange.all_gather_tokens(video_out.contiguous(), split.token_counts)
        return video_out, audio_out


def resolve_attention_functions(model: torch.nn.Module) -> None:
    """Replace ltx-core's AttentionFunction enum members by the callable each one stands for, made once.

    Same computation; but torch.compile (2.11) cannot trace a call of an Enum member and broke every
    block's graph there (measured: the compiled 2-GPU step at 6,144 tokens ran slower than eager).
    """
    made: dict[AttentionFunction, AttentionCallable] = {}
    for module in model.modules():
        fn = getattr(module, "attention_function", None)
        if isinstance(module, Attention) and isinstance(fn, AttentionFunction):
            if fn not in made:
                made[fn] = _attention_callable(fn)
            module.attention_function = made[fn]


def _attention_callable(fn: AttentionFunction) -> AttentionCallable:
    if fn is AttentionFunction.XFORMERS or (fn is AttentionFunction.DEFAULT and memory_efficient_attention):
        return XFormersAttention()
    if fn is AttentionFunction.FLASH_ATTENTION_3:
        return FlashAttention3()
    return PytorchAttention()  # PYTORCH, and DEFAULT without xformers installed


def _input_shapes(video: Modality, audio: Modality | None) -> tuple:
    """What decides whether torch.compile compiles again: the shapes of the call's tensors."""
    parts = (video,) if audio is None else (video, audio)
    return tuple((m.latent.shape, m.timesteps.shape, m.context.shape) for m in parts)


def slice_video_tokens(video: Modality, start: int, end: int) -> Modality:
    """The tokens [start, end) of a video Modality (latent, per-token timesteps, positions)."""
    timesteps = video.timesteps
    if timesteps.dim() >= 2 and timesteps.shape[1] == video.latent.shape[1]:
        timesteps = timesteps[:, start:end]
    return replace(
        video,
        latent=video.latent[:, start:end],
        timesteps=timesteps,
        positions=video.positions[:, :, start:end],
    )
