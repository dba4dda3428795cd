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
    GroupSample,
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


# A MIG-enabled GPU reports no utilization of its own (nvml.h: nvmlDeviceGetUtilizationRates is
# not supported in MIG mode), so "under load" is read from its instances' GPM SM activity.
TRAINED_DOWN = (Reading("gpu.pcie.link.width", 8), Reading("gpu.pcie.link.max_width", 16),
                Reading("gpu.pcie.link.generation", 5),
                Reading("gpu.pcie.link.max_generation", 5))


def mig_pcie_events(instance_sm: tuple[float, ...]) -> list[HealthEvent]:
    store = SnapshotStore()
    store.put(DeviceSnapshot(GPU, HealthState.OK, 0))
    for n, sm in enumerate(instance_sm):
        instance = DeviceSnapshot(DeviceIdentity(
            f"MIG-{n}", 0, "nvidia", "NVIDIA H100", "00000000:18:00.0",
            DevicePartition("GPU-a", "mig", "3g.40gb")), HealthState.OK, 0)
        store.put(instance.with_sample(GroupSample(
            "gpm", (Reading("gpu.sm.utilization", sm),), 1)))
    sink: list[HealthEvent] = []

    async def main() -> None:
        engine = HealthEngine([GPU], sink.append, store, EngineSettings(
            storm_window=1.0, debounce=DebounceSettings(degrade_after=2, clear_after=1)))
        task = asyncio.create_task(engine.run())
        try:
            for _ in range(3):
                engine.sampled("GPU-a", "slow", TRAINED_DOWN)
            for _ in range(100):  # delivery runs on the loop
                await asyncio.sleep(0.005)
        finally:
            task.cancel()
            engine.close()

    asyncio.run(main())
    return [e for e in sink if e.name == "gpu.degraded"]


def test_a_mig_gpu_with_a_busy_instance_is_judged_on_its_pcie_link() -> None:
    (event,) = mig_pcie_events((0.05, 0.9))
    attrs = dict(event.attributes)
    assert (attrs["gpu.health.subsystem"], attrs["gpu.health.condition"]) == (
        "pcie", "pcie_link_width")
    assert attrs["gpu.health.reason"] == "PCIe link width x8 of x16 under load"


def test_a_mig_gpu_whose_instances_idle_is_not_judged() -> None:
    assert mig_pcie_events((0.05, 0.1)) == []  # idle links train down to save power
    assert mig_pcie_events(()) == []  # no instance, no load to judge by
