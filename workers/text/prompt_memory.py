"""What encoding one prompt takes on a worker, from its token count, before anything is allocated
(checked by wire/job_memory.py). Pure arithmetic on Gemma's config.

A prompt runs alone, on its own L tokens only (the pads ComfyUI adds are skipped: NOTE [pads
skipped] in gemma3.py), and what grows with it is (gemma3.py):
- the attention masks, [L, L] float32: the causal mask and the sliding-window one are held, and two
  more [L, L] temporaries may exist while they are built (SequenceContext.build): 4 x 4 bytes a pair;
- the attention scores of one layer, [heads, L, L] float32, and their softmax (PyTorch's math
  attention, which an additive float mask with grouped heads gets on the CPU): 2 x 4 bytes per head
  and pair (an upper bound on GPUs whose fused kernels take the mask);
- the hidden states LTX reads, every layer's input and the last output, [L, hidden] float32 each,
  all gathered on the first worker; and one layer's MLP, [L, intermediate] x 3.
For LTX-2's Gemma 3 12B (16 heads) that is 144 bytes x L^2 + 0.94 MB x L: 10 GB at 8,192 tokens, 2.5 TB
at 131,072. The shared output [1, tokens, width] float32 comes on top.
"""

from __future__ import annotations

from ..wire.job_memory import JobNeed
from .gemma3 import GemmaConfig

MASK_BYTES_PER_PAIR = 4 * 4
SCORE_BYTES_PER_HEAD_PAIR = 2 * 4
FLOAT32 = 4
MLP_TEMPORARIES = 3


def prompt_worker_bytes(config: GemmaConfig, num_tokens: int) -> int:
    """A worker's memory for one prompt of `num_tokens` ids (see the module docstring)."""
    length = num_tokens
    pairs = length * length
    attention = pairs * (MASK_BYTES_PER_PAIR + SCORE_BYTES_PER_HEAD_PAIR * config.num_heads)
    states = config.num_hidden_states * length * config.hidden_size * FLOAT32
    mlp = MLP_TEMPORARIES * length * config.intermediate_size * FLOAT32
    return attention + states + mlp


def prompt_need(
    config: GemmaConfig, num_tokens: int, width: int, what: str, at_least: bool = False
) -> JobNeed:
    """One prompt's need: the worker's (prompt_worker_bytes) and the shared output [1, tokens, width].
    `at_least`: num_tokens is a lower bound on the prompt's tokens (said so in the refusal)."""
    return JobNeed(
        what=f"{what} of a prompt of {'at least ' if at_least else ''}{num_tokens:,} tokens",
        lower="the prompt's length",
        shared_bytes=num_tokens * width * FLOAT32,
        worker_bytes=prompt_worker_bytes(config, num_tokens),
    )
