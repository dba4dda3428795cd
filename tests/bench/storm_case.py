"""A storm of XIDs on one GPU: how fast it goes in, comes out summarised, and what it costs.

The real agent runs on the 8-GPU bench node (sampling and exporting every ``interval``, storm
window ``storm_window``) and exports over OTLP/gRPC to a local receiver. ``xids`` copies of
one XID on one GPU are pipelined through a single control connection of the simulated node,
as the integration test's storm does; the node pushes each into its event ring, where the
agent's NVML event thread picks it up. Every clock is this machine's wall clock (the
receiver stamps arrivals with ``time.time()``), so latencies need no clock translation.

What is measured, and from where:

- injection: first line sent -> last answer read, on the control connection;
- first record: first line sent -> the storm's first ``gpu.xid`` record at the receiver;
- accounted: first line sent -> the receiver holds the ``gpu.xid.errors`` counter at the
  number injected *and* storm summaries whose ``gpu.event.count`` plus the first record add
  up to it (both taken from arrival times, not from when this process noticed);
- agent CPU: utime + stime of the agent over that same span, less what the agent spent at
  rest over as long (measured just before the storm), per 1000 XIDs;
- the other GPUs' cadence: distinct sample times of ``hw.gpu.utilization`` at the receiver
  (largest gap over the interval; a sample no export carried widens a gap too, so this is
  an upper bound) and the agent's own ``gpu_agent.cycles.missed`` counters, before and after.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.agent_case import run_summary
from tests.bench.procstat import cpu_seconds
from tests.bench.results import StormResult
from tests.integration.harness import AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import LogEvent, Store

SAMPLED = "hw.gpu.utilization"  # a fast-group metric every GPU reports every cycle
MISSED = "gpu_agent.cycles.missed"


@dataclass(frozen=True)
class StormCase:
    name: str
    scenario: Path
    xids: int
    interval: float  # sampling interval = export interval (s)
    storm_window: float  # the agent's health.storm_window (s)
    rest_s: float  # the agent at rest before the storm: its baseline CPU
    device: int = 2
    code: int = 13  # leaves the GPU healthy: no gpu.health event joins the storm


@dataclass(frozen=True)
class Injection:
    first_sent: float  # wall clock, just before the first line left
    last_answer: float  # wall clock, when the last answer had been read
    seconds: float  # monotonic, first line -> last answer


def inject(socket_path: Path, device: int, code: int, count: int) -> Injection:
    """``count`` XIDs through one control connection, pipelined (every answer checked)."""
    line = json.dumps({"op": "xid", "device": device, "code": code}).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(socket_path))
        # Send on a thread: the node answers each line, and both directions must flow.
        sender = threading.Thread(target=conn.sendall, args=(line * count,), daemon=True)
        first_sent, started = time.time(), time.monotonic()
        sender.start()
        answers = ok = 0
        pending = b""
        while answers < count:
            chunk = conn.recv(1 << 16)
            if not chunk:
                raise RuntimeError(f"the node closed the control connection after {answers}")
            *lines, pending = (pending + chunk).split(b"\n")
            answers += len(lines)
            ok += sum(b'"ok": true' in answer for answer in lines)
        seconds, last_answer = time.monotonic() - started, time.time()
        sender.join()
    if ok != count:
        raise RuntimeError(f"the node refused {count - ok} of {count} XIDs")
    return Injection(first_sent, last_answer, seconds)


def max_gap(times: Iterable[float], start: float, end: float) -> float:
    """Largest gap between consecutive times that touches [start, end]: the gap that spans
    ``start`` counts (the last sample before it is included), as does the one ending after
    ``end`` (so a stall that outlasts the span is not cut short)."""
    ordered = sorted(set(times))
    before = [t for t in ordered if t < start]
    after = [t for t in ordered if t > end]
    inside = [t for t in ordered if start <= t <= end]
    kept = before[-1:] + inside + after[:1]
    if len(kept) < 2:
        raise ValueError(f"fewer than two samples around [{start}, {end}]")
    return max(b - a for a, b in itertools.pairwise(kept))


def accounted(records: Sequence[LogEvent]) -> int:
    """XIDs the storm's events account for: the first one, plus each summary's count. An
    event that hit several processes is one record per process sharing ``gpu.event.id``:
    counted once."""
    events = {str(r.attributes.get("gpu.event.id", id(r))): r for r in records}
    return sum(int(str(r.attributes.get("gpu.event.count", 1))) for r in events.values())


def _counter_reached(store: Store, uuid: str, code: int, count: int) -> float | None:
    """Arrival of the first export whose gpu.xid.errors counter shows ``count``."""
    hits = [p.received_at for p in store.points("gpu.xid.errors", {"hw.id": uuid,
                                                                    "gpu.xid.code": code})
            if p.value >= count]
    return min(hits) if hits else None


def _every_gpu(store: Store, gpus: int) -> dict[int, str] | None:
    """GPU index -> UUID, once every GPU's self-telemetry has arrived."""
    found = {int(str(p.attributes["gpu.index"])): str(p.attributes["hw.id"])
             for p in store.points(MISSED)}
    return found if len(found) == gpus else None


def _missed(store: Store, uuids: Sequence[str]) -> int | None:
    """The agent's missed-cycle counters of ``uuids`` summed, from their latest exports."""
    total = 0
    for uuid in uuids:
        point = store.latest(MISSED, {"hw.id": uuid})
        if point is None:
            return None
        total += int(point.value)
    return total


def run_storm_case(case: StormCase, workdir: Path) -> StormResult:
    workdir.mkdir(parents=True, exist_ok=True)
    gpus = len(load_scenario(case.scenario).devices)
    config = workdir / "agent.yaml"
    config.write_text(f"health: {{storm_window: {case.storm_window:g}}}\n", encoding="utf-8")
    flags = ["--config", str(config), "--interval", f"{case.interval:g}",
             "--export-interval", f"{case.interval:g}"]
    with OtlpGrpcReceiver() as receiver, \
            SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node:
        agent = AgentProcess(workdir, receiver.endpoint, node.env, flags)
        store = receiver.store
        pid = agent.process.pid
        try:
            uuids = store.wait_for(lambda s: _every_gpu(s, gpus), timeout=30,
                                   what="every GPU's self-telemetry")
            target = uuids[case.device]
            others = [u for i, u in sorted(uuids.items()) if i != case.device]
            # At rest: the agent's own CPU rate, to take out of the storm's figure.
            cpu0, mono0 = cpu_seconds(pid), time.monotonic()
            time.sleep(case.rest_s)
            rest_cpu_per_s = (cpu_seconds(pid) - cpu0) / (time.monotonic() - mono0)
            missed_before = _missed(store, others)
            cpu_before, mono_before = cpu_seconds(pid), time.monotonic()
            shot = inject(node.socket_path, case.device, case.code, case.xids)
            key = {"hw.id": target, "gpu.xid.code": case.code}
            first = store.wait_for(lambda s: s.logs("gpu.xid", key), timeout=60,
                                   what="the storm's first record")[0]
            store.wait_for(lambda s: accounted(s.logs("gpu.xid", key)) >= case.xids
                           and _counter_reached(s, target, case.code, case.xids),
                           timeout=120,
                           # Short of it: XIDs lost (the node's event ring holds 65536 events,
                           # as the driver queues each one for a reader) or a count gone astray.
                           what=f"all {case.xids} XIDs counted and summarised")
            cpu_after, mono_after = cpu_seconds(pid), time.monotonic()
            records = store.logs("gpu.xid", key)
            counter_at = _counter_reached(store, target, case.code, case.xids)
            assert counter_at is not None
            done_at = max(counter_at, *(r.received_at for r in records))
            # One more export of every GPU, so the missed-cycle counters cover the storm.
            store.wait_for(lambda s: all(p.received_at > done_at for u in others
                                         if (p := s.latest(MISSED, {"hw.id": u}))),
                           timeout=30, what="an export after the storm")
            missed_after = _missed(store, others)
            gaps = [max_gap((p.time_unix_nano / 1e9 for p in store.points(SAMPLED,
                                                                          {"hw.id": u})),
                            shot.first_sent, done_at) for u in others]
            agent.terminate()
        finally:
            agent.close()
    summary = run_summary(agent.log())
    health = summary.get("health")
    assert isinstance(health, dict)
    storm_cpu = cpu_after - cpu_before
    net_cpu = storm_cpu - rest_cpu_per_s * (mono_after - mono_before)
    counter = store.latest("gpu.xid.errors", key)
    assert missed_before is not None and missed_after is not None
    return StormResult(
        case=case.name, scenario=case.scenario.name, gpus=gpus, interval_s=case.interval,
        storm_window_s=case.storm_window, xids=case.xids,
        inject_s=round(shot.seconds, 3),
        inject_per_s=round(case.xids / shot.seconds),
        first_record_ms=round((first.received_at - shot.first_sent) * 1000, 1),
        first_is_single="gpu.event.count" not in first.attributes,
        accounted_s=round(done_at - shot.first_sent, 3),
        xids_counted=int(counter.value) if counter is not None else 0,
        xids_in_records=accounted(records),
        log_records=len({str(r.attributes.get("gpu.event.id", id(r))) for r in records}),
        suppressed=int(health["suppressed"]),
        agent_cpu_s=round(storm_cpu, 3),
        rest_cpu_percent=round(rest_cpu_per_s * 100, 2),
        cpu_ms_per_1000_xids=round(net_cpu / case.xids * 1000 * 1000, 2),
        other_gpus=len(others),
        max_gap_intervals=round(max(gaps) / case.interval, 2),
        missed_cycles=missed_after - missed_before,
        wal_writes=int(health["spool_writes"]),
    )
