"""The health engine's gray-failure path: slow reads in, gpu.degraded / gpu.healthy and the
subsystem states out; a MIG-enabled GPU's NVLink links (which NVML reports down) not judged."""

from __future__ import annotations

import asyncio

from gpu_otel_agent.gpu_health.debounce import DebounceSettings
from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    HealthState,
    Reading,
    SnapshotStore,
)

GPU = DeviceIdentity("GPU-a", 0, "nvidia", "NVIDIA H100", "00000000:18:00.0")
DOWN = (Reading("gpu.nvlink.link.state", 1, (("gpu.nvlink.link", 0),)),
        Reading("gpu.nvlink.link.state", 0, (("gpu.nvlink.link", 1),)))


def degraded_after(reads: int, *, mig: bool) -> tuple[list[HealthEvent], SnapshotStore]:
    store = SnapshotStore()
    store.put(DeviceSnapshot(GPU, HealthState.OK, 0))
    if mig:
        store.put(DeviceSnapshot(DeviceIdentity(
            "MIG-a", 0, "nvidia", "NVIDIA H100", "00000000:18:00.0",
            DevicePartition("GPU-a", "mig", "1g.10gb")), HealthState.OK, 0))
    sink: list[HealthEvent] = []

    async def main() -> None:
        engine = HealthEngine([GPU], sink.append, store, EngineSettings(
            storm_window=1.0, debounce=DebounceSettings(degrade_after=2, clear_after=1)))
        task = asyncio.create_task(engine.run())
        try:
            for _ in range(reads):
                engine.sampled("GPU-a", "slow", DOWN)
            for _ in range(100):  # delivery runs on the loop
                await asyncio.sleep(0.005)
        finally:
            task.cancel()
            engine.close()

    asyncio.run(main())
    return sink, store


def test_a_link_down_for_two_reads_is_degraded_nvlink() -> None:
    sink, store = degraded_after(1, mig=False)
    assert not [e for e in sink if e.name == "gpu.degraded"]  # one read: debounced
    sink, store = degraded_after(2, mig=False)
    (event,) = [e for e in sink if e.name == "gpu.degraded"]
    attrs = dict(event.attributes)
    assert (attrs["gpu.health.subsystem"], attrs["gpu.health.condition"]) == (
        "nvlink", "nvlink_link_down")
    assert attrs["gpu.health.reason"] == "NVLink link(s) 1 down of 2"
    health = store.current(0).health["GPU-a"]
    assert health.state is HealthState.DEGRADED
    status = {dict(r.attributes)["gpu.health.subsystem"]: dict(r.attributes)["hw.state"]
              for r in health.readings if r.metric == "gpu.health.status" and r.value == 1}
    assert status["nvlink"] == "degraded" and status["pcie"] == "ok"


def test_a_mig_enabled_gpus_links_are_not_judged() -> None:
    sink, store = degraded_after(4, mig=True)
    assert not [e for e in sink if e.name == "gpu.degraded"]
    assert store.current(0).health["GPU-a"].state is HealthState.OK
