"""What both engines' VAE jobs share: a rank's peak memory during a job, and the collective check of
the decoded audio's shape against the slot the client allocated.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re

import torch
import torch.distributed as dist

from .protocol import Job


def _release_free_heap() -> None:
    """Hand freed heap pages back to the OS (glibc malloc_trim), so that the resident set measures what
    is in use: glibc otherwise keeps the previous job's freed tensors resident and a job reusing them
    shows no growth."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the figure then includes retained free memory


class PeakMemory:
    """This rank's memory during a job: CUDA bytes allocated by torch, or on the CPU the process's
    resident set (peak from VmHWM, reset through /proc/self/clear_refs). `baseline` is the figure at
    construction (weights already loaded), so peak - baseline is what the job itself used. On the
    CPU the shared-memory pages of the IMAGE this rank wrote count too."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            self.baseline = int(torch.cuda.memory_allocated(device))
            return
        _release_free_heap()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass  # not resettable here: the peak is then the process's lifetime peak
        self.baseline = self._status_bytes("VmRSS")
        self._shared_start = self._status_bytes("RssShmem")

    @staticmethod
    def _status_bytes(field: str) -> int:
        with open("/proc/self/status") as f:
            match = re.search(rf"{field}:\s+(\d+) kB", f.read())
        return int(match.group(1)) * 1024 if match else -1

    def read(self) -> dict:
        """Peak and baseline bytes; on the CPU also the shared-memory pages mapped in during the job
        (the IMAGE values this rank wrote), which the peak resident set includes."""
        if self.device.type == "cuda":
            peak = int(torch.cuda.max_memory_allocated(self.device))
            return {
                "memory_kind": "cuda_max_allocated",
                "peak_memory_bytes": peak,
                "baseline_memory_bytes": self.baseline,
            }
        return {
            "memory_kind": "cpu_peak_rss",
            "peak_memory_bytes": self._status_bytes("VmHWM"),
            "baseline_memory_bytes": self.baseline,
            "shared_memory_written_bytes": self._status_bytes("RssShmem") - self._shared_start,
        }


def check_audio_shape(
    job: Job, result: tuple[int, int, int], out: torch.Tensor, audio_rank: int, maker: str = "the vocoder"
) -> int:
    """Collective: every rank learns the audio rank's waveform shape and rate; all raise alike (the
    group stays usable) when it is not the shape the client allocated. `maker` names what made it."""
    shared = torch.tensor(result, dtype=torch.int64)
    if job.world_size > 1:
        dist.broadcast(shared, src=audio_rank, group=job.control_group)
    channels, samples, rate = (int(v) for v in shared)
    if (channels, samples) != tuple(out.shape[1:]):
        raise RuntimeError(
            f"{maker} made {channels} x {samples} samples but {out.shape[1]} x {out.shape[2]} were "
            "allocated from the checkpoint's config (workers/wire/vae_outputs.py); report this with the "
            "checkpoint's 'audio_vae' and 'vocoder' config"
        )
    return rate
