"""A device's health is decided once (gpu_health/verdict.py) and every reader reads that one
record: the series every exporter writes, the local endpoint's /v1/snapshot and /v1/health.
(The same at real receivers: tests/integration/test_health_readers.py.)"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import GroupConfig
from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.verdict import EngineView, HealthBoard, Reachability, decide
from gpu_otel_agent.local.health import health_view
from gpu_otel_agent.local.views import device_view
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    HealthState,
    HeldCondition,
    NodeSnapshot,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.polling import until as _until

GPU = DeviceIdentity("GPU-a", 0, "nvidia", "H100", "00:18")
XID_48 = HeldCondition("memory", HealthState.DEGRADED, "XID 48 DBE")
COUNTER = Reading("gpu.xid.errors", 1, (("gpu.xid.code", 48),))


def _readers(snapshot: NodeSnapshot) -> dict[str, object]:
    """What each reader says of GPU-a's state."""
    (status,) = [p for p in series(snapshot)["hw.status"] if p.value == 1]
    (device,) = [d for d in snapshot.devices if d.identity.uuid == GPU.uuid]
    (judged,) = health_view(snapshot)["devices"]
    return {"hw.status": dict(status.attributes)["hw.state"],
            "/v1/snapshot": device_view(device, snapshot)["health"],
            "/v1/health": judged["state"]}


def test_a_lost_gpu_the_engine_found_degraded_is_failed_with_both_reasons() -> None:
    health = decide(Reachability(HealthState.FAILED, "lost: GPU_IS_LOST"),
                    EngineView(HealthState.DEGRADED, (XID_48,), (COUNTER,)))
    assert health.state is HealthState.FAILED
    assert [(dict(r.attributes)["hw.state"], r.value) for r in health.status] == [
        ("ok", 0), ("degraded", 0), ("failed", 1)]
    assert health.readings == (COUNTER,) and health.engine
    assert health.reason == "lost: GPU_IS_LOST"
    subsystems = {s.name: (s.state, s.reasons) for s in health.subsystems}
    assert subsystems["memory"] == (HealthState.DEGRADED, ("XID 48 DBE",))
    assert subsystems["driver"] == (HealthState.FAILED, ("lost: GPU_IS_LOST",))
    assert subsystems["pcie"] == (HealthState.OK, ())


def test_without_the_engine_a_gpu_is_as_it_answers() -> None:
    hung = decide(Reachability(HealthState.DEGRADED, ""), None)
    assert (hung.state, hung.readings, hung.engine) == (HealthState.DEGRADED, (), False)
    assert {s.name: s.reasons for s in hung.subsystems}["driver"] == ("not answering",)
    assert decide(Reachability(), None).state is HealthState.OK


def test_every_reader_reads_the_decision_and_decides_nothing() -> None:
    """The sampler's own field of the device is an input, never read as its health: a reader
    that still merged it would say failed here."""
    store = SnapshotStore()
    store.put(DeviceSnapshot(GPU, HealthState.FAILED, 0, reason="lost"))
    board = HealthBoard(store)
    board.reachability(GPU.uuid, HealthState.OK, "")
    board.engine_view(GPU.uuid, EngineView(HealthState.DEGRADED, (XID_48,), (COUNTER,)))
    assert set(_readers(store.current(1)).values()) == {"degraded"}
    board.reachability(GPU.uuid, HealthState.FAILED, "lost: GPU_IS_LOST")
    assert set(_readers(store.current(2)).values()) == {"failed"}
    board.reachability(GPU.uuid, HealthState.OK, "")  # back; the XID still holds
    assert set(_readers(store.current(3)).values()) == {"degraded"}


class _Device:
    """Answers at once until ``gate`` is cleared (then its call hangs)."""

    def __init__(self) -> None:
        self.identity = GPU
        self.current_call: str | None = None
        self.gate = threading.Event()
        self.gate.set()
        self.reads = 0

    def probe(self) -> frozenset[str]:
        return frozenset({"fast"})

    def read(self, group: str) -> tuple[Reading, ...]:
        self.current_call = "nvmlDeviceGetPowerUsage"
        self.gate.wait()
        self.reads += 1
        return (Reading("hw.power", 300.0),)


def test_a_hung_gpu_reaches_every_reader_through_the_board() -> None:
    """The sampler reports whether its GPU answers, the engine what the events say; both
    reach the readers only as the board's one record."""
    async def scenario() -> None:
        store = SnapshotStore()
        board = HealthBoard(store)
        events: list[HealthEvent] = []  # delivered only by engine.run(), not run here
        engine = HealthEngine([GPU], events.append, store, EngineSettings(), board=board)
        base = load(None, environ={})
        holder = ConfigHolder(replace(base, groups={"fast": GroupConfig(True, 0.05)},
                                      call_timeout=0.2))
        device = _Device()
        sampler = DeviceSampler(device, store, holder, observer=engine, health=board)
        task = asyncio.create_task(sampler.run())
        try:
            await _until(lambda: device.reads > 0)
            assert set(_readers(store.current(1)).values()) == {"ok"}
            device.gate.clear()
            await _until(lambda: store.current(2).health_of(GPU.uuid).state
                         is HealthState.DEGRADED)
            assert set(_readers(store.current(3)).values()) == {"degraded"}
            (judged,) = health_view(store.current(4))["devices"]
            assert judged["subsystems"]["driver"]["state"] == "degraded"
            assert any("nvmlDeviceGetPowerUsage" in reason
                       for reason in judged["subsystems"]["driver"]["reasons"])
            device.gate.set()
            await _until(lambda: store.current(5).health_of(GPU.uuid).state
                         is HealthState.OK)
            assert set(_readers(store.current(6)).values()) == {"ok"}
            assert store.current(7).health_of(GPU.uuid).engine  # the engine's view is in it
        finally:
            task.cancel()
            sampler.close()
            engine.close()

    asyncio.run(scenario())
