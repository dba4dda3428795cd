"""Measures the agent on a simulated node: CPU, peak RSS and NVML calls per GPU per cycle.

    python -m tests.bench.measure_agent examples/scenarios/h100-8gpu.yaml --interval 1 --seconds 60

The agent pushes to a local OTLP receiver; the node runs in its own process so its CPU is not
counted. Figures are printed as JSON; nothing is asserted (targets live in the notes/README).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from tempfile import TemporaryDirectory

from plugins.nvidia.simulator import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.integration.stats import per_device
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def totals(stats: Mapping[str, object]) -> dict[str, int]:
    return {dev: sum(calls.values()) for dev, calls in per_device(stats).items()}


def by_function(stats: Mapping[str, object], device: str) -> dict[str, int]:
    return per_device(stats).get(device, {})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--interval", type=float, default=None)
    parser.add_argument("--export-interval", type=float, default=None)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    flags: list[str] = []
    if args.interval:
        flags += ["--interval", str(args.interval)]
    if args.export_interval:
        flags += ["--export-interval", str(args.export_interval)]
    with TemporaryDirectory() as tmp, OtlpGrpcReceiver() as receiver, SimulatedNode.start(
        args.scenario, state_dir=Path(tmp) / "node"
    ) as node:
        started = time.monotonic()
        agent = AgentProcess(Path(tmp), receiver.endpoint, node.env, flags)
        try:
            receiver.store.wait_for(lambda s: s.points("hw.gpu.utilization"), timeout=30)
            first_export = time.monotonic() - started
            time.sleep(3)  # let start-up (probing, imports) settle before measuring
            cpu0, calls0, t0 = cpu_seconds(agent.process.pid), node.stats(), time.monotonic()
            time.sleep(args.seconds)
            cpu1, calls1, t1 = cpu_seconds(agent.process.pid), node.stats(), time.monotonic()
            rss = peak_rss_mib(agent.process.pid)
        finally:
            agent.terminate()
            agent.close()
    elapsed = t1 - t0
    interval = args.interval or 5.0
    cycles = elapsed / interval
    before, after = totals(calls0), totals(calls1)
    device0 = {k: v - by_function(calls0, "0").get(k, 0)
               for k, v in by_function(calls1, "0").items()}
    report = {
        "scenario": str(args.scenario),
        "fast_interval_s": interval,
        "measured_s": round(elapsed, 1),
        "cpu_seconds_per_minute": round((cpu1 - cpu0) / elapsed * 60, 3),
        "cpu_percent_of_one_core": round((cpu1 - cpu0) / elapsed * 100, 2),
        "peak_rss_mib": round(rss, 1),
        "first_export_s": round(first_export, 2),
        "nvml_calls_per_gpu_per_fast_cycle": {
            dev: round((after[dev] - before.get(dev, 0)) / cycles, 2) for dev in sorted(after)
        },
        "gpu0_calls_by_function": {k: v for k, v in sorted(device0.items()) if v},
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
