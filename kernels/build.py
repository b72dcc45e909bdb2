"""Builds the CUDA-IPC exchange extension from source with torch's extension tools and ninja.

NOTE [kernel build]: the sources in csrc/ are compiled on first use (or ahead of time by
`ltx2-mgpu build-kernels`, i.e. `build_kernels()`) into a cache outside the source tree:
`$LTX2_MGPU_CACHE/kernels/<tag>` or `~/.cache/ltx2_mgpu/kernels/<tag>`, where the tag names the torch and
CUDA versions, the Python version and a hash of the sources and flags, so an upgrade or an edit builds
afresh and never loads a stale binary. Concurrent builders (several ranks starting at once) are
serialised by torch's lock file in that directory. A failed build never raises out of `load_kernels()`:
it logs the compiler's output once, records the reason, and the caller falls back to torch.distributed.

Machine code: always sm_90 (H100/H200, what the pack is tuned on), plus every architecture of the visible
GPUs or of TORCH_CUDA_ARCH_LIST, plus PTX of the newest one so later GPUs JIT-compile it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shutil
import sys
import threading
from pathlib import Path
from types import ModuleType

import torch

__all__ = ["KernelBuildError", "build_config", "build_failure_reason", "build_kernels", "load_kernels"]

_log = logging.getLogger("ltx2_mgpu.kernels")

CSRC_DIR = Path(__file__).resolve().parent / "csrc"
SOURCES = ("engine.cpp", "exchange_kernel.cu")
HEADERS = ("exchange.h",)
# Namespaced: the compiled module never takes a generic top-level name (STYLE.md).
EXTENSION_NAME = "ltx2_mgpu_exchange"
# Where CUDA lives on our machines; `nvcc` on PATH is often a wrapper script that makes torch guess wrong.
DEFAULT_CUDA_HOME = Path("/usr/local/cuda")
# H100/H200: always built as machine code, whatever GPUs this machine shows.
ALWAYS_ARCH = (9, 0)
# ld.acquire/st.release at system scope and __grid_constant__ need sm_70; CUDA 13 dropped everything
# below sm_75.
MIN_ARCH_CUDA12 = (7, 0)
MIN_ARCH_CUDA13 = (7, 5)
# No -std here: torch picks the C++ standard its own headers need.
CUDA_FLAGS = ("-O3", "-lineinfo")
CXX_FLAGS = ("-O3",)


class KernelBuildError(RuntimeError):
    """The extension could not be built; the message holds the compiler's output."""


@dataclasses.dataclass(frozen=True)
class BuildConfig:
    """Everything that decides the binary; `build_dir` is derived from all the other fields."""

    cuda_home: Path | None  # None: no CUDA toolkit found
    archs: tuple[tuple[int, int], ...]  # machine-code targets, ascending; PTX for the last one
    cuda_flags: tuple[str, ...]  # nvcc flags, gencode included
    build_dir: Path

    @property
    def nvcc(self) -> Path | None:
        return None if self.cuda_home is None else self.cuda_home / "bin" / "nvcc"


def find_cuda_home() -> Path | None:
    """CUDA_HOME/CUDA_PATH if they hold nvcc, else /usr/local/cuda, else the directory above a real nvcc."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value and (Path(value) / "bin" / "nvcc").is_file():
            return Path(value)
    if (DEFAULT_CUDA_HOME / "bin" / "nvcc").is_file():
        return DEFAULT_CUDA_HOME
    found = shutil.which("nvcc")
    if found is not None:
        home = Path(os.path.realpath(found)).parent.parent
        if (home / "include" / "cuda_runtime.h").is_file():
            return home
    return None


def _parse_arch_list(text: str) -> list[tuple[int, int]]:
    archs = []
    for item in text.replace(",", ";").replace(" ", ";").split(";"):
        item = item.strip().removesuffix("+PTX")
        if not item:
            continue
        major, _, minor = item.partition(".")
        if major.isdigit() and minor.rstrip("af").isdigit():  # "9.0a" -> (9, 0)
            archs.append((int(major), int(minor.rstrip("af"))))
    return archs


def target_archs() -> tuple[tuple[int, int], ...]:
    """sm_90, plus TORCH_CUDA_ARCH_LIST or else the visible GPUs, without ones this CUDA cannot build."""
    env = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    archs = set(_parse_arch_list(env))
    if not archs and torch.cuda.is_available():
        archs = {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
    archs.add(ALWAYS_ARCH)
    cuda_major = int((torch.version.cuda or "12.0").split(".")[0])
    floor = MIN_ARCH_CUDA13 if cuda_major >= 13 else MIN_ARCH_CUDA12
    return tuple(sorted(a for a in archs if a >= floor))


def _gencode_flags(archs: tuple[tuple[int, int], ...]) -> list[str]:
    flags = [f"-gencode=arch=compute_{ma}{mi},code=sm_{ma}{mi}" for ma, mi in archs]
    ma, mi = archs[-1]
    flags.append(f"-gencode=arch=compute_{ma}{mi},code=compute_{ma}{mi}")
    return flags


def _cache_root() -> Path:
    if os.environ.get("LTX2_MGPU_CACHE"):
        return Path(os.environ["LTX2_MGPU_CACHE"]) / "kernels"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "ltx2_mgpu" / "kernels"


def build_config() -> BuildConfig:
    """The toolkit, targets, flags and cache directory a build would use now (cheap; builds nothing)."""
    cuda_home = find_cuda_home()
    archs = target_archs()
    cuda_flags = (*CUDA_FLAGS, *_gencode_flags(archs))
    digest = hashlib.sha256()
    for name in (*SOURCES, *HEADERS):
        digest.update(name.encode())
        digest.update((CSRC_DIR / name).read_bytes())
    digest.update(repr((cuda_flags, CXX_FLAGS, str(cuda_home))).encode())
    tag = (
        f"torch{torch.__version__}-cuda{torch.version.cuda}-py{sys.version_info.major}{sys.version_info.minor}"
        f"-{digest.hexdigest()[:16]}"
    )
    return BuildConfig(cuda_home, archs, cuda_flags, _cache_root() / tag)


def _use_cuda_home(cuda_home: Path) -> None:
    """Point torch's extension tools at `cuda_home`: they read CUDA_HOME once, when first imported."""
    os.environ["CUDA_HOME"] = str(cuda_home)
    from torch.utils import cpp_extension

    cpp_extension.CUDA_HOME = str(cuda_home)


def build_kernels(verbose: bool = False) -> ModuleType:
    """Compile (if the cache is stale) and import the extension. Raises KernelBuildError with nvcc's output."""
    config = build_config()
    if torch.version.cuda is None:
        raise KernelBuildError(f"this torch ({torch.__version__}) is built without CUDA")
    if config.nvcc is None:
        raise KernelBuildError(
            "no CUDA toolkit found (nvcc): install the CUDA toolkit matching "
            f"torch's CUDA {torch.version.cuda}, or set CUDA_HOME"
        )
    _use_cuda_home(config.cuda_home)  # before torch's extension tools are first imported
    from torch.utils import cpp_extension

    if not cpp_extension.is_ninja_available():
        raise KernelBuildError("ninja is not installed: `pip install ninja`")
    config.build_dir.mkdir(parents=True, exist_ok=True)
    try:
        return cpp_extension.load(
            name=EXTENSION_NAME,
            sources=[str(CSRC_DIR / name) for name in SOURCES],
            extra_cflags=list(CXX_FLAGS),
            extra_cuda_cflags=list(config.cuda_flags),
            build_directory=str(config.build_dir),
            verbose=verbose,
        )
    except (RuntimeError, OSError, ImportError) as exc:  # torch reports compiler failures as RuntimeError
        raise KernelBuildError(f"building the exchange kernels in {config.build_dir} failed:\n{exc}") from exc


@dataclasses.dataclass
class _LoadState:
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    attempted: bool = False
    module: ModuleType | None = None
    failure: str | None = None


_STATE = _LoadState()


def load_kernels() -> ModuleType | None:
    """The extension module, built on first use; None (never an exception) if it cannot be built.

    The first failure is logged once with the compiler's output; `build_failure_reason()` returns it.
    """
    with _STATE.lock:
        if not _STATE.attempted:
            _STATE.attempted = True
            try:
                _STATE.module = build_kernels(verbose=False)
            except KernelBuildError as exc:
                _STATE.failure = str(exc)
                _log.error("%s", exc)
        return _STATE.module


def build_failure_reason() -> str | None:
    """Why load_kernels() returned None: the first line of the failure, or None if it did not fail."""
    if _STATE.failure is None:
        return None
    return _STATE.failure.strip().splitlines()[0]


def main(argv: list[str] | None = None) -> int:
    """`python -m ltx2_mgpu.kernels.build [-q]`: build now, print where the binary is."""
    quiet = "-q" in (argv if argv is not None else sys.argv[1:])
    config = build_config()
    print(f"CUDA_HOME={config.cuda_home} archs={config.archs} cache={config.build_dir}")
    try:
        module = build_kernels(verbose=not quiet)
    except KernelBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"built {module.__file__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
