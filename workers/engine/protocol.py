"""The seam between a rank's command handlers and the model engine they run on.

NOTE [engine seam]: a worker group runs one engine for its whole life: ComfyUI's own model stack
(engine/comfy, the engine) or ltx-core (engine/ltxcore, the reference for LTX-2 without ComfyUI).
The UI side chooses it once per recipe (wire/backend.py) and the group manager starts a new group when
it changes; the rank's runtime makes it at the first command that names one (rank/runtime.py
`Runtime.engine_for`) and refuses another. Handlers in rank/ check the request, plan with
strategies/, and call the engine through `Engine`; they never ask which engine it is. What an engine
cannot do stands in its capability table (wire/capabilities.py), which the nodes read to refuse an
option before any work; the engine's own refusal (`Engine.refuse`) is the backstop for callers that
bypass the nodes (benchmarks, tests).

Errors an engine raises: `InputRejected` alike on every rank before its first collective (the group
stays usable), `Cancelled` once a cancel was agreed; anything else is reported as fatal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch

if TYPE_CHECKING:
    from ...kernels import HeadExchange
    from ..strategies.tdp_plan import TdpPlan
    from ..strategies.vae_encode_plan import EncodePlan
    from ..text.text_encoder import GemmaFiles
    from ..wire import requests as rq
    from ..wire.capabilities import EngineCapabilities


class InputRejected(ValueError):
    """Raised alike on every rank, before any collective, when a job's input is unusable."""


class Cancelled(Exception):
    """Raised alike on every rank once a cancel was agreed at a step boundary."""


# (step, total, streams): the denoised estimate (on_denoised) or the current latent (on_step).
StepCallback = Callable[[int, int, list[torch.Tensor]], None]


class Job(Protocol):
    """What an engine sees of the job it runs (rank/runtime.py JobContext).

    rank, world_size: this rank in the group; device: its device; comm_on_device: tensors travel
    between ranks on the device (NCCL) rather than through host memory (gloo); control_group: the
    CPU process group for agreements (cancel, errors)."""

    rank: int
    world_size: int

    @property
    def device(self) -> torch.device: ...

    @property
    def comm_on_device(self) -> bool: ...

    @property
    def control_group(self) -> Any: ...

    def progress(self, step: int, total: int, **extra: Any) -> None:
        """Report progress (rank 0 sends; a no-op elsewhere)."""

    def cancel_requested(self) -> bool:
        """Whether this rank sees a cancel request (local, no collective): a check inside a unit of work;
        the ranks agree on it at the next boundary (engine/units.py NOTE [units])."""

    def check_cancel(self) -> None:
        """Collective: raise Cancelled on every rank once any rank saw a cancel request."""

    def agree_on_error(self, message: str | None) -> None:
        """Collective: raise InputRejected on every rank with the first rank's message, if any has one."""

    def release_text_encoder(self) -> list[str]:
        """Drop the rank's resident text encoder (the next encode reloads it); what went, by name. The
        same on every rank (NOTE [memory room] in engine/memory_room.py)."""

    def step_callbacks(self, preview: bool) -> tuple[StepCallback, StepCallback]:
        """(on_denoised, on_step) for a sampling loop: live previews when `preview`, progress and the
        collective cancel check at every step boundary."""

    def head_exchange(self) -> HeadExchange:
        """The group's head exchange for sequence parallelism (collective on first use; kept)."""


class TextHead(Protocol):
    """Turns one prompt's Gemma hidden states into LTX's text features on a rank.

    in_features: hidden size x hidden states it takes; out_features: the features' width C."""

    in_features: int
    out_features: int

    def __call__(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """[1, n, C] float32 features from the hidden states of one prompt ([1, n, hidden] each)."""


class Engine(Protocol):
    """One rank's model engine (NOTE [engine seam]). Every method is called alike on every rank, in
    lockstep; the replies are plain dicts (builtins only). An engine subclasses this Protocol so that
    what it does not serve answers with `refuse` (its capability table says the same to the nodes)."""

    name: ClassVar[str]
    capabilities: ClassVar[EngineCapabilities]

    def refuse(self, what: str) -> InputRejected:
        """The error for a command or option this engine does not serve, naming what to change."""
        return InputRejected(f"{what} {self.capabilities.refusal}")

    # ----- the model -----
    def load(self, job: Job, request: rq.LoadModel) -> dict:
        """Load the request's checkpoint on this rank (skipped when the same one is loaded)."""
        raise self.refuse("loading a model")

    def unload(self) -> None:
        """Drop the loaded model and everything kept with it."""

    def set_compiled(self, job: Job, compile: bool) -> dict:
        """Switch torch.compile of the loaded transformer's blocks."""
        raise self.refuse("compile_blocks")

    def make_room(self, job: Job, need_bytes: int) -> str:
        """NOTE [text room]: room on this rank's device for `need_bytes` more (a text encoder beside the
        model), given up by the model where its weights option allows; a line saying what moved, or ""."""
        return ""

    # ----- denoising -----
    def sample(self, job: Job, request: rq.Sample) -> dict:
        """The SP Sampler's job (the handler checked the split); rank 0 writes the output slots."""
        raise self.refuse("the SP Sampler")

    def forward(self, job: Job, request: rq.Forward) -> dict:
        """One transformer forward without guidance (parity tests, benchmarks)."""
        raise self.refuse("the single-forward command")

    def model_call(self, job: Job, request: rq.ComfyModelCall) -> dict:
        """One diffusion-model call of a native sampler (the MGPU Loader's MODEL)."""
        raise self.refuse("the MGPU Loader's MODEL")

    def text_embeds(self, job: Job, request: rq.ComfyTextEmbeds) -> dict:
        """The text connectors on the ranks' model (the MGPU Loader's MODEL)."""
        raise self.refuse("the MGPU Loader's MODEL")

    def tdp_upscale(self, job: Job, request: rq.TdpUpscale, plan: TdpPlan) -> dict:
        """Upsample the stage-1 video and denoise it over `plan` (strategies/tdp_plan.py); rank 0
        writes the output slot. Returns the engine's part of the reply (audio_frames and extras)."""
        raise self.refuse("the TDP Upscaler")

    # ----- VAE -----
    def vae_decode(self, job: Job, request: rq.VaeDecode) -> dict:
        """Distributed VAE Decode into the request's IMAGE (and audio) slots."""
        raise self.refuse("Distributed VAE Decode")

    def vae_encode(self, job: Job, request: rq.VaeEncode, plan: EncodePlan) -> dict:
        """Distributed VAE Encode of the request's pixels over `plan` into its LATENT slot."""
        raise self.refuse("Distributed VAE Encode")

    # ----- LoRA -----
    def set_loras(self, job: Job, request: rq.SetLoras) -> dict:
        """Make the request's LoRA set the live one (a SwitchReport as a dict)."""
        raise self.refuse("LoRAs")

    def lora_state(self, job: Job) -> tuple[tuple[tuple[str, float], ...], list[torch.nn.Module]]:
        """(the live LoRA set, the modules whose weights it changes) for diagnostics."""
        raise self.refuse("LoRAs")

    # ----- text -----
    def text_dtype(self, files: GemmaFiles) -> torch.dtype:
        """The dtype the ranks hold Gemma (and the text head) in for this model."""
        raise self.refuse("MGPU Text Encode")

    def text_head(self, job: Job, files: GemmaFiles, projection: str = "") -> TextHead:
        """The text head for Gemma `files` from the projection in the file `projection` ("": the loaded
        model's file), kept while they match."""
        raise self.refuse("MGPU Text Encode")

    def encode_gemma4(self, job: Job, request: rq.EncodeGemma4) -> dict:
        """LTX-2.5's Gemma 4 text encoder over the group."""
        raise self.refuse("LTX-2.5's Gemma 4 text encoder")

    # ----- benchmarks -----
    def bench(self, job: Job, request: rq.Request, full_config: dict | None = None) -> dict:
        """The engine's benchmark commands (random weights, timed steps); `full_config`: the
        transformer config of a random model, complete (rank/ops_bench.py fills it in)."""
        raise self.refuse(f"the benchmark command {request.OP!r}")
