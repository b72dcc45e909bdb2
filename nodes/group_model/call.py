"""The UI side of one diffusion-model call on the worker group (NOTE [model call] in
workers/wire/model_call.py): what the group MODEL's weightless diffusion model does when ComfyUI's
sampler calls it.

Per call: the latent streams travel in shared memory kept from call to call while their shapes
stay (workers/group/kept_slots.py) and come back in output slots kept alike; tensors
under 64 KiB ride in the message; larger conditioning (the context, per-token timesteps, guide
latents) is sent once and then named by id while an equal tensor comes again (compared on the UI
device, where a 60 MB context compares in well under a millisecond on a GPU). Never imports ComfyUI
at module level: comfy.model_management is looked up per call, so the pack imports without it.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...workers.group import console
from ...workers.group.kept_slots import KeptSlots
from ...workers.group.manager import MGPUModel, get_manager
from ...workers.wire import model_call as wire
from ...workers.wire.capabilities import capabilities
from ...workers.wire.errors import JobInputError
from ...workers.wire.lora_files import describe_switch
from ...workers.wire.requests import ComfyModelCall, ComfyTextEmbeds, Request
from .. import comfy
from ..jobs import cancel_as_interrupt
from .patches import PatchSetSender, patch_signature

# Runs one request on the group -> the ranks' replies. Default: the manager's group for the
# recipe (started and loaded as needed, LoRAs synced); the bench passes its own group's run.
RunFn = Callable[[Request], list[dict]]
# Conditioning tensors the ranks keep per MODEL, most recently used first out last. A CFG step needs
# the batched context and masks (2-4 entries); STG / modality passes add a cond-only batch.
CACHE_ENTRIES = 8


def run_on_group(recipe: MGPUModel, request: Request) -> list[dict]:
    """One model call on the manager's group; a cancel (Unload Models during sampling) as ComfyUI's
    interrupt, as the sampler's own Cancel check raises it."""
    with cancel_as_interrupt():
        return get_manager().run(recipe, request, quiet=True)


@dataclass
class _Cached:
    id: int
    value: torch.Tensor  # a private copy on the UI device: ComfyUI may reuse the original's memory


class GroupModelCall:
    """Runs the diffusion-model calls of one MGPU recipe on the group; one per MODEL (its clones share it).

    Blocking, on the thread ComfyUI samples on; one call at a time (the group runs one job at a time).
    """

    def __init__(self, recipe: MGPUModel, run: RunFn | None = None) -> None:
        self.recipe = recipe
        self._run_job = run or (lambda request: run_on_group(recipe, request))
        self._token = secrets.token_hex(8)  # names this model's cache on the ranks
        self._ids = itertools.count(1)
        self._cache: list[_Cached] = []  # least recently used first
        self._dropped: list[int] = []  # evicted here; the next call tells the ranks
        self._embeds: list[tuple[torch.Tensor, bool, tuple, tuple, torch.Tensor]] = []
        self.calls = 0  # model calls served (tests and the bench read it)
        self.last_replies: list[dict] = []  # the ranks' replies to the last model call
        self._inputs, self._outputs = KeptSlots(), KeptSlots()  # the latent streams, in and out
        self._patches = PatchSetSender()
        self._current_patches: Callable[[], dict] = dict  # the sampling clone's weight patches

    def _check_engine(self) -> None:
        """ValueError, before anything reaches the group, when the recipe's engine cannot serve the
        MODEL (its capability table: the ltx-core engine has no native model calls)."""
        engine = capabilities(self.recipe.backend)
        if not engine.model_output:
            raise ValueError(f"the MGPU Loader's MODEL output {engine.refusal}; or use the SP Sampler")

    @property
    def patch_sender(self) -> PatchSetSender:
        """The weight patch sets sent for this MODEL (the SP Sampler's GUIDER path sends through it too)."""
        return self._patches

    def bind_patches(self, current: Callable[[], dict]) -> None:
        """Where the weight patches of the clone now sampling are read (the MODEL's current_patcher)."""
        self._current_patches = current

    # ----- the diffusion model's forward -------------------------------------------------------
    def forward(
        self, x: torch.Tensor | list[torch.Tensor], timestep: Any, context: Any, options: dict, kwargs: dict
    ) -> torch.Tensor | list[torch.Tensor]:
        """What LTXAVModel.forward(x, timestep, context=, transformer_options=, **kwargs) returns,
        computed by the ranks. `x` is one tensor, or the list of streams of an AV latent."""
        comfy.throw_if_interrupted()  # as native: a cancel between model calls stops the sampler
        self._check_engine()
        streams = list(x) if isinstance(x, list | tuple) else [x]
        call = {
            "timestep": timestep,
            "context": context,
            "options": carried_options(options),
            "kwargs": kwargs,
        }
        for attempt in range(2):
            try:
                outputs = self._run(streams, call)
                break
            except JobInputError as exc:
                self._forget()
                if attempt == 0 and str(exc).startswith(wire.CACHE_MISS):
                    continue  # a restarted group lost the cache: send everything once more
                raise ValueError(str(exc)) from None
            except BaseException:
                self._forget()  # the ranks may hold part of this call's stores
                raise
        self.calls += 1
        # copy=True: on a CPU sampler `.to` would return the kept segment, which the next call overwrites
        out = [o.to(device=s.device, copy=True) for o, s in zip(outputs, streams)]
        return out if isinstance(x, list | tuple) else out[0]

    def _run(self, streams: list[torch.Tensor], call: dict) -> list[torch.Tensor]:
        encoded = wire.encode(call, "the model call", self._tensor)
        # Kept from call to call while the latent shapes stay (NOTE [kept slots]): no new segments.
        inputs = self._inputs.get([(s.shape, s.dtype) for s in streams])
        slots = self._outputs.get([(s.shape, torch.float32) for s in streams])
        for slot, stream in zip(inputs, streams):
            slot.tensor.copy_(stream.detach())
        drop, self._dropped = self._dropped, []
        patch_token, patches = self._patches.fields(self._current_patches())
        request = ComfyModelCall(
            token=self._token, streams=inputs, call=encoded, out=slots, drop=tuple(drop),
            patch_token=patch_token, patches=patches, guidance_groups=self.recipe.guidance_groups,
        )  # fmt: skip
        self.last_replies = self._run_job(request)
        _say_switch(self.last_replies)
        return [slot.tensor for slot in slots]

    def release(self) -> None:
        """Unlink the kept stream segments now (tests; otherwise a group stop, exit or collection does)."""
        self._inputs.release()
        self._outputs.release()

    def _tensor(self, value: torch.Tensor, where: str) -> dict:
        if value.numel() * value.element_size() < wire.INLINE_MAX_BYTES:
            return wire.inline_tensor(value)
        for index, entry in enumerate(self._cache):
            if _same(entry.value, value):
                self._cache.append(self._cache.pop(index))
                return {wire.TAG_CACHED: entry.id}
        entry = _Cached(next(self._ids), value.detach().clone())
        self._cache.append(entry)
        if len(self._cache) > CACHE_ENTRIES:
            self._dropped.append(self._cache.pop(0).id)
        return {wire.TAG_STORE: entry.id, "value": value.detach()}

    def _forget(self) -> None:
        """Start a new cache: a new token makes the ranks drop what they kept for the old one."""
        self._token, self._cache, self._dropped = secrets.token_hex(8), [], []
        self._patches.forget()

    # ----- the text embeddings connectors ------------------------------------------------------
    def text_embeds(self, context: torch.Tensor, unprocessed: bool) -> torch.Tensor:
        """LTXAVModel.preprocess_text_embeds on the ranks' model (its connectors, with the recipe's
        LoRAs), once per distinct conditioning tensor; called by ComfyUI's conditioning processing."""
        patches = self._current_patches()
        key = (bool(unprocessed), self.recipe.loras, patch_signature(patches))
        for source, flag, loras, signature, out in self._embeds:
            if (flag, loras, signature) == key and _same(source, context):
                return out
        comfy.throw_if_interrupted()
        self._check_engine()
        for attempt in range(2):
            patch_token, encoded = self._patches.fields(patches)
            request = ComfyTextEmbeds(
                context=context.detach(),
                unprocessed=bool(unprocessed),
                patch_token=patch_token,
                patches=encoded,
            )
            try:
                replies = self._run_job(request)
                break
            except JobInputError as exc:
                self._patches.forget()
                if attempt == 0 and str(exc).startswith(wire.CACHE_MISS):
                    continue  # a restarted group lost the patch set: send it once more
                raise ValueError(str(exc)) from None
            except BaseException:
                self._patches.forget()
                raise
        _say_switch(replies)
        out = wire.inline_to_tensor(replies[0]["embeds"]).to(context.device)
        self._embeds = [*self._embeds[-3:], (context.detach().clone(), *key, out)]
        return out


def _say_switch(replies: list[dict]) -> None:
    """The console line of a LoRA set switch this call's ranks made (a LoRA node on the MODEL)."""
    report = replies[0].get("lora_switch") if replies else None
    line = describe_switch(report, len(replies)) if report else ""
    if line:
        console.info(line)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


# transformer_options entries that ComfyUI's patcher keeps for the UI process: wrappers of the levels
# above the model call (outer_sample ... apply_model) and patcher callbacks have already run here.
UI_ONLY_OPTIONS = ("wrappers", "callbacks")
# The one wrapper level inside the diffusion model: it cannot run here (no weights) nor travel.
INNER_WRAPPERS = ("diffusion_model",)


# Where ComfyUI keeps a MODEL's attention function (ModelPatcher.set_model_optimized_attention).
ATTENTION_OVERRIDE = "optimized_attention_override"


def carried_options(options: dict) -> dict:
    """transformer_options as the ranks receive them: everything but UI_ONLY_OPTIONS, the attention
    function a node chose by its registered name; a wrapper of the diffusion model itself is refused
    with its origin (wire.NotCarried), as is any other Python object."""
    for level in INNER_WRAPPERS:
        for key, functions in (options.get("wrappers") or {}).get(level, {}).items():
            for function in functions:
                raise wire.NotCarried(f"transformer_options['wrappers'][{level!r}][{key!r}]", function)
    out = {k: v for k, v in options.items() if k not in UI_ONLY_OPTIONS}
    override = out.pop(ATTENTION_OVERRIDE, None)
    if override is not None:
        out[wire.ATTENTION_BACKEND_KEY] = attention_backend_name(override)
    return out


def attention_backend_name(override: Callable) -> str:
    """The registered name of the attention function behind ComfyUI's own override closure
    (ModelAttentionBackend -> ModelPatcher.set_model_optimized_attention), which the ranks look up in
    their ComfyUI (NOTE [attention backend] in workers/engine/comfy/attention_backend.py).
    wire.NotCarried for any other override: another pack's function cannot run in the workers."""
    import comfy.ldm.modules.attention as attention

    where = f"transformer_options[{ATTENTION_OVERRIDE!r}]"
    if getattr(override, "__module__", None) != "comfy.model_patcher":
        raise wire.NotCarried(where, override)
    for cell in getattr(override, "__closure__", None) or ():
        function = cell.cell_contents
        name = wire.registered_name(attention.REGISTERED_ATTENTION_FUNCTIONS, function)
        if name is not None:
            return name
        if callable(function):  # a function no registry names (another pack's): refused by its origin
            raise wire.NotCarried(where, function)
    raise wire.NotCarried(where, override)
