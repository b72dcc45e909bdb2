"""How worker processes are started: device list, backend choice, clean environment, command line."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..wire.machines import remote_devices, split_device
from ..wire.model_call import ATTENTION_ENV, registered_name


def bootstrap(module: str) -> str:
    """`python -c` code that imports the pack from argv[1] under the name "ltx2_mgpu" (ComfyUI imports
    it under a path-derived name) and runs `module`'s main()."""
    return (
        "import sys, importlib.util as u\n"
        "root = sys.argv[1]\n"
        "if 'ltx2_mgpu' not in sys.modules:\n"
        "    spec = u.spec_from_file_location(\n"
        "        'ltx2_mgpu', root + '/__init__.py', submodule_search_locations=[root])\n"
        "    sys.modules['ltx2_mgpu'] = u.module_from_spec(spec)\n"
        f"from {module} import main\n"
        "main()\n"
    )


# A spawned worker's first lines: the rank's entry (workers/rank/entry.py).
BOOTSTRAP = bootstrap("ltx2_mgpu.workers.rank.entry")


PACK_ROOT = Path(__file__).resolve().parents[2]
CPU_WORKERS_ENV = "LTX2_MGPU_CPU_WORKERS"
# What ComfyUI picks by itself (PyTorch's attention on GPUs, sub-quadratic on CPUs): the workers keep
# their own default (PyTorch's, cuDNN first), as a flag-less ComfyUI on a GPU runs.
_DEFAULT_ATTENTION = ("pytorch", "sub_quad")


def comfyui_attention_env() -> dict[str, str]:
    """{ATTENTION_ENV: name} when this process runs ComfyUI with an attention function chosen on its
    command line, else {}. Reads the module only if ComfyUI imported it (never imports ComfyUI)."""
    attention = sys.modules.get("comfy.ldm.modules.attention")
    registry = getattr(attention, "REGISTERED_ATTENTION_FUNCTIONS", {})
    name = registered_name(registry, getattr(attention, "optimized_attention", None))
    return {ATTENTION_ENV: name} if name is not None and name not in _DEFAULT_ATTENTION else {}


# Allocator settings a host application may carry (ComfyUI can select cudaMallocAsync): memory
# from the async allocator cannot be shared over CUDA IPC and has broken NCCL in other packs.
_DROPPED_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


@dataclass(frozen=True)
class Placement:
    """Where each rank runs. devices[r] is "cpu" or "cuda:<id>" with ids as this process sees them, or
    "<machine>:cpu" / "<machine>:cuda:<id>" on another machine (NOTE [machines]), after this machine's."""

    devices: tuple[str, ...]

    @property
    def machines(self) -> tuple[str, ...]:
        """The other machines the ranks run on, in rank order."""
        return tuple(dict.fromkeys(m for m, _ in map(split_device, self.devices) if m))

    @property
    def local_ranks(self) -> tuple[int, ...]:
        return tuple(r for r, d in enumerate(self.devices) if not split_device(d)[0])

    def ranks_on(self, machine: str) -> tuple[int, ...]:
        return tuple(r for r, d in enumerate(self.devices) if split_device(d)[0] == machine)

    @property
    def world_size(self) -> int:
        return len(self.devices)

    @property
    def backend(self) -> str:
        """NCCL when every rank has a GPU of its own; gloo otherwise (CPU, or ranks sharing a GPU)."""
        cuda = [d for d in self.devices if split_device(d)[1].startswith("cuda")]
        if len(cuda) == len(self.devices) and len(set(cuda)) == len(cuda):
            return "nccl"
        return "gloo"

    def threads_per_rank(self) -> int:
        cpu_ranks = sum(1 for d in self.devices if d == "cpu")
        return max(1, (os.cpu_count() or 1) // max(cpu_ranks, 1))


def parse_devices(spec: str | Sequence[str | int], *, available_gpus: int | None = None) -> Placement:
    """Turn a user's device choice into a Placement, or raise ValueError saying what to change.

    Accepts "all" (every visible GPU, or one CPU rank without GPUs), "cpu" / "cpu:N" (N CPU ranks),
    a count "N" (the first N GPUs), or a list such as "0,1,3" / "cuda:0,cuda:0" / ["cpu", "cpu"]. A list
    may name other machines' devices ("0,1,box2:0-3", "cpu,box2:cpu:2"; NOTE [machines]): their ranks
    follow this machine's, machine by machine in the order the list first names them.
    """
    gpus = torch.cuda.device_count() if available_gpus is None else available_gpus
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("", "all"):
            if gpus:
                return Placement(tuple(f"cuda:{i}" for i in range(gpus)))
            # No GPU: CPU workers (one unless LTX2_MGPU_CPU_WORKERS says more; for testing workflows).
            count = _positive_int(os.environ.get(CPU_WORKERS_ENV, "1"), CPU_WORKERS_ENV)
            return Placement(("cpu",) * count)
        if "," not in text and (text == "cpu" or text.startswith("cpu:")):
            count = _positive_int(text.partition(":")[2] or "1", "CPU rank count")
            return Placement(("cpu",) * count)
        if text.isdigit() and text != "0":  # a count; a lone 0 (no count) means GPU 0, as in "0,1"
            count = _positive_int(text, "GPU count")
            if count > gpus:
                raise ValueError(f"{count} GPUs were asked for but {_visible(gpus)}. {_choices(gpus)}")
            return Placement(tuple(f"cuda:{i}" for i in range(count)))
        items: Sequence[str | int] = [t for t in text.replace(" ", "").split(",") if t]
    else:
        items = list(spec)
    if not items:
        raise ValueError("the device list is empty; use 'all', a GPU count, or ids like '0,1'")
    local: list[str] = []
    remote: dict[str, list[str]] = {}
    for item in items:
        machine, rest = split_device(str(item).strip().lower())
        if machine:
            remote.setdefault(machine, []).extend(remote_devices(machine, rest))
        else:
            local.append(_one_device(item, gpus))
    return Placement(tuple(local) + tuple(d for devices in remote.values() for d in devices))


def _positive_int(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, got {text!r}") from None
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    return value


def _one_device(item: str | int, gpus: int) -> str:
    text = str(item).strip().lower()
    if text == "cpu":
        return "cpu"
    index_text = text.removeprefix("cuda:")
    if not index_text.isdigit():
        raise ValueError(f"{item!r} is not a device; use GPU ids like 0 or cuda:0, or cpu")
    index = int(index_text)
    if index >= gpus:
        raise ValueError(f"GPU {index} does not exist: {_visible(gpus)}. {_choices(gpus)}")
    return f"cuda:{index}"


def _visible(gpus: int) -> str:
    if gpus == 0:
        return "no GPU is visible to this process"
    return f"{gpus} GPU{'s' if gpus > 1 else ''} {'are' if gpus > 1 else 'is'} visible (ids 0..{gpus - 1})"


def _choices(gpus: int) -> str:
    cpu = "'cpu:N' runs N workers on the CPU (slow; for trying a workflow)"
    if gpus == 0:
        return f"Check CUDA_VISIBLE_DEVICES and the driver (ltx2-mgpu doctor), or use 'cpu:N': {cpu}."
    return f"Pick ids from that range, a count up to {gpus}, or 'all'; {cpu}."


def worker_env(placement: Placement, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    # Rendezvous and collectives stay on loopback: nothing listens on a network interface.
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env["NCCL_SOCKET_IFNAME"] = "lo"
    env["MASTER_ADDR"] = "127.0.0.1"
    env["OMP_NUM_THREADS"] = str(placement.threads_per_rank())
    env["PYTHONUNBUFFERED"] = "1"
    # NCCL's one-time notice about unbatched send/recv (text encoding's layer pipeline) is noise here.
    env.setdefault("TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING", "false")
    if extra:
        env.update(extra)
    return env


def worker_command() -> list[str]:
    return [sys.executable, "-c", BOOTSTRAP, str(PACK_ROOT)]
