"""What the pack's V3 node classes share: the menu category, the MGPU_MODEL socket type, the strength
widget of the LoRA inputs."""

from __future__ import annotations

from comfy_api.latest import io

from ..mgpu_lora import STRENGTH_LIMIT, STRENGTH_STEP

CATEGORY = "LTX-2 MultiGPU"
# A handle to the worker group holding the model (workers/group/manager.py MGPUModel); the socket
# type name is part of saved workflows' links.
MGPUModel = io.Custom("MGPU_MODEL")


def node_id(node: type[io.ComfyNode]) -> str | None:
    """The running node's id in the graph (its progress bar and the text under it), None when the class is
    called outside ComfyUI's executor."""
    return getattr(node.hidden, "unique_id", None)


def strength_input(name: str, tooltip: str, optional: bool = False) -> io.Float.Input:
    """A LoRA strength, with LoraLoaderModelOnly's range and step."""
    return io.Float.Input(
        name,
        default=1.0,
        min=-STRENGTH_LIMIT,
        max=STRENGTH_LIMIT,
        step=STRENGTH_STEP,
        tooltip=tooltip,
        optional=optional,
    )


def seed_input() -> io.Int.Input:
    """A seed widget as KSampler's (the UI adds its control-after-generate choice after it)."""
    return io.Int.Input("seed", default=0, min=0, max=0xFFFFFFFFFFFFFFFF, control_after_generate=True)


def cfg_input(name: str, default: float, tooltip: str) -> io.Float.Input:
    """A guidance scale, with KSampler's range, step and rounding."""
    return io.Float.Input(name, default=default, min=0.0, max=100.0, step=0.1, round=0.01, tooltip=tooltip)
