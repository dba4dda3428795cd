"""Per-process series limit, overflow count and container totals, from a /proc the test writes."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.workloads.attribution import Attribution, AttributionSettings
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver

GPU = DeviceIdentity("GPU-0", 0, "nvidia", "H100", "00000000:18:00.0")
UID = "aaaaaaaa-1111-2222-3333-444455556666"


def _proc(root: Path, pid: int) -> None:
    base = root / str(pid)
    base.mkdir()
    (base / "cgroup").write_text(f"0::/kubepods/pod{UID}/{'c' * 64}\n")
    (base / "comm").write_text("worker\n")
    (base / "stat").write_text(f"{base.name} (a (b) c) S 1 1 1\n")


def _values(readings: tuple[Reading, ...], metric: str) -> list[float | int]:
    return [r.value for r in readings if r.metric == metric]


def test_limit_counts_the_rest_and_totals_keep_everyone(tmp_path: Path) -> None:
    for pid in range(10, 15):
        _proc(tmp_path, pid)
    attribution = Attribution(WorkloadResolver(ProcReader(tmp_path)),
                              AttributionSettings(max_process_series=2))
    usage = tuple(ProcessUsage(pid, pid * 100, (("general", 0.1),)) for pid in range(10, 15))
    readings = attribution.readings(GPU, usage)
    exported = [dict(r.attributes)["process.pid"] for r in readings
                if r.metric == "gpu.process.memory.usage"]
    assert exported == [14, 13]  # the largest users keep their own series
    assert _values(readings, "gpu.process.series.overflow") == [3]
    assert _values(readings, "gpu.container.memory.usage") == [sum(range(10, 15)) * 100]
    utilization = _values(readings, "gpu.container.utilization")
    assert len(utilization) == 1 and abs(utilization[0] - 0.5) < 1e-9


def test_exit_drops_the_series_at_once_and_lookup_follows(tmp_path: Path) -> None:
    _proc(tmp_path, 10)
    _proc(tmp_path, 11)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    published: list[tuple[str, GroupSample | None]] = []
    attribution = Attribution(resolver, AttributionSettings(), clock_ns=lambda: 7,
                              put_processes=lambda uuid, sample: published.append((uuid, sample)))
    attribution.publish(GPU, (ProcessUsage(10, 1), ProcessUsage(11, 2)), None, 5)
    assert [p.pid for p in attribution.processes_on(GPU.uuid)] == [10, 11]
    resolver.on_exit(11)
    # Republished at once from the same list (the GPU still shows pid 11), by attribution
    # itself: the sampler is not asked and its next cycle not awaited.
    assert [(uuid, s.group, s.time_ns) for uuid, s in published if s] == [
        (GPU.uuid, "processes", 5), (GPU.uuid, "processes", 7)]
    sample = published[-1][1]
    assert sample is not None
    pids = [dict(r.attributes)["process.pid"] for r in sample.readings
            if r.metric == "gpu.process.memory.usage"]
    assert pids == [10]
    (process,) = attribution.processes_on(GPU.uuid)
    assert (process.pid, process.executable, process.workload.pod_uid) == (10, "worker", UID)


def test_processes_reach_the_store_from_attribution_and_leave_when_withdrawn(
        tmp_path: Path) -> None:
    """One way: the sampler hands a list to attribution, attribution publishes into the store
    (and again when a process exits), readers find it among the device's samples."""
    _proc(tmp_path, 10)
    _proc(tmp_path, 11)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    store = SnapshotStore()
    attribution = Attribution(resolver, AttributionSettings(), put_processes=store.put_processes)
    store.put(DeviceSnapshot(GPU, HealthState.OK, 0))  # the sampler's: no processes in it
    assert not store.covers(1)
    attribution.publish(GPU, (ProcessUsage(10, 1), ProcessUsage(11, 2)), None, 5)
    assert store.covers(1)  # a node that samples processes only is ready too

    def pids() -> list[object]:
        (device,) = store.current(9).devices
        sample = device.samples.get("processes")
        return [] if sample is None else [dict(r.attributes)["process.pid"]
                                          for r in sample.readings
                                          if r.metric == "gpu.process.memory.usage"]

    assert pids() == [11, 10]  # largest memory first
    resolver.on_exit(11)
    assert pids() == [10]
    attribution.withdraw(GPU.uuid)  # the GPU went down: its processes' series go
    assert pids() == []
    resolver.on_exit(10)  # a change while withdrawn publishes nothing
    assert pids() == []
    assert [p.pid for p in attribution.processes_on(GPU.uuid)] == [10]  # events still name it


def test_a_new_list_tells_the_event_source_once(tmp_path: Path) -> None:
    """A GPU's first list of many new processes changes the watched PIDs (the kernel's event
    filter) once, with all of them, not once per process."""
    pids = range(10, 74)
    for pid in pids:
        _proc(tmp_path, pid)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    told: list[frozenset[int]] = []
    resolver.on_watched(told.append)
    attribution = Attribution(resolver, AttributionSettings())
    readings = attribution.readings(GPU, tuple(ProcessUsage(pid, pid) for pid in pids))
    assert told == [frozenset(), frozenset(pids)]
    assert len(_values(readings, "gpu.process.memory.usage")) == len(pids)
    attribution.readings(GPU, tuple(ProcessUsage(pid, pid) for pid in pids[:-1]))
    assert told[-1] == frozenset(pids[:-1])  # the one no GPU lists is let go


def _exact(readings: tuple[Reading, ...]) -> list[tuple[object, ...]]:
    """What reaches a collector of each reading, value type and sign included (1 and 1.0,
    0.0 and -0.0 are encoded differently)."""
    return [(r.metric, repr(r.value), type(r.value), r.attributes, r.time_ns) for r in readings]


def test_kept_readings_equal_a_fresh_attributions_over_changing_lists(tmp_path: Path) -> None:
    """A long-lived attribution hands on a process's readings while their values hold still;
    each cycle's readings equal, value types included, those of an attribution that never
    saw an earlier cycle, while processes come and go and their figures change or not."""
    import random

    rng = random.Random(41)
    pids = list(range(10, 40))
    for pid in pids:
        _proc(tmp_path, pid)
    kept = Attribution(WorkloadResolver(ProcReader(tmp_path)),
                       AttributionSettings(max_process_series=20))
    figures: dict[int, ProcessUsage] = {}
    reused = 0
    previous: tuple[Reading, ...] = ()
    for _ in range(60):
        listed = sorted(rng.sample(pids, rng.randint(0, len(pids))))
        for pid in listed:
            old = figures.get(pid)
            if old is None or rng.random() < 0.4:
                memory = rng.choice([None, 0, 1 << 20, pid * 1000])
                busy = rng.choice([0.0, -0.0, 0.25, 1.0, 1])
                utilization = rng.choice([(), (("general", busy), ("encoder", 0.0),
                                              ("decoder", 0.0))])
                occupancy = rng.choice([None, 0.5, 0, 0.0])
                figures[pid] = ProcessUsage(pid, memory, utilization, occupancy)
        usage = tuple(figures[pid] for pid in listed)
        fresh = Attribution(WorkloadResolver(ProcReader(tmp_path)),
                            AttributionSettings(max_process_series=20))
        got, want = kept.readings(GPU, usage), fresh.readings(GPU, usage)
        assert _exact(got) == _exact(want)
        assert kept.processes_on(GPU.uuid) == fresh.processes_on(GPU.uuid)
        reused += sum(1 for r in got if any(r is o for o in previous))
        previous = got
    assert reused > 0  # unchanged figures were handed on as the same objects


def test_an_exit_keeps_the_other_processes_identities(tmp_path: Path) -> None:
    """An exit republishes the GPU's readings without identifying every other process again
    (their readings are the very objects of before); a change of pods does identify them
    again, to the same values."""
    from gpu_otel_agent.workloads.pods import ContainerAllocation, PodAllocation

    for pid in (10, 11, 12):
        _proc(tmp_path, pid)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    published: list[GroupSample | None] = []
    attribution = Attribution(resolver, AttributionSettings(),
                              put_processes=lambda uuid, sample: published.append(sample))
    usage = tuple(ProcessUsage(pid, pid * 100) for pid in (10, 11, 12))
    before = attribution.publish(GPU, usage, None, 1)
    resolver.on_exit(11)
    after = published[-1]
    assert after is not None and after.readings is not before
    survivors = [r for r in before if r.metric == "gpu.process.memory.usage"
                 and dict(r.attributes)["process.pid"] != 11]
    memory = [r for r in after.readings if r.metric == "gpu.process.memory.usage"]
    assert len(memory) == 2 and all(a is b for a, b in zip(memory, survivors, strict=True))
    resolver.set_pods((PodAllocation("ml", "other", (ContainerAllocation("main", ()),)),))
    again = published[-1]
    assert again is not None
    renewed = [r for r in again.readings if r.metric == "gpu.process.memory.usage"]
    assert renewed == memory and not any(a is b for a, b in zip(renewed, memory, strict=True))


def test_utilization_series_carry_their_task_last_one_pair_per_task(tmp_path: Path) -> None:
    for pid in range(10, 14):
        _proc(tmp_path, pid)
    attribution = Attribution(WorkloadResolver(ProcReader(tmp_path)), AttributionSettings())
    tasks = (("sm", 0.5), ("enc", 0.25), ("dec", 0.0))
    first: dict[tuple[object, object], object] = {}
    for step in range(3):  # the values change at the third cycle, the attributes do not
        usage = tuple(ProcessUsage(pid, pid * 100, tuple((t, v + step // 2 / 10) for t, v in
                                                         tasks[:pid % 3 + 1]))
                      for pid in range(10, 14))
        readings = attribution.readings(GPU, usage)
        memory = {dict(r.attributes)["process.pid"]: r.attributes for r in readings
                  if r.metric == "gpu.process.memory.usage"}
        pairs: dict[str, object] = {}
        seen = 0
        for r in readings:
            if r.metric != "gpu.process.utilization":
                continue
            *process, task = r.attributes
            assert tuple(process) == memory[dict(process)["process.pid"]]
            assert task[0] == "hw.gpu.task" and task[1] in dict(tasks)
            assert pairs.setdefault(task[1], task) is task  # one pair object per task
            # The same attributes tuple every cycle (the exporters key a series on it).
            key = (dict(process)["process.pid"], task[1])
            assert first.setdefault(key, r.attributes) is r.attributes
            assert r.value == dict(tasks)[task[1]] + step // 2 / 10
            seen += 1
        assert seen == sum(pid % 3 + 1 for pid in range(10, 14))
