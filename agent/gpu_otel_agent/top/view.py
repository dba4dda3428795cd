"""What ``gpu-agent top`` shows, as data: devices, processes and events from the local
endpoint's documents, the short history behind the sparklines, sorting and filtering.

Nothing here draws: :mod:`render` lays this out as lines, the terminal or ``--once`` prints them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

HISTORY = 60  # samples per device (one per refresh)
SORTS = ("memory", "utilization", "gpu", "pod")
Json = Mapping[str, Any]


@dataclass(frozen=True)
class Device:
    uuid: str
    index: int
    model: str
    parent: str | None
    profile: str | None  # the partition's profile (MIG 3g.40gb, CPX) on a partition
    health: str
    reason: str
    utilization: float | None  # 0..1
    memory_used: int | None  # bytes
    memory_total: int | None
    temperature: float | None  # Celsius, the GPU sensor
    power: float | None  # W
    power_limit: float | None
    sm_clock: float | None  # Hz (AMD: the graphics clock)
    xid_errors: int
    vendor: str = ""  # the backend's key: "nvidia", "amd"


@dataclass(frozen=True)
class Process:
    gpu: int
    device_uuid: str
    profile: str | None
    pid: int
    executable: str
    memory: int | None
    utilization: float | None
    pod: str | None
    pod_uid: str | None
    namespace: str | None
    container: str | None
    slurm_job: str | None
    vendor: str = ""  # of its GPU

    @property
    def workload(self) -> str:
        """Who it runs for: the pod, else the Slurm job, else the container, else '-'."""
        if self.pod:
            return self.pod
        if self.pod_uid:  # a pod cgroup the kubelet has not named (yet, or no socket)
            return f"pod uid {self.pod_uid[:8]}"
        if self.slurm_job:
            return f"slurm job {self.slurm_job}"
        if self.container:
            return f"container {self.container[:12]}"
        return "-"


@dataclass(frozen=True)
class Event:
    seq: int
    time_ns: int
    name: str
    severity: str
    gpu: int | None
    summary: str  # one line: XID with catalog name and action, or the event's own body
    pods: tuple[str, ...]  # namespace/pod of the workloads hit
    processes: tuple[str, ...]  # executable(pid) when no pod is known
    vendor: str = ""  # of the GPU: "nvidia", "amd" (hw.vendor in lower case)


def _reading(readings: Sequence[Json], metric: str, **attributes: object) -> float | None:
    for reading in readings:
        if reading["metric"] == metric and all(
                reading["attributes"].get(k) == v for k, v in attributes.items()):
            return float(reading["value"])
    return None


def device(raw: Json) -> Device:
    readings = raw["readings"]
    temperature = _reading(readings, "hw.temperature", **{"hw.sensor_location": "gpu"})
    clock = (_reading(readings, "gpu.clock.frequency", **{"gpu.clock.domain": "sm"})
             or _reading(readings, "gpu.clock.frequency", **{"gpu.clock.domain": "graphics"}))
    xids = sum(int(r["value"]) for r in readings if r["metric"] == "gpu.xid.errors")
    used = _reading(readings, "hw.gpu.memory.usage")
    total = _reading(readings, "hw.gpu.memory.limit")
    partition = raw.get("partition")
    return Device(
        uuid=raw["uuid"], index=int(raw["index"]), model=raw["model"], parent=raw.get("parent"),
        profile=partition["profile"] if partition else None, health=raw["health"],
        reason=raw.get("reason", ""),
        utilization=_reading(readings, "hw.gpu.utilization", **{"hw.gpu.task": "general"}),
        memory_used=None if used is None else int(used),
        memory_total=None if total is None else int(total),
        temperature=temperature, power=_reading(readings, "hw.power"),
        power_limit=_reading(readings, "gpu.power.limit"), sm_clock=clock, xid_errors=xids,
        vendor=str(raw.get("vendor", "")))


def processes(raw: Json) -> list[Process]:
    partition = raw.get("partition")
    return [Process(gpu=int(raw["index"]), device_uuid=raw["uuid"],
                    profile=partition["profile"] if partition else None, pid=int(p["pid"]),
                    executable=p["executable"], memory=p["memory_bytes"],
                    utilization=p["utilization"], pod=p["pod"], pod_uid=p["pod_uid"],
                    namespace=p["namespace"],
                    container=p["container_id"], slurm_job=p["slurm_job"],
                    vendor=str(raw.get("vendor", "")))
            for p in raw["processes"]]


def event(raw: Json) -> Event:
    attributes = raw["attributes"]
    gpu = attributes.get("gpu.index")
    if raw["name"] == "gpu.xid":
        # The catalog's name and action: what an SRE needs first (the body has the rest).
        summary = (f"XID {attributes.get('gpu.xid.code')} {attributes.get('gpu.xid.name')}"
                   f" -> {attributes.get('gpu.xid.action')}")
    else:
        summary = raw["body"]
    # One entry per process on the GPU, its workload's attributes beside it.
    workloads = raw.get("workloads") or []
    named: list[str] = []
    procs: list[str] = []
    for w in workloads:
        pod, namespace, job = w.get("k8s.pod.name"), w.get("k8s.namespace.name"), \
            w.get("slurm.job.id")
        name = (f"{namespace}/{pod}" if pod and namespace else pod) or \
            (f"slurm job {job}" if job else None)
        if name and name not in named:
            named.append(name)
        if "process.pid" in w:
            procs.append(f"{w.get('process.executable.name', '')}({w['process.pid']})")
    return Event(seq=int(raw["seq"]), time_ns=int(raw["time_ns"]), name=raw["name"],
                 severity=raw["severity"], gpu=gpu if isinstance(gpu, int) else None,
                 summary=summary, pods=tuple(named), processes=tuple(procs),
                 vendor=str(attributes.get("hw.vendor", "")).lower())


@dataclass(frozen=True)
class Filter:
    """``pod:NAME ns:NAME gpu:N`` and bare words (pod, namespace or executable contain them)."""

    pod: str | None = None
    namespace: str | None = None
    gpu: int | None = None
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Filter:
        """Raises ValueError with what is wrong (shown in the status line)."""
        result = cls()
        words = []
        for token in text.split():
            key, sep, value = token.partition(":")
            if not sep:
                words.append(token)
            elif key == "pod" and value:
                result = replace(result, pod=value)
            elif key in ("ns", "namespace") and value:
                result = replace(result, namespace=value)
            elif key == "gpu" and value.isdigit():
                result = replace(result, gpu=int(value))
            else:
                raise ValueError(f"filter {token!r}: use pod:NAME, ns:NAME, gpu:N or a word")
        return replace(result, words=tuple(words))

    def __str__(self) -> str:
        parts = [f"pod:{self.pod}"] if self.pod else []
        if self.namespace:
            parts.append(f"ns:{self.namespace}")
        if self.gpu is not None:
            parts.append(f"gpu:{self.gpu}")
        return " ".join((*parts, *self.words))

    @property
    def workload(self) -> bool:
        return bool(self.pod or self.namespace or self.words)

    def device(self, d: Device) -> bool:
        return self.gpu is None or d.index == self.gpu

    def process(self, p: Process) -> bool:
        if self.gpu is not None and p.gpu != self.gpu:
            return False
        if self.pod and self.pod not in (p.pod or ""):
            return False
        if self.namespace and self.namespace != (p.namespace or ""):
            return False
        text = " ".join(filter(None, (p.pod, p.namespace, p.executable, p.slurm_job)))
        return all(word in text for word in self.words)

    def event(self, e: Event) -> bool:
        if self.gpu is not None and e.gpu != self.gpu:
            return False
        if self.pod and not any(self.pod in p.rpartition("/")[2] for p in e.pods):
            return False
        if self.namespace and not any(p.startswith(f"{self.namespace}/") for p in e.pods):
            return False
        text = " ".join((*e.pods, *e.processes, e.summary))
        return all(word in text for word in self.words)


def sort_processes(items: Sequence[Process], key: str) -> list[Process]:
    if key == "utilization":
        return sorted(items, key=lambda p: (-(p.utilization or 0.0), p.gpu, p.pid))
    if key == "gpu":
        return sorted(items, key=lambda p: (p.gpu, p.device_uuid, -(p.memory or 0), p.pid))
    if key == "pod":
        return sorted(items, key=lambda p: (p.namespace or "~", p.workload, p.gpu, p.pid))
    return sorted(items, key=lambda p: (-(p.memory or 0), p.gpu, p.pid))


@dataclass(frozen=True)
class Frame:
    """One refresh: everything a screen shows."""

    source: str  # which agent this comes from, in words
    taken_ns: int
    devices: tuple[Device, ...]
    processes: tuple[Process, ...]
    events: tuple[Event, ...]  # newest last
    history: Mapping[str, tuple[tuple[float, ...], tuple[float, ...]]]  # uuid -> (util, mem)
    # GPUs of more than one vendor: each vendor counts its own from 0, so a label needs both.
    mixed: bool = False


class Model:
    """Accumulates documents into frames: keeps the event feed and per-device history."""

    def __init__(self, source: str, max_events: int = 200) -> None:
        self.source = source
        self.last_seq = 0
        self._events: deque[Event] = deque(maxlen=max_events)
        self._util: dict[str, deque[float]] = {}
        self._mem: dict[str, deque[float]] = {}
        self.frame: Frame | None = None

    def update(self, snapshot: Json, events: Json) -> Frame:
        devices = tuple(device(raw) for raw in snapshot["devices"])
        for d in devices:
            util = self._util.setdefault(d.uuid, deque(maxlen=HISTORY))
            mem = self._mem.setdefault(d.uuid, deque(maxlen=HISTORY))
            util.append(d.utilization or 0.0)
            mem.append((d.memory_used or 0) / d.memory_total if d.memory_total else 0.0)
        for raw in events["events"]:
            if int(raw["seq"]) > self.last_seq:
                self._events.append(event(raw))
        self.last_seq = max(self.last_seq, int(events["last_seq"]))
        self.frame = Frame(
            source=self.source, taken_ns=int(snapshot["taken_ns"]), devices=devices,
            processes=tuple(p for raw in snapshot["devices"] for p in processes(raw)),
            events=tuple(self._events),
            history={d.uuid: (tuple(self._util[d.uuid]), tuple(self._mem[d.uuid]))
                     for d in devices},
            mixed=len({d.vendor for d in devices}) > 1)
        return self.frame
