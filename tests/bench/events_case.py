"""Health-event latency: XID injected into the simulated node -> log record at the receiver.

The agent runs on the 8-GPU bench node (sampling every second, exporting over OTLP/gRPC to a
local receiver). Events are injected one at a time, each waiting for the previous one to
arrive, so the figure is the latency of one event on an otherwise busy agent, not of a queue.
Each event is a different (GPU, XID code), so storm control never holds one back. Both clocks
are this machine's wall clock: injection is taken just before the control command is sent,
receipt when the receiver's handler gets the request.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.agent_case import run_summary
from tests.bench.results import EventLatencyResult
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

# XIDs that leave the GPU healthy, so no gpu.health event joins the stream being timed.
CODES = (13, 31, 43, 45, 68, 69, 70, 71, 72, 73, 75, 76, 77, 82, 83, 84, 85, 86, 88, 89, 96,
         97, 98, 99, 100, 101, 102, 103, 104, 105)


@dataclass(frozen=True)
class EventCase:
    name: str
    scenario: Path
    events: int


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _arrived(store: Store, uuid: str, code: int) -> float | None:
    events = store.logs("gpu.xid", {"hw.id": uuid, "gpu.xid.code": code})
    return events[0].received_at if events else None


def run_event_case(case: EventCase, workdir: Path) -> EventLatencyResult:
    workdir.mkdir(parents=True, exist_ok=True)
    gpus = len(load_scenario(case.scenario).devices)
    keys = [(gpu, code) for code in CODES for gpu in range(gpus)]
    assert case.events <= len(keys), "not enough distinct (GPU, code) pairs"
    with OtlpGrpcReceiver() as receiver, \
            SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node:
        agent = AgentProcess(workdir, receiver.endpoint, node.env,
                             ["--interval", "1", "--export-interval", "1"])
        store = receiver.store
        try:
            store.wait_for(lambda s: s.points("hw.power"), timeout=30, what="first export")
            uuids = {int(p.attributes["gpu.index"]): str(p.attributes["hw.id"])
                     for p in store.points("hw.power")}
            latencies = []  # from the event's entry into the node's ring
            from_command = []  # from just before the control command (earlier runs' figure)
            for gpu, code in keys[:case.events]:
                sent = time.time()
                answer = node.command({"op": "xid", "device": gpu, "code": code})
                arrived = store.wait_for(lambda s, u=uuids[gpu], c=code: _arrived(s, u, c),
                                         timeout=10, what=f"XID {code} on GPU {gpu}")
                latencies.append((arrived - int(answer["queued_unix_ns"]) / 1e9) * 1000)
                from_command.append((arrived - sent) * 1000)
        finally:
            agent.terminate()
            agent.close()
    summary = run_summary(agent.log())
    health = summary.get("health")
    assert isinstance(health, dict)
    return EventLatencyResult(
        case=case.name, scenario=case.scenario.name, gpus=gpus, events=len(latencies),
        p50_ms=round(_percentile(latencies, 0.50), 3),
        p99_ms=round(_percentile(latencies, 0.99), 3),
        max_ms=round(max(latencies), 3), mean_ms=round(statistics.fmean(latencies), 3),
        command_p50_ms=round(_percentile(from_command, 0.50), 3),
        command_p99_ms=round(_percentile(from_command, 0.99), 3),
        sent=int(health["sent"]), suppressed=int(health["suppressed"]),
        wal_ms_per_event=round(float(health["spool_write_seconds"]) * 1000
                               / max(1, int(health["spooled"])), 3),
        wal_events_per_write=round(int(health["spooled"])
                                   / max(1, int(health["spool_writes"])), 2),
    )
