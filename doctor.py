"""`ltx2-mgpu doctor`: what this machine offers the worker group, in plain text."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import torch


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _peer_matrix(count: int) -> list[str]:
    if count < 2:
        return ["  (fewer than 2 GPUs: no peer access needed)"]
    lines = ["  from\\to " + " ".join(f"{j:>3}" for j in range(count))]
    for i in range(count):
        cells = []
        for j in range(count):
            cells.append("  -" if i == j else ("yes" if torch.cuda.can_device_access_peer(i, j) else " no"))
        lines.append(f"  {i:>7} " + " ".join(f"{c:>3}" for c in cells))
    return lines


def _kernel_lines() -> list[str]:
    try:
        from .kernels import kernel_status
    except ImportError:
        return ["  all2all kernel: not part of this build (torch.distributed fallback)"]
    status = kernel_status()
    lines = [
        f"  all2all kernel built: {'yes' if status.built else 'no'}"
        + ("" if status.built else f" ({status.reason})")
    ]
    lines.append(
        f"  build cache: {status.cache_dir}  (CUDA_HOME {status.cuda_home}, archs {', '.join(status.archs) or '-'})"
    )
    lines.append(f"  mode: {status.mode} (LTX2_MGPU_ALL2ALL=auto|kernel|fallback)")
    if status.selected:
        lines.append(
            f"  in use in this process: {status.selected}"
            + (f" ({status.selected_reason})" if status.selected_reason else "")
        )
    elif not status.built:
        lines.append(
            "  GPU groups would use the torch.distributed all_to_all fallback until the kernel is built"
        )
    return lines


def report() -> str:
    from .workers.group.launcher import parse_devices

    lines = [
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores",
        f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none'}), ltx-core {_version('ltx-core')}, "
        f"transformers {_version('transformers')}",
    ]
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    lines.append(
        f"GPUs visible: {count}"
        + (
            f" (CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']})"
            if "CUDA_VISIBLE_DEVICES" in os.environ
            else ""
        )
    )
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        lines.append(
            f"  cuda:{i} {props.name}, {props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs"
        )
    lines.append("peer access:")
    lines.extend(_peer_matrix(count))
    lines.append("sequence-parallel exchange:")
    lines.extend(_kernel_lines())
    placement = parse_devices("all")
    lines.append(
        f"'all' would start {placement.world_size} worker(s) on {', '.join(placement.devices)} "
        f"with {placement.backend} for collectives"
    )
    if any(k in os.environ for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")):
        lines.append(
            "note: allocator settings in this environment are not passed to workers (CUDA IPC needs the default allocator)"
        )
    return "\n".join(lines)
