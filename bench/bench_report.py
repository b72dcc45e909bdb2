"""The end of a benchmark run: stamp the report with the command and torch version, print it, write it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV, check_comfyui_root


def shareable(arg: str) -> str:
    """A command-line argument as a result file may show it: an absolute path by its name only (results
    are committed; a path of the machine that ran them means nothing to a reader)."""
    return Path(arg).name if Path(arg).is_absolute() else arg


def add_comfyui_argument(parser: argparse.ArgumentParser) -> None:
    """--comfyui: the ComfyUI to measure with, COMFYUI_PATH by default."""
    parser.add_argument("--comfyui", default=os.environ.get(COMFYUI_PATH_ENV, ""), help="ComfyUI root")


def comfyui_root(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The --comfyui folder checked as a ComfyUI root; a usage error naming both ways to give it."""
    if not args.comfyui:
        parser.error(f"name the ComfyUI to measure with --comfyui or {COMFYUI_PATH_ENV}")
    return check_comfyui_root(args.comfyui, source="--comfyui")


def finish(report: dict, out: Path | None, argv: list[str] | None) -> dict:
    """`report` + "command" (as typed, `argv` or the process's own, absolute paths by name) + "torch",
    printed as JSON and written to `out` when given."""
    args = argv if argv is not None else sys.argv[1:]
    report = {
        **report,
        "command": " ".join([Path(sys.argv[0]).name, *map(shareable, args)]),
        "torch": torch.__version__,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")
    return report


def timed_peak(fn, device: torch.device) -> tuple[float, int, object]:
    """(seconds, CUDA peak bytes allocated above the start (0 on the CPU), result) of fn()."""
    if device.type != "cuda":
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, 0, result
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, torch.cuda.max_memory_allocated() - base, result
