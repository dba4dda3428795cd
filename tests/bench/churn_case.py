"""Host process churn: what hundreds of short non-GPU processes a second cost the agent.

The agent runs as in agent-8gpu-1s (8 GPUs, 64 GPU processes, 1 s sampling and export), with
attribution on (process events from the netlink proc connector) or off. Its CPU is measured
over a quiet window, then over a window of the same length while ``tests.bench.churn`` execs
``true`` at the requested rate; the difference is what the churn costs it. The agent's GPU
processes are the node's placeholders, which neither exit nor exec: every event of the churn
is for a process the agent does not hold, so with the kernel-side PID filter none should
reach it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.bench.procstat import peak_rss_mib, run_seconds
from tests.bench.results import ChurnResult
from tests.integration.harness import REPO, AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver


@dataclass(frozen=True)
class ChurnCase:
    name: str
    scenario: Path
    rate: float  # execs per second requested
    window_s: float  # each of the quiet and the churn window
    attribution: bool
    interval: float = 1.0


def _window(pid: int, seconds: float) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``pid`` over about ``seconds``."""
    cpu0, wall0 = run_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return run_seconds(pid) - cpu0, time.monotonic() - wall0


def run_churn_case(case: ChurnCase, workdir: Path) -> ChurnResult:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "agent.yaml"
    config.write_text(yaml.safe_dump({"log_level": "info",
                                      "attribution": {"enabled": case.attribution}}),
                      encoding="utf-8")
    flags = ["--config", str(config), "--interval", f"{case.interval:g}",
             "--export-interval", f"{case.interval:g}"]
    with OtlpGrpcReceiver() as receiver, SimulatedNode.start(
        case.scenario, state_dir=workdir / "node"
    ) as node:
        agent = AgentProcess(workdir, receiver.endpoint, node.env, flags)
        try:
            receiver.store.wait_for(lambda s: s.received("metrics"), timeout=30,
                                    what="the agent's first export")
            time.sleep(2 * case.interval)  # past start-up: the first attribution, caches
            quiet_cpu, quiet_s = _window(agent.process.pid, case.window_s)
            churn = subprocess.Popen([sys.executable, "-m", "tests.bench.churn", f"{case.rate:g}"],
                                     cwd=REPO, stdout=subprocess.PIPE, text=True)
            try:
                time.sleep(0.5)  # the generator's interpreter start-up is not churn
                churn_cpu, churn_s = _window(agent.process.pid, case.window_s)
            finally:
                churn.send_signal(signal.SIGTERM)
                out, _ = churn.communicate(timeout=30)
            rss = peak_rss_mib(agent.process.pid)
            alive = agent.process.poll() is None
            agent.terminate()
        finally:
            agent.close()
    spawned = json.loads(out)
    quiet = quiet_cpu / quiet_s * 100
    busy = churn_cpu / churn_s * 100
    rate = spawned["spawned"] / spawned["seconds"]
    return ChurnResult(
        case=case.name,
        attribution=case.attribution,
        rate_requested=case.rate,
        execs_per_s=round(rate, 1),
        window_s=round(churn_s, 1),
        cpu_percent_quiet=round(quiet, 3),
        cpu_percent_churn=round(busy, 3),
        cpu_percent_added=round(busy - quiet, 3),
        us_per_exec=round((churn_cpu / churn_s - quiet_cpu / quiet_s) / rate * 1e6, 2),
        peak_rss_mib=round(rss, 1),
        agent_alive=alive,
    )
