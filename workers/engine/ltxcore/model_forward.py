"""How the transformer is called: as native ComfyUI computes LTX-2 (default) or as Lightricks' reference.

ltx-core's LTXModel is Lightricks' reference. Native ComfyUI 0.33 differs in two places
(docs/COMFYUI_LTX2_PARITY.md section 7, measured there on shared weights):
  1. video->audio attention normalises the video state AFTER the audio->video update was added
     (ltx-core reuses the state from before it);
  2. the audio<->video AdaLN scale/shift of each stream is driven by that stream's own per-token
     timesteps, and each gate by the other stream's largest timestep in the batch (ltx-core uses the
     other stream's scalar sigma for both). Equal for plain text-to-video; differs with noise masks.
plus q/k RMSNorm eps 1e-5 instead of 1e-6. Users swap our nodes for native ones and expect the same
video, so "comfyui" is the default; "reference" runs ltx-core's own forward unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from ltx_core.model.transformer.attention import Attention
from ltx_core.model.transformer.modality import Modality
from ltx_core.model.transformer.model import LTXModel
from ltx_core.model.transformer.transformer import BasicAVTransformerBlock
from ltx_core.model.transformer.transformer_args import TransformerArgs
from ltx_core.utils import rms_norm

from ...wire.checks import ForwardMode

BlockForward = Callable[..., tuple[TransformerArgs | None, TransformerArgs | None]]
COMFYUI_QK_NORM_EPS = 1e-5  # comfy/ldm/lightricks CrossAttention's q/k RMSNorm, whatever the config says


def apply_mode_to_modules(module: torch.nn.Module, mode: ForwardMode) -> None:
    """Module-level settings of a mode (q/k norm eps), applied once after loading."""
    if mode is ForwardMode.COMFYUI:
        for sub in module.modules():
            if isinstance(sub, Attention):
                sub.q_norm.eps = COMFYUI_QK_NORM_EPS
                sub.k_norm.eps = COMFYUI_QK_NORM_EPS


def run_transformer(
    model: LTXModel,
    video: Modality | None,
    audio: Modality | None,
    mode: ForwardMode,
    *,
    video_timestep_max: torch.Tensor | None = None,
    block_forward: BlockForward | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Velocity of video and audio tokens. `video_timestep_max`: the largest video timestep of the
    whole batch when `video` holds only some of the tokens (sequence parallelism). `block_forward`:
    comfyui_block_forward or a compiled version of it (comfyui mode)."""
    if mode is ForwardMode.REFERENCE:
        return model(video, audio, None)
    v_args = model.video_args_preprocessor.prepare(video, audio) if video is not None else None
    a_args = model.audio_args_preprocessor.prepare(audio, video) if audio is not None else None
    if v_args is not None and a_args is not None:
        v_max = video.timesteps.max() if video_timestep_max is None else video_timestep_max
        v_args, a_args = _own_cross_timesteps(model, video, audio, v_args, a_args, v_max)
    block_forward = block_forward or comfyui_block_forward
    for block in model.transformer_blocks:
        v_args, a_args = block_forward(block, v_args, a_args)
    vx = None
    if v_args is not None:
        vx = model._process_output(
            model.scale_shift_table, model.norm_out, model.proj_out, v_args.x, v_args.embedded_timestep
        )
    ax = None
    if a_args is not None:
        ax = model._process_output(
            model.audio_scale_shift_table,
            model.audio_norm_out,
            model.audio_proj_out,
            a_args.x,
            a_args.embedded_timestep,
        )
    return vx, ax


def _adaln(adaln: torch.nn.Module, timesteps: torch.Tensor, batch: int, dtype: torch.dtype) -> torch.Tensor:
    """AdaLN embedding per timestep value, computed once per distinct value: per-token timesteps take
    a handful of values (sigma, sigma x mask), and 2 x 24,576 rows through a 4096 x 16,384 linear
    would cost ~6.6 TFLOP per call for nothing."""
    flat = timesteps.flatten()
    values, index = torch.unique(flat, return_inverse=True)
    emb, _ = adaln(values, hidden_dtype=dtype)
    if values.numel() == 1:
        return emb.view(1, 1, -1).expand(batch, 1, -1)  # broadcast, never materialised per token
    return emb[index].view(batch, -1, emb.shape[-1])


def _own_cross_timesteps(
    model: LTXModel,
    video: Modality,
    audio: Modality,
    v_args: TransformerArgs,
    a_args: TransformerArgs,
    video_max: torch.Tensor,
) -> tuple[TransformerArgs, TransformerArgs]:
    scale = model.timestep_scale_multiplier
    gate_factor = model.av_ca_timestep_scale_multiplier / scale
    b = v_args.x.shape[0]
    dtype = video.latent.dtype
    audio_max = audio.timesteps.max()
    v_args = replace(
        v_args,
        cross_scale_shift_timestep=_adaln(
            model.av_ca_video_scale_shift_adaln_single, video.timesteps * scale, b, dtype
        ),
        cross_gate_timestep=_adaln(
            model.av_ca_a2v_gate_adaln_single, (audio_max * scale * gate_factor).expand(b), b, dtype
        ),
    )
    a_args = replace(
        a_args,
        cross_scale_shift_timestep=_adaln(
            model.av_ca_audio_scale_shift_adaln_single, audio.timesteps * scale, b, dtype
        ),
        cross_gate_timestep=_adaln(
            model.av_ca_v2a_gate_adaln_single, (video_max * scale * gate_factor).expand(b), b, dtype
        ),
    )
    return v_args, a_args


def comfyui_block_forward(
    block: BasicAVTransformerBlock, video: TransformerArgs | None, audio: TransformerArgs | None
) -> tuple[TransformerArgs | None, TransformerArgs | None]:
    """One block in native ComfyUI's order (no perturbations). Differs from ltx-core's block only in
    the video input of video->audio attention (normalised after the audio->video update)."""
    eps = block.norm_eps
    vx = video.x if video is not None else None
    ax = audio.x if audio is not None else None
    run_v = video is not None and video.enabled and vx.numel() > 0
    run_a = audio is not None and audio.enabled and ax.numel() > 0
    if run_v:
        vx = _self_and_text_attention(block, vx, video, block.attn1, block.attn2, block.scale_shift_table, "")
    if run_a:
        ax = _self_and_text_attention(
            block, ax, audio, block.audio_attn1, block.audio_attn2, block.audio_scale_shift_table, "audio_"
        )
    if run_v and audio is not None and ax.numel() > 0:
        # audio -> video: video queries, audio keys/values, both from the states before this update.
        ax_norm = rms_norm(ax, eps=eps)
        scale_v, shift_v, gate_a2v = block.get_av_ca_ada_values(
            block.scale_shift_table_a2v_ca_video,
            vx.shape[0],
            video.cross_scale_shift_timestep,
            video.cross_gate_timestep,
            slice(0, 2),
        )
        scale_a, shift_a, _ = block.get_av_ca_ada_values(
            block.scale_shift_table_a2v_ca_audio,
            ax.shape[0],
            audio.cross_scale_shift_timestep,
            audio.cross_gate_timestep,
            slice(0, 2),
        )
        vx_in = rms_norm(vx, eps=eps) * (1 + scale_v) + shift_v
        ax_in = ax_norm * (1 + scale_a) + shift_a
        vx = (
            vx
            + block.audio_to_video_attn(
                vx_in,
                context=ax_in,
                pe=video.cross_positional_embeddings,
                k_pe=audio.cross_positional_embeddings,
            )
            * gate_a2v
        )
        if run_a:
            # video -> audio: the video side is normalised from the UPDATED video state (ComfyUI's order).
            scale_a, shift_a, gate_v2a = block.get_av_ca_ada_values(
                block.scale_shift_table_a2v_ca_audio,
                ax.shape[0],
                audio.cross_scale_shift_timestep,
                audio.cross_gate_timestep,
                slice(2, 4),
            )
            scale_v, shift_v, _ = block.get_av_ca_ada_values(
                block.scale_shift_table_a2v_ca_video,
                vx.shape[0],
                video.cross_scale_shift_timestep,
                video.cross_gate_timestep,
                slice(2, 4),
            )
            ax_in = ax_norm * (1 + scale_a) + shift_a
            vx_in = rms_norm(vx, eps=eps) * (1 + scale_v) + shift_v
            ax = (
                ax
                + block.video_to_audio_attn(
                    ax_in,
                    context=vx_in,
                    pe=audio.cross_positional_embeddings,
                    k_pe=video.cross_positional_embeddings,
                )
                * gate_v2a
            )
    if run_v:
        vx = _feed_forward(block, vx, video, block.ff, block.scale_shift_table)
    if run_a:
        ax = _feed_forward(block, ax, audio, block.audio_ff, block.audio_scale_shift_table)
    return (
        replace(video, x=vx) if video is not None else None,
        replace(audio, x=ax) if audio is not None else None,
    )


def _self_and_text_attention(
    block: BasicAVTransformerBlock,
    x: torch.Tensor,
    args: TransformerArgs,
    self_attn: Attention,
    text_attn: Attention,
    table: torch.Tensor,
    prefix: str,
) -> torch.Tensor:
    shift, scale, gate = block.get_ada_values(table, x.shape[0], args.timesteps, slice(0, 3))
    normed = rms_norm(x, eps=block.norm_eps) * (1 + scale) + shift
    x = x + self_attn(normed, pe=args.positional_embeddings, mask=args.self_attention_mask) * gate
    return x + block._apply_text_cross_attention(
        x,
        args.context,
        text_attn,
        table,
        getattr(block, f"{prefix}prompt_scale_shift_table", None),
        args.timesteps,
        args.prompt_timestep,
        args.context_mask,
        cross_attention_adaln=block.cross_attention_adaln,
    )


def _feed_forward(
    block: BasicAVTransformerBlock,
    x: torch.Tensor,
    args: TransformerArgs,
    ff: torch.nn.Module,
    table: torch.Tensor,
) -> torch.Tensor:
    shift, scale, gate = block.get_ada_values(table, x.shape[0], args.timesteps, slice(3, 6))
    return x + ff(rms_norm(x, eps=block.norm_eps) * (1 + scale) + shift) * gate
