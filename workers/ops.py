"""Registry of the commands a worker runs. Handlers live in the ops_* modules and register here.

A handler is `fn(job: JobContext, args: dict) -> dict | None`; tensors in `args` arrive already
mapped from shared memory; the returned dict must hold builtins only (see protocol.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Handler = Callable[[Any, dict], "dict | None"]
OPS: dict[str, Handler] = {}

_HANDLER_MODULES = ("ops_diagnostics", "ops_model", "ops_sampling")


class InputRejected(ValueError):
    """Raised alike on every rank, before any collective, when a job's input is unusable."""


class Cancelled(Exception):
    """Raised alike on every rank once a cancel was agreed at a step boundary."""


def op(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if name in OPS:
            raise RuntimeError(f"command {name!r} registered twice")
        OPS[name] = fn
        return fn

    return register


def load_all() -> None:
    for module in _HANDLER_MODULES:
        importlib.import_module(f"{__package__}.{module}")
