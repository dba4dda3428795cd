"""``exporter: console`` for a person (``console_format: lines``): one line per health event as
it happens, naming the GPU as the metrics' lines do (``model.snapshot.device_name``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from gpu_otel_agent.gpu_health.events import EventValue, HealthEvent
from gpu_otel_agent.model.snapshot import device_name


def _clock(time_ns: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_ns / 1e9))


def _hit(workloads: Iterable[Mapping[str, EventValue]]) -> list[str]:
    """Who the event hit: namespace/pod, Slurm job, else executable(pid)."""
    hit: list[str] = []
    for w in workloads:
        pod, namespace, job = w.get("k8s.pod.name"), w.get("k8s.namespace.name"), \
            w.get("slurm.job.id")
        name = (f"{namespace}/{pod}" if pod and namespace else str(pod) if pod else
                f"slurm job {job}" if job else
                f"{w.get('process.executable.name', '?')}({w['process.pid']})"
                if "process.pid" in w else None)
        if name is not None and name not in hit:
            hit.append(name)
    return hit


def event_line(event: HealthEvent) -> str:
    attributes = dict(event.attributes)
    where = (device_name(str(attributes.get("hw.vendor", "")).lower(), attributes["gpu.index"])
             if "gpu.index" in attributes else "node")
    if event.name == "gpu.xid":
        what = (f"XID {attributes.get('gpu.xid.code')} {attributes.get('gpu.xid.name')} -> "
                f"{attributes.get('gpu.xid.action')}: {event.body}")
    else:
        what = event.body
    hit = _hit(dict(w) for w in event.workloads)
    tail = f" (hit: {', '.join(hit)})" if hit else ""
    return f"{_clock(event.time_ns)} EVENT {event.severity.text} {event.name} {where}: {what}{tail}"
