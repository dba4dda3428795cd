"""A slow read's health evaluation keeps what the last one made while its inputs are the same
objects: ``Reads.each`` answers from an index by metric made once per read, and the engine
keeps each GPU's sibling ``Peer`` while its latest fast read is the same readings. Over random
reads (GPUs that run slow, draw odd power, idle, links going down, fast reads kept or new),
the answers and the health events must be what the old code gives: ``each`` as a scan of every
value, the peers made afresh for every slow read.
"""

from __future__ import annotations

import asyncio
import random

from gpu_otel_agent.gpu_health import engine as engine_module
from gpu_otel_agent.gpu_health.debounce import DebounceSettings
from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.gray import Reads
from gpu_otel_agent.gpu_health.siblings import Peer
from gpu_otel_agent.gpu_health.verdict import HealthBoard
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)

METRICS = ("gpu.nvlink.link.state", "gpu.fabric.status", "gpu.clock.throttle",
           "gpu.nvlink.link.errors", "hw.power", "gpu.fabric.fault")


def test_each_is_a_scan_of_every_value() -> None:
    rng = random.Random(11)
    for _ in range(300):
        readings = tuple(Reading(rng.choice(METRICS), rng.choice((0, 1, 2.5, -0.0)),
                                 tuple(("k", rng.randrange(3)) for _ in range(rng.randrange(2))))
                         for _ in range(rng.randrange(0, 30)))
        reads = Reads(readings, 1.0)
        values = {(r.metric, r.attributes): float(r.value) for r in readings}
        for metric in rng.sample((*METRICS, "absent"), 4):
            expected = [(attrs, v) for (name, attrs), v in values.items() if name == metric]
            answer = reads.each(metric)
            assert answer == expected
            answer.append(((), 9.0))  # the caller's own list: the next answer is whole
            assert reads.each(metric) == expected


class _Afresh(HealthEngine):
    """The engine as it was: every peer made from its fast read at every slow read."""

    def _peer(self, uuid: str, fast: tuple[Reading, ...]) -> Peer:
        return engine_module._peer(self._gpus[uuid].identity.model, fast)


GPUS = [DeviceIdentity(f"GPU-{i}", i, "nvidia", "NVIDIA H100", f"0000:{i:02x}:00.0")
        for i in range(5)]


def _fast(rng: random.Random) -> tuple[Reading, ...]:
    return (Reading("hw.gpu.utilization", rng.choice((0.1, 0.9, 0.95)),
                    (("hw.gpu.task", "general"),)),
            Reading("gpu.clock.frequency", rng.choice((1.98e9, 1.9e9, 1.2e9)),
                    (("gpu.clock.domain", "sm"),)),
            Reading("hw.power", rng.choice((700.0, 650.0, 300.0))),
            Reading("hw.temperature", 60.0, (("hw.sensor_location", "gpu"),)))


def _slow(rng: random.Random) -> tuple[Reading, ...]:
    return tuple(Reading("gpu.nvlink.link.state", int(rng.random() > 0.1),
                         (("gpu.nvlink.link", link),)) for link in range(4))


def _events(engine_class: type[HealthEngine], seed: int) -> list[tuple[object, ...]]:
    rng = random.Random(seed)
    store = SnapshotStore()
    for gpu in GPUS:
        store.put(DeviceSnapshot(gpu, HealthState.OK, 0))
    sink: list[HealthEvent] = []
    now = [0.0]

    async def main() -> None:
        engine = engine_class(GPUS, sink.append, store, EngineSettings(
            storm_window=1.0, debounce=DebounceSettings(degrade_after=2, clear_after=1)),
            clock=lambda: now[0], wall_ns=lambda: int(now[0] * 1e9),
            board=HealthBoard(SnapshotStore()))
        task = asyncio.create_task(engine.run())
        try:
            for _ in range(400):
                now[0] += 1.0
                for gpu in GPUS:  # a new fast read, or the last one kept
                    if rng.random() < 0.5:
                        device = store.devices()[gpu.index]
                        store.put(device.with_sample(GroupSample("fast", _fast(rng), 0)))
                gpu = rng.choice(GPUS)
                engine.sampled(gpu.uuid, "slow", _slow(rng))
            for _ in range(100):  # delivery runs on the loop
                await asyncio.sleep(0.005)
        finally:
            task.cancel()
            engine.close()

    asyncio.run(main())
    return [(e.name, e.severity, e.body, e.attributes) for e in sink]


def test_kept_peers_raise_and_clear_what_fresh_ones_do() -> None:
    for seed in (1, 2):
        ours = _events(HealthEngine, seed)
        assert ours == _events(_Afresh, seed)
        names = [name for name, *_ in ours]
        # Siblings and links were judged: both ways, more than once.
        assert names.count("gpu.degraded") > 5 and names.count("gpu.healthy") > 5
        assert any("siblings" in str(attrs) for *_, attrs in ours)
