"""Registry of the commands a worker runs. Handlers live in the ops_* modules and register here.

A handler is `fn(job: JobContext, args: dict) -> dict | None`; tensors in `args` arrive already
mapped from shared memory; the returned dict must hold builtins only (see protocol.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[Any, dict], "dict | None"]
OPS: dict[str, Handler] = {}


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
    """Import every ops_*.py module of this package (each registers its commands)."""
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("ops_"):
            importlib.import_module(f"{__package__}.{info.name}")
