"""The loader's `weights` option: where each rank keeps the transformer's weights (docs/NODES.md).

replicated: every rank holds the whole model on its GPU (the default; fastest when it fits).
offloaded: the rank's GPU keeps what fits, the other layers are cast in from host memory per call
(ComfyUI's own partial loading; workers/engine/comfy/weights.py).
sharded: each rank keeps 1/N of every block, gathered just before the block runs (torch FSDP2;
workers/engine/comfy/weights.py NOTE [sharded]): every node, fp8, int8 and nvfp4 files too; not GGUF files
or ranks that share a GPU.
layers: each rank keeps a contiguous range of the transformer blocks; the hidden states hand over between
ranks once per range (torch.distributed broadcast, no peer access; workers/engine/comfy/layer_split.py NOTE
[layers]). Any weight format, GGUF too; sequence parallelism and guidance groups off; the TDP Upscaler
runs its tiles one after another on the whole group.
"""

from __future__ import annotations

WEIGHTS_REPLICATED = "replicated"
WEIGHTS_OFFLOADED = "offloaded"
WEIGHTS_SHARDED = "sharded"
WEIGHTS_LAYERS = "layers"
WEIGHT_PLACEMENTS = (WEIGHTS_REPLICATED, WEIGHTS_OFFLOADED, WEIGHTS_SHARDED, WEIGHTS_LAYERS)
# resident_bytes meaning "the rank decides" (what the GPU may still hold, less the activations).
AUTO_RESIDENT = -1


def check_weights(weights: str, *, backend_is_comfy: bool) -> None:
    """ValueError saying what to change when `weights` is unknown or not served on the chosen backend."""
    if weights not in WEIGHT_PLACEMENTS:
        raise ValueError(f"weights {weights!r} is not one of {', '.join(WEIGHT_PLACEMENTS)}")
    if weights != WEIGHTS_REPLICATED and not backend_is_comfy:
        raise ValueError(
            f"weights {weights} runs on ComfyUI's engine in the workers only (mode comfyui, inside ComfyUI or "
            "with COMFYUI_PATH set); set weights to replicated for this model"
        )


def check_sharded_devices(weights: str, devices: tuple[str, ...]) -> None:
    """ValueError for sharded weights on workers that share a GPU: NCCL, which gathers the shards between
    GPUs, refuses two ranks on one device (and sharding within one GPU would save no memory)."""
    cuda = [d for d in devices if d.startswith("cuda")]
    if weights == WEIGHTS_SHARDED and len(set(cuda)) < len(cuda):
        raise ValueError(
            f"weights sharded needs one GPU per worker, but the workers share GPUs ({', '.join(devices)}): "
            "NCCL cannot gather shards between ranks on one GPU, and a shared GPU would hold every shard anyway. "
            "Set weights to offloaded, or give each worker its own GPU"
        )
