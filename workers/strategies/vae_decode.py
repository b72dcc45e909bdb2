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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from .vae_tiles import Region, TilePlan

# decode(latent tile [B, C, f, h, w] on the device in the decoder's dtype, tile index) -> pixels
# [B, 3, frames, H, W] in the decoder's dtype, about [-1, 1].
DecodeFn = Callable[[torch.Tensor, int], torch.Tensor]
RoundFn = Callable[[int], None]
CPU = torch.device("cpu")


def to_image(pixels: torch.Tensor) -> torch.Tensor:
    """Decoder output -> IMAGE values, as ComfyUI's VAE.process_output does: clamp((x + 1) / 2, 0, 1)
    in float32 (the same operations, in place on one new tensor)."""
    return (pixels.float() + 1.0).div_(2.0).clamp_(min=0.0, max=1.0)


@dataclass
class DecodeStats:
    """What one rank did: tiles decoded, seconds per phase, bytes written to IMAGE / sent to peers."""

    tiles: int = 0
    decode_s: float = 0.0
    write_s: float = 0.0
    exchange_s: float = 0.0
    finalize_s: float = 0.0
    bytes_written: int = 0
    bytes_sent: int = 0

    def as_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


class TiledDecode:
    """One rank's part of a distributed decode.

    image: the shared IMAGE tensor [B * frames, H, W, 3] float32 (CPU, shared memory).
    pixel_dtype: the decoder's output dtype (the same on every rank: strips travel in it).
    comm_on_device: the exchange runs on device tensors (NCCL); otherwise on CPU copies (gloo).
    """

    def __init__(
        self,
        plan: TilePlan,
        rank: int,
        device: torch.device,
        pixel_dtype: torch.dtype,
        comm_on_device: bool,
    ) -> None:
        self.plan = plan
        self.rank = rank
        self.device = device
        self.pixel_dtype = pixel_dtype
        self.comm_device = device if comm_on_device else CPU
        self.stats = DecodeStats()
        self._strips: dict[tuple[int, int], torch.Tensor] = {}

    def run(
        self, latent: torch.Tensor, image: torch.Tensor, decode: DecodeFn, on_round: RoundFn
    ) -> DecodeStats:
        """Decode `latent` [B, C, F, h, w] into `image` (collective)."""
        batch = latent.shape[0]
        frames, height, width = self.plan.pixel_shape
        image5 = image.view(batch, frames, height, width, image.shape[-1])
        tiles = self.plan.tiles_of(self.rank)
        for r in range(self.plan.rounds):
            if r < len(tiles):
                self._decode_tile(latent, tiles[r], image5, decode)
            on_round(r)
            # Regions whose last tile was decoded this round: blend them now, so a rank holds only
            # the strips of regions still waiting for a tile (a wavefront, not the whole frame's).
            received = self._exchange(batch, image.shape[-1], r)
            self._finalize(image5, received, r)
        assert not self._strips, "strips left over after the blend: plan and exchange disagree"
        return self.stats

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
        (t0, t1), (h0, h1), (w0, w1) = region.pixels
        src = values.permute(0, 2, 3, 4, 1)
        if src.device.type != "cpu":
            src = src.contiguous().to(CPU)
        image5[:, t0:t1, h0:h1, w0:w1, :].copy_(src)
        self.stats.write_s += time.perf_counter() - start
        self.stats.bytes_written += src.numel() * src.element_size()

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
