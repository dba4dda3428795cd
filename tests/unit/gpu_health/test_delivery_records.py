"""Delivery shares a process's workload record between a GPU's events (delivery.py says
why): every event must still carry exactly ``workload_records`` of its processes."""

from __future__ import annotations

import asyncio
import operator
import random

from gpu_otel_agent.gpu_health.delivery import Delivery, Pending, workload_records
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.workload import GpuProcess, Workload


class _Lookup:
    """The processes on each GPU, changed by the test between events."""

    def __init__(self) -> None:
        self.on: dict[str, tuple[GpuProcess, ...]] = {}

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
        return self.on.get(uuid, ())


def _process(rng: random.Random, pid: int) -> GpuProcess:
    pod = rng.choice([None, "a", "b"])
    workload = Workload() if pod is None else Workload(
        container_id=f"c{pid % 7}", pod_uid=f"u-{pod}", pod_name=pod, namespace="ns",
        container_name=rng.choice([None, "main"]))
    return GpuProcess(pid, rng.choice(["", "python", "train"]), workload)


def test_each_event_carries_its_processes_records_shared_where_the_same() -> None:
    rng = random.Random(41)
    lookup = _Lookup()
    delivered: list[HealthEvent] = []
    expected: list[tuple[object, ...]] = []

    async def scenario() -> None:
        delivery = Delivery(delivered.append, lookup)
        runner = asyncio.create_task(delivery.run())
        pool = {uuid: [_process(rng, pid) for pid in range(100 * i, 100 * i + 40)]
                for i, uuid in enumerate(("GPU-a", "GPU-b"))}
        try:
            for n in range(120):
                uuid = rng.choice(list(pool))
                processes = pool[uuid]
                if rng.random() < 0.4:  # processes come and go, or are made anew (equal)
                    at = rng.randrange(len(processes))
                    processes[at] = rng.choice([
                        _process(rng, processes[at].pid),
                        GpuProcess(processes[at].pid, processes[at].executable,
                                   processes[at].workload)])
                    rng.shuffle(processes)
                now = lookup.on[uuid] = tuple(processes[:rng.randrange(len(processes) + 1)])
                expected.append(workload_records(now))
                delivery.put(Pending(HealthEvent("x", n, Severity.INFO, "", ()), uuid, True))
                while len(delivered) <= n:
                    await asyncio.sleep(0.001)
            # Two events of one GPU with its processes unchanged: the very same records.
            for n in (120, 121):
                expected.append(workload_records(lookup.on["GPU-a"]))
                delivery.put(Pending(HealthEvent("x", n, Severity.INFO, "", ()), "GPU-a", True))
                while len(delivered) <= n:
                    await asyncio.sleep(0.001)
        finally:
            runner.cancel()
            delivery.close()

    asyncio.run(scenario())
    assert [event.workloads for event in delivered] == expected
    # Records are shared, not copied, between events of a GPU with the same processes.
    last, before = delivered[-1].workloads, delivered[-2].workloads
    assert all(map(operator.is_, last, before))
    shared = {id(record) for event in delivered for record in event.workloads}
    assert len(shared) < sum(len(event.workloads) for event in delivered) / 2
