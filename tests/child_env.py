"""The environment of a Python the tests start (a ComfyUI server, a bench, a probed CLI run)."""

from __future__ import annotations

from collections.abc import Mapping


def no_bytecode_beside_sources(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a child that leaves no __pycache__ in the checkout: its bytecode goes to the session's
    PYTHONPYCACHEPREFIX (tests/conftest.py), where later children read it; without one, it writes none.
    (Forcing PYTHONDONTWRITEBYTECODE beside the folder made each ComfyUI server compile the modules only
    servers import again: 10.1 s of CPU per start against 7.0 s.)"""
    out = dict(env)
    if not out.get("PYTHONPYCACHEPREFIX"):
        out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out
