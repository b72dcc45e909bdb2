"""The end of a benchmark run: stamp the report with the command and torch version, print it, write it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


def finish(report: dict, out: Path | None, argv: list[str] | None) -> dict:
    """`report` + "command" (as typed, `argv` or the process's own) + "torch", printed as JSON and
    written to `out` when given."""
    report = {
        **report,
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "torch": torch.__version__,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")
    return report
