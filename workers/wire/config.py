"""Tunables of the worker group, in one place. Each says where its number came from."""

from __future__ import annotations

import os


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{name}={raw!r} is not a number of seconds") from exc


# Workers stamp a heartbeat this often; cheap (one 8-byte store into shared memory).
HEARTBEAT_INTERVAL_S = 0.25
# A worker whose heartbeat is older than this is treated as hung (SIGSTOP, deadlock in C code
# holding the GIL). Long enough for a slow swap-in of a 19B model's pages; tests lower it.
HEARTBEAT_TIMEOUT_S = _env_float("LTX2_MGPU_HEARTBEAT_TIMEOUT_S", 30.0)
# Start-up: interpreter + torch import + process-group init. Measured ~4 s per CPU rank on the
# 2-core CI machine with 3 ranks; CUDA init adds a few seconds per GPU.
START_TIMEOUT_S = _env_float("LTX2_MGPU_START_TIMEOUT_S", 180.0)
# After one rank reports an error, how long the others get to report theirs before the
# group is declared out of step and rebuilt.
ERROR_GRACE_S = _env_float("LTX2_MGPU_ERROR_GRACE_S", 10.0)
# Polite stop (SIGTERM after the stop command) before SIGKILL.
STOP_GRACE_S = 5.0
# When the UI process exits (Ctrl+C, SIGTERM) its workers are sent SIGTERM and get this long before
# SIGKILL: the exit must not wait for a job (a user expects ComfyUI gone within a few seconds).
EXIT_GRACE_S = 2.0
# A job thread that finds the process exiting waits this long for the end instead of raising (NOTE
# [exit] in workers/group/shutdown.py says why); only a process that did not end ever sees the error.
EXIT_JOB_WAIT_S = 60.0
# A worker whose stdin closed waits this long to see itself reparented (its owner dead) before it
# removes the owner's segments; the reparenting follows the EOF within milliseconds.
OWNER_EXIT_WAIT_S = 1.0
# How often the client wakes up to check cancel, heartbeats and deaths while a job runs.
POLL_INTERVAL_S = 0.05
# Shared-memory names: /dev/shm/<prefix>-<owner pid>-<random>; the owner pid lets a later
# group remove segments left by a UI process that was killed.
SHM_PREFIX = "ltx2mgpu"
SHM_DIR = "/dev/shm"
# Upper bound on video tokens in one forward. Lightricks ships 32,768 (1088x1920x121 is
# 32,640 tokens); beyond it memory for attention activations dominates.
DEFAULT_MAX_VIDEO_TOKENS = 32768
