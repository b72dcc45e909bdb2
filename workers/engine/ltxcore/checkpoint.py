"""Load LTX-2 components from one checkpoint file (the released 19B files or our tiny model).

Every loader goes through ltx-core's own `SingleGPUModelBuilder` with the configurator and state-dict
ops that Lightricks' ltx-pipelines `ModelLedger` uses for that component, so a checkpoint that works
here works there. Around it we add what the builder leaves out:

- the file is proven to be safetensors from its header before anything reads it (never pickle);
- the metadata "config" must be present (ltx-core silently falls back to the 19B defaults);
- the file's keys, after the component's SDOps, must match the model's state dict exactly, with the
  shapes; the builder itself loads with strict=False and only logs a warning when a weight is missing;
- the result is in eval mode and holds no meta tensors.

Key layout of a full checkpoint (released files and `workers.tiny_model` alike):
`model.diffusion_model.*` transformer plus its `video_/audio_embeddings_connector.*`, `vae.encoder.*`,
`vae.decoder.*`, `vae.per_channel_statistics.*`, `audio_vae.decoder.*` (and `.encoder.*`),
`audio_vae.per_channel_statistics.*`, `vocoder.*`, `text_embedding_projection.*`. The spatial
upsampler is a file of its own with its config flat in the metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from ltx_core.loader import ModuleOps, SDOps, SingleGPUModelBuilder
from ltx_core.model.audio_vae import (
    AUDIO_VAE_DECODER_COMFY_KEYS_FILTER,
    AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER,
    VOCODER_COMFY_KEYS_FILTER,
    AudioDecoder,
    AudioDecoderConfigurator,
    AudioEncoder,
    AudioEncoderConfigurator,
    Vocoder,
    VocoderConfigurator,
    VocoderWithBWE,
)
from ltx_core.model.transformer import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModel, LTXModelConfigurator
from ltx_core.model.upsampler import LatentUpsampler, LatentUpsamplerConfigurator
from ltx_core.model.video_vae import (
    VAE_DECODER_COMFY_KEYS_FILTER,
    VAE_ENCODER_COMFY_KEYS_FILTER,
    VideoDecoder,
    VideoDecoderConfigurator,
    VideoEncoder,
    VideoEncoderConfigurator,
)

from ...wire.model_files import SafetensorsHeader, config_from_header, read_safetensors_header
from .fp8 import folding_sd_ops, scaled_fp8_layout

if TYPE_CHECKING:
    from ltx_core.text_encoders.gemma import EmbeddingsProcessor

PathLike = str | Path
DeviceLike = torch.device | str

# How many offending keys an error message lists before it says "and N more".
MAX_KEYS_IN_MESSAGE = 8
# Per-channel statistics that LTX VAE files may carry beside mean-of-means / std-of-means
# (LTX-Video's layout; diffusers' convert_ltx2_to_diffusers.py drops them). ltx-core and
# ComfyUI 0.33 read only those two, so the others are ignored rather than rejected.
_STATISTICS_EXTRAS = ("channel", "mean-of-stds", "mean-of-stds_over_std-of-means")
_VAE_IGNORED_KEYS = tuple(f"per_channel_statistics.{name}" for name in _STATISTICS_EXTRAS)
# The transformer prefix also holds the text connectors, which ltx-core builds on the text side
# (EmbeddingsProcessor); the transformer loader sees them and ignores them.
_TRANSFORMER_IGNORED_PREFIXES = (
    "video_embeddings_connector.",
    "audio_embeddings_connector.",
    "embeddings_connector.",
)
# Where each component's weights live in a full checkpoint.
TEXT_PROJECTION_PREFIX = "text_embedding_projection."


@dataclass(frozen=True)
class ComponentSpec:
    """How one component is cut out of a checkpoint: ltx-core's configurator and SDOps for it.

    config_section: the metadata section the configurator reads (None: the whole config is the
    component's, as in upsampler files). file_prefix: where its tensors sit, for messages.
    ignored_keys / ignored_prefixes: keys (named as after the SDOps) that files carry by design and
    the ltx-core module has no slot for.
    """

    name: str
    configurator: type
    sd_ops: SDOps | None
    config_section: str | None
    file_prefix: str
    ignored_keys: tuple[str, ...] = ()
    ignored_prefixes: tuple[str, ...] = ()


def _vae_part(name: str, configurator: type, sd_ops: SDOps, file_prefix: str) -> ComponentSpec:
    section = file_prefix.split(".")[0]
    return ComponentSpec(name, configurator, sd_ops, section, file_prefix, ignored_keys=_VAE_IGNORED_KEYS)


# The configurator + SDOps pairs of ltx-pipelines 1.0.0 (utils/model_ledger.py), one per component.
TRANSFORMER = ComponentSpec(
    "transformer", LTXModelConfigurator, LTXV_MODEL_COMFY_RENAMING_MAP, "transformer", "model.diffusion_model.",
    ignored_prefixes=_TRANSFORMER_IGNORED_PREFIXES,
)  # fmt: skip
VIDEO_ENCODER = _vae_part(
    "video encoder", VideoEncoderConfigurator, VAE_ENCODER_COMFY_KEYS_FILTER, "vae.encoder."
)
VIDEO_DECODER = _vae_part(
    "video decoder", VideoDecoderConfigurator, VAE_DECODER_COMFY_KEYS_FILTER, "vae.decoder."
)
AUDIO_ENCODER = _vae_part(
    "audio encoder", AudioEncoderConfigurator, AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER, "audio_vae.encoder."
)
AUDIO_DECODER = _vae_part(
    "audio decoder", AudioDecoderConfigurator, AUDIO_VAE_DECODER_COMFY_KEYS_FILTER, "audio_vae.decoder."
)
VOCODER = ComponentSpec("vocoder", VocoderConfigurator, VOCODER_COMFY_KEYS_FILTER, "vocoder", "vocoder.")
UPSAMPLER = ComponentSpec("spatial upsampler", LatentUpsamplerConfigurator, None, None, "")


def embeddings_processor_spec() -> ComponentSpec:
    """The text connectors + projection, as the ledger builds them. Imported on demand:
    ltx_core.text_encoders.gemma pulls in transformers (3-5 s), which only the text path needs."""
    from ltx_core.text_encoders.gemma import EMBEDDINGS_PROCESSOR_KEY_OPS, EmbeddingsProcessorConfigurator

    return ComponentSpec(
        "embeddings processor", EmbeddingsProcessorConfigurator, EMBEDDINGS_PROCESSOR_KEY_OPS, "transformer",
        "model.diffusion_model.*_embeddings_connector. and text_embedding_projection.",
    )  # fmt: skip


def with_scaled_fp8(
    spec: ComponentSpec, header: SafetensorsHeader, dtype: torch.dtype | None
) -> ComponentSpec:
    """`spec` as it must load this file: unchanged unless the file holds scaled fp8 weights."""
    layout = scaled_fp8_layout(header)
    if layout is None or spec.sd_ops is None:
        return spec
    return replace(spec, sd_ops=folding_sd_ops(spec.sd_ops, header, layout, dtype))


def feature_extractor_resize_op(shapes: Mapping[str, tuple[int, ...]]) -> ModuleOps:
    """A builder module op that sizes the text projection's Linear layers from checkpoint shapes.

    ltx-core 1.0.0 builds `feature_extractor` for Gemma 3 12B whatever the config says (49 hidden
    states x 3840 -> 3840, from GEMMA3_CONFIG_FOR_LTX). Before weights load, this replaces each
    `feature_extractor.<name>` Linear whose `text_embedding_projection.<name>.weight` in `shapes`
    (file key -> shape) has another shape. On the released files it changes nothing.
    """

    def resize(module: torch.nn.Module) -> torch.nn.Module:
        extractor = module.feature_extractor
        for name, child in list(extractor.named_children()):
            shape = shapes.get(f"{TEXT_PROJECTION_PREFIX}{name}.weight")
            if isinstance(child, torch.nn.Linear) and shape is not None and len(shape) == 2:
                if tuple(child.weight.shape) != shape:
                    bias = f"{TEXT_PROJECTION_PREFIX}{name}.bias" in shapes
                    setattr(extractor, name, torch.nn.Linear(shape[1], shape[0], bias=bias, device="meta"))
        return module

    return ModuleOps(
        name="size_text_projection_from_checkpoint",
        matcher=lambda module: isinstance(getattr(module, "feature_extractor", None), torch.nn.Module),
        mutator=resize,
    )


def _mapped_shapes(header: SafetensorsHeader, spec: ComponentSpec) -> dict[str, tuple[tuple[int, ...], str]]:
    """Module key -> (shape, file key) for the file's tensors that the component's SDOps select."""
    if spec.sd_ops is None:
        return {key: (shape, key) for key, shape in header.shapes.items()}
    mapped: dict[str, tuple[tuple[int, ...], str]] = {}
    for file_key, shape in header.shapes.items():
        renamed = spec.sd_ops.apply_to_key(file_key)
        if renamed is None:
            continue
        # Key-value ops (the vocoder's prefix strip) take a tensor; a meta one costs nothing.
        for result in spec.sd_ops.apply_to_key_value(renamed, torch.empty(shape, device="meta")):
            mapped[result.new_key] = (tuple(result.new_value.shape), file_key)
    return mapped


def _listing(items: list[str]) -> str:
    more = len(items) - MAX_KEYS_IN_MESSAGE
    return ", ".join(items[:MAX_KEYS_IN_MESSAGE]) + (f" and {more} more" if more > 0 else "")


def check_component_keys(header: SafetensorsHeader, spec: ComponentSpec, model: torch.nn.Module) -> None:
    """Raise ValueError unless the file holds exactly `model`'s state dict, names and shapes.

    `model` may be on the meta device. Names are compared as the module sees them (after SDOps).
    """
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    present = _mapped_shapes(header, spec)
    missing = sorted(expected.keys() - present.keys())
    misshaped = [
        f"{present[key][1]} {list(present[key][0])} (model expects {list(expected[key])})"
        for key in sorted(expected.keys() & present.keys())
        if present[key][0] != expected[key]
    ]
    unexpected = sorted(
        present[key][1]
        for key in present.keys() - expected.keys()
        if key not in spec.ignored_keys and not key.startswith(spec.ignored_prefixes)
    )
    problems = []
    if missing:
        problems.append(
            f"{len(missing)} tensors missing (stored under {spec.file_prefix}): {_listing(missing)}"
        )
    if misshaped:
        problems.append(f"{len(misshaped)} tensors of the wrong shape: {_listing(misshaped)}")
    if unexpected:
        problems.append(f"{len(unexpected)} tensors the model has no slot for: {_listing(unexpected)}")
    if problems:
        raise ValueError(
            f"{header.path} does not match the LTX-2 {spec.name} its config describes: " + "; ".join(problems)
        )


def _build(
    path: PathLike,
    spec: ComponentSpec,
    device: DeviceLike,
    dtype: torch.dtype | None,
    module_ops: Callable[[SafetensorsHeader], tuple[ModuleOps, ...]] | None = None,
) -> torch.nn.Module:
    header = read_safetensors_header(path)
    config = config_from_header(header)
    spec = with_scaled_fp8(spec, header, dtype)  # fp8 files (ltx-2-19b-dev-fp8): scales folded on load
    if spec.config_section is not None and not isinstance(config.get(spec.config_section), dict):
        raise ValueError(
            f"{header.path} holds no {spec.name}: its config has no '{spec.config_section}' section "
            f"(sections: {sorted(config)})"
        )
    if spec.config_section is None and "transformer" in config:
        raise ValueError(f"{header.path} is a full LTX-2 checkpoint, not a {spec.name} file")
    builder = SingleGPUModelBuilder(
        model_class_configurator=spec.configurator,
        model_path=str(header.path),
        model_sd_ops=spec.sd_ops,
        module_ops=module_ops(header) if module_ops is not None else (),
    )
    try:
        meta_model = builder.meta_model(config, builder.module_ops)
    except (ValueError, KeyError, TypeError) as exc:  # ltx-core's checks on the config
        raise ValueError(
            f"{header.path}: ltx-core cannot build the {spec.name} from its config: {exc!r}"
        ) from exc
    check_component_keys(header, spec, meta_model)
    model = builder.build(device=torch.device(device), dtype=dtype)
    # ltx-core only logs a warning and hands back a meta model when something stayed unloaded.
    on_meta = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if on_meta:
        raise ValueError(f"{header.path}: the {spec.name} was left without values for {_listing(on_meta)}")
    return model.eval()


# Loaders. Each: `path` a full checkpoint (the upsampler: its own file); `dtype` None keeps the
# stored dtype; returns the module in eval mode on `device`; raises ValueError when the file is not
# safetensors or does not match the component its config describes.


def load_transformer(path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None) -> LTXModel:
    """The audio+video velocity model (not wrapped in X0Model)."""
    return _build(path, TRANSFORMER, device, dtype)


def load_video_encoder(path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None) -> VideoEncoder:
    """Video [B, 3, 8k+1, 32h, 32w] in [-1, 1] -> normalised latent [B, 128, k+1, h, w]."""
    return _build(path, VIDEO_ENCODER, device, dtype)


def load_video_decoder(path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None) -> VideoDecoder:
    """Normalised latent [B, 128, F', H', W'] -> video [B, 3, 8(F'-1)+1, 32H', 32W'], about [-1, 1]."""
    return _build(path, VIDEO_DECODER, device, dtype)


def load_audio_encoder(path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None) -> AudioEncoder:
    """Log-mel [B, 2, 4T-3, 64] (ltx-core's AudioProcessor) -> normalised latent [B, 8, T, 16]."""
    return _build(path, AUDIO_ENCODER, device, dtype)


def load_audio_decoder(path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None) -> AudioDecoder:
    """Normalised latent [B, 8, T, 16] -> log-mel [B, 2, 4T-3, 64]."""
    return _build(path, AUDIO_DECODER, device, dtype)


def load_vocoder(
    path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None
) -> Vocoder | VocoderWithBWE:
    """Log-mel [B, 2, T, 64] -> stereo waveform [B, 2, samples] at `.output_sampling_rate` Hz."""
    return _build(path, VOCODER, device, dtype)


def load_upsampler(path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None) -> LatentUpsampler:
    """Un-normalised latent [B, 128, F, H, W] -> [B, 128, F, 2H, 2W]; ltx_core.model.upsampler.upsample_video
    wraps it in the video encoder's statistics."""
    return _build(path, UPSAMPLER, device, dtype)


def load_embeddings_processor(
    path: PathLike, device: DeviceLike, dtype: torch.dtype | None = None
) -> EmbeddingsProcessor:
    """Gemma hidden states -> text projection -> video/audio connectors -> transformer context
    [B, T, caption_channels] each. The projection is sized from the file (`feature_extractor_resize_op`)."""
    resize = lambda header: (feature_extractor_resize_op(header.shapes),)  # noqa: E731
    return _build(path, embeddings_processor_spec(), device, dtype, module_ops=resize)
