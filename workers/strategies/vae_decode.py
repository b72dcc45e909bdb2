"""Run a VAE tile plan over the process group and write the frames into the shared IMAGE tensor.

Collective: every rank calls `TiledDecode.run` with the same plan, in the same job. Per NOTE
[vae tiles] and NOTE [vae blend] (vae_tiles.py):
  1. round r: rank k decodes tile r*N + k (one tile at a time, so a rank's peak memory is one tile's
     decode plus the overlap strips it keeps). Regions the tile covers alone are mapped to IMAGE
     values and written straight into the shared-memory IMAGE; its pixels in shared regions are
     kept (decoder dtype, on the rank's device). `on_round` runs after every round on every rank
     (progress, the collective cancel check);
  2. after every round, one all_to_all_single moves the kept strips of the regions completed in that
     round to their finalisers (only overlap pixels travel; full frames never do);
  3. each finaliser adds the weighted contributions of those regions in tile order, maps them to
     IMAGE values and writes them. Every output value is written once, by one rank.
IMAGE values are ComfyUI's: ((x + 1) / 2) clamped to [0, 1], float32, [B * frames, H, W, 3].
Hand-back speed: with `prefault`, a thread populates the pages of the bytes this rank will write, in
the order it writes them, while the first tiles decode (NOTE [shm prefault] in workers/strategies/shm_prefault.py); from
a GPU, values go through one reused pinned buffer (STAGING_BYTES), not fresh pageable memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from . import shm_prefault
from .vae_tiles import Region, TilePlan

# decode(latent tile [B, C, f, h, w] on the device in the decoder's dtype, tile index) -> pixels
# [B, 3, frames, H, W] in the decoder's dtype, about [-1, 1].
DecodeFn = Callable[[torch.Tensor, int], torch.Tensor]
RoundFn = Callable[[int], None]
CPU = torch.device("cpu")
# Device-to-host copies go through one pinned buffer of this size per rank, reused for every write
# (larger regions in chunks of frames): into fresh pageable memory a D2H copy ran at 1.9 GB/s on an
# H200 host, into pinned memory at 55 GB/s (bench/results/vae_h200x2.json, handback_baseline).
STAGING_BYTES = 64 * 2**20
# The pre-fault thread checks for a stop between batches of about this many bytes: 10-40 ms at the
# 1.6-6.9 GB/s first-touch rates measured (CI machine, H200 host), the most a cancel waits for it.
PREFAULT_BATCH_BYTES = 64 * 2**20


def to_image(pixels: torch.Tensor) -> torch.Tensor:
    """Decoder output -> IMAGE values, as ComfyUI's VAE.process_output does: clamp((x + 1) / 2, 0, 1)
    in float32 (the same operations, in place on one new tensor)."""
    return (pixels.float() + 1.0).div_(2.0).clamp_(min=0.0, max=1.0)


def copy_through(dst: torch.Tensor, src: torch.Tensor, staging: torch.Tensor) -> None:
    """dst[B, f, ...] (CPU, any strides) <- src (same shape, contiguous, any device) through the flat
    buffer `staging` (CPU, of src's dtype, at least one frame src[b, t]), a chunk of frames at a time.
    Blocking."""
    frame_numel = src[0, 0].numel() if src.numel() else 1
    per_chunk = staging.numel() // frame_numel
    assert per_chunk >= 1, "staging buffer smaller than one frame"
    for b in range(src.shape[0]):
        for t in range(0, src.shape[1], per_chunk):
            chunk = src[b, t : t + per_chunk]
            stage = staging[: chunk.numel()].view(chunk.shape)
            stage.copy_(chunk)
            dst[b, t : t + per_chunk].copy_(stage)


def region_view(image5: torch.Tensor, region: Region) -> torch.Tensor:
    """The part of image5 [B, frames, H, W, 3] that `region` covers (a strided view)."""
    (t0, t1), (h0, h1), (w0, w1) = region.pixels
    return image5[:, t0:t1, h0:h1, w0:w1, :]


@dataclass
class DecodeStats:
    """What one rank did: tiles decoded, seconds per phase, bytes written to IMAGE / sent to peers.
    write_s includes prefault_wait_s (waiting for the pre-fault thread before a write); prefault_s is
    that thread's own time, prefault_bytes the bytes of the ranges it was given, prefault_method the
    method that ran ("off": not asked; "none": nothing to write)."""

    tiles: int = 0
    decode_s: float = 0.0
    write_s: float = 0.0
    exchange_s: float = 0.0
    finalize_s: float = 0.0
    bytes_written: int = 0
    bytes_sent: int = 0
    prefault_method: str = "off"
    prefault_s: float = 0.0
    prefault_wait_s: float = 0.0
    prefault_bytes: int = 0

    def as_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


class ImagePrefault:
    """Pre-faults the IMAGE bytes of `regions` on a thread, in the given (write) order; see NOTE
    [shm prefault]. The method (`method`, or when None the first that works) is fixed before the
    thread starts: writes may overlap "madvise" and "fallocate"; with "touch" `before_write` waits
    for the thread, as touching must not race this rank's own writes. `finish` stops the thread
    early and joins it (always call it)."""

    def __init__(self, image5: torch.Tensor, regions: list[Region], method: str | None = None) -> None:
        self.method = method or shm_prefault.prefault_method(image5)
        self.seconds = 0.0
        self.num_bytes = 0
        self._image5 = image5
        self._regions = regions
        self._stop = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="ltx2mgpu-image-prefault", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            for region in self._regions:
                ranges = shm_prefault.byte_ranges(region_view(self._image5, region))
                for batch in shm_prefault.range_batches(ranges, PREFAULT_BATCH_BYTES):
                    if self._stop.is_set():
                        return
                    shm_prefault.prefault(self._image5, batch, self.method)
                    self.num_bytes += int((batch[:, 1] - batch[:, 0]).sum())
        except Exception as exc:  # handed to the writing thread, raised there by `_join`
            self._error = exc
        finally:
            self.seconds = time.perf_counter() - start

    def _join(self, raise_error: bool = True) -> None:
        self._thread.join()
        if self._error is not None and raise_error:
            error, self._error = self._error, None
            raise error

    def before_write(self) -> None:
        if self.method not in shm_prefault.CONCURRENT_PREFAULT_METHODS:
            self._join()

    def finish(self, raise_error: bool = True) -> None:
        """Stop and join the thread; raise its error, if any, when `raise_error` (False while another
        error is on its way out, which this one must not hide)."""
        self._stop.set()
        self._join(raise_error)


class TiledDecode:
    """One rank's part of a distributed decode.

    image: the shared IMAGE tensor [B * frames, H, W, 3] float32 (CPU, shared memory).
    pixel_dtype: the decoder's output dtype (the same on every rank: strips travel in it).
    comm_on_device: the exchange runs on device tensors (NCCL); otherwise on CPU copies (gloo).
    prefault: whether and how to pre-fault the IMAGE pages this rank writes while it decodes
    (ImagePrefault): "auto", "off" or a method of shm_prefault.PREFAULT_METHODS (shm_prefault.prefault_setting).
    """

    def __init__(
        self,
        plan: TilePlan,
        rank: int,
        device: torch.device,
        pixel_dtype: torch.dtype,
        comm_on_device: bool,
        prefault: str = "auto",
    ) -> None:
        self.plan = plan
        self.rank = rank
        self.device = device
        self.pixel_dtype = pixel_dtype
        self.comm_device = device if comm_on_device else CPU
        self.prefault = prefault
        self.stats = DecodeStats()
        self._strips: dict[tuple[int, int], torch.Tensor] = {}
        self._prefault: ImagePrefault | None = None
        self._staging: torch.Tensor | None = None  # pinned, for device-to-host writes (_staging_for)

    def written_regions(self) -> list[Region]:
        """The regions this rank writes, in the order it writes them: per round, those its tile covers
        alone, then the shared ones it finalises."""
        tiles = self.plan.tiles_of(self.rank)
        out: list[Region] = []
        for r in range(self.plan.rounds):
            if r < len(tiles):
                out += [region for region in self.plan.regions_of(tiles[r]) if not region.is_shared]
            out += [region for region in self.plan.shared_regions(r) if region.finalizer == self.rank]
        return out

    def run(
        self, latent: torch.Tensor, image: torch.Tensor, decode: DecodeFn, on_round: RoundFn
    ) -> DecodeStats:
        """Decode `latent` [B, C, F, h, w] into `image` (collective)."""
        batch = latent.shape[0]
        frames, height, width = self.plan.pixel_shape
        image5 = image.view(batch, frames, height, width, image.shape[-1])
        if self.prefault != "off":
            method = None if self.prefault == "auto" else self.prefault
            self._prefault = ImagePrefault(image5, self.written_regions(), method)
        try:
            self._run(latent, image5, decode, on_round)
        except BaseException:
            self._end_prefault(raise_error=False)
            raise
        finally:
            self._staging = None  # back to torch's pinned-memory cache
        self._end_prefault(raise_error=True)
        return self.stats

    def _end_prefault(self, raise_error: bool) -> None:
        if self._prefault is None:
            return
        prefault, self._prefault = self._prefault, None
        prefault.finish(raise_error)
        self.stats.prefault_method = prefault.method
        self.stats.prefault_s = prefault.seconds
        self.stats.prefault_bytes = prefault.num_bytes

    def _run(self, latent: torch.Tensor, image5: torch.Tensor, decode: DecodeFn, on_round: RoundFn) -> None:
        batch, channels = latent.shape[0], image5.shape[-1]
        tiles = self.plan.tiles_of(self.rank)
        for r in range(self.plan.rounds):
            if r < len(tiles):
                self._decode_tile(latent, tiles[r], image5, decode)
            on_round(r)
            # Regions whose last tile was decoded this round: blend them now, so a rank holds only
            # the strips of regions still waiting for a tile (a wavefront, not the whole frame's).
            received = self._exchange(batch, channels, r)
            self._finalize(image5, received, r)
        assert not self._strips, "strips left over after the blend: plan and exchange disagree"

    def _decode_tile(self, latent: torch.Tensor, tile: int, image5: torch.Tensor, decode: DecodeFn) -> None:
        start = time.perf_counter()
        ts, hs, ws = self.plan.latent_slices(tile)
        piece = latent[:, :, ts, hs, ws].to(device=self.device, dtype=self.pixel_dtype)
        pixels = decode(piece, tile)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.stats.decode_s += time.perf_counter() - start
        self.stats.tiles += 1
        expected = tuple(s.stop - s.start for s in self.plan.pixel_slices(tile))
        assert tuple(pixels.shape[2:]) == expected, (
            f"tile {tile} decoded to {tuple(pixels.shape)}, plan says {expected}"
        )
        for region in self.plan.regions_of(tile):
            part = pixels[(slice(None), slice(None), *self.plan.local_slices(region, tile))]
            if region.is_shared:
                self._strips[(region.index, tile)] = part.clone()
            else:  # this tile alone covers the region: its weight there is exactly 1.0
                self._write(image5, region, to_image(part))

    def _write(self, image5: torch.Tensor, region: Region, values: torch.Tensor) -> None:
        """values [B, 3, f, h, w] float32 -> image5[:, f, h, w, :] (a strided view of shared memory)."""
        start = time.perf_counter()
        src = values.permute(0, 2, 3, 4, 1)
        if self._prefault is not None:
            waited = time.perf_counter()
            self._prefault.before_write()
            self.stats.prefault_wait_s += time.perf_counter() - waited
        dst = region_view(image5, region)
        if src.device.type == "cpu":
            dst.copy_(src)
        else:
            copy_through(dst, src.contiguous(), self._staging_for(src))
        self.stats.write_s += time.perf_counter() - start
        self.stats.bytes_written += src.numel() * src.element_size()

    def _staging_for(self, src: torch.Tensor) -> torch.Tensor:
        """This run's pinned staging buffer (float32), at least one frame of `src` [B, f, h, w, 3]."""
        numel = max(STAGING_BYTES // src.element_size(), src[0, 0].numel())
        if self._staging is None or self._staging.numel() < numel:
            self._staging = torch.empty(numel, dtype=src.dtype, pin_memory=True)
        return self._staging

    def _numel(self, key: tuple[int, int], batch: int, channels: int) -> int:
        (t0, t1), (h0, h1), (w0, w1) = self.plan.regions[key[0]].pixels
        return batch * channels * (t1 - t0) * (h1 - h0) * (w1 - w0)

    def _exchange(self, batch: int, channels: int, round_: int) -> dict[tuple[int, int], torch.Tensor]:
        """After round `round_`: send the kept strips of the regions completed in that round that
        another rank finalises; receive ours (collective)."""
        world = self.plan.world_size
        if world == 1:
            return {}
        start = time.perf_counter()
        sends = [self.plan.transfers(self.rank, peer, round_) for peer in range(world)]
        recvs = [self.plan.transfers(peer, self.rank, round_) for peer in range(world)]
        parts = [self._strips.pop(key).reshape(-1) for keys in sends for key in keys]
        send = (
            torch.cat(parts).to(self.comm_device)
            if parts
            else torch.empty(0, dtype=self.pixel_dtype, device=self.comm_device)
        )
        del parts
        in_splits = [sum(self._numel(k, batch, channels) for k in keys) for keys in sends]
        out_splits = [sum(self._numel(k, batch, channels) for k in keys) for keys in recvs]
        recv = torch.empty(sum(out_splits), dtype=self.pixel_dtype, device=self.comm_device)
        dist.all_to_all_single(recv, send, out_splits, in_splits)
        self.stats.bytes_sent += send.numel() * send.element_size()
        received, offset = {}, 0
        for keys in recvs:
            for key in keys:
                n = self._numel(key, batch, channels)
                (t0, t1), (h0, h1), (w0, w1) = self.plan.regions[key[0]].pixels
                shape = (batch, channels, t1 - t0, h1 - h0, w1 - w0)
                received[key] = recv[offset : offset + n].view(shape).to(self.device)
                offset += n
        self.stats.exchange_s += time.perf_counter() - start
        return received

    def _finalize(
        self, image5: torch.Tensor, received: dict[tuple[int, int], torch.Tensor], round_: int
    ) -> None:
        start = time.perf_counter()
        write_before = self.stats.write_s
        for region in self.plan.shared_regions(round_):
            if region.finalizer != self.rank:
                continue
            total: torch.Tensor | None = None
            for tile in region.tiles:  # tile order: the same sum whatever the timing or rank count
                key = (region.index, tile)
                pixels = self._strips.pop(key) if key in self._strips else received.pop(key)
                weight = self.plan.weight(region, tile).to(self.device)
                part = weight * pixels.float()
                total = part if total is None else total.add_(part)
            assert total is not None
            self._write(image5, region, to_image(total))
        assert not received, "received strips no region of this round needs: plan and exchange disagree"
        self.stats.finalize_s += time.perf_counter() - start - (self.stats.write_s - write_before)
