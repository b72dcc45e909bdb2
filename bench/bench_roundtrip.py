"""Overhead of one worker command round trip with an empty command (ping), per group size.

    python bench/bench_roundtrip.py --out roundtrip.json [--devices cpu:1 cpu:2 cpu:4] [--calls 200]
Writes the median and 90th percentile in milliseconds. The client sends one message per rank and waits
for every reply, so this is the floor under every node call.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import parse_devices


def measure(devices: str, calls: int) -> dict:
    group = WorkerGroup(parse_devices(devices)).start()
    try:
        for _ in range(20):
            group.run("ping")
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            group.run("ping")
            times.append((time.perf_counter() - start) * 1e3)
    finally:
        group.stop()
    times.sort()
    return {
        "devices": devices,
        "calls": calls,
        "median_ms": times[len(times) // 2],
        "p90_ms": times[int(len(times) * 0.9)],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--devices", nargs="+", default=["cpu:1", "cpu:2", "cpu:4"])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    rows = [measure(d, args.calls) for d in args.devices]
    for row in rows:
        print(json.dumps(row))
    with open(args.out, "w") as f:
        json.dump(
            {"machine": platform.node(), "cpus": __import__("os").cpu_count(), "rows": rows}, f, indent=2
        )


if __name__ == "__main__":
    main()
