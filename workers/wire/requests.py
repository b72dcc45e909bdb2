"""One typed request per worker command: built and checked by the nodes, read by every rank.

A request is a frozen dataclass. Building one runs its checks (`check`), so a user's mistake raises
ValueError / TypeError, saying what to change, in the node before any worker runs; every rank builds
the same request again from the wire (`from_wire`) and so runs the same checks before its first
collective (the runtime turns their errors into InputRejected, alike on every rank). Only checks
that need no model live here; what depends on the loaded checkpoint stays in the command handler.

On the wire a request is the plain dict `to_wire()` makes (field name -> value; nested settings as
dicts): tensors stay tensors and travel through shared memory (protocol.share_tensors), output
slots (protocol.OutputSlot on the node side) arrive on the rank as the mapped tensor. Nothing here
is unpickled as an object (protocol.py's rule).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch

from . import checks
from .backend import BACKEND_COMFY, BACKEND_LTXCORE, BACKENDS
from .constants import (
    DEFAULT_FRAME_RATE,
    DEFAULT_MAX_VIDEO_TOKENS,
    VIDEO_FRAMES_PER_CELL,
    VIDEO_PIXELS_PER_CELL,
)
from .protocol import OutputSlot
from .weight_placement import AUTO_RESIDENT, WEIGHTS_REPLICATED, check_weights

R = TypeVar("R", bound="Request")
# An output tensor: a protocol.OutputSlot where the node builds the request, the mapped tensor on a rank.
# Output fields' names start with OUTPUT_PREFIX: what the ranks of other machines wrote there is sent
# back to the UI machine (NOTE [machines] in machines.py); every other tensor goes to them as an input.
Output = Any
OUTPUT_PREFIX = "out"
_SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


@dataclass(frozen=True)
class Request:
    """Base of every request. OP: the command's name; USES_LORAS: whether the group manager must fuse
    the model's LoRA set before it (a switch costs seconds on the 19B; commands that never run the
    transformer or its text connectors skip it). NESTED: fields that are settings dataclasses."""

    OP: ClassVar[str] = ""
    USES_LORAS: ClassVar[bool] = False
    NESTED: ClassVar[Mapping[str, type]] = {}
    # False for commands ComfyUI's sampler sends back to back (one per model call): the rank keeps its
    # CUDA allocator's cache after them instead of emptying it, so the next call allocates nothing new.
    FREES_GPU_CACHE: ClassVar[bool] = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            kind = _SCALARS.get(str(f.type))
            if kind is not None:
                value = getattr(self, f.name)
                object.__setattr__(self, f.name, _coerce(kind, value, f"{self.OP}.{f.name}"))
        self.check()

    def check(self) -> None:
        """Raise ValueError saying what to change (no model needed). Runs on every construction."""

    def to_wire(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = _fields(value) if f.name in self.NESTED and value is not None else value
        return out

    @classmethod
    def from_wire(cls: type[R], args: Mapping[str, Any]) -> R:
        """The request a node sent (tensors already mapped). TypeError for unknown or missing fields."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(args) - names)
        if unknown:
            raise TypeError(f"command {cls.OP!r} has no field(s) {unknown}; it takes {sorted(names)}")
        values = dict(args)
        for name, kind in cls.NESTED.items():
            if isinstance(values.get(name), Mapping):
                values[name] = kind(**values[name])
        try:
            return cls(**values)
        except TypeError as exc:
            if "required" in str(exc) or "missing" in str(exc):
                raise TypeError(f"command {cls.OP!r}: {exc}") from None
            raise


def _fields(settings: Any) -> dict[str, Any]:
    # Not dataclasses.asdict: it deep-copies every value, tensors included.
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}


def _coerce(kind: type, value: Any, what: str) -> Any:
    """Scalars as the field's type: a node may pass an int for a float, a rank gets what pickle kept."""
    if kind is str:
        return str(value)
    if kind is bool and isinstance(value, bool | int):
        return bool(value)
    if kind is not bool and isinstance(value, int | float | str) and not isinstance(value, bool):
        try:
            return kind(value)
        except ValueError:
            pass
    raise TypeError(f"{what} must be {kind.__name__}, got {value!r}")


def _shape(x: torch.Tensor | OutputSlot) -> tuple[int, ...]:
    return tuple((x.tensor if isinstance(x, OutputSlot) else x).shape)


def _check_output(slot: Output, shape: tuple[int, ...], what: str) -> None:
    # The node allocates every slot from the same numbers; a mismatch is a bug, not a user's mistake.
    if slot is not None and _shape(slot) != tuple(shape):
        raise ValueError(f"{what} output slot is {list(_shape(slot))}, the result is {list(shape)}")


def _check_streams(video: torch.Tensor, audio: torch.Tensor | None, what: str = "") -> None:
    """The latents of a sampling job: LTX-2 shapes, one batch, finite values."""
    checks.check_video_latent(video, f"{what}video latent")
    if audio is not None:
        checks.check_audio_latent(audio, f"{what}audio latent")
        if audio.shape[0] != video.shape[0]:
            raise ValueError(
                f"the audio latent has batch {audio.shape[0]} but the video latent {video.shape[0]}; "
                "use latents that were made together (LTXVConcatAVLatent)"
            )
    for name, tensor in (("video", video), ("audio", audio)):
        if tensor is not None and not torch.isfinite(tensor).all():
            raise ValueError(f"the {what}{name} latent holds NaN or infinite values; re-create it upstream")


def _check_tokens(video: torch.Tensor, max_video_tokens: int) -> None:
    _, _, f, h, w = video.shape
    tokens = f * h * w
    if tokens > max_video_tokens:
        raise ValueError(
            f"the video latent has {tokens:,} tokens ({f} x {h} x {w} latent cells), over the limit of "
            f"{max_video_tokens:,}. Lower the resolution or the frame count (or raise max tokens if memory allows)."
        )


# Conditioning dict entries besides the flag and frame rate that LTX-2's model reads (ComfyUI 0.33
# comfy/model_base.py LTXAV.extra_conds) and that travel as tensors: the text attention mask and
# the guide frames' latent indices (LTXVAddGuide).
MODEL_CONDITIONING_KEYS = ("attention_mask", "keyframe_idxs")


@dataclass(frozen=True)
class TextConditioning:
    """One prompt's encoding. tensor: [B, T, W] float32. unprocessed: True for ComfyUI's LTX-2 encoder
    output (Gemma features before the connectors, [B, T, C]); False for the compat form [B, L, 2C].
    extras: the CONDITIONING entries LTX-2's model reads besides those two (MODEL_CONDITIONING_KEYS);
    the comfy backend hands them to ComfyUI."""

    tensor: torch.Tensor
    unprocessed: bool
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tensor, torch.Tensor) or self.tensor.dim() != 3:
            raise ValueError(
                "a conditioning tensor must be [batch, tokens, width]; connect an LTX-2 text encoding"
            )
        object.__setattr__(self, "unprocessed", bool(self.unprocessed))
        unknown = sorted(set(self.extras or {}) - set(MODEL_CONDITIONING_KEYS))
        if unknown:
            raise ValueError(
                f"conditioning entries {unknown} are not read by the model; it reads {MODEL_CONDITIONING_KEYS}"
            )
        object.__setattr__(self, "extras", dict(self.extras or {}))


# ----- model ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadModel(Request):
    """Load `checkpoint` in every rank (skipped when the same file, dtype, mode and fp8 are loaded).
    backend: the group's engine (NOTE [engine seam] in workers/engine/protocol.py), wire/backend.py's
    BACKEND_COMFY (ComfyUI's loaders, from the ComfyUI at `comfyui_root`) or BACKEND_LTXCORE."""

    OP: ClassVar[str] = "load_model"
    checkpoint: str
    dtype: str = "bfloat16"
    mode: str = checks.ForwardMode.COMFYUI.value
    compile: bool = False
    fp8_matmul: bool = False
    backend: str = BACKEND_LTXCORE
    comfyui_root: str = ""
    comfyui_version: str = ""
    # Separate VAE files (LTX-2.5 ships them apart from its diffusion model); "" = the checkpoint's own.
    video_vae: str = ""
    audio_vae: str = ""
    # Where the transformer's weights live (wire/weight_placement.py); resident_bytes caps what an
    # offloaded rank keeps on its device (AUTO_RESIDENT: what the device may hold less reserve_bytes).
    weights: str = WEIGHTS_REPLICATED
    resident_bytes: int = AUTO_RESIDENT
    reserve_bytes: int = 0

    def check(self) -> None:
        dtype, mode = checks.parse_dtype(self.dtype), checks.parse_mode(self.mode)
        check_weights(self.weights, backend_is_comfy=self.backend == BACKEND_COMFY)
        if self.resident_bytes < AUTO_RESIDENT or self.reserve_bytes < 0:
            raise ValueError(
                f"resident_bytes {self.resident_bytes} / reserve_bytes {self.reserve_bytes}: give sizes >= 0 "
                f"(resident_bytes {AUTO_RESIDENT}: the rank decides)"
            )
        if self.compile:
            checks.check_compilable(mode)
        if self.fp8_matmul:
            checks.check_fp8_dtype(dtype)
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.backend == BACKEND_COMFY and not self.comfyui_root:
            raise ValueError("backend comfy needs the ComfyUI root the ranks import; set COMFYUI_PATH")


@dataclass(frozen=True)
class UnloadModel(Request):
    OP: ClassVar[str] = "unload_model"


@dataclass(frozen=True)
class SetCompiled(Request):
    """Switch torch.compile of the loaded transformer's blocks (benchmarks)."""

    OP: ClassVar[str] = "set_compiled"
    USES_LORAS: ClassVar[bool] = True
    compile: bool


def _lora_pairs(value: Any, refusal: str) -> tuple[tuple[str, float], ...]:
    """A LoRA list from the wire (lists of [path, strength]) as the request's tuple of pairs."""
    try:
        return tuple((str(path), float(strength)) for path, strength in value)
    except (TypeError, ValueError):
        raise TypeError(f"{refusal}, got {value!r}") from None


@dataclass(frozen=True)
class SetLoras(Request):
    """Make the fused LoRA set `loras` ((path, strength), ... in order); () restores the base."""

    OP: ClassVar[str] = "set_loras"
    loras: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        loras = _lora_pairs(self.loras, "loras must be a list of (path, strength) pairs")
        object.__setattr__(self, "loras", loras)

    def to_wire(self) -> dict[str, Any]:
        return {"loras": [list(x) for x in self.loras]}


@dataclass(frozen=True)
class LoraState(Request):
    """Diagnostics: the fused set and a fingerprint of every transformer weight."""

    OP: ClassVar[str] = "lora_state"


# ----- sampling ---------------------------------------------------------------------------------
# The guiders the ranks rebuild (NOTE [guider in the workers] in nodes/guider_spec.py): ComfyUI's
# CFGGuider, LTXVDualCFGGuider's guider, BasicGuider's.
GUIDER_KINDS = ("cfg", "dual", "basic")
# Post-CFG guidance terms that run one more model call per step (LTXVSpatioTemporalGuidance,
# LTXVModalityGuidance, LTXVReferenceAudio's identity guidance).
EXTRA_PASS_KINDS = ("stg", "modality", "identity")
# guidance_groups: 0 = the plan's choice (workers/strategies/guidance_plan.py); n = n groups.
GUIDANCE_AUTO = 0


@dataclass(frozen=True)
class GuiderSpec:
    """A native GUIDER as the ranks rebuild it with ComfyUI's own classes. positive / negative: its
    CONDITIONING in model_call's wire form (negative None for BasicGuider); options: the model_options
    entries that travel (transformer_options, disable_cfg1_optimization), wire form; extra_passes:
    {"kind": EXTRA_PASS_KINDS, "scale", "sigma_start", "sigma_end", "blocks" (stg)}; patch_token /
    patches: the MODEL's weight patches as in ComfyModelCall."""

    kind: str
    positive: Any
    negative: Any = None
    cfg: float = 1.0
    cfg_audio: float = 1.0
    options: Any = None
    extra_passes: tuple = ()
    patch_token: str = ""
    patches: list[Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in GUIDER_KINDS:
            raise ValueError(f"guider kind {self.kind!r} is not one of {GUIDER_KINDS}")
        for extra in self.extra_passes:
            if extra.get("kind") not in EXTRA_PASS_KINDS:
                raise ValueError(f"guidance pass {extra.get('kind')!r} is not one of {EXTRA_PASS_KINDS}")
        if (self.negative is None) != (self.kind == "basic"):
            raise ValueError("a basic guider has no negative conditioning; every other guider has one")


@dataclass(frozen=True)
class Sample(Request):
    """SP Sampler: denoise video [B,128,F,H,W] (+ audio [B,8,T,16]) over `sigmas`; rank 0 writes the
    result into out_video / out_audio (float32, the latents' shapes). The guidance is either
    positive / negative with cfg_video / cfg_audio, or a native `guider` (ComfyUI's engine only);
    guidance_groups spreads a step's guidance passes over groups of ranks (GUIDANCE_AUTO: planned)."""

    OP: ClassVar[str] = "sample"
    USES_LORAS: ClassVar[bool] = True
    NESTED: ClassVar[Mapping[str, type]] = {
        "positive": TextConditioning,
        "negative": TextConditioning,
        "guider": GuiderSpec,
    }
    video: torch.Tensor
    sigmas: torch.Tensor
    positive: TextConditioning | None = None
    negative: TextConditioning | None = None
    audio: torch.Tensor | None = None
    video_mask: torch.Tensor | None = None
    audio_mask: torch.Tensor | None = None
    frame_rate: float = DEFAULT_FRAME_RATE
    sampler: str = "euler"
    cfg_video: float = 1.0
    cfg_audio: float = 1.0
    seed: int = 0
    add_noise: bool = True
    eta: float = 1.0
    s_noise: float = 1.0
    max_video_tokens: int = DEFAULT_MAX_VIDEO_TOKENS
    preview: bool = False
    guider: GuiderSpec | None = None
    guidance_groups: int = GUIDANCE_AUTO
    out_video: Output = None
    out_audio: Output = None

    def check(self) -> None:
        if (self.positive is None) == (self.guider is None):
            raise ValueError(
                "the SP Sampler takes either a GUIDER or positive and negative conditioning: connect one of them"
            )
        if self.guidance_groups < 0:
            raise ValueError(f"guidance groups must be 0 (auto) or a group count, got {self.guidance_groups}")
        _check_streams(self.video, self.audio)
        checks.validate_sigmas(self.sigmas)
        checks.check_sampler(self.sampler)
        _check_tokens(self.video, self.max_video_tokens)
        _check_output(self.out_video, _shape(self.video), "the video")
        if self.audio is not None:
            _check_output(self.out_audio, _shape(self.audio), "the audio")


@dataclass(frozen=True)
class Forward(Request):
    """One transformer forward (no CFG) at `sigma`: velocities as tokens [B, T, C] into out_video /
    out_audio. For parity tests and benchmarks."""

    OP: ClassVar[str] = "forward"
    USES_LORAS: ClassVar[bool] = True
    NESTED: ClassVar[Mapping[str, type]] = {"positive": TextConditioning, "negative": TextConditioning}
    video: torch.Tensor
    sigma: float
    positive: TextConditioning
    negative: TextConditioning | None = None
    audio: torch.Tensor | None = None
    video_mask: torch.Tensor | None = None
    audio_mask: torch.Tensor | None = None
    frame_rate: float = DEFAULT_FRAME_RATE
    max_video_tokens: int = DEFAULT_MAX_VIDEO_TOKENS
    out_video: Output = None
    out_audio: Output = None

    def check(self) -> None:
        _check_streams(self.video, self.audio)
        checks.validate_sigmas(torch.tensor([self.sigma, 0.0]))
        _check_tokens(self.video, self.max_video_tokens)


# TDP Upscaler previews (strategies/tdp_preview.py computes their regions).
PREVIEW_OFF = "off"
PREVIEW_CENTRE_TILE = "centre tile"
PREVIEW_FIRST_FRAMES = "first frames"
PREVIEW_BOTH = "centre tile, first frames"
PREVIEW_MODES = (PREVIEW_OFF, PREVIEW_CENTRE_TILE, PREVIEW_FIRST_FRAMES, PREVIEW_BOTH)
# Pixel frames of a "first frames" preview: one second at 24 fps (4 latent frames), enough to judge
# motion; 8k + 1 as LTX-2 counts frames (EmptyLTXVLatentVideo's length).
DEFAULT_PREVIEW_FRAMES = 25
# From this first sigma on, every TDP tile starts from pure noise and invents its own content.
PURE_NOISE_SIGMA = 1.0
# tiles_h = tiles_w = TILES_AUTO: a grid from the latent alone, never the group size (tiled.auto_counts).
TILES_AUTO = 0


def check_preview_mode(mode: str) -> None:
    if mode not in PREVIEW_MODES:
        raise ValueError(
            f"preview {mode!r} is not one of {', '.join(repr(m) for m in PREVIEW_MODES)}; pick one of them"
        )


@dataclass(frozen=True)
class TdpUpscale(Request):
    """TDP Upscaler: upsample the stage-1 video 2x with `upscaler` (a file path) and denoise it in
    tiles_h x tiles_w tiles (TILES_AUTO: from the latent), for a long clip also tiles_t spans of frames
    (TILES_AUTO: one unless the clip is longer than the model generates), overlapping by `overlap`
    cells (frames along time); the stage-1 audio rides along unchanged. out_video: [B,128,F,2H,2W] float32, or the preview region's shape."""

    OP: ClassVar[str] = "tdp_upscale"
    USES_LORAS: ClassVar[bool] = True
    NESTED: ClassVar[Mapping[str, type]] = {"positive": TextConditioning, "negative": TextConditioning}
    video: torch.Tensor
    sigmas: torch.Tensor
    positive: TextConditioning
    upscaler: str
    negative: TextConditioning | None = None
    audio: torch.Tensor | None = None
    frame_rate: float = DEFAULT_FRAME_RATE
    sampler: str = "euler"
    cfg: float = 1.0
    seed: int = 0
    tiles_h: int = TILES_AUTO
    tiles_w: int = TILES_AUTO
    overlap: int = 0
    max_video_tokens: int = DEFAULT_MAX_VIDEO_TOKENS
    tiles_t: int = TILES_AUTO
    preview: str = PREVIEW_OFF
    preview_frames: int = DEFAULT_PREVIEW_FRAMES
    live_preview: bool = False
    out_video: Output = None

    def check(self) -> None:
        _check_streams(self.video, self.audio, "stage-1 ")
        checks.validate_sigmas(self.sigmas)
        if float(self.sigmas[0]) >= PURE_NOISE_SIGMA:
            raise ValueError(
                f"the first sigma is {float(self.sigmas[0]):g}: TDP denoises each tile on its own, and from pure "
                "noise (sigma 1.0) the tiles invent unrelated content that never joins into one video. TDP is an "
                "upscaler: start it from the partly re-noised stage-1 result (default sigmas 0.625, 0.4, 0.0) and "
                "generate stage 1 with the SP Sampler."
            )
        checks.check_sampler(self.sampler)
        check_preview_mode(self.preview)
        if self.cfg != 1.0 and self.negative is None:
            raise ValueError("cfg is not 1 but no negative conditioning was given; connect a negative prompt")
        if self.overlap < 0:
            raise ValueError(f"overlap {self.overlap} must be 0 or more latent cells")
        if self.tiles_t < 0:
            raise ValueError(f"time_tiles {self.tiles_t} must be 0 (auto) or more")


# ----- VAE --------------------------------------------------------------------------------------
# Tile sizes of the Distributed VAE Decode: AUTO (0) chooses from the latent and the group size.
AUTO = 0
# Defaults of the node: 64 px spatial overlap (the template's VAEDecodeTiled and ltx-core's default),
# 24-frame temporal overlap (ltx-core's TemporalTilingConfig default).
DEFAULT_OVERLAP_PX = 64
DEFAULT_TEMPORAL_OVERLAP_FRAMES = 24
# The tile inputs' ranges: ComfyUI's VAEDecodeTiled (nodes.py, 0.33) as (min, max, step), so that every
# value its templates use is accepted; 0 (AUTO) is ours on top, for the sizes and the overlaps.
TILE_PX_RANGE = (64, 4096, 32)
OVERLAP_PX_RANGE = (0, 4096, 32)
TEMPORAL_FRAMES_RANGE = (8, 4096, 4)
TEMPORAL_OVERLAP_FRAMES_RANGE = (4, 4096, 4)


def _check_tile_input(name: str, value: int, allowed: tuple[int, int, int], unit: str) -> None:
    """VAEDecodeTiled's range for one input, plus 0 (auto, or no overlap)."""
    low, high, step = allowed
    if value != AUTO and (value < low or value > high or value % step):
        raise ValueError(
            f"{name} {value} is not allowed: use 0 or a multiple of {step} {unit} from {low} to {high} "
            "(VAEDecodeTiled's range)"
        )


@dataclass(frozen=True)
class TileSettings:
    """Tiling as the user sets it, in pixels and frames, within VAEDecodeTiled's ranges.

    tile_px: the long side of a spatial tile; AUTO (0): chosen from the latent and the group size
    (tiled mode on the comfy backend: VAEDecodeTiled's default). temporal_frames: frames per temporal
    chunk; AUTO (0): the whole clip in one chunk (comfy backend: VAEDecodeTiled's default). Overlaps
    are between neighbouring tiles / chunks. The comfy backend's tiled mode applies VAEDecodeTiled's
    own arithmetic to any of these; ltx-core's tiles take a subset (vae_tiles.check_ltxcore_tiles).
    """

    tile_px: int = AUTO
    overlap_px: int = DEFAULT_OVERLAP_PX
    temporal_frames: int = AUTO
    temporal_overlap_frames: int = DEFAULT_TEMPORAL_OVERLAP_FRAMES

    def __post_init__(self) -> None:
        _check_tile_input("tile_size", self.tile_px, TILE_PX_RANGE, "pixels")
        _check_tile_input("overlap", self.overlap_px, OVERLAP_PX_RANGE, "pixels")
        _check_tile_input("temporal_size", self.temporal_frames, TEMPORAL_FRAMES_RANGE, "frames")
        _check_tile_input(
            "temporal_overlap", self.temporal_overlap_frames, TEMPORAL_OVERLAP_FRAMES_RANGE, "frames"
        )


# "exact": VAEDecode's frames (the frame split in slabs, edge rows swapped between GPUs); "tiled":
# VAEDecodeTiled's frames for the four tile settings (engine/comfy/vae_job.py; ltx-core decodes tiles either way).
VAE_DECODE_MODES = ("exact", "tiled")


@dataclass(frozen=True)
class VaeDecode(Request):
    """Distributed VAE Decode: video [B,128,F,h,w] in tiles over the ranks into out_image (IMAGE
    [B*frames, H, W, 3] float32, vae_outputs.image_shape); audio [B,8,T,16] or None, decoded by the
    last rank into out_audio [B, channels, samples]. prefault: whether and how ranks pre-fault the
    IMAGE pages (a bool or a method name of strategies/shm_prefault.py; None: its default)."""

    OP: ClassVar[str] = "vae_decode"
    NESTED: ClassVar[Mapping[str, type]] = {"tiles": TileSettings}
    video: torch.Tensor
    audio: torch.Tensor | None = None
    tiles: TileSettings = field(default_factory=TileSettings)
    prefault: str | bool | None = None
    mode: str = VAE_DECODE_MODES[0]
    # LTX-2.5's diffusion decoder in exact mode: the most bytes one neighbourhood attention call may
    # hold on a rank (strategies/na_bands.py); 0: a rank's whole band at once.
    na_chunk_bytes: int = 0
    out_image: Output = None
    out_audio: Output = None

    def check(self) -> None:
        _check_streams(self.video, self.audio)
        if self.mode not in VAE_DECODE_MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {', '.join(VAE_DECODE_MODES)}")
        if not isinstance(self.na_chunk_bytes, int) or self.na_chunk_bytes < 0:
            raise ValueError(
                f"na_chunk_bytes is {self.na_chunk_bytes!r}; use 0 (a rank's whole band at once) or a byte "
                "count (Distributed VAE Decode's attention_chunk_mb, in MiB)"
            )


@dataclass(frozen=True)
class VaeEncode(Request):
    """Distributed VAE Encode: pixels [8k+1 frames, H, W, 3] (H, W multiples of 32, floats in 0..1)
    into out_latent [1, 128, k+1, H/32, W/32] float32; temporal_frames per chunk (AUTO: by memory)."""

    OP: ClassVar[str] = "vae_encode"
    USES_LORAS: ClassVar[bool] = True  # as before the requests were typed; it runs no transformer
    pixels: torch.Tensor
    temporal_frames: int = AUTO
    out_latent: Output = None

    def check(self) -> None:
        shape = tuple(self.pixels.shape)
        frames, height, width, channels = shape if len(shape) == 4 else (0, 0, 0, 0)
        if (
            channels != 3
            or (frames - 1) % VIDEO_FRAMES_PER_CELL
            or height % VIDEO_PIXELS_PER_CELL
            or width % VIDEO_PIXELS_PER_CELL
            or min(height, width) == 0
        ):
            raise ValueError(
                f"pixels of shape {shape}: the encode needs [8k + 1 frames, H, W, 3] with H and W "
                f"multiples of {VIDEO_PIXELS_PER_CELL}; connect the IMAGE to Distributed VAE Encode, which crops it "
                "as VAEEncode does"
            )
        if not self.pixels.is_floating_point():
            raise ValueError(f"pixels of dtype {self.pixels.dtype}: IMAGE values are floats in 0..1")


# ----- text -------------------------------------------------------------------------------------
TEXT_PLACEMENTS = ("auto", "layers", "replicas")


@dataclass(frozen=True)
class EncodeText(Request):
    """MGPU Text Encode: Gemma at `text_encoder` (a file or HF folder) over the ranks; prompts as token
    ids; outputs[p]: [1, len(prompts[p]), projection width] float32."""

    OP: ClassVar[str] = "encode_text"
    text_encoder: str
    prompts: list[list[int]]
    outputs: list[Output]
    placement: str = "auto"
    # LoRAs on the text encoder ((path, strength), ...), as LoraLoader's CLIP side (workers/text/gemma_lora.py).
    text_loras: tuple[tuple[str, float], ...] = ()
    # The file holding LTX's text projection ("": the loaded model's file), as LTXAVTextEncoderLoader's
    # ckpt_name: a GGUF or diffusion-model file has none of its own.
    projection: str = ""

    def check(self) -> None:
        loras = _lora_pairs(self.text_loras, "text_loras must be (path, strength) pairs")
        object.__setattr__(self, "text_loras", loras)
        if self.placement not in TEXT_PLACEMENTS:
            raise ValueError(f"placement {self.placement!r} is not one of {', '.join(TEXT_PLACEMENTS)}")
        if not self.prompts or len(self.prompts) != len(self.outputs):
            raise ValueError(
                f"{len(self.prompts)} prompts but {len(self.outputs)} output slots; pass one slot per prompt"
            )


@dataclass(frozen=True)
class EncodeGemma4(Request):
    """MGPU Text Encode on LTX-2.5's Gemma 4 file (comfy backend): ComfyUI's own encoder, whole on
    rank 0 or its layers spread over the group (`placement`, as EncodeText's; engine/comfy/gemma4_job.py).
    outputs[0]: [1, max_tokens, projection width] float32, of which rank 0 writes the first `tokens`
    rows (its reply says how many)."""

    OP: ClassVar[str] = "encode_gemma4"
    text_encoder: str
    text: str
    outputs: list[Output]
    placement: str = "auto"

    def check(self) -> None:
        if len(self.outputs) != 1:
            raise ValueError(f"encode_gemma4 takes one output slot, got {len(self.outputs)}")
        if self.placement not in TEXT_PLACEMENTS:
            raise ValueError(f"placement {self.placement!r} is not one of {', '.join(TEXT_PLACEMENTS)}")


# ----- benchmarks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadRandomModel(Request):
    """Replace the loaded model with random weights of `config` (None: the 19B shape); fp8_matmul:
    quantize the Linears the released fp8 files quantize."""

    OP: ClassVar[str] = "load_random_model"
    USES_LORAS: ClassVar[bool] = True
    dtype: str = "bfloat16"
    config: dict[str, Any] | None = None
    mode: str = checks.ForwardMode.COMFYUI.value
    seed: int = 0
    fp8_matmul: bool = False

    def check(self) -> None:
        checks.parse_dtype(self.dtype)
        checks.parse_mode(self.mode)


@dataclass(frozen=True)
class BenchForward(Request):
    """Time `repeats` model calls (cond+uncond batch) on a random video of `video_shape` (+ audio of
    `audio_frames` latent frames), after `warmup` calls; `profile`: a kernel-time breakdown (CUDA)."""

    OP: ClassVar[str] = "bench_forward"
    USES_LORAS: ClassVar[bool] = True
    video_shape: tuple[int, ...]
    audio_frames: int | None = None
    seed: int = 0
    compare_plain: bool = True
    warmup: int = 1
    repeats: int = 3
    profile: bool = False

    def check(self) -> None:
        if len(self.video_shape) != 5:
            raise ValueError(f"video_shape {self.video_shape} must be [B, 128, F, H, W]")


# The weight formats comfy_load_random_model builds (engine/comfy/random_model.WEIGHT_FORMATS, which the
# UI side does not import).
BENCH_WEIGHT_FORMATS = ("bf16", "fp8", "fp8_fast", "int8")


@dataclass(frozen=True)
class ComfyLoadRandomModel(Request):
    """Replace the loaded model by ComfyUI's LTXAVModel of `config` (None: the 19B shape) with random
    weights, ComfyUI imported from `comfyui_root` (bench/bench_comfy_step.py). `weights`: "bf16" (all in
    `dtype`), "fp8" (fp8 scaled), "fp8_fast" (a bf16 file with fp8_matmul) or "int8" (int8 convrot), held
    as ComfyUI holds a released file in that format (engine/comfy/random_model.py)."""

    OP: ClassVar[str] = "comfy_load_random_model"
    comfyui_root: str
    dtype: str = "bfloat16"
    config: dict[str, Any] | None = None
    seed: int = 0
    weights: str = "bf16"
    # The loader's weights option (wire/weight_placement.py) and a cap on what this process may allocate
    # on its GPU (torch.cuda.set_per_process_memory_fraction; 0: none); reserve_bytes as LoadModel's.
    placement: str = WEIGHTS_REPLICATED
    memory_cap_bytes: int = 0
    reserve_bytes: int = 0

    def check(self) -> None:
        checks.parse_dtype(self.dtype)
        check_weights(self.placement, backend_is_comfy=True)
        if self.weights not in BENCH_WEIGHT_FORMATS:
            raise ValueError(
                f"comfy_load_random_model weights {self.weights!r} is not one of "
                f"{', '.join(BENCH_WEIGHT_FORMATS)}; pick one of those"
            )
        if not self.comfyui_root:
            raise ValueError(
                "comfy_load_random_model needs comfyui_root, the folder holding ComfyUI's main.py"
            )


@dataclass(frozen=True)
class ComfyBenchStep(Request):
    """Time `repeats` sampling steps (cond+uncond, or cond only at cfg 1; + audio of `audio_frames` latent frames) on a random
    video of `video_shape` through ComfyUI's sampler on the SP-patched model (after one warm-up step)."""

    OP: ClassVar[str] = "comfy_bench_step"
    video_shape: tuple[int, ...]
    audio_frames: int | None = None
    repeats: int = 3
    cfg: float = 4.0  # 1: the cond pass alone (ComfyUI skips uncond), one pass per step
    cuda_graphs: bool = False  # the blocks replayed from CUDA graphs where they apply (NOTE [call graphs])
    attention: str = ""  # a registered ComfyUI attention function (NOTE [attention backend]); "": default
    compile: bool = False  # the blocks torch.compile'd (NOTE [compiled blocks]); the warm-up step compiles
    # after the timed steps rank 0 saves the guided clean-latent prediction (engine/comfy/bench.denoised)
    # here with torch.save: the bench compares it with native's (its accuracy figures)
    denoised_path: str = ""

    def check(self) -> None:
        if len(self.video_shape) != 5:
            raise ValueError(f"video_shape {self.video_shape} must be [B, 128, F, H, W]")
        if self.repeats < 1:
            raise ValueError(f"repeats {self.repeats} must be at least 1")


# ----- native sampling on the group (the MGPU Loader's MODEL; NOTE [model call] in model_call.py) -----
@dataclass(frozen=True)
class ComfyModelCall(Request):
    """One diffusion-model call of ComfyUI's sampler in the UI process: `streams` the latent streams as
    LTXAVModel.forward receives them, `call` its other arguments in model_call's wire form, `token` and
    `drop` the conditioning cache on the ranks; rank 0 writes each output stream into `out` (float32,
    the streams' shapes). Comfy backend only."""

    OP: ClassVar[str] = "comfy_model_call"
    USES_LORAS: ClassVar[bool] = True
    FREES_GPU_CACHE: ClassVar[bool] = False
    token: str
    streams: list[torch.Tensor | OutputSlot]  # a slot: the caller's kept segment (no copy per call)
    call: dict[str, Any]
    out: list[Output]
    drop: tuple[int, ...] = ()
    # The sampling clone's weight patches (ComfyUI's LoRA loaders; NOTE [node patches]): "" none,
    # else the token of the set; `patches` its wire form when the ranks may not hold it yet.
    patch_token: str = ""
    patches: list[Any] | None = None
    # A batched call (cond and uncond in one) split over guidance groups; GUIDANCE_AUTO: planned.
    guidance_groups: int = GUIDANCE_AUTO

    def check(self) -> None:
        if not self.streams or len(self.streams) != len(self.out):
            raise ValueError(f"{len(self.streams)} latent streams but {len(self.out)} output slots")
        for i, (stream, slot) in enumerate(zip(self.streams, self.out)):
            _check_output(slot, _shape(stream), f"stream {i}")


@dataclass(frozen=True)
class ComfyTextEmbeds(Request):
    """The text connectors (LTXAVModel.preprocess_text_embeds) on the ranks' model for `context`
    [B, T, W]; rank 0 replies the embeddings inline. Comfy backend only."""

    OP: ClassVar[str] = "comfy_text_embeds"
    USES_LORAS: ClassVar[bool] = True
    context: torch.Tensor
    unprocessed: bool = False
    patch_token: str = ""  # as in ComfyModelCall
    patches: list[Any] | None = None

    def check(self) -> None:
        if self.context.dim() != 3:
            raise ValueError(f"conditioning {list(self.context.shape)} must be [batch, tokens, width]")


REQUESTS: dict[str, type[Request]] = {
    cls.OP: cls
    for cls in (LoadModel, UnloadModel, SetCompiled, SetLoras, LoraState, Sample, Forward, TdpUpscale,
                VaeDecode, VaeEncode, EncodeText, LoadRandomModel, BenchForward, ComfyLoadRandomModel,
                ComfyBenchStep, ComfyModelCall, ComfyTextEmbeds)
}  # fmt: skip


def uses_loras(op: str) -> bool:
    """Whether the manager fuses the LoRA set before `op`; commands without a request type (the
    diagnostics: ping, steps, fault, ...) never run the transformer."""
    request = REQUESTS.get(op)
    return request is not None and request.USES_LORAS
