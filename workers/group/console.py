"""The pack's lines in ComfyUI's console: one logger, one prefix, so a user sees which pack speaks.

ComfyUI shows INFO records of every logger on its console; outside ComfyUI (the CLI, tests) nothing is
configured and INFO lines stay silent unless the program sets up logging.
"""

from __future__ import annotations

import logging

CONSOLE_PREFIX = "[LTX2 MultiGPU]"  # as the workers' error lines (workers/rank/runtime.py)
_log = logging.getLogger("ltx2_mgpu")


def info(message: str) -> None:
    _log.info("%s %s", CONSOLE_PREFIX, message)


def warning(message: str) -> None:
    _log.warning("%s %s", CONSOLE_PREFIX, message)


def seconds(elapsed_s: float) -> str:
    return f"{elapsed_s:.2f} s" if elapsed_s < 10 else f"{elapsed_s:.1f} s"
