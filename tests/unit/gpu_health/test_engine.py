"""The health engine between its inputs (device events, sampler observations) and its sink."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from gpu_otel_agent.backends.protocol import (
    EVENT_ECC_CORRECTED,
    EVENT_FATAL_POISON,
    EVENT_GPU_RESET_END,
    EVENT_GPU_RESET_START,
    EVENT_PARTITIONS_CHANGED,
    EVENT_RECOVERY_ACTION,
    EVENT_SXID,
    EVENT_XID,
    RECOVERY_ACTION_UNKNOWN,
    DeviceEvent,
    LinkFault,
)
from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.storm_journal import StormJournal
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    HealthState,
    SnapshotStore,
)
from gpu_otel_agent.model.workload import GpuProcess, Workload
from tests.polling import until

GPU = DeviceIdentity("GPU-a", 0, "nvidia", "NVIDIA H100", "00000000:18:00.0")


class Lookup:
    def __init__(self) -> None:
        self.calls = 0

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
        self.calls += 1
        return (GpuProcess(7, "python3", Workload(pod_name="train-0", namespace="ml")),
                GpuProcess(8, "python3", Workload(pod_name="train-0", namespace="ml")))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(scenario: Callable[[HealthEngine, list[HealthEvent], Clock], Awaitable[None]],
        window: float = 1.0, lookup: Lookup | None = None,
        clock: Clock | None = None) -> SnapshotStore:
    store = SnapshotStore()
    clock = clock or Clock()

    async def main() -> None:
        sink: list[HealthEvent] = []
        engine = HealthEngine([GPU], sink.append, store,
                              EngineSettings(storm_window=window, dedup_window=2.0),
                              lookup, clock=clock)
        task = asyncio.create_task(engine.run())
        try:
            await scenario(engine, sink, clock)
        finally:
            task.cancel()
            engine.close()

    asyncio.run(main())
    return store


def xid(code: int, source: str = "nvml") -> DeviceEvent:
    return DeviceEvent("GPU-a", EVENT_XID, time.time_ns(), code=code, source=source)


def test_xid_79_event_with_workloads_health_and_counter() -> None:
    lookup = Lookup()

    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([xid(79)])
        await until(lambda: len(sink) == 2)
        first, health = sink
        attrs = dict(first.attributes)
        assert (first.name, attrs["gpu.xid.code"], attrs["gpu.xid.action"]) == (
            "gpu.xid", 79, "RESTART_BM")
        # Each process with its own workload, scalars together (not one array per attribute).
        assert [dict(w) for w in first.workloads] == [
            {"process.pid": pid, "process.executable.name": "python3",
             "k8s.pod.name": "train-0", "k8s.namespace.name": "ml"} for pid in (7, 8)]
        assert dict(health.attributes)["hw.state"] == "failed"

    store = run(scenario, lookup=lookup)
    health = store.current(0).health["GPU-a"]
    assert health.state is HealthState.FAILED
    assert [(r.metric, r.value, r.attributes) for r in health.readings
            if r.metric == "gpu.xid.errors"] == [("gpu.xid.errors", 1, (("gpu.xid.code", 79),))]
    # XID 79 (fell off the bus) is the PCIe subsystem's: failed there, ok elsewhere.
    held = {dict(r.attributes)["gpu.health.subsystem"]: dict(r.attributes)["hw.state"]
            for r in health.readings if r.metric == "gpu.health.status" and r.value == 1}
    assert held == {"pcie": "failed", "nvlink": "ok", "memory": "ok", "thermal": "ok",
                    "power": "ok", "driver": "ok", "sm": "ok"}


def test_the_storm_summariser_sleeps_until_an_occurrence_is_suppressed() -> None:
    """Nothing suppressed: the summariser does not look at the clock at all (it woke on a
    tick before, four times per window); one suppressed repeat wakes it, and its summary
    follows the window's end."""

    class CountingClock(Clock):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def __call__(self) -> float:
            self.calls += 1
            return self.now

    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        assert isinstance(clock, CountingClock)
        engine.on_events([xid(13)])
        await until(lambda: len(sink) == 1)
        idle_from = clock.calls
        await asyncio.sleep(0.6)  # the old tick (window / 4) would have read it twice
        assert clock.calls == idle_from
        engine.on_events([xid(13)])  # a repeat inside the window: suppressed
        clock.now += 1.0
        await until(lambda: len(sink) == 2, timeout=3)
        assert dict(sink[1].attributes)["gpu.event.count"] == 1

    run(scenario, clock=CountingClock())


def test_storm_first_out_then_summary_with_the_count() -> None:
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([xid(13) for _ in range(500)])
        await until(lambda: len(sink) == 1)
        clock.now += 1.0  # the window ends
        await until(lambda: len(sink) == 2, timeout=3)
        summary = dict(sink[1].attributes)
        assert summary["gpu.event.count"] == 499
        assert summary["gpu.event.source"] == "summary"
        assert engine.stats.suppressed == 499

    store = run(scenario)
    (counter,) = [r for r in store.current(0).health["GPU-a"].readings
                  if r.metric == "gpu.xid.errors"]
    assert counter.value == 500


def test_lost_recovered_unresponsive_and_sticky_conditions() -> None:
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        steps: list[Callable[[], None]] = [
            lambda: engine.unresponsive("GPU-a", "nvmlDeviceGetFieldValues", 2.0),
            lambda: engine.unresponsive("GPU-a", "nvmlDeviceGetFieldValues", 2.0),  # no news
            lambda: engine.responsive("GPU-a"),
            lambda: engine.on_events([DeviceEvent("GPU-a", EVENT_FATAL_POISON,
                                                  time.time_ns())]),
            lambda: engine.lost("GPU-a", "GPU is lost"),
            lambda: engine.available("GPU-a"),  # back from loss = reset: poison goes too
        ]
        for step in steps:
            clock.now += 1.0  # each in its own storm window
            step()
        names = ["gpu.unresponsive", "gpu.health", "gpu.recovered", "gpu.health",
                 "gpu.health", "gpu.lost", "gpu.recovered", "gpu.health"]
        await until(lambda: len(sink) >= len(names))
        assert [e.name for e in sink] == names
        states = [dict(e.attributes)["hw.state"] for e in sink if e.name == "gpu.health"]
        assert states == ["degraded", "ok", "failed", "ok"]
        hung = dict(sink[0].attributes)
        assert (hung["gpu.call"], hung["gpu.call.duration"]) == ("nvmlDeviceGetFieldValues", 2.0)

    run(scenario, window=0.001)


def test_duplicates_dropped_and_undelivered_events_kept_at_shutdown() -> None:
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([xid(43, "nvml"), xid(43, "kmsg")])
        await until(lambda: len(sink) == 1)
        assert engine.stats.duplicates == 1
        engine.on_events([DeviceEvent("GPU-a", EVENT_ECC_CORRECTED, time.time_ns())] * 3)
        left = engine.drain()  # shutdown before delivery: nothing is lost
        names = [e.name for e in sink] + [e.name for e in left]
        assert names.count("gpu.ecc") == 2  # the first, and the summary of the other two
        assert any(dict(e.attributes).get("gpu.event.count") == 2 for e in [*sink, *left])

    run(scenario)


def test_every_recovery_action_of_nvml_h_and_only_none_clears() -> None:
    """nvml.h nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P,
    4 drain and reset, 5 recover IMEX domain, 6 bus reset, 7 system reboot."""
    needs_reset_or_reboot = {1, 2, 4, 6, 7}

    def recovery(code: int) -> DeviceEvent:
        return DeviceEvent("GPU-a", EVENT_RECOVERY_ACTION, time.time_ns(), code=code)

    for action in (*range(1, 8), RECOVERY_ACTION_UNKNOWN):
        async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock,
                           action: int = action) -> None:
            engine.on_events([recovery(action)])
            await until(lambda: len(sink) >= 1)
            clock.now += 1.0
            engine.on_events([recovery(0)])  # the driver says: nothing to do any more
            await until(lambda: len(sink) >= 2)
            states = [dict(e.attributes)["hw.state"] for e in sink]
            expected = "failed" if action in needs_reset_or_reboot else "degraded"
            assert states == [expected, "ok"], (action, states)

        run(scenario, window=0.001)


def test_an_xid_scoped_to_a_partition_names_it_and_is_counted_on_its_gpu() -> None:
    asked: list[str] = []

    class PerDevice(Lookup):
        def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
            asked.append(uuid)
            return super().processes_on(uuid)

    instance = DeviceIdentity("MIG-1", 0, "nvidia", "NVIDIA H100", "00000000:18:00.0",
                              DevicePartition("GPU-a", "mig", "1g.10gb",
                                              (("gpu.mig.profile", "1g.10gb"),)))

    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine._store.put(DeviceSnapshot(instance, HealthState.OK, 0))  # as its sampler does
        engine.on_events([DeviceEvent("GPU-a", EVENT_XID, time.time_ns(), code=43,
                                      partition="MIG-1")])
        await until(lambda: len(sink) == 1)
        attrs = dict(sink[0].attributes)
        assert (attrs["hw.id"], attrs["hw.parent"], attrs["gpu.mig.profile"]) == (
            "MIG-1", "GPU-a", "1g.10gb")
        assert "MIG 1g.10gb (MIG-1)" in sink[0].body
        assert asked == ["MIG-1"]  # the workloads on the instance

    store = run(scenario, lookup=PerDevice())
    health = store.current(0).health["GPU-a"]  # counted on the physical GPU
    assert [(r.metric, r.value) for r in health.readings
            if r.metric == "gpu.xid.errors"] == [("gpu.xid.errors", 1)]


MIG_1 = DeviceIdentity("MIG-1", 0, "nvidia", "NVIDIA H100", "00000000:18:00.0",
                       DevicePartition("GPU-a", "mig", "1g.10gb",
                                       (("gpu.mig.profile", "1g.10gb"),)))


def test_a_storm_on_a_mig_instance_is_summarised_on_the_instance() -> None:
    """Issue 37: the key carried the instance's UUID where the GPU's belongs, and the summary
    was looked up among the physical GPUs: repeated XIDs on an instance never had one."""
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine._store.put(DeviceSnapshot(MIG_1, HealthState.OK, 0))
        engine.on_events([DeviceEvent("GPU-a", EVENT_XID, time.time_ns(), code=43,
                                      partition="MIG-1") for _ in range(30)])
        engine.on_events([xid(43) for _ in range(3)])  # the GPU's own: a storm of its own
        await until(lambda: len(sink) == 2)
        clock.now += 1.0
        await until(lambda: len(sink) == 4, timeout=3)
        summaries = {dict(e.attributes)["hw.id"]: e for e in sink[2:]}
        on_mig = dict(summaries["MIG-1"].attributes)
        assert on_mig["gpu.event.count"] == 29 and on_mig["gpu.xid.code"] == 43
        assert on_mig["hw.parent"] == "GPU-a" and on_mig["gpu.event.source"] == "summary"
        assert "MIG 1g.10gb (MIG-1)" in summaries["MIG-1"].body
        assert dict(summaries["GPU-a"].attributes)["gpu.event.count"] == 2

    store = run(scenario)
    health = store.current(0).health["GPU-a"]
    assert [(r.metric, r.value) for r in health.readings if r.metric == "gpu.xid.errors"] == [
        ("gpu.xid.errors", 33)]


def test_a_mig_storm_counted_before_a_restart_is_summarised_after_it(tmp_path: Path) -> None:
    async def before(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        journal = StormJournal(tmp_path)
        journal.open()
        engine.journal = journal
        engine._store.put(DeviceSnapshot(MIG_1, HealthState.OK, 0))
        engine.on_events([DeviceEvent("GPU-a", EVENT_XID, time.time_ns(), code=43,
                                      partition="MIG-1") for _ in range(12)])
        await until(lambda: len(sink) == 1)  # kill -9 now: the 11 repeats are on disk only

    async def after(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine._store.put(DeviceSnapshot(MIG_1, HealthState.OK, 0))
        journal = StormJournal(tmp_path)
        engine.journal = journal
        engine.restore(journal.open())
        await until(lambda: len(sink) == 1)
        attrs = dict(sink[0].attributes)
        assert (attrs["hw.id"], attrs["gpu.event.count"], attrs["gpu.xid.code"]) == (
            "MIG-1", 11, 43)

    run(before)
    run(after)


def test_the_last_occurrence_of_each_xid_is_a_timestamp() -> None:
    first, later = 1_700_000_000_000_000_000, 1_700_000_060_000_000_000

    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([DeviceEvent("GPU-a", EVENT_XID, first, code=13),
                          DeviceEvent("GPU-a", EVENT_XID, later, code=13),
                          DeviceEvent("GPU-a", EVENT_XID, first, code=31)])
        await until(lambda: len(sink) >= 2)

    store = run(scenario)
    seen = {dict(r.attributes)["gpu.xid.code"]: r.value
            for r in store.current(0).health["GPU-a"].readings
            if r.metric == "gpu.xid.last_seen"}
    assert seen == {13: later / 1e9, 31: first / 1e9}


def nvlink_xid(fatal: bool, link: int) -> DeviceEvent:
    return DeviceEvent("GPU-a", EVENT_XID, time.time_ns(), code=145, source="kmsg",
                       detail="RLW_RXPIPE ...", link_fault=LinkFault(fatal, link, "RLW_RXPIPE",
                                                                      0, 8))


def test_a_fatal_nvlink_xid_is_never_folded_into_a_storm_of_non_fatal_ones() -> None:
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([nvlink_xid(False, 13) for _ in range(20)])
        engine.on_events([nvlink_xid(True, 13), nvlink_xid(False, 2)])
        await until(lambda: len(sink) >= 4)  # 145 non-fatal, 145 fatal, health, link 2
        xids = [dict(e.attributes) for e in sink if e.name == "gpu.xid"]
        assert [(x["gpu.xid.fatal"], x["gpu.nvlink.link"]) for x in xids] == [
            (False, 13), (True, 13), (False, 2)]
        assert [e.severity.text for e in sink if e.name == "gpu.xid"] == ["WARN", "FATAL", "WARN"]
        clock.now += 1.0
        await until(lambda: any(dict(e.attributes).get("gpu.event.source") == "summary"
                                for e in sink), timeout=3)
        (summary,) = [e for e in sink if dict(e.attributes).get("gpu.event.source") == "summary"]
        assert dict(summary.attributes)["gpu.event.count"] == 19
        assert dict(summary.attributes)["gpu.nvlink.link"] == 13
        assert summary.severity.text == "WARN"

    store = run(scenario)
    assert store.current(0).health["GPU-a"].state is HealthState.FAILED  # the fatal one


def test_a_fatal_line_after_nvml_saw_the_same_xid_fails_the_gpu_without_a_second_event(
) -> None:
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([xid(145)])  # NVML: no severity word, the catalog's ERROR / degraded
        await until(lambda: len(sink) >= 2)  # the XID and the health change
        engine.on_events([nvlink_xid(True, 13)])  # the kernel log's line of the same fault
        await until(lambda: any(dict(e.attributes).get("hw.state") == "failed" for e in sink))
        assert len([e for e in sink if e.name == "gpu.xid"]) == 1

    store = run(scenario)
    assert store.current(0).health["GPU-a"].state is HealthState.FAILED


def test_an_sxid_is_an_event_of_its_switch_and_its_storm_is_summarised() -> None:
    def sxid(fatal: bool) -> DeviceEvent:
        return DeviceEvent("0000:04:00.0", EVENT_SXID, time.time_ns(), code=22013,
                           source="kmsg", detail="Minion Link DLREQ interrupt",
                           name="nvidia-nvswitch3", link_fault=LinkFault(fatal, 44))

    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        engine.on_events([sxid(False) for _ in range(5)])
        await until(lambda: len(sink) == 1)
        first = dict(sink[0].attributes)
        assert (first["hw.id"], first["hw.type"], first["hw.name"], first["gpu.pci.bus_id"],
                first["gpu.nvswitch.sxid.code"], first["gpu.nvlink.link"]) == (
            "nvswitch-0000:04:00.0", "network", "nvidia-nvswitch3", "0000:04:00.0", 22013, 44)
        assert sink[0].severity.text == "WARN" and "k8s.pod.name" not in first
        assert sink[0].workloads == ()  # a switch runs no workloads
        clock.now += 1.0
        await until(lambda: len(sink) == 2, timeout=3)
        summary = dict(sink[1].attributes)
        assert (summary["hw.id"], summary["gpu.event.count"]) == ("nvswitch-0000:04:00.0", 4)

    store = run(scenario, lookup=Lookup())
    assert store.current(0).health["GPU-a"].state is HealthState.OK  # no GPU's fault


def test_unknown_xid_from_nvml_and_the_kernel_log_line_are_one_fault() -> None:
    """nvml.h: NVML reports an XID it cannot identify as 999; the kernel log names it. Both
    were reported (deduplicated apart, by code), and 999 was not in the catalog."""
    async def scenario(engine: HealthEngine, sink: list[HealthEvent], clock: Clock) -> None:
        def xids() -> list[dict[str, object]]:
            return [dict(e.attributes) for e in sink if e.name == "gpu.xid"]

        engine.on_events([xid(79, "kmsg"), xid(999, "nvml")])
        await until(lambda: len(xids()) == 1)
        assert engine.stats.duplicates == 1
        assert xids()[0]["gpu.xid.code"] == 79
        engine.on_events([xid(999, "nvml")])  # on its own: reported, named
        await until(lambda: len(xids()) == 2)
        assert xids()[1]["gpu.xid.name"] == "UNKNOWN_XID"

    run(scenario)


class Requests:
    """The samplers' side of SamplingRequests: what the engine asked, in order."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def reprobe(self, uuid: str) -> None:
        self.asked.append(("reprobe", uuid))

    def rescan_partitions(self, uuid: str) -> None:
        self.asked.append(("rescan_partitions", uuid))


def test_a_reset_that_ends_and_partitions_that_change_are_asked_of_the_samplers() -> None:
    """A reset's end asks the GPU's sampler to probe at once (the GPU is back before its next
    re-probe), a partition change to enumerate them again; other events ask nothing."""
    requests = Requests()
    sink: list[HealthEvent] = []
    engine = HealthEngine([GPU], sink.append, SnapshotStore(), EngineSettings(),
                          sampling=requests)
    now = time.time_ns()
    engine.on_events([DeviceEvent("GPU-a", EVENT_GPU_RESET_START, now, source="nvml")])
    assert requests.asked == []
    engine.on_events([DeviceEvent("GPU-a", EVENT_GPU_RESET_END, now + 1, source="nvml"),
                      DeviceEvent("GPU-a", EVENT_PARTITIONS_CHANGED, now + 2, source="nvml"),
                      DeviceEvent("GPU-unknown", EVENT_GPU_RESET_END, now + 3, source="nvml")])
    assert requests.asked == [("reprobe", "GPU-a"), ("rescan_partitions", "GPU-a")]
    engine.close()
