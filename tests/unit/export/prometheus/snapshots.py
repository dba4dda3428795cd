"""Real snapshots (the model objects samplers publish) for the Prometheus endpoint tests."""

from __future__ import annotations

from types import MappingProxyType

from gpu_otel_agent.model.snapshot import (
    AgentSample,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
    SnapshotStore,
)

MIB = 1024 * 1024
UUIDS = ("GPU-aaaaaaaa-0000-4000-8000-000000000000", "GPU-bbbbbbbb-0000-4000-8000-000000000001")
POD_A = (("k8s.namespace.name", "ml"), ("k8s.pod.name", "infer-a"),
         ("k8s.container.name", "server"), ("k8s.pod.uid", "uid-a"))
POD_B = (("k8s.namespace.name", "ml"), ("k8s.pod.name", "infer-b"),
         ("k8s.container.name", "server"), ("k8s.pod.uid", "uid-b"))


def identity(index: int) -> DeviceIdentity:
    return DeviceIdentity(UUIDS[index], index, "nvidia", "NVIDIA H100 80GB HBM3",
                          f"00000000:{0x18 + index:02X}:00.0")


def device_readings(util: float, used_mib: int,
                    pods: tuple[tuple[tuple[str, str], ...], ...] = (POD_A,),
                    ) -> tuple[Reading, ...]:
    return (
        *(Reading("gpu.container.memory.limit", 8192 * MIB, pod) for pod in pods),
        Reading("hw.gpu.utilization", util, (("hw.gpu.task", "general"),)),
        Reading("hw.gpu.utilization", 0.05, (("hw.gpu.task", "encoder"),)),
        Reading("hw.gpu.memory.usage", used_mib * MIB),
        Reading("hw.gpu.memory.limit", 81559 * MIB),
        Reading("gpu.memory.reserved", 520 * MIB),
        Reading("hw.temperature", 61.0, (("hw.sensor_location", "gpu"),)),
        Reading("hw.power", 512.5),
        Reading("hw.energy", 1234.5),
        Reading("gpu.clock.frequency", 1980e6, (("gpu.clock.domain", "sm"),)),
        Reading("gpu.clock.frequency", 1755e6, (("gpu.clock.domain", "graphics"),)),
        Reading("gpu.clock.throttle", 1, (("gpu.clock.throttle.reason", "sw_power_cap"),)),
        Reading("gpu.clock.throttle", 0, (("gpu.clock.throttle.reason", "gpu_idle"),)),
        Reading("gpu.clock.throttle", 1, (("gpu.clock.throttle.reason", "hw_slowdown"),)),
        Reading("gpu.violation.time", 2.5, (("gpu.violation.policy", "power"),)),
        Reading("hw.errors", 3, (("error.type", "corrected"),)),
        Reading("gpu.process.utilization", 0.25,
                (("process.pid", 4242), ("process.executable.name", "python"), *POD_A,
                 ("hw.gpu.task", "general"))),
        Reading("gpu.process.memory.usage", 2048 * MIB,
                (("process.pid", 4242), ("process.executable.name", "python"), *POD_A)),
    )


def device(index: int, util: float, used_mib: int, time_ns: int,
           health: HealthState = HealthState.OK, *,
           pods: tuple[tuple[tuple[str, str], ...], ...] = (POD_A,)) -> DeviceSnapshot:
    sample = GroupSample("fast", device_readings(util, used_mib, pods), time_ns)
    snapshot = DeviceSnapshot(identity(index), HealthState.OK, 1_000,
                              MappingProxyType({"fast": sample}))
    return snapshot.with_health(health) if health is not HealthState.OK else snapshot


def node(time_ns: int = 5_000_000_000) -> NodeSnapshot:
    agent = AgentSample((Reading("gpu_agent.exports.completed", 7),), 1_000, time_ns)
    return NodeSnapshot((device(0, 0.37, 40000, time_ns), device(1, 0.5, 1000, time_ns)),
                        time_ns, agent)


def store_with(*devices: DeviceSnapshot) -> SnapshotStore:
    store = SnapshotStore()
    for d in devices:
        store.put(d)
    return store
