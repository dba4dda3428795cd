"""gpu-agent top's view and layout, fed by the local endpoint's own documents (views.py), so
what top parses is what the agent serves."""

from __future__ import annotations

import time

import pytest

from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.local.recent_events import EventRing
from gpu_otel_agent.local.views import events_view, snapshot_view
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.top.render import Options, plain, render
from gpu_otel_agent.top.view import Filter, Model

GIB = 1024 ** 3


def _node(gpus: int, migs: int, processes_per_gpu: int, events: int) -> Model:
    store = SnapshotStore()
    for index in range(gpus):
        gpu = DeviceIdentity(f"GPU-{index}", index, "nvidia", "NVIDIA H100 80GB HBM3", "bus")
        for m in range(migs):
            mig = DeviceIdentity(f"MIG-{index}-{m}", index, "nvidia", "NVIDIA H100", "bus",
                                 DevicePartition(f"GPU-{index}", "mig", "1g.10gb"))
            store.put(DeviceSnapshot(mig, HealthState.OK, 1))
        store.put(DeviceSnapshot(gpu, HealthState.OK, 1).with_sample(GroupSample("fast", (
            Reading("hw.gpu.utilization", 0.42, (("hw.gpu.task", "general"),)),
            Reading("hw.gpu.memory.usage", 40 * GIB), Reading("hw.gpu.memory.limit", 80 * GIB),
            Reading("hw.temperature", 55.0, (("hw.sensor_location", "gpu"),)),
            Reading("hw.power", 301.0),
            Reading("gpu.clock.frequency", 1_980_000_000, (("gpu.clock.domain", "sm"),)),
        ), 1)).with_sample(GroupSample("processes", tuple(
            Reading("gpu.process.memory.usage", (p + 1) * 2**20, (
                ("process.pid", 1000 * index + p), ("process.executable.name", "python"),
                ("k8s.namespace.name", f"team-{p % 2}"), ("k8s.pod.name", f"pod-{index}-{p}")))
            for p in range(processes_per_gpu)), 1)))
    ring = EventRing(100)
    for n in range(events):
        ring.append(HealthEvent("gpu.xid", time.time_ns(), Severity.FATAL, "body", (
            ("gpu.index", n % gpus), ("gpu.xid.code", 79),
            ("gpu.xid.name", "GPU_FALLEN_OFF_BUS"), ("gpu.xid.action", "RESTART_BM")),
            workloads=tuple((("process.pid", pid), ("process.executable.name", "python"),
                             ("k8s.namespace.name", "team-0"), ("k8s.pod.name", pod))
                            for pid, pod in ((7, "pod-a"), (8, "pod-b")))))
    model = Model("test source")
    model.update(snapshot_view(store.current(time.time_ns()), {}), events_view(ring.after(0)))
    return model


def test_a_big_node_fits_80_by_24_with_the_footer_on_the_last_row() -> None:
    model = _node(gpus=8, migs=7, processes_per_gpu=12, events=30)
    assert model.frame is not None
    lines = render(model.frame, Options(), 80, 24)
    text = [plain([line]).rstrip("\n") for line in lines]
    assert len(text) == 24
    assert all(len(line) <= 80 for line in text)
    assert text[-1].startswith("q quit  s sort:memory  / filter:none")
    assert any("56 partitions not shown" in line for line in text)
    assert any("more processes" in line for line in text)
    # At 80 columns the pods hit go on a line of their own, under the summary.
    first = next(i for i, line in enumerate(text) if "XID 79 GPU_FALLEN_OFF_BUS -> RESTART_BM"
                 in line)
    assert text[first + 1].strip() == "hit: team-0/pod-a, team-0/pod-b"


def test_the_plain_snapshot_lists_everything_and_the_values() -> None:
    model = _node(gpus=2, migs=1, processes_per_gpu=3, events=1)
    assert model.frame is not None
    text = plain(render(model.frame, Options(), 120))
    (row,) = [line for line in text.splitlines() if line.startswith("  1 H100")]
    assert row.split()[4:7] == ["42%", "▄", "40.0/80G"]  # 0.42 of the 8 block heights
    assert "55C" in row and "301W" in row and "1980" in row and row.endswith("ok")
    assert text.count("└ 1g.10gb") == 2
    assert len([line for line in text.splitlines() if "python" in line]) == 6


@pytest.mark.parametrize(("text", "shown"), [
    ("pod:pod-1-2", ["pod-1-2"]),
    ("ns:team-1 gpu:0", ["pod-0-1"]),
    ("gpu:1 pod-1-0", ["pod-1-0"]),
])
def test_filters_select_processes(text: str, shown: list[str]) -> None:
    model = _node(gpus=2, migs=0, processes_per_gpu=3, events=0)
    assert model.frame is not None
    lines = plain(render(model.frame, Options(filter=Filter.parse(text)), 120))
    assert [line.split()[-1] for line in lines.splitlines() if "python" in line] == shown


def test_a_bad_filter_says_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="use pod:NAME, ns:NAME, gpu:N or a word"):
        Filter.parse("gpu:zero")


def test_events_are_kept_across_refreshes_and_not_repeated() -> None:
    model = _node(gpus=1, migs=0, processes_per_gpu=0, events=2)
    ring = EventRing(10)
    for _ in range(3):
        ring.append(HealthEvent("gpu.lost", 5, Severity.FATAL, "GPU 0 is lost", ()))
    snapshot = {"devices": [], "taken_ns": 1, "agent": {}}
    model.update(snapshot, events_view(ring.after(0)))  # seq 1..3 of another ring: new
    frame = model.update(snapshot, events_view(ring.after(model.last_seq)))
    assert [e.summary for e in frame.events].count("GPU 0 is lost") == 1


def test_a_process_on_a_partition_names_it() -> None:
    store = SnapshotStore()
    mig = DeviceIdentity("MIG-0", 3, "nvidia", "NVIDIA H100", "bus",
                         DevicePartition("GPU-3", "mig", "3g.40gb"))
    store.put(DeviceSnapshot(mig, HealthState.OK, 1).with_sample(GroupSample("processes", (
        Reading("gpu.process.memory.usage", 2**30, (
            ("process.pid", 77), ("process.executable.name", "train"),
            ("slurm.job.id", "4242"))),), 1)))
    model = Model("test")
    frame = model.update(snapshot_view(store.current(1), {}), events_view(EventRing(1).after(0)))
    (line,) = [line for line in plain(render(frame, Options(), 120)).splitlines()
               if "train" in line]
    assert line.split() == ["3", "77", "train", "1024M", "-", "-", "slurm", "job", "4242",
                            "on", "3g.40gb"]


def _mixed_node() -> list[str]:
    """An NVIDIA and an AMD GPU, each its vendor's GPU 0, a process and an event on each."""
    store = SnapshotStore()
    ring = EventRing(10)
    for vendor, model, pid in (("nvidia", "NVIDIA H100 80GB HBM3", 11),
                               ("amd", "AMD Instinct MI300X", 22)):
        gpu = DeviceIdentity(f"{vendor}-0", 0, vendor, model, "bus")
        store.put(DeviceSnapshot(gpu, HealthState.OK, 1).with_sample(GroupSample(
            "processes", (Reading("gpu.process.memory.usage", 2**30, (
                ("process.pid", pid), ("process.executable.name", "train"))),), 1)))
        ring.append(HealthEvent("gpu.lost", 5, Severity.FATAL, f"{vendor} lost", (
            ("hw.vendor", "NVIDIA" if vendor == "nvidia" else "AMD"), ("gpu.index", 0))))
    frame = Model("test").update(snapshot_view(store.current(1), {}),
                                 events_view(ring.after(0)))
    return plain(render(frame, Options(), 80)).splitlines()


def test_a_mixed_node_labels_each_vendors_gpu_0_apart_and_names_the_mi300x_whole() -> None:
    lines = _mixed_node()
    rows = [line.split()[:2] for line in lines if line.startswith(("  ", " A", " N"))
            and ("H100" in line or "MI300" in line)]
    assert rows == [["A0", "MI300X"], ["N0", "H100"]], lines
    processes = {line.split()[1]: line.split()[0] for line in lines if " train " in line}
    assert processes == {"11": "N0", "22": "A0"}
    events = [line for line in lines if " lost" in line]
    assert any("GPU N0" in e and "nvidia lost" in e for e in events), events
    assert any("GPU A0" in e and "amd lost" in e for e in events), events


def test_one_vendor_keeps_plain_indices_and_a_long_model_shows_its_cut() -> None:
    store = SnapshotStore()
    store.put(DeviceSnapshot(DeviceIdentity(
        "GPU-0", 0, "nvidia", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "bus"),
        HealthState.OK, 1))
    frame = Model("test").update(snapshot_view(store.current(1), {}),
                                 events_view(EventRing(1).after(0)))
    (row,) = [line for line in plain(render(frame, Options(), 80)).splitlines()
              if "RTX" in line]
    assert row.startswith("  0 RTX PRO 6000 …"), row
