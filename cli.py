"""`ltx2-mgpu`: the pack's command line (make-tiny, doctor, build-kernels, demo, worker)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .workers.wire.pack_folder import keep_pack_folder_off_sys_path

# Before any subcommand imports transformers, ComfyUI or ltx-core: NOTE [pack folder]
# (`python -m ltx2_mgpu.cli` from the checkout root puts the checkout on sys.path).
keep_pack_folder_off_sys_path()


def _make_tiny(args: argparse.Namespace) -> int:
    make = _TINY_FAMILIES.get(args.family)
    if make is None:
        print(f"--family {args.family!r} is not one of {', '.join(_TINY_FAMILIES)}", file=sys.stderr)
        return 2
    return make(args)


def _make_tiny_ltx2(args: argparse.Namespace) -> int:
    from .workers.embedded.released import write_released

    for path in write_released(Path(args.dir), "2", seed=args.seed).values():
        print(f"{path}  ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


def _make_tiny_ltx25(args: argparse.Namespace) -> int:
    from .workers.embedded.tiny_ltx25 import make_tiny_ltx25

    try:
        files = make_tiny_ltx25(Path(args.dir), seed=args.seed)
    except ValueError as exc:  # no ComfyUI to build the modules with: the message says what to set
        print(f"make-tiny --family 2.5: {exc}", file=sys.stderr)
        return 2
    for path in files.all():
        print(f"{path}  ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


def _make_tiny_ltx23(args: argparse.Namespace) -> int:
    from .workers.embedded.released import write_released
    from .workers.embedded.tiny_ltx23 import ComfyUINotFound

    try:
        written = write_released(Path(args.dir), "2.3", seed=args.seed)
    except ComfyUINotFound as exc:
        print(exc, file=sys.stderr)
        return 1
    for path in written.values():
        print(f"{path}  ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


# make-tiny's families: --family value -> writer. Each family's module owns its files.
_TINY_FAMILIES = {"2": _make_tiny_ltx2, "2.3": _make_tiny_ltx23, "2.5": _make_tiny_ltx25}


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import report

    print(report())
    return 0


def _build_kernels(args: argparse.Namespace) -> int:
    from .kernels import build

    try:
        build.build_kernels(verbose=args.verbose)
    except build.KernelBuildError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    print("all2all kernel built")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args)


def _worker(args: argparse.Namespace) -> int:
    import os

    from .workers.group.machine_agent import MachineAgent
    from .workers.wire.machines import TOKEN_FILE_ENV, read_token

    if args.token_file:
        os.environ[TOKEN_FILE_ENV] = args.token_file
    try:
        token = read_token(create=False)
        agent = MachineAgent(
            args.join, token, name=args.name, models=args.models,
            comfyui_root=args.comfyui or os.environ.get("COMFYUI_PATH", ""),
        )  # fmt: skip
    except ValueError as exc:
        print(f"ltx2-mgpu worker: {exc}", file=sys.stderr)
        return 2
    return agent.run(once=args.once)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ltx2-mgpu", description="LTX-2 on several GPUs (ComfyUI-LTX2-MultiGPU)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "make-tiny",
        help="write a tiny LTX release (a few MB, random weights) into DIR's ComfyUI model folders, under the "
        "released file names the official templates and example workflows load",
    )
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--family",
        default="2",
        help=f"which LTX release: {', '.join(_TINY_FAMILIES)} (2.3 and 2.5 are built with ComfyUI's classes: "
        "need COMFYUI_PATH or the pack inside ComfyUI's custom_nodes/)",
    )
    p.set_defaults(func=_make_tiny)

    p = sub.add_parser(
        "doctor", help="devices, peer access, kernel build, versions, what the group would use"
    )
    p.set_defaults(func=_doctor)

    p = sub.add_parser(
        "build-kernels", help="build the CUDA all2all extension now (otherwise built on first use)"
    )
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(func=_build_kernels)

    p = sub.add_parser("demo", help="run the two-stage text-to-video job on the embedded tiny model")
    p.add_argument(
        "--devices", default="cpu:2", help="worker devices: cpu:N (default cpu:2), all, a count, or ids 0,1"
    )
    p.add_argument("--out", default="ltx2-mgpu-demo", help="output folder (default ./ltx2-mgpu-demo)")
    p.add_argument("--models", default=None, help="where to write the tiny model (default: <out>/models)")
    p.add_argument("--prompt", default="A red fox runs through fresh snow at dawn, cinematic.")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--runs", type=int, default=1, help="run the job this many times on one group")
    p.set_defaults(func=_demo)

    p = sub.add_parser(
        "worker",
        help="lend this machine's GPUs to the worker group of the machine that runs ComfyUI (docs/MACHINES.md)",
    )
    p.add_argument(
        "--join", required=True, metavar="HOST:PORT", help="that machine's LTX2_MGPU_LISTEN address"
    )
    p.add_argument(
        "--name", default="", help="this machine's name in the loader's gpus (default: its host name)"
    )
    p.add_argument("--token-file", default="", help="the join token's file (default: LTX2_MGPU_JOIN_TOKEN, else "
                   "~/.config/ltx2-mgpu/join_token)")  # fmt: skip
    p.add_argument("--models", action="append", default=[], metavar="DIR",
                   help="a folder holding this machine's copies of the model files (repeatable; default: "
                   "<comfyui>/models)")  # fmt: skip
    p.add_argument("--comfyui", default="", help="this machine's ComfyUI folder (default: COMFYUI_PATH)")
    p.add_argument(
        "--once", action="store_true", help="exit after serving one group instead of joining again"
    )
    p.set_defaults(func=_worker)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
