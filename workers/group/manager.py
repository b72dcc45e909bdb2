"""The one worker group of the UI process, and the model loaded in it.

Nodes never hold a WorkerGroup: they hold an `MGPUModel` handle, a recipe (checkpoint, dtype, device
choice). Every node call goes through `GroupManager.acquire`, which starts the group, restarts it
after a crash or an "Unload Models", and (re)loads the checkpoint, so a cached handle keeps working
without the user doing anything. Only one group exists at a time: a recipe with other devices
replaces it. Never imports ComfyUI.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..wire.backend import BACKEND_LTXCORE
from ..wire.capabilities import capabilities
from ..wire.constants import DEFAULT_MAX_VIDEO_TOKENS
from ..wire.errors import JobCancelled, JobInputError, WorkerGroupError
from ..wire.gguf_checks import check_gguf_loadable
from ..wire.loader_files import check_model_header
from ..wire.lora_files import LoraSpec, active_loras, describe_switch
from ..wire.machines import machine_guidance_groups
from ..wire.model_files import describe_header
from ..wire.requests import LoadModel, Request, SetLoras, uses_loras
from ..wire.weight_placement import AUTO_RESIDENT, WEIGHTS_REPLICATED, check_sharded_devices
from . import client, console, launcher
from .launcher import Placement, parse_devices


@dataclass(frozen=True)
class MGPUModel:
    """The MGPU_MODEL value passed between nodes: what to load, where. Cheap, picklable, comparable."""

    checkpoint: str
    dtype: str = "bfloat16"
    devices: tuple[str, ...] = ("cpu",)
    max_video_tokens: int = DEFAULT_MAX_VIDEO_TOKENS
    loras: tuple[tuple[str, float], ...] = field(default=())
    mode: str = "comfyui"  # "comfyui": match native ComfyUI; "reference": Lightricks' ltx-core forward
    compile_blocks: bool = False  # torch.compile the transformer blocks (docs/PERFORMANCE.md)
    fp8_matmul: bool = False  # block Linears in fp8, fp8 matmuls (workers/engine/ltxcore/fp8_linear.py)
    backend: str = BACKEND_LTXCORE  # "comfy": ComfyUI's model stack in the ranks; "ltxcore": ltx-core's
    comfyui_root: str = ""  # the ComfyUI the ranks import (backend "comfy")
    comfyui_version: str = ""
    # Separate VAE files (LTX-2.5 ships them apart from its diffusion model); "" = the checkpoint's own.
    video_vae: str = ""
    audio_vae: str = ""
    family: str = ""  # LTX-2, LTX-2.3, LTX-2.5 (wire/ltx_files.py); "" when not read
    # Guidance groups for a step's passes (workers/strategies/guidance_plan.py): 1 = none (the default
    # until measured on several GPUs), 0 = planned, n = n groups.
    guidance_groups: int = 1
    # Where the transformer's weights live (wire/weight_placement.py): replicated, offloaded, sharded;
    # resident_bytes / reserve_bytes as LoadModel's (the loader's pre-flight sets reserve_bytes).
    weights: str = WEIGHTS_REPLICATED
    resident_bytes: int = AUTO_RESIDENT
    reserve_bytes: int = 0

    @property
    def placement(self) -> Placement:
        return Placement(self.devices)

    @property
    def world_size(self) -> int:
        return len(self.devices)

    @staticmethod
    def create(checkpoint: str | Path, devices: str = "all", dtype: str = "bfloat16", **kwargs) -> MGPUModel:
        return MGPUModel(
            checkpoint=str(Path(checkpoint).resolve()),
            dtype=dtype,
            devices=parse_devices(devices).devices,
            **kwargs,
        )


ProgressFn = Callable[[int, int, dict], None]


def for_op(model: MGPUModel, op: str) -> MGPUModel:
    """The recipe an op runs on: a command the recipe's engine does not serve (the single forward of
    parity tests and benchmarks on ComfyUI's engine) runs on ltx-core, which then loads the file in a
    group of its own (a log line says so once per op)."""
    engine = capabilities(model.backend)
    if engine.serves(op) or model.backend == BACKEND_LTXCORE:
        return model
    ltxcore = capabilities(BACKEND_LTXCORE)
    if not ltxcore.serves(op) or (model.family and model.family not in ltxcore.families):
        raise ValueError(
            f"{op} is not served by {engine.title}, and {ltxcore.title} cannot run "
            f"{Path(model.checkpoint).name} ({model.family or 'unknown release'}); it serves "
            f"{', '.join(ltxcore.families)}"
        )
    if op not in _logged_ltxcore_ops:
        _logged_ltxcore_ops.add(op)
        _log.info("%s runs on %s (%s does not serve it)", op, ltxcore.title, engine.title)
    return replace(model, backend=BACKEND_LTXCORE, comfyui_root="", comfyui_version="")


class GroupManager:
    """NOTE [unload during a run]: ComfyUI acts on "Unload Models" (POST /free) only between prompts, so
    a running job would run to its end before the workers stop. `request_unload` (called from the HTTP
    thread, without the job lock) makes every job cancel at its next unit of work, stops the group
    as soon as the job has ended, and refuses further jobs until `unload` (ComfyUI's own unload after
    the prompt) clears it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._group: client.WorkerGroup | None = None
        self._loaded: MGPUModel | None = None  # the base (loras=()) loaded in the group
        self._engine: str | None = None  # the group's engine (NOTE [engine seam]): fixed at its first load
        self._loras: LoraSpec | None = ()  # the LoRA set fused into it; None: unknown, ask the workers
        self._unload_requested = threading.Event()
        self.env: dict[str, str] = {}

    def request_unload(self) -> None:
        """Unload Models was pressed while a prompt runs (NOTE [unload during a run]). Thread-safe."""
        self._unload_requested.set()

    def _cancel_check(self, should_cancel: Callable[[], bool] | None) -> Callable[[], bool]:
        return lambda: self._unload_requested.is_set() or bool(should_cancel is not None and should_cancel())

    def _unload_if_requested(self) -> None:
        """Before and after every job: a pending unload stops the group (the job, if any, was cancelled)."""
        if self._unload_requested.is_set():
            self._stop_group("Unload Models was pressed during the run")
            raise JobCancelled("Unload Models was pressed: the run was cancelled and the workers stopped")

    @property
    def group(self) -> client.WorkerGroup | None:
        return self._group

    def acquire(
        self,
        model: MGPUModel,
        *,
        on_progress: ProgressFn | None = None,
        should_cancel: Callable[[], bool] | None = None,
        with_loras: bool = True,
        quiet: bool = False,
    ) -> client.WorkerGroup:
        """A running group with `model` loaded. Starts or restarts the group as needed.

        The base (checkpoint, dtype, mode, devices) loads once; `model.loras` are then fused in place
        (`with_loras`), so another LoRA set never reloads the base (workers/engine/ltxcore/lora.py).
        `quiet`: no console line when the loaded model is reused (every call of native sampling).
        """
        with self._lock:
            self._unload_if_requested()
            should_cancel = self._cancel_check(should_cancel)
            t0 = time.monotonic()
            base = replace(model, loras=())
            if self._loaded != base:
                check_fits(model)
            group = self._group
            if group is not None and not group.is_alive:
                self.unload("a worker had exited")
                group = None
            elif group is not None and group.requested_placement != model.placement:
                self.unload(f"the model asks for other devices: {', '.join(model.placement.devices)}")
                group = None
            elif group is not None and self._engine not in (None, model.backend):
                # A group runs one engine for its life: a ComfyUI group never imports ltx-core.
                self.unload(f"the model runs on {capabilities(model.backend).title}")
                group = None
            if group is None:
                env = {**launcher.comfyui_attention_env(), **self.env}  # the tests' env wins
                group = client.WorkerGroup(model.placement, env=env, comfyui_root=model.comfyui_root).start()
                self._group, self._loaded, self._engine = group, None, None
            if self._loaded != base:
                self._loaded = None
                self._engine = model.backend  # the ranks make it at this load, whether it succeeds or not
                t_load = time.monotonic()
                try:
                    replies = group.run(
                        LoadModel.OP,
                        load_request(model).to_wire(),
                        on_progress=on_progress,
                        should_cancel=should_cancel,
                        abort_on_cancel=True,
                    )
                except WorkerGroupError as exc:
                    if exc.fatal:
                        self._group = None
                    self._unload_if_requested()
                    raise
                # A reused worker model may still hold LoRAs from before: the first sync finds out.
                self._loaded, self._loras = base, None
                attention = replies[0].get("attention") if replies else None
                console.info(
                    f"loaded {_describe(base)} into {group.world_size} workers "
                    f"in {console.seconds(time.monotonic() - t_load)}"
                    + (f", attention {attention} as ComfyUI's" if attention not in (None, "pytorch") else "")
                )
            elif not quiet:
                console.info(
                    f"reusing {_describe(base)}, already loaded in {group.world_size} workers: no reload "
                    f"({console.seconds(time.monotonic() - t0)})"
                )
            if with_loras and self._loras != active_loras(model.loras):
                self._switch_loras(group, active_loras(model.loras), should_cancel)
            return group

    def _switch_loras(
        self, group: client.WorkerGroup, loras: LoraSpec, should_cancel: Callable[[], bool] | None
    ) -> None:
        try:
            replies = group.run(SetLoras.OP, SetLoras(loras).to_wire(), should_cancel=should_cancel)
        except JobInputError:
            raise  # rejected before any weight changed: the fused set is what it was
        except WorkerGroupError as exc:
            # Failed part-way: the workers dropped the base (or died); load it again next time.
            self._loaded, self._loras = None, None
            if exc.fatal:
                self._group = None
            self._unload_if_requested()
            raise
        self._loras = loras
        line = describe_switch(replies[0], group.world_size) if replies else ""
        if line:
            console.info(line)

    def run(
        self,
        model: MGPUModel,
        request: Request | str,
        args: dict | None = None,
        *,
        on_progress: ProgressFn | None = None,
        should_cancel: Callable[[], bool] | None = None,
        quiet: bool = False,
    ) -> list[dict]:
        """acquire + run one job; a fatal error leaves no group behind (the next call starts one).

        `request`: a typed request (what the nodes send), or a command name with its wire args (the
        diagnostics commands, and tests that build the wire form by hand; the ranks check both alike).
        """
        op, wire = (request.OP, request.to_wire()) if isinstance(request, Request) else (request, args or {})
        with self._lock:
            model = for_op(model, op)
            group = self.acquire(model, should_cancel=should_cancel, with_loras=uses_loras(op), quiet=quiet)
            wire = _guidance_for(group, wire)
            try:
                return group.run(
                    op, wire, on_progress=on_progress, should_cancel=self._cancel_check(should_cancel)
                )
            except WorkerGroupError as exc:
                if exc.fatal:
                    self._group, self._loaded = None, None
                self._unload_if_requested()
                raise

    def unload(self, reason: str = "unload requested") -> None:
        """Stop the group and free all it holds (ComfyUI's "Unload Models", after the prompt). `reason`
        goes into the console line. Ends a pending `request_unload`: later jobs start a fresh group."""
        with self._lock:
            self._stop_group(reason)
            self._unload_requested.clear()

    def _stop_group(self, reason: str) -> None:
        if self._group is not None:
            self._group.stop(reason)
        self._group, self._loaded, self._loras, self._engine = None, None, (), None


def _guidance_for(group: client.WorkerGroup, wire: dict) -> dict:
    """A group that runs without a machine that did not join plans its guidance groups anew (the loader
    counted them for every machine it named: NOTE [machines])."""
    groups = wire.get("guidance_groups")
    if group.placement == group.requested_placement or not isinstance(groups, int) or groups <= 1:
        return wire
    try:
        fitted = machine_guidance_groups(group.placement.devices, 0)
    except ValueError:  # machines left with unequal device counts: the plan of one machine's group
        fitted = 0
    return {**wire, "guidance_groups": fitted}


def _describe(model: MGPUModel) -> str:
    """How the console names a loaded model: file name, dtype, and the options that change the weights."""
    options = [model.dtype]
    if model.mode != "comfyui":
        options.append(f"mode {model.mode}")
    if model.fp8_matmul:
        options.append("fp8_matmul")
    if model.compile_blocks:
        options.append("compile_blocks")
    if model.weights != WEIGHTS_REPLICATED:
        options.append(f"weights {model.weights}")
    return f"{Path(model.checkpoint).name} ({', '.join(options)})"


def load_request(model: MGPUModel) -> LoadModel:
    """The load_model request of `model` (its checks: dtype, mode, compile and fp8 settings)."""
    return LoadModel(
        checkpoint=model.checkpoint,
        dtype=model.dtype,
        mode=model.mode,
        compile=model.compile_blocks,
        fp8_matmul=model.fp8_matmul,
        backend=model.backend,
        comfyui_root=model.comfyui_root,
        comfyui_version=model.comfyui_version,
        video_vae=model.video_vae,
        audio_vae=model.audio_vae,
        weights=model.weights,
        resident_bytes=model.resident_bytes,
        reserve_bytes=model.reserve_bytes,
    )


def check_fits(model: MGPUModel) -> None:
    """Refuse, before any worker starts, a checkpoint that is not one or a group it cannot be split over."""
    load_request(model)
    path = Path(model.checkpoint)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist; pick an existing file")
    # Refuses non-safetensors files without unpickling, and headers ComfyUI's own loader refuses; the
    # metadata config may be absent, partial or hold null sections (NOTE [file metadata]).
    description = describe_header(check_model_header(path))
    check_sharded_devices(model.weights, model.devices)
    check_gguf_loadable(path, model.backend, model.comfyui_root, model.weights)
    heads = min(description.video_num_heads, description.audio_num_heads)
    if model.world_size > heads:
        raise ValueError(
            f"{model.world_size} workers cannot share this model's {heads} attention heads (each needs at least one). "
            f"Use at most {heads} GPUs."
        )


_MANAGER = GroupManager()
_log = logging.getLogger("ltx2_mgpu.group")
_logged_ltxcore_ops: set[str] = set()


def get_manager() -> GroupManager:
    return _MANAGER
