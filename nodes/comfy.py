"""The only place besides nodes/v3/ that touches ComfyUI's modules, always lazily, so the pack imports without ComfyUI.

Outside ComfyUI (tests, the CLI) every function degrades to something sensible: no progress bar,
never interrupted, model folders unknown.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def in_comfyui() -> bool:
    return "comfy.model_management" in sys.modules


def filename_list(folder: str) -> list[str]:
    folder_paths = _module("folder_paths") if in_comfyui() else None
    if folder_paths is None:
        return []
    try:
        return list(folder_paths.get_filename_list(folder))
    except KeyError:
        return []  # folder kind unknown to this ComfyUI version


def folder_roots(folder: str) -> list[Path]:
    """The directories ComfyUI searches for models of kind `folder` (none outside ComfyUI)."""
    folder_paths = _module("folder_paths") if in_comfyui() else None
    if folder_paths is None:
        return []
    try:
        return [Path(p) for p in folder_paths.get_folder_paths(folder)]
    except KeyError:
        return []


def full_path(folders: tuple[str, ...], name: str) -> Path:
    """Resolve a model file name the way ComfyUI's loaders do; refuse names that escape the folders."""
    folder_paths = _module("folder_paths") if in_comfyui() else None
    candidate = Path(name)
    if folder_paths is None:
        if candidate.is_file():
            return candidate.resolve()
        raise ValueError(f"model file {name!r} not found (outside ComfyUI, give a path to an existing file)")
    if candidate.is_absolute() or ".." in candidate.parts:
        raise ValueError(
            f"model name {name!r} points outside ComfyUI's model folders; pick a file from the list "
            f"(folders: {', '.join(folders)})"
        )
    for folder in folders:
        found = folder_paths.get_full_path(folder, name)
        if found:
            return Path(found)
    raise ValueError(
        f"{name!r} is not in ComfyUI's {' or '.join(folders)} folders; put the file there or pick another"
    )


class Progress:
    """ComfyUI progress bar for one node, or nothing outside ComfyUI."""

    def __init__(self, total: int, node_id: str | None) -> None:
        utils = _module("comfy.utils") if in_comfyui() else None
        self._bar = utils.ProgressBar(total, node_id=node_id) if utils is not None else None

    def update(self, step: int, total: int, message: dict | None = None) -> None:
        if self._bar is None:
            return
        preview = _preview_image(message.get("preview")) if message else None
        mm = sys.modules.get("comfy.model_management")
        try:
            self._bar.update_absolute(step, total, preview)
        except BaseException as exc:
            # ComfyUI's progress hook raises its interrupt (and clears the flag) once Cancel was pressed.
            # Raising here would abandon the workers mid-job; put the flag back so the job's cancel
            # check sees it and every rank stops at the step boundary.
            if mm is None or not isinstance(exc, mm.InterruptProcessingException):
                raise
            mm.interrupt_current_processing(True)


# Preview size ComfyUI uses for sampler previews (args.preview_size default).
PREVIEW_MAX_SIZE = 512


def _preview_image(payload: dict | None) -> tuple | None:
    """A worker's preview payload (one latent frame) -> ("JPEG", PIL image, max size), as ComfyUI's
    own sampler previews, with the RGB factors of ComfyUI's LTX-2 latent format."""
    if not payload:
        return None
    formats = _module("comfy.latent_formats")
    if formats is None or not previews_enabled():
        return None
    import numpy as np
    import torch
    from PIL import Image

    latent = torch.frombuffer(bytearray(payload["data"]), dtype=torch.float16).float().view(payload["shape"])
    fmt = formats.LTXAV()
    factors = torch.tensor(fmt.latent_rgb_factors, dtype=torch.float32)  # [channels, 3]
    bias = torch.tensor(getattr(fmt, "latent_rgb_factors_bias", None) or [0.0, 0.0, 0.0])
    rgb = torch.einsum("chw,cr->hwr", latent, factors) + bias
    pixels = ((rgb + 1) / 2).clamp(0, 1).mul(255).to(torch.uint8).numpy()
    return ("JPEG", Image.fromarray(np.ascontiguousarray(pixels)), PREVIEW_MAX_SIZE)


def previews_enabled() -> bool:
    """Whether ComfyUI shows sampler previews (--preview-method other than none)."""
    cli = _module("comfy.cli_args") if in_comfyui() else None
    method = getattr(cli.args, "preview_method", None) if cli is not None else None
    return getattr(method, "value", method) not in (None, "none")


def interrupt_requested() -> bool:
    mm = sys.modules.get("comfy.model_management")
    return bool(mm is not None and mm.processing_interrupted())


def throw_if_interrupted() -> None:
    """ComfyUI's own check: its interrupt exception once Cancel was pressed (nothing outside ComfyUI)."""
    mm = sys.modules.get("comfy.model_management")
    if mm is not None:
        mm.throw_exception_if_processing_interrupted()


def raise_interrupted() -> None:
    """Raise ComfyUI's own interrupt exception (so the UI shows 'interrupted', not an error)."""
    mm = sys.modules.get("comfy.model_management")
    if mm is not None:
        mm.throw_exception_if_processing_interrupted()
        raise mm.InterruptProcessingException()
    raise KeyboardInterrupt("cancelled")


def nested_tensor(tensors: list) -> Any:
    """comfy.nested_tensor.NestedTensor of the streams (audio+video LATENT samples)."""
    module = _module("comfy.nested_tensor")
    if module is None:
        raise RuntimeError("audio+video latents need ComfyUI's comfy.nested_tensor")
    return module.NestedTensor(tensors)


def install_process_hooks() -> None:
    """What the pack hooks in ComfyUI's process, called once by the extension's on_load (nodes/v3/).

    NOTE [process hooks]: the worker group holds GPU memory and /dev/shm segments outside ComfyUI's
    model management, so two moments of ComfyUI's process must reach it, and ComfyUI 0.33 offers a hook
    for neither: its extension API (comfy_api.latest.ComfyExtension) has on_load and get_node_list only;
    comfy.model_management has no unload callbacks; PromptServer's "/free" route only sets the flag
    after which main.py calls comfy.model_management.unload_all_models().
    - "Unload Models" (and ComfyUI's own unload after an out-of-memory error, --disable-smart-memory):
      stop the group. Hooked by wrapping unload_all_models (`install_unload_hook`); the cached
      MGPU_MODEL stays valid and the next job starts the group again.
    - SIGTERM (systemd, docker stop, kill): ComfyUI installs no handler, so the process would end
      without atexit and leave the workers' shared memory; ours ends the groups, then hands the signal
      on (workers/group/shutdown.py). Ctrl+C needs nothing: main.py returns and atexit runs.
    - "Unload Models" or "Free memory" while a prompt runs: ComfyUI only flags it for after the prompt;
      the group manager cancels its job at the next unit of work and stops the group at once
      (`install_free_hook`, workers/group/manager.py NOTE [unload during a run]).
    Outside ComfyUI nothing is installed. tests/test_pack_loading.py checks both here, with a stand-in
    for ComfyUI's module; the server tests check them in a real ComfyUI (test_comfyui_server.py
    "Unload Models", test_comfyui_stop.py SIGTERM).
    """
    if not in_comfyui():
        return
    from ..workers.group.manager import get_manager
    from ..workers.group.shutdown import install_sigterm_handler

    install_unload_hook(lambda: get_manager().unload("ComfyUI unloaded all models"))
    install_free_hook(get_manager().request_unload)
    install_sigterm_handler()


def install_unload_hook(on_unload: Callable[[], None]) -> bool:
    """Call `on_unload` after every comfy.model_management.unload_all_models() (NOTE [process hooks]).
    Wraps the function once; returns whether it did."""
    mm = sys.modules.get("comfy.model_management")
    if mm is None or getattr(mm.unload_all_models, "_ltx2_mgpu_hooked", False):
        return False
    original = mm.unload_all_models

    def unload_all_models(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        finally:
            on_unload()

    unload_all_models._ltx2_mgpu_hooked = True  # type: ignore[attr-defined]
    mm.unload_all_models = unload_all_models
    return True


# POST /free's flags (server.py post_free): "Unload Models" sets the first, "Free memory" the second.
FREE_FLAGS = ("unload_models", "free_memory")


def install_free_hook(on_free_during_run: Callable[[], None]) -> bool:
    """Call `on_free_during_run` when "Unload Models" or "Free memory" is posted while a prompt runs.

    ComfyUI only sets a flag on its prompt queue then and unloads once the prompt has ended
    (main.py prompt_worker), so a long job would run to its end first. Wraps the queue's set_flag
    once (the server's queue exists before custom nodes load); nothing outside ComfyUI's server.
    """
    server = sys.modules.get("server")  # never imports ComfyUI's server
    queue = getattr(getattr(getattr(server, "PromptServer", None), "instance", None), "prompt_queue", None)
    if queue is None or getattr(queue.set_flag, "_ltx2_mgpu_hooked", False):
        return False
    original = queue.set_flag

    def set_flag(name: str, data: Any) -> Any:
        result = original(name, data)
        if name in FREE_FLAGS and data and getattr(queue, "currently_running", None):
            on_free_during_run()
        return result

    set_flag._ltx2_mgpu_hooked = True  # type: ignore[attr-defined]
    queue.set_flag = set_flag
    return True


def show_node_text(text: str, node_id) -> None:
    """Show `text` under node `node_id` in ComfyUI's graph (PromptServer.send_progress_text, the text
    ComfyUI's own nodes show while they run). Nothing outside ComfyUI or without a node id."""
    server = sys.modules.get("server") if node_id is not None else None  # never imports ComfyUI's server
    instance = getattr(getattr(server, "PromptServer", None), "instance", None)
    send = getattr(instance, "send_progress_text", None)
    if send is not None:
        send(text, str(node_id))
