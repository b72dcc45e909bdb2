"""The transformer configurations of Lightricks' released checkpoints, as their metadata gives them:
the shapes benchmarks build with random weights (real weights are not downloaded where we measure).
Pure data."""

from __future__ import annotations

# The transformer section of the released ltx-2-19b-dev metadata (docs/COMFYUI_LTX2_PARITY.md, section 1).
LTX2_19B_TRANSFORMER = {
    "num_layers": 48,
    "num_attention_heads": 32,
    "attention_head_dim": 128,
    "cross_attention_dim": 4096,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048,
    "caption_channels": 3840,
    "connector_num_attention_heads": 30,
    "connector_attention_head_dim": 128,
    "in_channels": 128,
    "out_channels": 128,
    "audio_in_channels": 128,
    "audio_out_channels": 128,
    "positional_embedding_theta": 10000.0,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "audio_positional_embedding_max_pos": [20],
    "rope_type": "split",
    "frequencies_precision": "float64",
    "use_middle_indices_grid": True,
    "causal_temporal_positioning": True,
    "timestep_scale_multiplier": 1000,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "norm_eps": 1e-06,
}
