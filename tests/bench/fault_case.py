"""Health events through minutes of faults: kill -9 of the agent, collector outages,
throttling and a poison record, with XIDs injected throughout (issue 30).

The real agent runs on the 8-GPU simulated node and sends to a real OTLP/gRPC receiver (grpcio)
that this case drives: at random (seeded) it is stopped for a while (an outage), answers every
request with RESOURCE_EXHAUSTED and a RetryInfo in its status details (throttling), or the agent
is killed with SIGKILL and started again on the same spool. Once, an XID of a code used for
nothing else is injected and the receiver refuses every request holding it with
INVALID_ARGUMENT (a record the collector will never take). XIDs go in all the while the agent
is up and its NVML event sets exist (injected while it is down, they would be lost before an
event set exists: docs/health-events.md says why).

What is counted, at the receiver:

- injected: XIDs the node raised while the agent was up (the poison one apart);
- delivered: those the accepted log records account for: each distinct ``gpu.event.id`` of a
  ``gpu.xid`` record counts 1, a storm summary its ``gpu.event.count``. Events, not records:
  an XID on a GPU with 8 processes is 8 records of one event, and counting records let one
  event's 8 hide 7 lost events (issue 39);
- distinct records and duplicates: accepted records by ``log.record.uid``, and those whose uid
  had already been accepted (re-sends after a kill);
- quarantined: lines in the spool's ``dead-letter.jsonl`` (the poison record: 1 expected);
- longest wait: the most seconds between a fault's time and its first accepted copy.
"""

from __future__ import annotations

import json
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf.message import Message

from gpu_otel_agent.simulation.node import SimulatedNode, load_scenario
from tests.bench.results import FaultSoakResult
from tests.integration.harness import AgentProcess
from tests.receivers import decode
from tests.receivers.otlp_grpc import Answer, OtlpGrpcReceiver, throttled
from tests.receivers.records import Signal

CODES = (13, 31, 43, 45, 63, 64, 68, 69)  # XIDs that leave the GPU healthy
POISON = 94  # used for the poison record only


@dataclass(frozen=True)
class FaultCase:
    name: str
    scenario: Path
    minutes: float = 10.0
    seed: int = 30
    xids_per_s: float = 2.0
    mean_gap_s: float = 20.0  # between faults (kill -9, outage, throttle), exponential
    outage_s: float = 8.0
    throttle_s: float = 5.0
    storm_window_s: float = 2.0
    settle_s: float = 90.0  # after the run: time for the last events to arrive


def _codes(request: Message) -> set[object]:
    return {e.attributes.get("gpu.xid.code")
            for e in decode.log_events(request, 0.0)}  # type: ignore[arg-type]


class _Receiver:
    """The receiver's answers: poison refused, throttling while ``throttle_until``."""

    def __init__(self) -> None:
        self.throttle_until = 0.0

    def __call__(self, signal_: Signal, request: Message) -> Answer | None:
        if signal_ == "logs" and POISON in _codes(request):
            return Answer(grpc.StatusCode.INVALID_ARGUMENT, "poison record")
        if time.monotonic() < self.throttle_until:
            return throttled(2.0)
        return None


def run_fault_case(case: FaultCase, workdir: Path) -> FaultSoakResult:
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(case.seed)
    config = workdir / "agent.yaml"
    config.write_text(f"health: {{storm_window: {case.storm_window_s:g}}}\n", encoding="utf-8")
    flags = ["--interval", "1", "--export-interval", "1", "--config", str(config)]
    rule = _Receiver()
    injected = kills = outages = throttles = 0
    poisoned = False
    with OtlpGrpcReceiver() as receiver, \
            SimulatedNode.start(case.scenario, state_dir=workdir / "node") as node:
        receiver.answer_with(rule)
        store = receiver.store
        gpus = len(load_scenario(case.scenario).devices)

        def start() -> AgentProcess:
            agent = AgentProcess(workdir, receiver.endpoint, node.env, flags)
            mark = len(store.received("metrics", accepted=None))
            deadline = time.monotonic() + 60
            # Up, and past its first export: its NVML event sets exist by then.
            while len(store.received("metrics", accepted=None)) <= mark and \
                    time.monotonic() < deadline and receiver.running:
                time.sleep(0.1)
            time.sleep(1.0)
            return agent

        agent = start()
        begin = time.monotonic()
        end = begin + case.minutes * 60
        next_fault = begin + rng.expovariate(1 / case.mean_gap_s)
        outage_until = 0.0
        try:
            while (now := time.monotonic()) < end:
                if outage_until and now >= outage_until:
                    receiver.start()
                    outage_until = 0.0
                if now >= next_fault:
                    fault = rng.choice(("kill", "outage", "throttle"))
                    if fault == "kill":
                        agent.process.send_signal(signal.SIGKILL)
                        agent.process.wait()
                        agent.close()
                        kills += 1
                        if outage_until:  # it must come up to a collector to be "up"
                            receiver.start()
                            outage_until = 0.0
                        agent = start()
                    elif fault == "outage" and not outage_until:
                        receiver.stop()
                        outage_until = now + case.outage_s
                        outages += 1
                    else:
                        rule.throttle_until = now + case.throttle_s
                        throttles += 1
                    next_fault = time.monotonic() + rng.expovariate(1 / case.mean_gap_s)
                if not poisoned and now - begin >= case.minutes * 20:  # a third in
                    node.command({"op": "xid", "device": rng.randrange(gpus), "code": POISON})
                    poisoned = True
                else:
                    node.command({"op": "xid", "device": rng.randrange(gpus),
                                  "code": rng.choice(CODES)})
                    injected += 1
                time.sleep(1 / case.xids_per_s)
            if outage_until:
                receiver.start()
            rule.throttle_until = 0.0
            settle_end = time.monotonic() + case.settle_s
            while time.monotonic() < settle_end and _accounted(store)[0] < injected:
                time.sleep(0.5)
            agent.shutdown()
        finally:
            agent.close()
        delivered, distinct, duplicates, longest = _accounted(store)
    dead = workdir / "event-spool" / "dead-letter.jsonl"
    quarantined = len(dead.read_bytes().splitlines()) if dead.exists() else 0
    return FaultSoakResult(
        case=case.name, scenario=case.scenario.name, minutes=case.minutes, seed=case.seed,
        kills=kills, outages=outages, throttles=throttles, poison_records=int(poisoned),
        xids_injected=injected, xids_delivered=delivered, distinct_records=distinct,
        duplicates=duplicates, quarantined=quarantined, lost=max(0, injected - delivered),
        longest_wait_s=round(longest, 1))


def _accounted(store: object) -> tuple[int, int, int, float]:
    """(XIDs accounted for, distinct records, duplicate copies, longest wait in seconds)."""
    first: dict[str, float] = {}  # per event (gpu.event.id): its first accepted copy's wait
    counts: dict[str, int] = {}  # per event: the XIDs it stands for
    records: set[str] = set()
    copies = 0
    for received in store.received("logs", accepted=True):  # type: ignore[attr-defined]
        for event in decode.log_events(received.request, received.received_at):
            if event.event_name != "gpu.xid" or event.attributes.get("gpu.xid.code") == POISON:
                continue
            copies += 1
            records.add(str(event.attributes["log.record.uid"]))
            event_id = str(event.attributes["gpu.event.id"])
            if event_id in first:
                continue
            first[event_id] = received.received_at - event.time_unix_nano / 1e9
            summary = event.attributes.get("gpu.event.source") == "summary"
            counts[event_id] = int(str(event.attributes["gpu.event.count"])) if summary else 1
    longest = max(first.values(), default=0.0)
    return sum(counts.values()), len(records), copies - len(records), longest


def describe(result: FaultSoakResult) -> str:
    return json.dumps(result.__dict__, sort_keys=True)
