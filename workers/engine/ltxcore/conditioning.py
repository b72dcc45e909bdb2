"""Text conditioning: from what ComfyUI's LTX-2 text encoding produces to the transformer's context.

ComfyUI hands over one of two forms (docs/COMFYUI_LTX2_PARITY.md):
  - unprocessed: [B, T, caption_channels] text features (flag `unprocessed_ltxav_embeds`); the
    embeddings connectors stored in the checkpoint turn them into context here, in the workers;
  - processed (compat): [B, L, 2 * caption_channels], the connectors already ran (video | audio halves).
Both end up as `TextContext`: video and audio context [B, L, caption_channels] and a token mask [B, L].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...wire.model_files import ModelDescription

# The connectors see at least this many tokens: the prompt, then learned registers (Gemma's max
# prompt length in LTX-2; ComfyUI's text path pads to it).
CONTEXT_LENGTH = 1024


@dataclass(frozen=True)
class TextContext:
    """Transformer context for a batch of prompts. video/audio: [B, L, C]; mask: [B, L] int64 (1 = token)
    or None when every token counts (the connectors leave no padding)."""

    video: torch.Tensor
    audio: torch.Tensor | None
    mask: torch.Tensor | None

    @property
    def batch(self) -> int:
        return self.video.shape[0]

    def expand_to(self, batch: int) -> TextContext:
        if self.batch == batch:
            return self
        if self.batch != 1:
            raise ValueError(
                f"conditioning holds {self.batch} prompts but the latent batch is {batch}; use 1 or {batch}"
            )
        return TextContext(
            video=self.video.expand(batch, -1, -1),
            audio=None if self.audio is None else self.audio.expand(batch, -1, -1),
            mask=None if self.mask is None else self.mask.expand(batch, -1),
        )


def check_conditioning_width(
    tensor: torch.Tensor, unprocessed: bool, model: ModelDescription, what: str
) -> None:
    """Raise ValueError when the conditioning tensor cannot belong to this model."""
    if tensor.dim() != 3:
        raise ValueError(
            f"{what} conditioning has shape {tuple(tensor.shape)}; expected [batch, tokens, width]"
        )
    want = model.caption_channels if unprocessed else 2 * model.caption_channels
    if tensor.shape[2] != want:
        form = "text-encoder features" if unprocessed else "processed context"
        raise ValueError(
            f"{what} conditioning is {tensor.shape[2]} wide but this checkpoint takes {form} {want} wide. "
            "Encode the prompt with the LTX-2 text encoder (LTXAVTextEncoderLoader + CLIPTextEncode, or MGPU Text "
            "Encode) for this checkpoint."
        )


def context_from_features(
    features: torch.Tensor, processor: torch.nn.Module, device: torch.device, dtype: torch.dtype
) -> TextContext:
    """Run the checkpoint's video and audio embeddings connectors on unprocessed text features [B, T, C].

    As native ComfyUI does it: the T real tokens are followed by learned registers up to
    max(CONTEXT_LENGTH, T) tokens (register i mod 128 at position i) and no attention mask is used.
    (ltx-core reaches the same values from a left-padded layout; appending avoids its one-prompt-at-a-
    time limit and works for prompts longer than the context length.)
    """
    x = features.to(device=device, dtype=dtype)
    video = _run_connector(processor.video_connector, x)
    audio_connector = getattr(processor, "audio_connector", None)
    audio = None if audio_connector is None else _run_connector(audio_connector, x)
    return TextContext(video=video, audio=audio, mask=None)


def _run_connector(connector: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    b, n, _ = tokens.shape
    length = max(CONTEXT_LENGTH, n)
    registers = connector.learnable_registers
    index = torch.arange(n, length, device=registers.device) % registers.shape[0]
    filler = registers[index].to(tokens.dtype).unsqueeze(0).expand(b, -1, -1)
    hidden = torch.cat([tokens, filler], dim=1)
    saved = connector.num_learnable_registers
    connector.num_learnable_registers = 0  # registers are already in place; skip ltx-core's padding swap
    try:
        out, _ = connector(hidden, None)
    finally:
        connector.num_learnable_registers = saved
    return out


def context_from_processed(processed: torch.Tensor, device: torch.device, dtype: torch.dtype) -> TextContext:
    """Split already-processed context [B, L, 2C] into its video and audio halves."""
    x = processed.to(device=device, dtype=dtype)
    half = x.shape[2] // 2
    return TextContext(video=x[..., :half], audio=x[..., half:], mask=None)
