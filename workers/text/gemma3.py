"""Gemma 3's text decoder, computed the way ComfyUI's LTX-2 text encoder computes it.

Our own small implementation instead of transformers' Gemma3 classes: their constructor, config
and layer signatures change between releases (ComfyUI users run many transformers versions), and
a pipeline over ranks needs to run any contiguous block of layers on its own. The numerics follow
ComfyUI 0.33 (`comfy/text_encoders/llama.py` Llama2_ with the Gemma 3 12B config, driven by
`sd1_clip.SDClipModel` as `lt.py` sets it up):

- the residual stream is float32 whatever the weights are stored in (`COMPUTE_DTYPE`): ComfyUI embeds
  in float32 and its manual-cast linears cast each weight to the input's dtype;
- embeddings are scaled by sqrt(hidden_size); RMSNorm multiplies by (1 + w), with 1 + w formed in the
  stored dtype (as ComfyUI does) and applied with torch's fused rms_norm;
- attention: q/k RMSNorm per head, rotary embedding with rotate-half pairs (global layers: theta
  1e6 with linear scaling 8; sliding layers: theta 1e4 and a 1,024-token window), softmax scale
  query_pre_attn_scalar^-1/2, additive causal masks of finfo.min/4 (ComfyUI's also mask its left
  padding, which runs nowhere here: NOTE [pads skipped]);
- the hidden states LTX-2 reads are each layer's input plus the final-normed output
  (num_layers + 1 states), as `intermediate_output="all"` returns them.

`GemmaSegment` holds a contiguous block of layers (plus the embedding on the first block and the
final norm on the last), so ranks of a pipeline each hold only their part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

COMPUTE_DTYPE = torch.float32  # ComfyUI runs Gemma's activations in float32 (see module docstring)
# ComfyUI's additive mask value: finfo.min / 4, so that two masks added stay finite (no NaN rows).
_MASK_DIVISOR = 4.0


@dataclass(frozen=True)
class GemmaConfig:
    """What a Gemma 3 text decoder forward needs. Defaults: Gemma 3 12B (the text encoder of LTX-2),
    as ComfyUI's `Gemma3_12B_Config` and google/gemma-3-12b-it's config.json give them.

    sliding_layers[i]: layer i uses local (windowed) attention with the local rope; else global.
    """

    vocab_size: int = 262_208
    hidden_size: int = 3840
    intermediate_size: int = 15_360
    num_layers: int = 48
    num_heads: int = 16
    num_kv_heads: int = 8
    head_dim: int = 256
    rms_norm_eps: float = 1e-6
    query_pre_attn_scalar: float = 256.0
    sliding_window: int = 1024
    sliding_layers: tuple[bool, ...] = field(default_factory=lambda: default_sliding_layers(48))
    rope_theta_global: float = 1_000_000.0
    rope_scale_global: float = 8.0  # linear scaling: frequencies divided by this
    rope_theta_local: float = 10_000.0
    rope_scale_local: float = 1.0

    @property
    def num_hidden_states(self) -> int:
        """Hidden states LTX-2 reads: the input of every layer and the final-normed output."""
        return self.num_layers + 1

    @property
    def feature_width(self) -> int:
        """Width of the flattened features the text projection takes (hidden x states)."""
        return self.hidden_size * self.num_hidden_states


# Gemma 3: five sliding-window layers, then one global layer (transformers' sliding_window_pattern 6).
SLIDING_PATTERN = 6


def default_sliding_layers(num_layers: int) -> tuple[bool, ...]:
    return tuple((i + 1) % SLIDING_PATTERN != 0 for i in range(num_layers))


class CastLinear(nn.Module):
    """A bias-free linear layer whose weight is cast to the input's dtype per call (ComfyUI's
    manual cast). weight: [out, in] in the storage dtype."""

    def __init__(self, in_features: int, out_features: int, dtype: torch.dtype, device=None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=dtype, device=device), False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype))


class GemmaRMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * (1 + weight) over the last dim; weight [dim] in the storage dtype."""

    def __init__(self, dim: int, eps: float, dtype: torch.dtype, device=None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim, dtype=dtype, device=device), False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = (self.weight + 1.0).to(x.dtype)
        return F.rms_norm(x, scale.shape, scale, self.eps)


class GemmaAttention(nn.Module):
    def __init__(self, config: GemmaConfig, dtype: torch.dtype, device=None) -> None:
        super().__init__()
        c = config
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.scale = c.query_pre_attn_scalar**-0.5
        self.q_proj = CastLinear(c.hidden_size, c.num_heads * c.head_dim, dtype, device)
        self.k_proj = CastLinear(c.hidden_size, c.num_kv_heads * c.head_dim, dtype, device)
        self.v_proj = CastLinear(c.hidden_size, c.num_kv_heads * c.head_dim, dtype, device)
        self.o_proj = CastLinear(c.num_heads * c.head_dim, c.hidden_size, dtype, device)
        self.q_norm = GemmaRMSNorm(c.head_dim, c.rms_norm_eps, dtype, device)
        self.k_norm = GemmaRMSNorm(c.head_dim, c.rms_norm_eps, dtype, device)

    def forward(self, x: torch.Tensor, rope: Rope, mask: torch.Tensor) -> torch.Tensor:
        b, length, _ = x.shape
        q = self.q_proj(x).view(b, length, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = rope.apply(self.q_norm(q)), rope.apply(self.k_norm(k))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=self.scale, enable_gqa=self.num_heads != self.num_kv_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, length, self.num_heads * self.head_dim))


class GemmaMLP(nn.Module):
    def __init__(self, config: GemmaConfig, dtype: torch.dtype, device=None) -> None:
        super().__init__()
        self.gate_proj = CastLinear(config.hidden_size, config.intermediate_size, dtype, device)
        self.up_proj = CastLinear(config.hidden_size, config.intermediate_size, dtype, device)
        self.down_proj = CastLinear(config.intermediate_size, config.hidden_size, dtype, device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class GemmaLayer(nn.Module):
    """One decoder layer: sandwich norms around attention and around the MLP."""

    def __init__(self, config: GemmaConfig, dtype: torch.dtype, device=None) -> None:
        super().__init__()
        c = config
        self.self_attn = GemmaAttention(c, dtype, device)
        self.mlp = GemmaMLP(c, dtype, device)
        self.input_layernorm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)
        self.post_attention_layernorm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)
        self.pre_feedforward_layernorm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)
        self.post_feedforward_layernorm = GemmaRMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)

    def forward(self, x: torch.Tensor, rope: Rope, mask: torch.Tensor) -> torch.Tensor:
        h = self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), rope, mask))
        x = x + h
        h = self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        return x + h


@dataclass(frozen=True)
class Rope:
    """cos/sin tables [1, 1, L, head_dim] for L consecutive positions (rotate-half layout)."""

    cos: torch.Tensor
    sin: torch.Tensor

    @staticmethod
    def build(
        head_dim: int, length: int, theta: float, scale: float, device: torch.device, first: int = 0
    ) -> Rope:
        """Tables for positions first..first+length-1 (each angle one product, as for the whole range)."""
        exponents = torch.arange(0, head_dim, 2, device=device).float() / head_dim
        inv_freq = 1.0 / (theta**exponents) / scale
        positions = torch.arange(first, first + length, device=device).float()
        freqs = (inv_freq[None, :, None] @ positions[None, None, :]).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return Rope(cos=emb.cos().unsqueeze(1), sin=emb.sin().unsqueeze(1))

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, H, L, head_dim] -> rotated, as ComfyUI's apply_rope computes it."""
        half = x.shape[-1] // 2
        out = x * self.cos
        out[..., :half].addcmul_(x[..., half:], -self.sin[..., half:])
        out[..., half:].addcmul_(x[..., :half], self.sin[..., :half])
        return out


@dataclass(frozen=True)
class SequenceContext:
    """Rope tables and attention masks of a prompt's `length` ids at the positions ComfyUI gives them:
    the last `length` of its left-padded sequence of `padded` positions.
    Built by every rank that runs layers of it (cheap, deterministic).

    NOTE [pads skipped]: ComfyUI left-pads each prompt to 1,024 positions and runs Gemma on all of
    them, but every prompt token's attention masks the pads out (finfo.min / 4 added: their softmax
    weight is exactly 0), and nothing else in a layer mixes positions. So the prompt tokens' states
    depend only on each other and their positions, and running only them, at the same positions,
    gives ComfyUI's states within float32 rounding (the products' summation order) for a fraction
    of the work: a 150-token prompt costs 15% of a padded one. The pads' own rows, which ComfyUI
    computes and LTX throws away, are never formed."""

    length: int
    global_rope: Rope
    local_rope: Rope
    mask: torch.Tensor  # [1, 1, L, L] additive: the causal triangle
    sliding_mask: torch.Tensor  # the same plus keys more than `sliding_window` positions back

    @staticmethod
    def build(config: GemmaConfig, num_tokens: int, padded: int, device: torch.device) -> SequenceContext:
        if padded < num_tokens:
            raise ValueError(f"a prompt of {num_tokens} tokens cannot sit in {padded} positions")
        dtype, length, first = COMPUTE_DTYPE, num_tokens, padded - num_tokens
        low = torch.finfo(dtype).min / _MASK_DIVISOR
        mask = (
            torch.full((length, length), low, device=device, dtype=dtype).triu_(1).view(1, 1, length, length)
        )
        sliding = mask
        if length > config.sliding_window:
            far = torch.full((length, length), torch.finfo(dtype).min, device=device, dtype=dtype)
            sliding = mask + far.tril_(-config.sliding_window)
        return SequenceContext(
            length=length,
            global_rope=Rope.build(
                config.head_dim, length, config.rope_theta_global, config.rope_scale_global, device, first
            ),
            local_rope=Rope.build(
                config.head_dim, length, config.rope_theta_local, config.rope_scale_local, device, first
            ),
            mask=mask,
            sliding_mask=sliding,
        )


class GemmaSegment(nn.Module):
    """Layers [start, stop) of a Gemma 3 text decoder, with the token embedding when start == 0 and
    the final norm when stop == num_layers. State-dict keys are the file's keys without their model
    prefix ("embed_tokens.weight", "layers.<global index>.self_attn.q_proj.weight", "norm.weight")."""

    def __init__(self, config: GemmaConfig, start: int, stop: int, dtype: torch.dtype, device=None) -> None:
        super().__init__()
        if not 0 <= start < stop <= config.num_layers:
            raise ValueError(f"layer block [{start}, {stop}) is not inside 0..{config.num_layers}")
        self.config, self.start, self.stop = config, start, stop
        self.embed_tokens = (
            nn.Embedding(config.vocab_size, config.hidden_size, dtype=dtype, device=device)
            if start == 0
            else None
        )
        if self.embed_tokens is not None:
            self.embed_tokens.weight.requires_grad_(False)
        self.layers = nn.ModuleDict({str(i): GemmaLayer(config, dtype, device) for i in range(start, stop)})
        self.norm = (
            GemmaRMSNorm(config.hidden_size, config.rms_norm_eps, dtype, device)
            if stop == config.num_layers
            else None
        )

    @property
    def has_embedding(self) -> bool:
        return self.embed_tokens is not None

    @property
    def has_final_norm(self) -> bool:
        return self.norm is not None

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, L] int64 -> [B, L, hidden] float32, scaled by sqrt(hidden) (Gemma's embedding)."""
        assert self.embed_tokens is not None, "only the first segment embeds"
        return self.embed_tokens(ids).to(COMPUTE_DTYPE) * (self.config.hidden_size**0.5)

    def forward(self, x: torch.Tensor, context: SequenceContext, states: list[torch.Tensor]) -> torch.Tensor:
        """Run this block on the prompt tokens x [B, n, hidden] float32 (NOTE [pads skipped]). Appends
        to `states` every layer's input, and the final-normed output on the last block.
        Returns the block's output (before the final norm)."""
        for index in range(self.start, self.stop):
            states.append(x)  # layers return new tensors: x is never written after this
            sliding = self.config.sliding_layers[index]
            rope = context.local_rope if sliding else context.global_rope
            mask = context.sliding_mask if sliding else context.mask
            x = self.layers[str(index)](x, rope, mask)
        if self.norm is not None:
            states.append(self.norm(x))
        return x
