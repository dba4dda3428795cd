"""Health events: the immutable record every source, the spool and the exporter share.

An event becomes one OTLP LogRecord per workload it hit (one record when it hit none):
``event_name`` and the attribute ``event.name`` carry the same name (Loki drops the field), the
severity comes from the XID catalog or the event kind, the body is one human-readable line.
Conventional attributes keep their conventional type (``process.pid`` an int, ``k8s.pod.name`` a
string), so a record names one process with its own pod, namespace and container; the records of
one event share ``gpu.event.id`` (the event's ULID, made when the event is). Each record's
``log.record.uid`` is the event's id for the first and one derived from it for the others, the
same on every re-send and spool replay, so a backend can drop duplicates. The names and
attributes are the public contract of ``shared/specs/telemetry.md``; :data:`EVENTS` lists
them for ``docs/events.md``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.ulid import stable_ulid, ulid

EventValue = str | int | float | bool | tuple[str, ...] | tuple[int, ...]
EventAttributes = tuple[tuple[str, EventValue], ...]

XID = "gpu.xid"
ECC = "gpu.ecc"
LOST = "gpu.lost"
RECOVERED = "gpu.recovered"
UNRESPONSIVE = "gpu.unresponsive"
THROTTLE = "gpu.throttle"
HEALTH = "gpu.health"
DEGRADED = "gpu.degraded"
HEALTHY = "gpu.healthy"
AMD_VM_FAULT = "gpu.amd.vm_fault"
SXID = "gpu.nvswitch.sxid"
# Not a health event (so not in EVENTS, which the gateway routes to Loki): the one test record
# `gpu-agent check` sends to see that logs reach the collector.
CHECK = "gpu_agent.check"


@dataclass(frozen=True)
class HealthEvent:
    name: str
    time_ns: int
    severity: Severity
    body: str
    attributes: EventAttributes  # device attributes, event attributes
    # Made once, when the event is; kept through enrichment, the spool and every re-send.
    uid: str = field(default_factory=ulid)
    # The processes on the GPU at that moment, each with its workload's attributes (scalars).
    workloads: tuple[EventAttributes, ...] = ()

    def records(self) -> tuple[EventAttributes, ...]:
        """The attributes of each record sent: one per workload (one when there is none)."""
        base = (("event.name", self.name), ("gpu.event.id", self.uid))
        if not self.workloads:
            return ((*base, ("log.record.uid", self.uid), *self.attributes),)
        return tuple((*base, ("log.record.uid", self.record_uid(i)), *self.attributes, *w)
                     for i, w in enumerate(self.workloads))

    def record_uid(self, index: int) -> str:
        """Record ``index``'s ``log.record.uid``: the event's id, then ids derived from it."""
        if index == 0:
            return self.uid
        return stable_ulid(self.time_ns // 1_000_000, f"{self.uid}/{index}".encode())

    def to_json(self) -> str:
        return json.dumps(
            {"n": self.name, "t": self.time_ns, "s": self.severity.name, "b": self.body,
             "a": _json_attributes(self.attributes), "u": self.uid,
             "w": [_json_attributes(w) for w in self.workloads]},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> HealthEvent:
        """Inverse of :meth:`to_json`; raises ValueError (or KeyError/TypeError) on bad input.

        A record spooled before events had ids gets one derived from its content, the same
        on every replay."""
        raw: Any = json.loads(text)
        attributes = tuple((str(k), _value(v)) for k, v in raw["a"])
        time_ns = _time_ns(raw["t"])
        uid = raw.get("u")
        if not isinstance(uid, str):
            uid = stable_ulid(time_ns // 1_000_000, text.encode())
        workloads = tuple(tuple((str(k), _value(v)) for k, v in w) for w in raw.get("w", ()))
        return cls(str(raw["n"]), time_ns, Severity[raw["s"]], str(raw["b"]), attributes, uid,
                   workloads)


def _json_attributes(attributes: EventAttributes) -> list[list[Any]]:
    return [[k, list(v) if isinstance(v, tuple) else v] for k, v in attributes]


def _time_ns(raw: Any) -> int:
    """A record's time: an integer of nanoseconds within OTLP's fixed64. A float (JSON has
    no other numbers past 2**53) must be finite: ``int(inf)`` raised OverflowError, which is
    not a ValueError, and ended the event sender on every start (issue 30)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"time {raw!r} is not a number")
    if isinstance(raw, float) and not math.isfinite(raw):
        raise ValueError(f"time {raw!r} is not finite")
    time_ns = int(raw)
    if not 0 <= time_ns < 2**64:
        raise ValueError(f"time {raw!r} is out of range")
    return time_ns


def _value(raw: Any) -> EventValue:
    if isinstance(raw, list):
        if all(isinstance(v, str) for v in raw):
            return tuple(str(v) for v in raw)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
            return tuple(int(v) for v in raw)
        raise ValueError(f"mixed array attribute {raw!r}")
    if isinstance(raw, str | int | float | bool):
        return raw
    raise ValueError(f"unsupported attribute value {raw!r}")


@dataclass(frozen=True)
class EventSpec:
    name: str
    attributes: tuple[str, ...]
    description: str


# Attributes every event carries (besides these, the device attributes; workloads on gpu.xid
# and wherever processes are known).
COMMON_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("event.name", "the event name again (Loki drops the LogRecord field)"),
    ("gpu.event.id", "the event's identity, a ULID: the same on every record of the event, "
     "re-send, spool replay and agent restart"),
    ("log.record.uid", "the record's identity, a ULID: the event's id on its first record, one "
     "derived from it on each further record; stable across re-sends, so a backend can drop "
     "duplicates"),
    ("process.pid", "where the event hit workloads: one record per process on the GPU at that "
     "moment, this its PID (int)"),
    ("process.executable.name", "that process's executable name"),
    ("k8s.pod.name, k8s.namespace.name, k8s.container.name, container.id, …",
     "that process's workload, where known (strings)"),
    ("gpu.event.count", "on a storm summary: occurrences folded into it since the last "
     "event of the same kind"),
)

EVENTS: tuple[EventSpec, ...] = (
    EventSpec(XID, ("gpu.xid.code", "gpu.xid.name", "gpu.xid.action", "gpu.event.source",
                    "gpu.xid.fatal", "gpu.nvlink.link", "gpu.xid.unit", "gpu.xid.subcode"),
              "An XID error (NVML event or kernel log); severity and action from the "
              "XID catalog. Seen by both sources within the de-duplication window: once. "
              "An NVLink XID 144-150 from the kernel log takes its severity from the line "
              "(`Fatal`: FATAL and the GPU failed until reset; `Nonfatal`: WARN, health "
              "unchanged) and names, where the line does, `gpu.xid.fatal`, the link "
              "(`gpu.nvlink.link`), the unit (`gpu.xid.unit`, e.g. `RLW_RXPIPE`) and the "
              "subcode (`gpu.xid.subcode`: bits 20-25 of the first register, the key of "
              "NVIDIA's XID 144-150 decode table)."),
    EventSpec(ECC, ("error.type",), "A single-bit (`corrected`) or double-bit "
              "(`uncorrected`) ECC error event."),
    EventSpec(LOST, (), "The GPU answers NVML_ERROR_GPU_IS_LOST (fell off the bus); on AMD, "
              "its calls answer AMDSMI_STATUS_NOT_FOUND, or amdsmi notified a GPU reset "
              "(GPU_PRE_RESET): lost until the reset ends."),
    EventSpec(RECOVERED, (), "A lost or unresponsive GPU answers again (AMD: also the "
              "GPU_POST_RESET notification)."),
    EventSpec(UNRESPONSIVE, ("gpu.call", "gpu.call.duration"), "A device call exceeded its "
              "deadline (`call_timeout`); names the call and how long it had run (s)."),
    EventSpec(THROTTLE, ("gpu.clock.throttle.reason", "gpu.throttle.state"),
              "A thermal or power clock slowdown starts (`start`) or ends (`end`), from the "
              "slow metric group; a slowdown only the violation counters saw between two "
              "reads is `transient` with `gpu.violation.policy`. AMD: reasons `ppt_power`, "
              "`socket_thermal`, `vr_thermal`, `hbm_thermal`, `prochot` from the slow group, "
              "and amdsmi's THERMAL_THROTTLE notification as reason `thermal`, state `start`, "
              "`gpu.event.source=amdsmi`."),
    EventSpec(HEALTH, ("hw.state", "gpu.health.previous_state", "gpu.health.reason"),
              "The GPU's health state (`ok`/`degraded`/`failed`, as in `hw.status`) changed."),
    EventSpec(DEGRADED, ("gpu.health.subsystem", "gpu.health.reason", "gpu.health.condition"),
              "A gray failure: one subsystem of the GPU (`pcie`, `nvlink`, `memory`, "
              "`thermal`, `power`, `sm`) is degrading before it fails. Raised after the "
              "condition held for `health.degrade_after` slow reads; the reason carries the "
              "values. Conditions and thresholds: the table below."),
    EventSpec(HEALTHY, ("gpu.health.subsystem", "gpu.health.reason", "gpu.health.condition"),
              "The condition of an earlier `gpu.degraded` is gone (for `health.clear_after` "
              "slow reads, past its clear threshold); the reason is the one it was raised "
              "with."),
    EventSpec(SXID, ("gpu.nvswitch.sxid.code", "gpu.nvswitch.sxid.fatal", "gpu.nvlink.link",
                     "gpu.event.source"),
              "An NVSwitch SXID from the kernel log (`nvidia-nvswitchN: SXid (PCI:...): "
              "code, Fatal|Non-fatal, Link N ...`): an event of the switch, not of a GPU. "
              "Device attributes are the switch's: `hw.id` = `nvswitch-<PCI bus id>`, "
              "`hw.type` = `network`, `hw.name` = the driver's device name "
              "(`nvidia-nvswitch3`), `gpu.pci.bus_id`. Severity FATAL for a fatal SXID, WARN "
              "for a non-fatal one. Needs `health.kmsg`."),
    EventSpec(AMD_VM_FAULT, ("gpu.event.source",),
              "AMD only: a GPU virtual-memory fault (amdsmi VMFAULT notification, the NVIDIA "
              "counterpart being an MMU-fault XID); the body carries the driver's message "
              "(faulting address, process)."),
)
