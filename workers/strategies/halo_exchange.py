"""Edge rows swapped between neighbouring ranks along a slab axis: the exchange of the slab-split VAE
encodes and decodes of both engines (NOTE [encode slabs] in vae_encode_plan.py). Point-to-point,
neighbours only; no model.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .vae_encode_plan import EncodePlan

CPU = torch.device("cpu")


class HaloExchange:
    """Swaps edge rows along the slab axis with the neighbouring ranks (point-to-point).

    comm_on_device: tensors travel as they are (NCCL); otherwise through CPU copies (gloo).
    """

    def __init__(self, plan: EncodePlan, rank: int, comm_on_device: bool) -> None:
        self.dim = plan.axis_dim
        self.before, self.after = plan.neighbours(rank)
        self.comm_on_device = comm_on_device
        self.seconds = 0.0
        self.bytes_sent = 0

    def pad(self, x: torch.Tensor, rows: int) -> torch.Tensor:
        """x [B, C, F, H, W] -> x with `rows` rows of each neighbour's slab (zeros at an edge) on both
        sides along the slab axis (collective with the neighbours)."""
        if rows == 0:
            return x
        assert x.shape[self.dim] >= rows, (
            "a slab is thinner than the rows it lends: plan and encoder disagree"
        )
        start = time.perf_counter()
        edge_shape = list(x.shape)
        edge_shape[self.dim] = rows
        device = x.device if self.comm_on_device else CPU
        ops, received = [], {}
        for peer, leading in ((self.before, True), (self.after, False)):
            if peer is None:
                continue
            edge = (
                x.narrow(self.dim, 0 if leading else x.shape[self.dim] - rows, rows).to(device).contiguous()
            )
            received[leading] = torch.empty(edge_shape, dtype=x.dtype, device=device)
            ops += [dist.P2POp(dist.isend, edge, peer), dist.P2POp(dist.irecv, received[leading], peer)]
            self.bytes_sent += edge.numel() * edge.element_size()
        for request in dist.batch_isend_irecv(ops) if ops else []:
            request.wait()
        before, after = (
            received[leading].to(x.device) if leading in received else x.new_zeros(edge_shape)
            for leading in (True, False)
        )
        self.seconds += time.perf_counter() - start
        return torch.cat([before, x, after], dim=self.dim)
