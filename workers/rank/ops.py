"""Registry of the commands a worker runs. Handlers live in the ops_* modules and register here.

A handler is `fn(job: JobContext, request) -> dict | None`, registered with `@op(RequestType)`: the
runtime rebuilds the node's typed request (wire/requests.py) from the message, so its checks run on
every rank before the handler (their ValueError / TypeError become InputRejected, alike on every
rank). Diagnostics commands without a request type register by name and get the args dict. Tensors
arrive already mapped from shared memory; the returned dict must hold builtins only (protocol.py).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..engine.protocol import Cancelled, InputRejected
from ..wire.requests import Request

__all__ = ["OPS", "Cancelled", "InputRejected", "load_all", "op", "read_request"]

R = TypeVar("R", bound=Request)

Handler = Callable[[Any, dict], "dict | None"]
OPS: dict[str, Handler] = {}


def op(command: str | type[Request]) -> Callable[[Handler], Handler]:
    name = command if isinstance(command, str) else command.OP

    def register(fn: Handler) -> Handler:
        if name in OPS:
            raise RuntimeError(f"command {name!r} registered twice")
        if isinstance(command, str):
            OPS[name] = fn
            return fn

        # Called with the wire dict (the runtime, tests) or with the request itself.
        @functools.wraps(fn)
        def typed(job, args):
            return fn(job, args if isinstance(args, command) else read_request(command, args))

        OPS[name] = typed
        return typed

    return register


def read_request(kind: type[R], args: dict) -> R:
    """The typed request of a command's args; its checks' errors as InputRejected (alike on every rank)."""
    try:
        return kind.from_wire(args)
    except (TypeError, ValueError) as exc:
        raise InputRejected(str(exc)) from None


def load_all() -> None:
    """Import every ops_*.py module of this package (each registers its commands)."""
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("ops_"):
            importlib.import_module(f"{__package__}.{info.name}")
