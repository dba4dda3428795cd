"""Measures the agent on a simulated node, exporting over OTLP/gRPC to a local receiver.

One agent process per case. After the main window (all groups on their default intervals) the
agent's configuration file is rewritten to disable the slow, gpm and processes groups and
reloaded with SIGHUP, and a second window counts the fast group's calls alone: NVML functions
such as nvmlDeviceGetFieldValues and nvmlDeviceGetClockInfo serve both fast and slow groups, so
counting them by name in the main window would charge the fast group with slow-group calls.
"""

from __future__ import annotations

import gzip
import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.runtime.agent import COSTS_MARK
from gpu_otel_agent.simulation.node import Scenario, SimulatedNode, load_scenario
from tests.bench.calls import per_gpu_per_cycle
from tests.bench.procstat import peak_rss_mib
from tests.bench.results import AgentResult, CycleCosts
from tests.bench.window import Window, measure
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Received

SUMMARY_MARK = "run summary "
DEFAULT_EXPORT_INTERVAL_S = AgentConfig().export_interval
DEFAULT_FAST_INTERVAL_S = AgentConfig().groups["fast"].interval


@dataclass(frozen=True)
class AgentCase:
    name: str
    scenario: Path
    interval: float
    cycles: int  # main window length, in fast cycles
    fast_only_cycles: int
    # The agent's own defaults for every interval (no --interval/--export-interval flags);
    # ``interval`` is then the default fast interval, which the window counts cycles of.
    at_defaults: bool = False

    @property
    def export_interval(self) -> float:
        return DEFAULT_EXPORT_INTERVAL_S if self.at_defaults else self.interval


def node_ready_timeout(scenario: Scenario) -> float:
    """How long the node may take to come up: it spawns a placeholder process for each GPU
    process without a pid (one fork each), which at 2,048 took over 30 s on a loaded
    2-core machine."""
    return 30.0 + 0.05 * len(scenario.processes)


def run_summary(log: str) -> dict[str, object]:
    """The JSON the agent logs at exit (``... run summary {json}``)."""
    for line in reversed(log.splitlines()):
        if SUMMARY_MARK in line:
            parsed = json.loads(line.split(SUMMARY_MARK, 1)[1])
            assert isinstance(parsed, dict)
            return parsed
    raise ValueError("the agent logged no run summary")


def summed(summary: dict[str, object], key: str) -> int:
    devices = summary.get("devices", {})
    assert isinstance(devices, dict)
    return sum(int(stats[key]) for stats in devices.values())


def _wait_in_log(agent: AgentProcess, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in agent.log():
        if time.monotonic() > deadline or agent.process.poll() is not None:
            raise RuntimeError(f"agent did not log {text!r}:\n{agent.log()[-3000:]}")
        time.sleep(0.05)


def _costs(agent: AgentProcess) -> tuple[float, dict[str, Any]]:
    """Ask the agent for its CPU per stage and thread so far (SIGUSR1 logs it)."""
    seen = agent.log().count(COSTS_MARK)
    asked = time.monotonic()
    agent.process.send_signal(signal.SIGUSR1)
    deadline = asked + 10
    while agent.log().count(COSTS_MARK) <= seen:
        if time.monotonic() > deadline:
            raise RuntimeError(f"agent did not log its cycle costs:\n{agent.log()[-3000:]}")
        time.sleep(0.02)
    line = agent.log().split(COSTS_MARK)[seen + 1].splitlines()[0]
    parsed = json.loads(line)
    assert isinstance(parsed, dict)
    return asked, parsed


def _cycle_costs(before: tuple[float, dict[str, Any]], after: tuple[float, dict[str, Any]],
                 interval: float) -> CycleCosts:
    (t0, a), (t1, b) = before, after
    cycles = (t1 - t0) / interval

    def per_cycle(key: str) -> dict[str, float]:
        return {name: round((b[key][name] - a[key].get(name, 0.0)) / cycles * 1e6, 1)
                for name in b[key]}

    return CycleCosts(round(cycles, 2), per_cycle("stages"), per_cycle("threads"),
                      round((b["process"] - a["process"]) / cycles * 1e6, 1))


def _in_window(requests: list[Received], window: Window) -> list[Received]:
    return [r for r in requests if window.wall_start < r.received_at <= window.wall_end]


def _points(request: Received) -> int:
    message: Any = request.request  # ExportMetricsServiceRequest; the stubs are untyped
    count = 0
    for rm in message.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                count += len(getattr(metric, metric.WhichOneof("data")).data_points)
    return count


FAMILIES = (("gpu.process.", "per-process"), ("gpu.container.", "per-container"),
            ("gpu_agent.", "self-telemetry"))


def points_by_family(request: Received) -> dict[str, int]:
    """Points per family of metric (one point per series in an export)."""
    message: Any = request.request
    counts = {"device": 0, **{family: 0 for _, family in FAMILIES}}
    for rm in message.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                family = next((f for prefix, f in FAMILIES if metric.name.startswith(prefix)),
                              "device")
                counts[family] += len(getattr(metric, metric.WhichOneof("data")).data_points)
    return counts


def run_agent_case(case: AgentCase, workdir: Path) -> AgentResult:
    scenario = load_scenario(case.scenario)
    gpus = len(scenario.devices)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "agent.yaml"
    config.write_text("log_level: info\n", encoding="utf-8")
    flags = ["--config", str(config)]
    if not case.at_defaults:
        flags += ["--interval", f"{case.interval:g}", "--export-interval", f"{case.interval:g}"]
    with OtlpGrpcReceiver() as receiver, SimulatedNode.start(
        case.scenario, state_dir=workdir / "node", ready_timeout=node_ready_timeout(scenario)
    ) as node:
        started_wall = time.time()
        agent = AgentProcess(workdir, receiver.endpoint, node.env, flags)
        alive = lambda: agent.process.poll() is None  # noqa: E731
        try:
            receiver.store.wait_for(lambda s: s.received("metrics"), timeout=30,
                                    what="the agent's first export")
            first_export = receiver.store.received("metrics")[0].received_at - started_wall
            before = _costs(agent)
            main = measure(node, agent.process.pid, case.interval, case.cycles, alive)
            costs = _cycle_costs(before, _costs(agent), case.interval)
            requests = _in_window(receiver.store.received("metrics"), main)
            # Fast group alone: switch the other groups off at run time (see module docstring).
            config.write_text(
                yaml.safe_dump({"log_level": "info",
                                "groups": {"slow": {"enabled": False},
                                           "gpm": {"enabled": False},
                                           "processes": {"enabled": False}}}),
                encoding="utf-8",
            )
            agent.process.send_signal(signal.SIGHUP)
            _wait_in_log(agent, "configuration reloaded", timeout=10)
            fast = measure(node, agent.process.pid, case.interval, case.fast_only_cycles, alive)
            rss = peak_rss_mib(agent.process.pid)
            agent.terminate()
            summary = run_summary(agent.log())
        finally:
            agent.close()
    last = requests[-1] if requests else receiver.store.received("metrics")[-1]
    sizes = [r.request.ByteSize() for r in requests] or [last.request.ByteSize()]
    return AgentResult(
        case=case.name,
        scenario=case.scenario.name,
        gpus=gpus,
        gpu_processes=len(scenario.processes),
        interval_s=case.interval,
        export_interval_s=case.export_interval,
        window_s=round(main.seconds, 2),
        cycles=main.cycles,
        cpu_s_per_min=round(main.cpu_s_per_min, 3),
        cpu_percent_one_core=round(main.cpu_percent, 3),
        peak_rss_mib=round(rss, 1),
        first_export_s=round(first_export, 3),
        calls_per_gpu_per_cycle=round(main.calls.calls / gpus / max(main.cycles, 1), 3),
        calls_by_function=per_gpu_per_cycle(main.calls, gpus, main.cycles),
        fast_calls_per_gpu_per_cycle=round(fast.calls.calls / gpus / max(fast.cycles, 1), 3),
        fast_calls_by_function=per_gpu_per_cycle(fast.calls, gpus, fast.cycles),
        fast_window_cycles=fast.cycles,
        missed_cycles=summed(summary, "missed_cycles"),
        deadline_overruns=summed(summary, "deadline_overruns"),
        errors=summed(summary, "errors"),
        group_cycles=summed(summary, "cycles"),
        exports=int(str(summary.get("exports", 0))),
        export_failures=int(str(summary.get("export_failures", 0))),
        exports_in_window=len(requests),
        payload_bytes_mean=round(sum(sizes) / len(sizes), 1),
        payload_bytes_last=last.request.ByteSize(),
        points_per_export=_points(last),
        costs=costs,
        points_by_family=points_by_family(last),
        payload_gzip_bytes=len(gzip.compress(last.request.SerializeToString(), compresslevel=6)),
    )
