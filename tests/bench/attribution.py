"""Attribution cost per cycle, with few and with many idle host processes.

The claim under test: the per-cycle cost of attributing GPU use depends on the GPU processes
only, never on how many other processes the host runs. The parent makes the host busy with
``host_processes`` idle processes (sleeping children of one shell), puts 50 GPU processes in
real kubepods cgroups (10 pods x 5, cgroup v2 where the machine has it; plain processes
otherwise), registers them on a simulated node, and runs a child (attaching pynvml is once per
process) that builds the agent's own attribution (``runtime.attribution_setup``: netlink proc
connector and cgroup inotify live on an asyncio loop, kubelet off) and runs cycles: the
NVIDIA backend's ``read_processes`` for every GPU, then ``Attribution.readings``. Reported per
cycle: the CPU time of the attribution step (thread CPU, median and p99), the NVML process
reads for context, the whole child's CPU per cycle over the window (event handling included),
and the /proc reads done after warm-up (expected 0: each GPU PID is read once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.bench.results import AttributionResult
from tests.integration.cgroups import Cgroups, v2_root

GPU_PROCESSES = 50
GPUS = 4
PODS = 10
METHOD = (
    "in-process gpu_otel_agent.workloads attribution (netlink + inotify live) over {gpu} GPU "
    "processes "    "in {pods} kubepods cgroups on {gpus} simulated GPUs; per cycle: NvidiaBackend."
    "read_processes on every GPU, then Attribution.readings; thread CPU of the attribution "
    "step, {cycles} cycles every {interval:g} s after {warmup} warm-up cycles"
)


@dataclass(frozen=True)
class AttributionCase:
    name: str
    host_processes: int
    cycles: int
    interval_s: float = 0.02
    warmup: int = 3


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _cycles(cycles: int, warmup: int, interval: float) -> dict[str, float | int]:
    from gpu_otel_agent.config.schema import AttributionConfig, KubeletConfig
    from gpu_otel_agent.plugins.nvidia.backend import NvidiaBackend
    from gpu_otel_agent.runtime.attribution_setup import build_attribution

    backend = NvidiaBackend()
    backend.open()
    devices = backend.devices()
    for device in devices:
        device.probe()
    attribution, service = build_attribution(AttributionConfig(kubelet=KubeletConfig(socket=None)))
    running = asyncio.create_task(service.run())
    await asyncio.sleep(0.2)  # sources started
    attribute_us: list[float] = []
    nvml_ms: list[float] = []
    series = 0
    cpu_start = 0.0
    resolutions_after_warmup = 0
    for cycle in range(warmup + cycles):
        if cycle == warmup:
            cpu_start = time.process_time()
            resolutions_after_warmup = attribution.resolver.resolutions
        t0 = time.perf_counter()
        lists = [device.read_processes() for device in devices]  # type: ignore[attr-defined]
        t1 = time.thread_time()
        readings = [attribution.readings(device.identity, lst)
                    for device, lst in zip(devices, lists, strict=True)]
        t2 = time.thread_time()
        if cycle >= warmup:
            nvml_ms.append((time.perf_counter() - t0) * 1000 - (t2 - t1) * 1000)
            attribute_us.append((t2 - t1) * 1e6)
            series = sum(len(r) for r in readings)
        await asyncio.sleep(interval)
    cpu = time.process_time() - cpu_start
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    backend.close()
    return {
        "attribute_us_median": statistics.median(attribute_us),
        "attribute_us_p99": _percentile(attribute_us, 0.99),
        "nvml_ms_median": statistics.median(nvml_ms),
        "process_cpu_us_per_cycle": cpu / cycles * 1e6,
        "proc_reads_after_warmup": attribution.resolver.resolutions - resolutions_after_warmup,
        "proc_reads_total": attribution.resolver.resolutions,
        "readings_per_cycle": series,
    }


def _measure(node_env: Mapping[str, str], cycles: int, warmup: int,
             interval: float) -> dict[str, float | int]:
    from gpu_otel_agent.simulation.node import attach_in_process

    attach_in_process(node_env)
    return asyncio.run(_cycles(cycles, warmup, interval))


@contextlib.contextmanager
def idle_host_processes(count: int) -> Iterator[subprocess.Popen[bytes]]:
    """``count`` sleeping processes: children of one shell, in their own session."""
    shell = subprocess.Popen(
        ["sh", "-c", f"i=0; while [ $i -lt {count} ]; do sleep 3600 & i=$((i+1)); done; "
                     "echo ready; wait"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        assert shell.stdout is not None
        shell.stdout.readline()
        yield shell
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()


def _host_process_count() -> int:
    return sum(1 for entry in os.scandir("/proc") if entry.name.isdigit())


def run_attribution_case(case: AttributionCase, workdir: Path) -> AttributionResult:
    workdir.mkdir(parents=True, exist_ok=True)
    made = Cgroups()
    base = v2_root() if os.geteuid() == 0 else None
    try:
        with idle_host_processes(case.host_processes):
            pids: list[int] = []
            for pod_index in range(PODS):
                cgroup = (made.pod(base, f"bench-{pod_index}").cgroup if base is not None
                          else None)
                for _ in range(GPU_PROCESSES // PODS):
                    if cgroup is not None:
                        pids.append(made.spawn(cgroup))
                    else:
                        pids.append(made.spawn_plain())
            devices = [{"model": "NVIDIA H100 80GB HBM3"} for _ in range(GPUS)]
            processes = [{"device": i % GPUS, "pid": pid, "used_memory_mib": 100 + i,
                          "sm_util": i % 100} for i, pid in enumerate(pids)]
            scenario = workdir / "scenario.yaml"
            scenario.write_text(yaml.safe_dump({"devices": devices, "processes": processes}),
                                encoding="utf-8")
            host = _host_process_count()
            with SimulatedNode.start(scenario, state_dir=workdir / "node") as node:
                child = subprocess.run(
                    [sys.executable, "-m", "tests.bench.attribution",
                     json.dumps(dict(node.env)), "--cycles", str(case.cycles),
                     "--warmup", str(case.warmup), "--interval", str(case.interval_s)],
                    capture_output=True, text=True, timeout=300, check=False,
                )
    finally:
        made.close()
    if child.returncode:
        raise RuntimeError(f"attribution child failed:\n{child.stderr[-3000:]}")
    figures = json.loads(child.stdout)
    return AttributionResult(
        case=case.name,
        method=METHOD.format(gpu=GPU_PROCESSES, pods=PODS, gpus=GPUS, cycles=case.cycles,
                             interval=case.interval_s, warmup=case.warmup),
        gpu_processes=GPU_PROCESSES,
        idle_host_processes=case.host_processes,
        host_processes_seen=host,
        in_cgroups=base is not None,
        cycles=case.cycles,
        attribute_us_median=round(float(figures["attribute_us_median"]), 1),
        attribute_us_p99=round(float(figures["attribute_us_p99"]), 1),
        nvml_ms_median=round(float(figures["nvml_ms_median"]), 3),
        process_cpu_us_per_cycle=round(float(figures["process_cpu_us_per_cycle"]), 1),
        proc_reads_after_warmup=int(figures["proc_reads_after_warmup"]),
        proc_reads_total=int(figures["proc_reads_total"]),
        readings_per_cycle=int(figures["readings_per_cycle"]),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("node_env", help="the node's attach environment, as JSON")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args()
    figures = _measure(json.loads(args.node_env), args.cycles, args.warmup, args.interval)
    json.dump(figures, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
