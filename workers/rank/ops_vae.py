"""The "vae_decode" command: video latent -> IMAGE frames over the whole group, audio latent -> waveform.

The request: wire/requests.py VaeDecode (built by nodes/vae_decode.py); pre-faulting of the IMAGE
pages: NOTE [shm prefault] in strategies/shm_prefault.py.

Video: strategies/vae_decode.py on the plan of strategies/vae_tiles.py; every rank decodes its tiles
with ltx-core's VideoDecoder in the model's dtype. Audio: the last rank (round-robin leaves it the
fewest tiles) decodes it during the last round with ltx-core's AudioDecoder and vocoder in float32,
as ComfyUI's LTXVAudioVAEDecode does (its audio VAE works in float32 only). The decoders are loaded
on first use and kept in the loaded model's `extras`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import time

import torch
import torch.distributed as dist

from ..engine.comfy.model import ComfyModel
from ..engine.ltxcore.checkpoint import load_audio_decoder, load_video_decoder, load_vocoder
from ..engine.ltxcore.model import LoadedModel
from ..strategies import shm_prefault
from ..strategies.decode_limits import check_decodable, check_tiles_decodable
from ..strategies.vae_decode import TiledDecode
from ..strategies.vae_tiles import TilePlan, make_plan
from ..wire.requests import VaeDecode
from ..wire.vae_outputs import image_shape
from .ops import InputRejected, op
from .ops_sampling import loaded_model

VIDEO_DECODER_KEY = "video_decoder"
AUDIO_DECODER_KEY = "audio_decoder"
VOCODER_KEY = "vocoder"
# Only for checkpoints whose decoder has timestep_conditioning (it then mixes noise into the latent):
# tile i draws it from a generator seeded DECODE_NOISE_SEED + i, so the decode does not depend on
# timing or the rank count. ComfyUI and ltx-core draw it unseeded.
DECODE_NOISE_SEED = 0
AUDIO_DTYPE = torch.float32


def video_decoder(model: LoadedModel, device: torch.device) -> torch.nn.Module:
    if VIDEO_DECODER_KEY not in model.extras:
        model.extras[VIDEO_DECODER_KEY] = load_video_decoder(model.path, device, model.dtype)
    return model.extras[VIDEO_DECODER_KEY]


def audio_modules(model: LoadedModel, device: torch.device) -> tuple[torch.nn.Module, torch.nn.Module]:
    if AUDIO_DECODER_KEY not in model.extras:
        model.extras[AUDIO_DECODER_KEY] = load_audio_decoder(model.path, device, AUDIO_DTYPE)
    if VOCODER_KEY not in model.extras:
        model.extras[VOCODER_KEY] = load_vocoder(model.path, device, AUDIO_DTYPE)
    return model.extras[AUDIO_DECODER_KEY], model.extras[VOCODER_KEY]


def validate(request: VaeDecode, world_size: int) -> TilePlan:
    """The tile plan for this group, alike on every rank before any collective (the request checked
    the latents)."""
    video, audio = request.video, request.audio
    try:
        check_decodable(tuple(video.shape))
        plan = make_plan(tuple(video.shape[2:]), request.tiles, world_size)
        check_tiles_decodable(plan)  # ltx-core's tiles; the comfy backend tiles as VAEDecodeTiled does
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    out_image, out_audio = request.out_image, request.out_audio
    assert tuple(out_image.shape) == image_shape(tuple(video.shape)), "IMAGE slot of the wrong shape"
    assert out_image.dtype == torch.float32, "IMAGE slot must be float32"
    assert (out_audio is None) == (audio is None), "an audio slot goes with an audio latent"
    return plan


def agree_on_error(job, message: str | None) -> None:
    """Collective: if any rank has an error message, every rank raises InputRejected with the first
    (in rank order), so a failure on one rank leaves the group usable."""
    messages = [message]
    if job.world_size > 1:
        messages = [None] * job.world_size
        dist.all_gather_object(messages, message, group=job.runtime.control_group)
    first = next((m for m in messages if m is not None), None)
    if first is not None:
        raise InputRejected(first)


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


def _decode_audio(
    model: LoadedModel, audio: torch.Tensor, out: torch.Tensor, device: torch.device
) -> tuple[int, int, int]:
    """Decode on this rank into `out` when the shapes match; return (channels, samples, sample rate)."""
    decoder, vocoder = audio_modules(model, device)
    with torch.inference_mode():
        waveform = vocoder(decoder(audio.to(device=device, dtype=AUDIO_DTYPE)))
    if tuple(waveform.shape) == tuple(out.shape):
        out.copy_(waveform.to(device="cpu", dtype=out.dtype))
    return int(waveform.shape[1]), int(waveform.shape[-1]), int(vocoder.output_sampling_rate)


@op(VaeDecode)
def vae_decode(job, request: VaeDecode) -> dict:
    rt = job.runtime
    comfy_model = rt.state.get("model")
    if isinstance(comfy_model, ComfyModel):  # before loaded_model, which accepts ltx-core's only
        from .comfy_vae import vae_decode_comfy  # imports ComfyUI's VAE code: only on the comfy backend

        return vae_decode_comfy(job, comfy_model, request)
    model = loaded_model(job)
    plan = validate(request, job.world_size)
    try:
        prefault = shm_prefault.prefault_setting(request.prefault)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    memory = PeakMemory(rt.device)
    audio, out_audio = request.audio, request.out_audio
    audio_rank = job.world_size - 1
    error = None
    try:
        decoder = video_decoder(model, rt.device)
        if audio is not None and job.rank == audio_rank:
            audio_modules(model, rt.device)
    except ValueError as exc:
        error = f"{exc} (the Distributed VAE Decode needs the checkpoint's VAE)"
    agree_on_error(job, error)
    audio_result = (0, 0, 0)
    audio_s = 0.0

    def decode(tile_latent: torch.Tensor, tile: int) -> torch.Tensor:
        generator = None
        if decoder.timestep_conditioning:
            generator = torch.Generator(rt.device).manual_seed(DECODE_NOISE_SEED + tile)
        return decoder(tile_latent, generator=generator)

    def on_round(r: int) -> None:
        nonlocal audio_result, audio_s
        if audio is not None and job.rank == audio_rank and r == plan.rounds - 1:
            start = time.perf_counter()
            audio_result = _decode_audio(model, audio, out_audio, rt.device)
            audio_s = time.perf_counter() - start
        job.progress(min((r + 1) * job.world_size, plan.num_tiles), plan.num_tiles)
        job.check_cancel()

    job.check_cancel()
    start = time.perf_counter()
    runner = TiledDecode(
        plan, job.rank, rt.device, model.dtype, comm_on_device=rt.backend == "nccl", prefault=prefault
    )
    with torch.inference_mode():
        stats = runner.run(request.video, request.out_image, decode, on_round)
    total_s = time.perf_counter() - start
    sample_rate = check_audio_shape(job, audio_result, out_audio, audio_rank) if audio is not None else None
    return {
        "backend": "ltxcore",
        "mode": "tiled",  # ltx-core's tiles (NOTE [vae tiles]); the exact mode runs on the comfy backend
        "plan": plan.describe(),
        "num_tiles": plan.num_tiles,
        "total_s": round(total_s, 6),
        "audio_s": round(audio_s, 6),
        "sample_rate": sample_rate,
        **memory.read(),
        **stats.as_dict(),
    }


def check_audio_shape(
    job, result: tuple[int, int, int], out: torch.Tensor, audio_rank: int, maker: str = "the vocoder"
) -> int:
    """Collective: every rank learns the audio rank's waveform shape and rate; all raise alike (the
    group stays usable) when it is not the shape the client allocated. `maker` names what made it."""
    shared = torch.tensor(result, dtype=torch.int64)
    if job.world_size > 1:
        dist.broadcast(shared, src=audio_rank, group=job.runtime.control_group)
    channels, samples, rate = (int(v) for v in shared)
    if (channels, samples) != tuple(out.shape[1:]):
        raise RuntimeError(
            f"{maker} made {channels} x {samples} samples but {out.shape[1]} x {out.shape[2]} were "
            "allocated from the checkpoint's config (workers/wire/vae_outputs.py); report this with the "
            "checkpoint's 'audio_vae' and 'vocoder' config"
        )
    return rate
