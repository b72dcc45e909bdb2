"""LTX's text features on the comfy backend: ComfyUI's own LTXAVTEModel on Gemma's hidden states.

The ranks run Gemma 3 themselves (workers/text/: layers split over ranks or one replica per prompt,
measured 0 to 2.2e-6 of ComfyUI's Gemma). Everything after Gemma is ComfyUI's code: the
LTXAVTEModel of comfy/text_encoders/lt.py, built with `HiddenStates` as its text-encoder model, so
its own encode_token_weights cuts the prompt tokens, picks bf16 where ComfyUI would
(should_use_bf16), normalises and projects, for both projections it knows: "single_linear"
(LTX-2 19B: 8 (x - mean) / (max - min) over (tokens, hidden), one Linear) and "dual_linear"
(LTX-2.3: per-state RMS norm, a video and an audio Linear, concatenated). The projection weights
come from the checkpoint's `text_embedding_projection.*` keys, read and mapped by lt.sd_detect and
LTXAVTEModel.load_sd as LTXAVTextEncoderLoader reads them.

The wrapper depends on LTXAVTEModel's constructor taking `text_encoder_model`, the model's
`.operations` and `.transformer.model.config`; tests/test_comfy_text.py fails when that changes.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from safetensors import safe_open

PROJECTION_PREFIX = "text_embedding_projection."
TEXT_ENCODER_KEY = "gemma3_12b"  # the key LTXAVTEModel reads its token batch under


class HiddenStates(torch.nn.Module):
    """Stands in for ComfyUI's Gemma model inside LTXAVTEModel: "encodes" a batch that already is
    Gemma's output, [B, num_hidden_states, n, hidden] float32 (every token a prompt token)."""

    def __init__(self, *, hidden_size: int, num_hidden_layers: int, operations: Any) -> None:
        super().__init__()
        self.operations = operations
        config = SimpleNamespace(hidden_size=hidden_size, num_hidden_layers=num_hidden_layers)
        self.transformer = SimpleNamespace(model=SimpleNamespace(config=config))

    def encode_token_weights(self, states: torch.Tensor) -> tuple[torch.Tensor, None, dict]:
        mask = torch.ones(states.shape[0], states.shape[2], dtype=torch.long, device=states.device)
        return states, None, {"attention_mask": mask}

    def set_clip_options(self, options: dict) -> None:
        pass

    def reset_clip_options(self) -> None:
        pass


@dataclass(frozen=True)
class ComfyTextHead:
    """ComfyUI's LTXAVTEModel for one checkpoint's projection, on one device.

    in_features: hidden x num_hidden_states it takes; out_features: C of the conditioning [1, n, C]
    (video + audio widths for "dual_linear"); kind: the projection type lt.sd_detect found."""

    model: torch.nn.Module
    kind: str
    in_features: int
    out_features: int

    @staticmethod
    def load(
        checkpoint: Path, hidden_size: int, num_hidden_states: int, dtype: torch.dtype, device: torch.device
    ) -> ComfyTextHead:
        """Build the head from `checkpoint`'s projection, weights in `dtype` (ComfyUI holds them in the
        Gemma file's dtype). Raises ValueError naming the file when it has no LTX text projection."""
        import comfy.ops
        from comfy.text_encoders import lt

        weights = read_projection(checkpoint)
        detected = lt.sd_detect([weights])
        if not detected:
            raise ValueError(
                f"the checkpoint {checkpoint.name} has no text projection ({PROJECTION_PREFIX}*); MGPU Text Encode "
                "needs an LTX-2 / LTX-2.3 checkpoint"
            )

        widths = {k: v.shape[-1] for k, v in weights.items() if k.endswith("weight") and v.dim() == 2}
        in_features = hidden_size * num_hidden_states
        if any(width != in_features for width in widths.values()):
            raise ValueError(
                f"the checkpoint {checkpoint.name}'s text projection takes {sorted(set(widths.values()))} features "
                f"but the text encoder gives {num_hidden_states} hidden states of {hidden_size} ({in_features}): "
                "pick the Gemma that belongs to this checkpoint"
            )

        def states_model(**_: Any) -> HiddenStates:
            return HiddenStates(
                hidden_size=hidden_size,
                num_hidden_layers=num_hidden_states - 1,
                operations=comfy.ops.manual_cast,
            )

        model = lt.LTXAVTEModel(
            dtype_llama=dtype, device=device, dtype=dtype, text_encoder_model=states_model, **detected
        )
        missing, unexpected = model.load_sd({k: v.to(device) for k, v in weights.items()})
        if missing or unexpected:  # ComfyUI would only log these; a half-loaded projection is garbage
            raise ValueError(
                f"the checkpoint {checkpoint.name}'s text projection does not load into ComfyUI's "
                f"{detected['text_projection_type']} projection: missing {missing}, unexpected {unexpected}"
            )
        model.set_clip_options({"execution_device": device})
        out_features = sum(
            m.out_features
            for m in model.text_embedding_projection.modules()
            if isinstance(m, torch.nn.Linear)
        )
        return ComfyTextHead(model, detected["text_projection_type"], in_features, out_features)

    def __call__(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """states: num_hidden_states tensors [1, n, hidden] (embeddings first, final-normed last), the
        prompt's tokens only. Returns [1, n, C] float32, as CLIPTextEncode's cond tensor."""
        batch = torch.stack(list(states), dim=1).float()
        with torch.inference_mode():
            out, _, _extra = self.model.encode_token_weights({TEXT_ENCODER_KEY: batch})
        return out


def read_projection(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's `text_embedding_projection.*` tensors (nothing else is read)."""
    with safe_open(str(checkpoint), framework="pt", device="cpu") as f:
        return {k: f.get_tensor(k) for k in f.keys() if k.startswith(PROJECTION_PREFIX)}
