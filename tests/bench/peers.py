"""Peers on the same simulated node, measured one at a time: nvitop-exporter and gpustat.

Both attach through the node's environment (LD_LIBRARY_PATH + GPU_SIM_NODE), exactly as the
agent does, so every client reads the same GPUs and processes through the same library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.calls import CallCounts, per_gpu_per_cycle, settle
from tests.bench.procstat import peak_rss_mib, run_child
from tests.bench.results import AgentResult, ExporterPeerResult, OneShotPeerResult
from tests.bench.window import measure
from tests.receivers.netutil import free_port, wait_for_port


@dataclass(frozen=True)
class PeerCase:
    name: str
    scenario: Path
    interval: float
    cycles: int  # window length for the exporter, invocations for the one-shot tool
    compare_with: str  # the agent case the ratios divide by


def ratio(peer: float, agent: float) -> float:
    return round(peer / agent, 2) if agent > 0 else float("nan")


class _Scraper(threading.Thread):
    """GET /metrics every interval, as Prometheus would at the same cadence as our sampling."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(name="scraper", daemon=True)
        self._url = url
        self._interval = interval
        self._stop_event = threading.Event()
        self.scrapes = 0
        self.last_bytes = 0

    def run(self) -> None:
        next_due = time.monotonic()
        while not self._stop_event.wait(max(0.0, next_due - time.monotonic())):
            next_due += self._interval
            try:
                with urllib.request.urlopen(self._url, timeout=self._interval * 2 + 5) as reply:
                    self.last_bytes = len(reply.read())
                self.scrapes += 1
            except OSError:
                continue  # not up yet, or a slow scrape; the count shows it

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)


def run_nvitop_exporter(case: PeerCase, workdir: Path, agent: AgentResult) -> ExporterPeerResult:
    gpus = len(load_scenario(case.scenario).devices)
    port = free_port()
    with SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node:
        env = {**os.environ, **node.env}
        command = [sys.executable, "-m", "nvitop_exporter", "--bind-address", "127.0.0.1",
                   "--port", str(port), "--interval", f"{case.interval:g}"]
        log = (workdir / "nvitop-exporter.log").open("wb")
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        scraper = _Scraper(f"http://127.0.0.1:{port}/metrics", case.interval)
        try:
            if not wait_for_port("127.0.0.1", port, 30, lambda: process.poll() is None):
                output = (workdir / "nvitop-exporter.log").read_text()
                raise RuntimeError(f"nvitop-exporter did not serve:\n{output}")
            scraper.start()
            window = measure(node, process.pid, case.interval, case.cycles,
                             lambda: process.poll() is None)
            rss = peak_rss_mib(process.pid)
        finally:
            scraper.stop()
            process.terminate()
            process.wait(10)
            log.close()
    calls = window.calls.calls / gpus / max(window.cycles, 1)
    return ExporterPeerResult(
        case=case.name,
        scenario=case.scenario.name,
        gpus=gpus,
        interval_s=case.interval,
        window_s=round(window.seconds, 2),
        cycles=window.cycles,
        cpu_s_per_min=round(window.cpu_s_per_min, 3),
        cpu_percent_one_core=round(window.cpu_percent, 3),
        peak_rss_mib=round(rss, 1),
        calls_per_gpu_per_cycle=round(calls, 3),
        calls_by_function=per_gpu_per_cycle(window.calls, gpus, window.cycles),
        scrapes=scraper.scrapes,
        scrape_bytes_last=scraper.last_bytes,
        compared_with=agent.case,
        ratios={
            "cpu": ratio(window.cpu_s_per_min, agent.cpu_s_per_min),
            "rss": ratio(rss, agent.peak_rss_mib),
            "calls": ratio(calls, agent.calls_per_gpu_per_cycle),
        },
    )


def _processes_listed(stdout: bytes) -> int:
    parsed = json.loads(stdout)
    assert isinstance(parsed, Mapping)
    return sum(len(gpu.get("processes") or []) for gpu in parsed["gpus"])


def run_gpustat(case: PeerCase, workdir: Path, agent: AgentResult) -> OneShotPeerResult:
    """``gpustat --json`` run ``case.cycles`` times; figures are per invocation.

    The CPU ratio compares one invocation per sampling interval (what polling with gpustat at
    the agent's interval would cost) with the agent's CPU per interval.
    """
    gpus = len(load_scenario(case.scenario).devices)
    gpustat = [str(Path(sys.executable).with_name("gpustat")), "--json"]
    with SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node:
        env = {**os.environ, **node.env}
        before = settle(node, 0.05)
        runs = [run_child(gpustat, env) for _ in range(case.cycles)]
        calls = CallCounts.read(node).minus(before)
    failed = [r.returncode for r in runs if r.returncode]
    if failed:
        raise RuntimeError(f"gpustat failed with exit codes {failed}")
    n = len(runs)
    cpu = sum(r.cpu_s for r in runs) / n
    per_call = calls.calls / gpus / n
    agent_cpu_per_cycle = agent.cpu_s_per_min / 60 * agent.interval_s
    return OneShotPeerResult(
        case=case.name,
        scenario=case.scenario.name,
        gpus=gpus,
        invocations=n,
        wall_s_per_invocation=round(sum(r.wall_s for r in runs) / n, 3),
        cpu_s_per_invocation=round(cpu, 3),
        peak_rss_mib=round(max(r.peak_rss_mib for r in runs), 1),
        calls_per_gpu_per_invocation=round(per_call, 3),
        calls_by_function=per_gpu_per_cycle(calls, gpus, n),
        processes_listed=_processes_listed(runs[-1].stdout),
        compared_with=agent.case,
        ratios={
            "cpu": ratio(cpu, agent_cpu_per_cycle),
            "rss": ratio(max(r.peak_rss_mib for r in runs), agent.peak_rss_mib),
            "calls": ratio(per_call, agent.calls_per_gpu_per_cycle),
        },
    )
