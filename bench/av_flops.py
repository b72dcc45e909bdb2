"""Matrix FLOPs of one LTX audio+video denoising step, from the transformer config and the token counts.

One step = one model call on the cond+uncond batch (batch 2; ComfyUI may run the two as one batch or
two, the FLOPs are the same). Every matrix product counts 2 FLOPs per multiply-add; elementwise work
(norms, AdaLN, RoPE, gates' sigmoid, softmax) is left out, as are the text connectors (they run once per
sampling run, not per step). With N video tokens, M audio tokens, C = 1024 text tokens, video width
d = heads x head_dim, audio width a, per block:

  video self-attention   2N(4d^2) + 4N^2 d           q, k, v, out; scores and values
  video text attention   2N(2d^2) + 2C(2 d_ctx d) + 4NCd
  video feed-forward     2N(8d^2)                     d -> 4d -> d
  audio self-attention   2M(4a^2) + 4M^2 a
  audio text attention   2M(2a^2) + 2C(2 a_ctx a) + 4MCa
  audio feed-forward     2M(8a^2)
  audio -> video         2N(2da) + 2M(2a^2) + 4NMa     q from video, k/v from audio (a wide), out to d
  video -> audio         2M(2a^2) + 2N(2da) + 4MNa
  gated attention        2 Lq x width x heads per attention module (LTX-2.3 / 2.5: apply_gated_attention)

plus the patchify and output projections (2N(2 x 128 d) + 2M(2 x 128 a)) once per call, and for LTX-2
(text projection inside the model) the caption projections, 2C(cc d + d^2) + 2C(cc a + a^2). d_ctx, a_ctx are
cross_attention_dim and audio_cross_attention_dim. MFU = FLOPs / step time / the GPU's dense peak.
"""

from __future__ import annotations

TEXT_TOKENS = 1024  # the connectors pad the text to 1024 tokens with learned registers
CFG_BATCH = 2  # cond + uncond
LATENT_CHANNELS = 128  # video latent channels and audio (8 channels x 16 bins) per token
# Dense tensor-core peaks of one H200 SXM (NVIDIA's datasheet, without sparsity), FLOP/s.
H200_PEAK_FLOPS = {"bf16": 989e12, "fp8": 1979e12, "fp8_fast": 1979e12, "int8": 1979e12}


def av_step_flops(
    config: dict, video_tokens: int, audio_tokens: int, text_tokens: int = TEXT_TOKENS
) -> float:
    """FLOPs of one CFG step (module docstring) for a transformer `config` in ComfyUI's metadata keys."""
    return sum(av_step_flops_parts(config, video_tokens, audio_tokens, text_tokens))


def av_step_flops_parts(
    config: dict, video_tokens: int, audio_tokens: int, text_tokens: int = TEXT_TOKENS
) -> tuple[float, float]:
    """(Linear layers, attention products) of av_step_flops: the terms with a weight, and the
    query-key and probability-value products."""
    n, m, c = video_tokens, audio_tokens, text_tokens
    heads, a_heads = config["num_attention_heads"], config["audio_num_attention_heads"]
    d = heads * config["attention_head_dim"]
    a = a_heads * config["audio_attention_head_dim"]
    d_ctx, a_ctx = config["cross_attention_dim"], config["audio_cross_attention_dim"]
    video = 2 * n * 4 * d * d + 2 * n * 2 * d * d + 2 * c * 2 * d_ctx * d + 2 * n * 8 * d * d
    audio = 2 * m * 4 * a * a + 2 * m * 2 * a * a + 2 * c * 2 * a_ctx * a + 2 * m * 8 * a * a
    cross = 2 * (2 * n * 2 * d * a + 2 * m * 2 * a * a)
    gates = 0
    if config.get("apply_gated_attention", False):
        # attn1, attn2, audio_to_video (queries: video); audio_attn1, audio_attn2, video_to_audio (audio)
        gates = 2 * n * d * (2 * heads + a_heads) + 2 * m * a * 3 * a_heads
    io = 2 * n * 2 * LATENT_CHANNELS * d + 2 * m * 2 * LATENT_CHANNELS * a
    if not config.get("caption_proj_before_connector", False):
        # LTX-2 projects the text in the model on every call (caption_channels -> width -> width).
        cc = config["caption_channels"]
        io += 2 * c * (cc * d + d * d) + 2 * c * (cc * a + a * a)
    linear = config["num_layers"] * (video + audio + cross + gates) + io
    products = 4 * n * n * d + 4 * n * c * d + 4 * m * m * a + 4 * m * c * a + 2 * 4 * n * m * a
    attention = config["num_layers"] * products
    return float(CFG_BATCH * linear), float(CFG_BATCH * attention)


def mfu(flops: float, step_ms: float, weights: str) -> float:
    """Model FLOP utilisation of one H200 at `step_ms` per step, against the dense peak of the weight
    format's matrix products (bf16 989, fp8 / int8 1979 TFLOP/s; every FLOP is counted against it, so
    for fp8 / int8, whose attention products stay in bf16, it is a lower bound)."""
    return flops / (step_ms / 1e3) / H200_PEAK_FLOPS[weights]
