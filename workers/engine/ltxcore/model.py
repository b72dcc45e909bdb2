"""What a rank holds for a loaded checkpoint, and the model call the sampler uses (CFG, streams).

The transformer is ltx-core's LTXModel wrapped in SequenceParallelModel; with one rank the wrapper is
a pass-through, so the 1-rank worker path runs exactly the plain ltx-core forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from ltx_core.model.transformer.modality import Modality

from ...wire.model_family import check_ltxcore_serves, detect_model_family
from ...wire.model_files import (
    ModelDescription,
    describe_checkpoint,
    read_checkpoint_config,
    read_safetensors_header,
)
from . import latents
from .checkpoint import load_embeddings_processor, load_transformer
from .conditioning import TextContext
from .fp8_linear import Fp8Selection, quantize_linears
from .model_forward import ForwardMode, apply_mode_to_modules
from .sequence_parallel import SequenceParallelModel


@dataclass
class LoadedModel:
    """One checkpoint on one rank. Identity (path, dtype) decides whether a load can be skipped."""

    path: Path
    dtype: torch.dtype
    mode: ForwardMode
    description: ModelDescription
    causal_positions: bool
    transformer: SequenceParallelModel
    processor: torch.nn.Module
    extras: dict[str, torch.nn.Module] = field(default_factory=dict)  # VAE, upsampler... loaded on demand
    fp8_matmul: bool = False  # block Linears kept in fp8 and multiplied in fp8 (fp8_linear.py)

    @staticmethod
    def load(
        path: Path,
        device: torch.device,
        dtype: torch.dtype,
        exchange,
        mode: ForwardMode,
        on_part=None,
        fp8_matmul: bool = False,
    ) -> LoadedModel:
        header = read_safetensors_header(path)
        check_ltxcore_serves(
            detect_model_family(header.shapes, header.dtypes, header.metadata), Path(path).name
        )
        description = describe_checkpoint(path)
        # ComfyUI reads this from the checkpoint's metadata and defaults to False when it is absent.
        causal = bool(
            read_checkpoint_config(path).get("transformer", {}).get("causal_temporal_positioning", False)
        )
        transformer = load_transformer(path, device, dtype)
        if fp8_matmul:  # after every dtype cast: a later .to(dtype) would cast the fp8 buffers too
            selection = Fp8Selection.for_checkpoint(header, description.num_layers)
            quantize_linears(transformer, selection)
        apply_mode_to_modules(transformer, mode)
        if on_part:
            on_part("transformer")
        processor = load_embeddings_processor(path, device, dtype)
        apply_mode_to_modules(processor, mode)
        if on_part:
            on_part("text connectors")
        wrapped = SequenceParallelModel(transformer, exchange, mode)
        return LoadedModel(path, dtype, mode, description, causal, wrapped, processor, fp8_matmul=fp8_matmul)


@dataclass(frozen=True)
class Guidance:
    cfg_video: float
    cfg_audio: float

    @property
    def needs_uncond(self) -> bool:
        # ComfyUI skips the unconditional pass when cfg is exactly 1.
        return self.cfg_video != 1.0 or self.cfg_audio != 1.0

    @property
    def is_dual(self) -> bool:
        return self.cfg_video != self.cfg_audio


class AVDenoiser:
    """The sampler's model call: latents in ComfyUI form -> denoised latents (x0), CFG applied.

    Positions are computed once per job. uncond and cond run as one batch [uncond; cond], as ComfyUI batches them.
    """

    def __init__(
        self,
        model: LoadedModel,
        positive: TextContext,
        negative: TextContext | None,
        guidance: Guidance,
        video_shape: torch.Size,
        audio_shape: torch.Size | None,
        frame_rate: float,
        device: torch.device,
        timing: latents.AudioTiming,
    ) -> None:
        self.model = model
        self.guidance = guidance
        self.device = device
        batch = video_shape[0]
        contexts = []
        if guidance.needs_uncond:
            if negative is None:
                raise ValueError(
                    "cfg is not 1 but no negative conditioning was given; connect a negative prompt"
                )
            contexts.append(negative.expand_to(batch))
        contexts.append(positive.expand_to(batch))  # ComfyUI batches [uncond, cond]
        self.copies = len(contexts)
        self.video_context = torch.cat([c.video for c in contexts])
        self.audio_context = None if audio_shape is None else torch.cat([_audio_ctx(c) for c in contexts])
        masks = [c.mask for c in contexts]
        self.context_mask = None if any(m is None for m in masks) else torch.cat(masks)
        self.video_shape = video_shape
        self.audio_shape = audio_shape
        self.video_positions = latents.video_positions(
            video_shape, frame_rate, causal_fix=model.causal_positions, device=device
        ).repeat(self.copies, 1, 1, 1)
        self.audio_positions = (
            None
            if audio_shape is None
            else latents.audio_positions(audio_shape, timing, device=device).repeat(self.copies, 1, 1, 1)
        )

    def __call__(
        self, xs: list[torch.Tensor], sigma: float, masks: list[torch.Tensor | None]
    ) -> list[torch.Tensor]:
        (v_tokens, v_out), audio = self.velocity(xs, sigma, masks)
        out = [
            latents.tokens_to_video(
                self._guided(
                    v_tokens, v_out, sigma, self.copies, self.guidance.cfg_video, self.guidance.is_dual
                ),
                self.video_shape,
            )
        ]
        if audio is not None:
            a_tokens, a_out = audio
            a = self._guided(
                a_tokens, a_out, sigma, self.copies, self.guidance.cfg_audio, self.guidance.is_dual
            )
            out.append(latents.tokens_to_audio(a, self.audio_shape))
        return out

    def velocity(
        self, xs: list[torch.Tensor], sigma: float, masks: list[torch.Tensor | None]
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None]:
        """One transformer call (collective): ((video tokens, velocity), (audio tokens, velocity) | None).
        Velocities are [copies * B, T, C] in the model's dtype, cond first."""
        dtype = self.model.dtype
        v_tokens = latents.video_to_tokens(xs[0])
        v_scale = latents.video_mask_to_tokens(masks[0], self.video_shape)
        video = self._modality(v_tokens, sigma, v_scale, self.video_positions, self.video_context, dtype)
        audio = None
        if self.audio_shape is not None:
            a_tokens = latents.audio_to_tokens(xs[1])
            a_scale = (
                None
                if masks[1] is None
                else latents.audio_to_tokens(masks[1].expand(self.audio_shape))[..., 0]
            )
            audio = self._modality(a_tokens, sigma, a_scale, self.audio_positions, self.audio_context, dtype)
        with torch.inference_mode():
            v_out, a_out = self.model.transformer(video, audio, None)
        return (v_tokens, v_out), (None if audio is None else (a_tokens, a_out))

    def _modality(
        self,
        tokens: torch.Tensor,
        sigma: float,
        scale: torch.Tensor | None,
        positions: torch.Tensor,
        context: torch.Tensor,
        dtype: torch.dtype,
    ) -> Modality:
        n = self.copies
        b, t, _ = tokens.shape
        if scale is None:
            # One timestep per item ([B, 1]), as ComfyUI passes it. Per-token [B, T] would make every
            # AdaLN table per token: a 2 x 24,576-row GEMM per forward and [B, T, 4096] scale/shift/gate
            # tensors in every block, measured +2.5% per step on the 19B shape (bench/bench_step.py).
            timesteps = torch.full((b, 1), sigma, dtype=torch.float32, device=self.device)
        else:
            # Per-token timestep: conditioned frames see less noise.
            timesteps = torch.full((b, t), sigma, dtype=torch.float32, device=self.device) * scale
        return Modality(
            latent=tokens.repeat(n, 1, 1).to(dtype),
            sigma=torch.full((b * n,), sigma, dtype=torch.float32, device=self.device),
            timesteps=timesteps.repeat(n, 1),
            positions=positions,
            context=context,
            context_mask=self.context_mask,
        )

    @staticmethod
    def _guided(
        x_tokens: torch.Tensor,
        velocity: torch.Tensor,
        sigma: float,
        copies: int,
        cfg: float,
        dual: bool = False,
    ) -> torch.Tensor:
        """x0 = x - sigma * v per copy, then CFG. Copies are [uncond, cond] (or [cond] alone).

        `dual`: the two streams have different scales; then ComfyUI's LTXVDualCFGGuider form is used,
        algebraically the same but rounded differently, so results match it bit for bit.
        """
        denoised = x_tokens - sigma * velocity.float().view(copies, *x_tokens.shape)
        if copies == 1:
            return denoised[0]
        uncond, cond = denoised[0], denoised[1]
        if dual:
            return x_tokens - ((x_tokens - uncond) + ((x_tokens - cond) - (x_tokens - uncond)) * cfg)
        return uncond + (cond - uncond) * cfg


def _audio_ctx(context: TextContext) -> torch.Tensor:
    if context.audio is None:
        raise ValueError("the conditioning carries no audio context, so the audio stream cannot be denoised")
    return context.audio
