"""The health engine: device events and sampler observations in, health events out.

Inputs arrive on the event loop: event batches from the vendor sources (handed over from their
threads), and the sampler's observations (a call overran its deadline, the GPU is lost, it
answers again, a slow-group reading). The engine keeps one state machine per GPU, counts XIDs,
drops the second sighting of one fault, summarises storms, attaches the workloads on the GPU
and hands finished events to delivery (``delivery.py``: workloads attached, sink in order).
Its view of each GPU (state, conditions, XID counts) goes to the health board
(``verdict.py``), which decides the GPU's health with the sampler's and publishes it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from gpu_otel_agent.backends.protocol import (
    EVENT_ECC_CORRECTED,
    EVENT_ECC_UNCORRECTED,
    EVENT_FATAL_POISON,
    EVENT_GPU_RESET_END,
    EVENT_GPU_RESET_START,
    EVENT_MEMORY_RETIREMENT,
    EVENT_MEMORY_RETIREMENT_FAILURE,
    EVENT_PARTITIONS_CHANGED,
    EVENT_RECOVERY_ACTION,
    EVENT_SXID,
    EVENT_THERMAL_THROTTLE,
    EVENT_UNAVAILABLE,
    EVENT_VENDOR,
    EVENT_XID,
    DeviceEvent,
    LinkFault,
)
from gpu_otel_agent.gpu_health import events as ev
from gpu_otel_agent.gpu_health import subsystems
from gpu_otel_agent.gpu_health.debounce import DebounceSettings
from gpu_otel_agent.gpu_health.dedup import CrossSourceDedup
from gpu_otel_agent.gpu_health.delivery import Delivery, Pending
from gpu_otel_agent.gpu_health.events import EventAttributes, EventValue, HealthEvent
from gpu_otel_agent.gpu_health.polled import PolledWatcher
from gpu_otel_agent.gpu_health.sampling_requests import NoSampling, SamplingRequests
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.siblings import Peer
from gpu_otel_agent.gpu_health.state import HealthMachine, Transition
from gpu_otel_agent.gpu_health.storm import StormControl, StormKey, Summary
from gpu_otel_agent.gpu_health.storm_journal import OpenWindow, StormJournal
from gpu_otel_agent.gpu_health.ulid import ulid
from gpu_otel_agent.gpu_health.verdict import EngineView, HealthBoard
from gpu_otel_agent.gpu_health.watch import Change, GrayWatch
from gpu_otel_agent.gpu_health.xid import ACTIONS, UNKNOWN_XID, lookup
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.model.workload import WorkloadLookup

log = logging.getLogger(__name__)
MIN_SUMMARY_WAIT_S = 0.05
RESTORE_WAIT_READS = 10  # reads of a GPU a restored partition storm waits for its partition
_MEMORY_FAULTS = {
    EVENT_MEMORY_RETIREMENT: (HealthState.DEGRADED,
                              "memory page/row retirement pending (reset the GPU to apply)"),
    EVENT_MEMORY_RETIREMENT_FAILURE: (HealthState.DEGRADED, "memory retirement failed"),
    EVENT_FATAL_POISON: (HealthState.FAILED, "fatal poisoned-memory error"),
}
# The driver's recovery actions (nvml.h nvmlDeviceGpuRecoveryAction_t): what it asks for, and
# the state the GPU is in until it is done. 0 (none) is the only one that clears; an action
# that needs a reset or a reboot means the GPU cannot be trusted with work until then.
_RECOVERY_ACTIONS: dict[int, tuple[HealthState, str]] = {
    0: (HealthState.OK, "no recovery action needed"),
    1: (HealthState.FAILED, "GPU reset"),
    2: (HealthState.FAILED, "node reboot"),
    3: (HealthState.DEGRADED, "drain of peer-to-peer traffic"),
    4: (HealthState.FAILED, "drain of peer-to-peer traffic and GPU reset"),
    5: (HealthState.DEGRADED, "recovery of the IMEX domain"),
    6: (HealthState.FAILED, "reset of the GPU's PCIe bus"),
    7: (HealthState.FAILED, "system reboot"),
}


@dataclass(frozen=True)
class EngineSettings:
    storm_window: float = 10.0  # seconds
    dedup_window: float = 2.0  # seconds
    debounce: DebounceSettings = field(default_factory=DebounceSettings)  # gray failures


@dataclass
class HealthStats:
    """Self-telemetry of the engine (exported as gpu_agent.events.*)."""

    device_events: int = 0  # raw events from the sources
    suppressed: int = 0  # occurrences folded into storm summaries
    duplicates: int = 0  # second sightings of one fault (NVML + kmsg)
    ignored: int = 0  # clock / P-state / power-source changes


@dataclass
class _Gpu:
    identity: DeviceIdentity
    machine: HealthMachine
    polled: PolledWatcher
    xids: dict[int, int]
    gray: GrayWatch
    # XID code -> wall-clock ns of its latest occurrence (gpu.xid.last_seen): a first
    # occurrence an alert can see, where increase() over the counter misses a new series.
    xid_seen: dict[int, int] = field(default_factory=dict)


class HealthEngine:
    def __init__(
        self,
        devices: Sequence[DeviceIdentity],
        sink: Callable[[HealthEvent], None],
        store: SnapshotStore,
        settings: EngineSettings,
        workloads: WorkloadLookup | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
        board: HealthBoard | None = None,
        sampling: SamplingRequests | None = None,
        journal: StormJournal | None = None,
    ) -> None:
        """``store``: read for the latest readings and partitions; ``board``: where the
        engine's view of each GPU goes (the agent's, shared with the samplers; by default one
        of its own on ``store``); ``sampling``: whom to ask for a re-probe or a partition
        rescan when an event calls for one (by default nobody); ``journal``: where folded
        repeats are counted on disk too, once it is open (by default nowhere)."""
        self._board = board if board is not None else HealthBoard(store)
        self._gpus = {d.uuid: _Gpu(d, HealthMachine(), PolledWatcher(), {},
                                   GrayWatch(settings.debounce)) for d in devices}
        self._store = store
        # Each GPU's last fast read and the peer made of it (``_peer``).
        self._peers: dict[str, tuple[tuple[Reading, ...], Peer]] = {}
        self._settings = settings
        self._clock = clock
        self._wall_ns = wall_ns
        self._storm = StormControl(settings.storm_window)
        # Once open (the pipeline opens it where the spool is usable): each folded repeat is
        # counted on disk too, so a crash cannot lose it (storm_journal).
        self.journal = journal
        self._windows: dict[StormKey, int] = {}  # key -> its window's id (wall ns)
        self._switches: dict[str, EventAttributes] = {}  # NVSwitch PCI bus id -> its attributes
        # Restored storms of partitions not published yet, and reads of their GPU since.
        self._restored: list[OpenWindow] = []
        self._restored_reads: dict[str, int] = {}
        self._suppressed = asyncio.Event()  # wakes the summariser: a window has a count now
        self._dedup = CrossSourceDedup(settings.dedup_window, wildcard=UNKNOWN_XID)
        self._delivery = Delivery(sink, workloads)
        self.stats = HealthStats()
        self._sampling: SamplingRequests = sampling if sampling is not None else NoSampling()
        for gpu in self._gpus.values():
            self._publish(gpu)

    # -- inputs from the sources ---------------------------------------------------------

    def on_events(self, batch: Sequence[DeviceEvent]) -> None:
        for event in batch:
            self.stats.device_events += 1
            if event.kind == EVENT_SXID:  # an NVSwitch's, not a GPU's
                self._sxid(event)
                continue
            gpu = self._gpus.get(event.uuid)
            if gpu is None:
                continue
            if event.kind == EVENT_XID:
                self._xid(gpu, event)
            elif event.kind == EVENT_PARTITIONS_CHANGED:
                self._sampling.rescan_partitions(gpu.identity.uuid)
            elif event.kind in (EVENT_ECC_CORRECTED, EVENT_ECC_UNCORRECTED):
                self._ecc(gpu, event)
            elif event.kind == EVENT_RECOVERY_ACTION:
                self._recovery_action(gpu, event)
            elif event.kind in _MEMORY_FAULTS:
                state, reason = _MEMORY_FAULTS[event.kind]
                self._transition(gpu, gpu.machine.set(f"mem:{event.kind}", state, reason),
                                 event.time_ns)
            elif event.kind == EVENT_UNAVAILABLE:
                log.warning("gpu %d: NVML reports the GPU unavailable", gpu.identity.index)
                self.stats.ignored += 1
            elif event.kind == EVENT_GPU_RESET_START:
                self._lost(gpu, f"GPU reset: {event.detail or 'started'}",
                           f"GPU {gpu.identity.index} is being reset; it is lost until the "
                           f"reset ends ({event.detail or 'no message'})", event.time_ns)
            elif event.kind == EVENT_GPU_RESET_END:
                # Its sampler reads again now, not at its next re-probe.
                self._sampling.reprobe(event.uuid)
                self.available(event.uuid)
            elif event.kind == EVENT_THERMAL_THROTTLE:
                self._emit_admitted(gpu, ev.THROTTLE, Severity.WARN,
                                    f"GPU {gpu.identity.index} clock slowdown thermal started "
                                    f"({event.detail or event.source})",
                                    (("gpu.clock.throttle.reason", "thermal"),
                                     ("gpu.throttle.state", "start"),
                                     ("gpu.event.source", event.source)),
                                    time_ns=event.time_ns, qualifier="thermal/start")
            elif event.kind == EVENT_VENDOR and event.name:
                # Scoped to a partition (an AMD VM fault on the partition that faulted): the
                # event names it and its workloads; storm control counts it per partition.
                scope = self._partition(event.partition) if event.partition else None
                self._emit_admitted(gpu, event.name, Severity.ERROR,
                                    f"{event.name} on GPU {gpu.identity.index}: "
                                    f"{event.detail or 'no message'}",
                                    (("gpu.event.source", event.source),),
                                    time_ns=event.time_ns, scope=scope,
                                    storm_scope=event.partition)
            else:
                self.stats.ignored += 1

    def _xid(self, gpu: _Gpu, event: DeviceEvent) -> None:
        now = self._clock()
        if self._dedup.is_duplicate(gpu.identity.uuid, event.code, event.source, now):
            self.stats.duplicates += 1
            fault = event.link_fault
            if fault is not None and fault.fatal:
                # NVML saw it first, without the line's word: the kernel log says Fatal, so the
                # GPU fails as if the line had come first (no second event: one fault).
                info = lookup(event.code)
                self._transition(gpu, gpu.machine.set(f"xid:{event.code}", HealthState.FAILED,
                                                      f"XID {event.code} {info.name} (fatal)"),
                                 event.time_ns)
            return
        gpu.xids[event.code] = gpu.xids.get(event.code, 0) + 1
        gpu.xid_seen[event.code] = max(gpu.xid_seen.get(event.code, 0), event.time_ns)
        info = lookup(event.code)
        self._publish(gpu)
        fault = event.link_fault
        severity, state = _xid_severity(info.severity, info.state, fault)
        change = None
        if state is not HealthState.OK:
            change = gpu.machine.set(f"xid:{event.code}", state,
                                     f"XID {event.code} {info.name}")
        # An XID scoped to a partition (a MIG instance) names it and its workloads; the count
        # and the health state stay with the physical GPU.
        scope = self._partition(event.partition) if event.partition else None
        key = StormKey(gpu.identity.uuid, ev.XID, code=event.code, scope=event.partition,
                       fatal=fault.fatal if fault else None, link=fault.link if fault else None)
        if self._admit(key, now):
            detail = f" ({event.detail})" if event.detail else ""
            where = f"GPU {gpu.identity.index}"
            if scope is not None and scope.partition is not None:
                where += (f" {scope.partition.kind.upper()} {scope.partition.profile} "
                          f"({scope.uuid})")
            self._emit(gpu, ev.XID, severity,
                       f"XID {event.code} {info.name} on {where}: "
                       f"{info.meaning}{detail}. Action: {info.action} - "
                       f"{ACTIONS.get(info.action, '')}",
                       (("gpu.xid.code", event.code), ("gpu.xid.name", info.name),
                        ("gpu.xid.action", info.action), ("gpu.event.source", event.source),
                        *_fault_attributes(fault, "gpu.xid")),
                       time_ns=event.time_ns, scope=scope)
        else:
            self.stats.suppressed += 1
        self._transition(gpu, change, event.time_ns)  # after the event that caused it

    def _ecc(self, gpu: _Gpu, event: DeviceEvent) -> None:
        uncorrected = event.kind == EVENT_ECC_UNCORRECTED
        kind = "uncorrected" if uncorrected else "corrected"
        change = None
        if uncorrected:
            change = gpu.machine.set("ecc:uncorrected", HealthState.DEGRADED,
                                     "uncorrected ECC error")
        if self._admit(StormKey(gpu.identity.uuid, ev.ECC, qualifier=kind), self._clock()):
            detail = f" ({event.detail})" if event.detail else ""
            self._emit(gpu, ev.ECC, Severity.ERROR if uncorrected else Severity.WARN,
                       f"{'Double' if uncorrected else 'Single'}-bit ({kind}) ECC error on GPU "
                       f"{gpu.identity.index}{detail}", (("error.type", kind),),
                       time_ns=event.time_ns)
        else:
            self.stats.suppressed += 1
        self._transition(gpu, change, event.time_ns)

    def _recovery_action(self, gpu: _Gpu, event: DeviceEvent) -> None:
        state, action = _RECOVERY_ACTIONS.get(
            event.code, (HealthState.DEGRADED, f"recovery action {event.code} (unknown)"))
        if state is HealthState.OK:
            change = gpu.machine.clear("recovery_action", "the driver needs no recovery action")
        else:
            change = gpu.machine.set("recovery_action", state, f"the driver asks for a {action}")
        self._transition(gpu, change, event.time_ns)

    # -- inputs from the sampler (gpu_otel_agent.sampling.sampler.DeviceObserver) ---------------

    def unresponsive(self, uuid: str, call: str | None, seconds: float) -> None:
        gpu = self._gpus.get(uuid)
        if gpu is None or gpu.machine.holds("unresponsive"):
            return
        name = call or "device call"
        now = self._wall_ns()
        change = gpu.machine.set("unresponsive", HealthState.DEGRADED,
                                 f"unresponsive: {name} exceeded {seconds:g}s")
        self._emit_admitted(gpu, ev.UNRESPONSIVE, Severity.ERROR,
                            f"GPU {gpu.identity.index} is unresponsive: {name} did not return "
                            f"within {seconds:g}s",
                            (("gpu.call", name), ("gpu.call.duration", float(seconds))),
                            time_ns=now, live_lookup=False)
        self._transition(gpu, change, now)

    def responsive(self, uuid: str) -> None:
        gpu = self._gpus.get(uuid)
        if gpu is None or not gpu.machine.holds("unresponsive"):
            return
        now = self._wall_ns()
        change = gpu.machine.clear("unresponsive", "responding again")
        self._emit_admitted(gpu, ev.RECOVERED, Severity.INFO,
                            f"GPU {gpu.identity.index} answers again (it was unresponsive)",
                            (), time_ns=now)
        self._transition(gpu, change, now)

    def lost(self, uuid: str, reason: str) -> None:
        gpu = self._gpus.get(uuid)
        if gpu is not None:
            self._lost(gpu, reason, f"GPU {gpu.identity.index} is lost (fell off the bus): "
                       f"{reason}", self._wall_ns())

    def _lost(self, gpu: _Gpu, reason: str, body: str, now: int) -> None:
        """The sampler's view and a reset notification meet here: one ``gpu.lost`` either way."""
        if gpu.machine.holds("lost"):
            return
        change = gpu.machine.set("lost", HealthState.FAILED, f"lost: {reason}")
        gpu.machine.clear("unresponsive", "lost")
        self._emit_admitted(gpu, ev.LOST, Severity.FATAL, body, (), time_ns=now,
                            live_lookup=False)
        self._transition(gpu, change, now)

    def available(self, uuid: str) -> None:
        gpu = self._gpus.get(uuid)
        if gpu is None:
            return
        if not gpu.machine.holds("lost"):
            return
        now = self._wall_ns()
        before = gpu.machine.state
        gpu.machine.clear("lost", "answers again")
        gpu.machine.reset("answers again")  # a GPU back from loss was reset
        self._emit_admitted(gpu, ev.RECOVERED, Severity.INFO,
                            f"GPU {gpu.identity.index} answers again (it was lost)", (),
                            time_ns=now)
        self._transition(gpu, Transition(before, gpu.machine.state, "answers again after "
                                         "being lost"), now)

    def sampled(self, uuid: str, group: str, readings: tuple[Reading, ...]) -> None:
        gpu = self._gpus.get(uuid)
        if gpu is not None and self._restored:
            self._flush_restored(uuid)
        if gpu is None or group != "slow":
            return
        throttles, conditions = gpu.polled.update(readings)
        now = self._wall_ns()
        for throttle in throttles:
            attributes: list[tuple[str, EventValue]] = [
                ("gpu.clock.throttle.reason", throttle.reason),
                ("gpu.throttle.state", throttle.state)]
            if throttle.state == "transient":
                attributes.append(("gpu.violation.policy", throttle.reason.split("_")[0]))
                attributes.append(("gpu.throttle.duration", throttle.seconds))
            verb = {"start": "started", "end": "ended", "transient": "happened"}[throttle.state]
            self._emit_admitted(gpu, ev.THROTTLE, Severity.WARN if throttle.state != "end"
                                else Severity.INFO,
                                f"GPU {gpu.identity.index} clock slowdown {throttle.reason} "
                                f"{verb}", tuple(attributes), time_ns=now,
                                qualifier=f"{throttle.reason}/{throttle.state}")
        for condition in conditions:
            subsystem = subsystems.subsystem_of(condition.cause)
            if condition.active:
                change = gpu.machine.set(condition.cause, HealthState.DEGRADED, condition.reason)
            else:
                change = gpu.machine.clear(condition.cause, f"no longer: {condition.reason}")
            self._gray_event(gpu, Change(condition.cause, subsystem, condition.active,
                                         condition.reason), now)
            self._transition(gpu, change, now)
        self._gray(gpu, readings, now)

    def _gray(self, gpu: _Gpu, slow: tuple[Reading, ...], now: int) -> None:
        """Gray-failure conditions from this slow read, the GPU's latest fast read and its
        same-model siblings' (all from the store: the samplers publish before reporting)."""
        fast: dict[str, tuple[Reading, ...]] = {}
        partitioned = False
        instance_loads: list[float] = []
        gpus, uuid = self._gpus, gpu.identity.uuid
        for device in self._store.devices():
            identity = device.identity
            partition = identity.partition
            if partition is None:  # a GPU: no one's partition
                if identity.uuid in gpus:
                    sample = device.samples.get("fast")
                    fast[identity.uuid] = sample.readings if sample else ()
            elif partition.parent_uuid == uuid:
                partitioned = True
                instance_loads.extend(_instance_load(device.samples.values()))
        if partitioned:
            # NVML reports the NVLink links of a MIG-enabled GPU down (DCGM treats them as
            # disabled there: DcgmHealthWatch, "Bug 200682374"): not a link failure.
            slow = tuple(r for r in slow if r.metric != "gpu.nvlink.link.state")
        mine = fast.get(gpu.identity.uuid, ())
        peer = self._peer
        others = [peer(uuid, readings) for uuid, readings in fast.items()
                  if uuid != gpu.identity.uuid]
        me = peer(gpu.identity.uuid, mine) if mine else None
        # A MIG-enabled GPU has no utilization of its own: under load when an instance is.
        load = max(instance_loads) if instance_loads else None
        for change in gpu.gray.update((*slow, *mine), self._clock(), me, others, load):
            cause = subsystems.gray_cause(change.subsystem, change.condition)
            if change.active:
                transition = gpu.machine.set(cause, HealthState.DEGRADED, change.reason)
            else:
                transition = gpu.machine.clear(cause, f"no longer: {change.reason}")
            self._gray_event(gpu, change, now)
            self._transition(gpu, transition, now)

    def _peer(self, uuid: str, fast: tuple[Reading, ...]) -> Peer:
        """``_peer`` of a GPU's fast read, kept while that read is the GPU's latest: each of a
        node's slow reads compares with every other GPU's, and between two fast reads the
        same (immutable) readings give the same peer."""
        kept = self._peers.get(uuid)
        if kept is not None and kept[0] is fast:
            return kept[1]
        found = _peer(self._gpus[uuid].identity.model, fast)
        self._peers[uuid] = (fast, found)
        return found

    def _gray_event(self, gpu: _Gpu, change: Change, now: int) -> None:
        self._publish(gpu)
        name, severity, verb = ((ev.DEGRADED, Severity.WARN, "degraded") if change.active
                                else (ev.HEALTHY, Severity.INFO, "healthy again"))
        self._emit(gpu, name, severity,
                   f"GPU {gpu.identity.index} {change.subsystem} {verb}: {change.reason}",
                   (("gpu.health.subsystem", change.subsystem),
                    ("gpu.health.reason", change.reason),
                    ("gpu.health.condition", change.condition)), time_ns=now)

    # -- output --------------------------------------------------------------------------

    def _transition(self, gpu: _Gpu, change: Transition | None, time_ns: int) -> None:
        if change is None or change.previous is change.current:
            return
        before = change.previous
        self._publish(gpu)
        severity = {HealthState.OK: Severity.INFO, HealthState.DEGRADED: Severity.WARN,
                    HealthState.FAILED: Severity.ERROR}[change.current]
        self._emit_admitted(
            gpu, ev.HEALTH, severity,
            f"GPU {gpu.identity.index} health {before.value} -> {change.current.value}: "
            f"{change.reason}",
            (("hw.state", change.current.value), ("gpu.health.previous_state", before.value),
             ("gpu.health.reason", change.reason)),
            time_ns=time_ns, qualifier=change.current.value)

    def _emit_admitted(
        self, gpu: _Gpu, name: str, severity: Severity, body: str,
        attributes: EventAttributes, *, time_ns: int, live_lookup: bool = True,
        qualifier: str = "", storm_scope: str = "", scope: DeviceIdentity | None = None,
    ) -> None:
        """Through storm control, so a flapping GPU cannot flood the collector; repeats are
        counted per ``qualifier`` and per partition (``storm_scope``)."""
        key = StormKey(gpu.identity.uuid, name, qualifier=qualifier, scope=storm_scope)
        if not self._admit(key, self._clock()):
            self.stats.suppressed += 1
            return
        self._emit(gpu, name, severity, body, attributes, time_ns=time_ns,
                   live_lookup=live_lookup, scope=scope)

    def _partition(self, uuid: str) -> DeviceIdentity | None:
        """A partition's identity, as its parent's sampler last published it."""
        return next((d.identity for d in self._store.devices() if d.identity.uuid == uuid),
                    None)

    def _emit(
        self, gpu: _Gpu, name: str, severity: Severity, body: str,
        attributes: EventAttributes, *, time_ns: int, live_lookup: bool = True,
        scope: DeviceIdentity | None = None, uid: str | None = None,
    ) -> None:
        """``scope``: the partition the event is about (its attributes and its workloads);
        ``uid``: the event's id when it must be the same on every start (a storm summary)."""
        identity = scope or gpu.identity
        # The id's time is the fault's: ids sort the way the faults happened.
        event = HealthEvent(name, time_ns, severity, body,
                            (*identity.series_attributes(), *attributes),
                            uid or ulid(max(time_ns, 0) // 1_000_000))
        down = gpu.machine.holds("unresponsive") or gpu.machine.holds("lost")
        self._delivery.put(Pending(event, identity.uuid, live_lookup and not down))

    def _summaries(self, summaries: list[Summary]) -> None:
        for summary in summaries:
            key = summary.key
            window = self._windows.pop(key, None)
            journal = self._open_journal()
            uid = (journal.summarised(key, window)
                   if journal is not None and window is not None else None)
            if key.event == ev.SXID:
                self._sxid_summary(key, summary.count, uid)
                continue
            gpu = self._gpus.get(key.gpu)
            if gpu is None:
                continue
            seconds = self._settings.storm_window
            attributes: list[tuple[str, EventValue]] = [("gpu.event.count", summary.count)]
            severity = Severity.WARN
            what = key.event
            if key.event == ev.XID and key.code is not None:
                info = lookup(key.code)
                severity = _xid_severity(info.severity, info.state,
                                         LinkFault(key.fatal, key.link))[0]
                what = f"XID {key.code} {info.name}"
                attributes += [("gpu.xid.code", key.code), ("gpu.xid.name", info.name),
                               ("gpu.xid.action", info.action),
                               ("gpu.event.source", "summary"),
                               *_fault_attributes(LinkFault(key.fatal, key.link), "gpu.xid")]
            elif key.event == ev.ECC and key.qualifier:
                attributes.append(("error.type", key.qualifier))
            # A storm on a partition is summarised on it (its attributes, its workloads);
            # one whose partition is gone (or not published yet after a restart) on the GPU,
            # naming the partition.
            scope = self._partition(key.scope) if key.scope else None
            where = f"GPU {gpu.identity.index}"
            if scope is not None and scope.partition is not None:
                where += f" {scope.partition.kind.upper()} {scope.partition.profile} ({scope.uuid})"
            elif key.scope:
                where += f" partition {key.scope}"
            self._emit(gpu, key.event, severity,
                       f"{what} repeated {summary.count} more time(s) on {where} within "
                       f"{seconds:g}s (storm summary)",
                       tuple(attributes), time_ns=self._wall_ns(), uid=uid, scope=scope)

    def _sxid(self, event: DeviceEvent) -> None:
        """An NVSwitch's SXID: an event of the switch (named by its PCI bus id), through the
        same storm control as a GPU's events."""
        fault = event.link_fault or LinkFault()
        switch = _switch_attributes(event.uuid, event.name)
        self._switches[event.uuid] = switch
        key = StormKey(event.uuid, ev.SXID, code=event.code, fatal=fault.fatal, link=fault.link)
        if not self._admit(key, self._clock()):
            self.stats.suppressed += 1
            return
        word = {True: "fatal", False: "non-fatal", None: ""}[fault.fatal]
        link = f" link {fault.link}" if fault.link is not None else ""
        detail = f": {event.detail}" if event.detail else ""
        body = (f"SXID {event.code} ({word}) on NVSwitch {event.name or event.uuid} "
                f"({event.uuid}){link}{detail}")
        self._emit_switch(_sxid_severity(fault), " ".join(body.split()),
                          (*switch, ("gpu.nvswitch.sxid.code", event.code),
                           *_fault_attributes(fault, "gpu.nvswitch.sxid"),
                           ("gpu.event.source", event.source)), event.time_ns)

    def _sxid_summary(self, key: StormKey, count: int, uid: str | None) -> None:
        switch = self._switches.get(key.gpu) or _switch_attributes(key.gpu, "")
        fault = LinkFault(key.fatal, key.link)
        self._emit_switch(
            _sxid_severity(fault),
            f"SXID {key.code} repeated {count} more time(s) on NVSwitch {key.gpu} within "
            f"{self._settings.storm_window:g}s (storm summary)",
            (*switch, ("gpu.nvswitch.sxid.code", key.code or 0),
             *_fault_attributes(fault, "gpu.nvswitch.sxid"), ("gpu.event.source", "summary"),
             ("gpu.event.count", count)), self._wall_ns(), uid)

    def _emit_switch(self, severity: Severity, body: str, attributes: EventAttributes,
                     time_ns: int, uid: str | None = None) -> None:
        event = HealthEvent(ev.SXID, time_ns, severity, body, attributes,
                            uid or ulid(max(time_ns, 0) // 1_000_000))
        self._delivery.put(Pending(event, "", False))  # no workloads: a switch runs none

    def _publish(self, gpu: _Gpu) -> None:
        readings = tuple(Reading("gpu.xid.errors", count, (("gpu.xid.code", code),))
                         for code, count in sorted(gpu.xids.items()))
        readings += tuple(Reading("gpu.xid.last_seen", seen / 1e9, (("gpu.xid.code", code),))
                          for code, seen in sorted(gpu.xid_seen.items()))
        held = subsystems.held(gpu.machine.causes())
        readings += subsystems.status_readings(subsystems.states(held))
        self._board.engine_view(gpu.identity.uuid,
                                EngineView(gpu.machine.state, held, readings))

    # -- tasks ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Deliver events in order (with their workloads) and summarise storms."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._delivery.run(), name="health-deliver")
            tasks.create_task(self._summarise(), name="health-storms")

    def _admit(self, key: StormKey, now: float) -> bool:
        """Storm control's verdict; a suppressed occurrence wakes the summariser."""
        if self._storm.admit(key, now):
            return True
        self._suppressed.set()
        count = self._storm.suppressed(key)
        journal = self._open_journal()
        if journal is not None and count:
            window = self._windows.setdefault(key, self._wall_ns())
            journal.count(key, window, count)
        return False

    def _open_journal(self) -> StormJournal | None:
        return self.journal if self.journal is not None and self.journal.opened else None

    def restore(self, windows: list[OpenWindow]) -> None:
        """Summaries of the storm windows a previous run counted and never summarised."""
        for window in windows:
            if window.key.event != ev.SXID and window.key.gpu not in self._gpus:
                # a GPU this node no longer has
                if (journal := self._open_journal()) is not None:
                    journal.written([journal.summarised(window.key, window.window)])
                continue
            if window.key.scope and self._partition(window.key.scope) is None:
                # A partition's storm: summarised on the partition once its GPU's sampler has
                # published it again (the samplers start after this), see _flush_restored.
                self._restored.append(window)
                continue
            self._summarise_restored(window)

    def _summarise_restored(self, window: OpenWindow) -> None:
        self._windows[window.key] = window.window
        self._summaries([Summary(window.key, window.count)])

    def _flush_restored(self, uuid: str) -> None:
        """The restored partition storms of this GPU whose partition is known now; after
        RESTORE_WAIT_READS reads without it (the instance is gone), on the GPU itself."""
        waiting = [w for w in self._restored if w.key.gpu == uuid]
        if not waiting:
            return
        reads = self._restored_reads[uuid] = self._restored_reads.get(uuid, 0) + 1
        for window in waiting:
            if self._partition(window.key.scope) is None and reads < RESTORE_WAIT_READS:
                continue
            self._restored.remove(window)
            self._summarise_restored(window)

    async def _summarise(self) -> None:
        """Summaries when their windows end. With nothing suppressed it sleeps until something
        is (a healthy node's summariser never wakes: it woke every second before, ~0.1 ms of
        CPU each on an idle node, for nothing)."""
        while True:
            due_at = self._storm.next_due()
            if due_at is None:
                self._suppressed.clear()
                await self._suppressed.wait()
                continue
            # At least MIN_SUMMARY_WAIT_S: the clock can be another than the loop's (tests).
            await asyncio.sleep(max(due_at - self._clock(), MIN_SUMMARY_WAIT_S))
            self._summaries(self._storm.due(self._clock()))

    @property
    def delivered(self) -> int:
        """Health events handed to the exporter (drained ones included)."""
        return self._delivery.delivered

    def drain(self) -> list[HealthEvent]:
        """At shutdown: storm counts not yet summarised and events not yet delivered."""
        for window in self._restored:
            self._summarise_restored(window)
        self._restored.clear()
        self._summaries(self._storm.pending())
        return self._delivery.drain()

    def close(self) -> None:
        self._delivery.close()


def _instance_load(samples: Iterable[GroupSample]) -> list[float]:
    """A MIG instance's SM activity (GPM: the fraction of time its SMs were busy)."""
    return [float(r.value) for s in samples for r in s.readings
            if r.metric == "gpu.sm.utilization" and not r.attributes]


def _peer(model: str, fast: tuple[Reading, ...]) -> Peer:
    values = {(r.metric, r.attributes): float(r.value) for r in fast}
    return Peer(model, values.get(("hw.gpu.utilization", (("hw.gpu.task", "general"),))),
                values.get(("gpu.clock.frequency", (("gpu.clock.domain", "sm"),))),
                values.get(("hw.power", ())))


def _xid_severity(severity: Severity, state: HealthState,
                  fault: LinkFault | None) -> tuple[Severity, HealthState]:
    """The catalog's severity and state, unless the kernel log's line says Fatal or Nonfatal
    (NVLink XIDs 144-150): a fatal one needs a GPU reset (NVIDIA's decode table: RESET_GPU for
    the fatal rows), a non-fatal one leaves the GPU usable (IGNORE for most non-fatal rows)."""
    if fault is None or fault.fatal is None:
        return severity, state
    return (Severity.FATAL, HealthState.FAILED) if fault.fatal else (Severity.WARN,
                                                                     HealthState.OK)


def _sxid_severity(fault: LinkFault) -> Severity:
    return {True: Severity.FATAL, False: Severity.WARN, None: Severity.ERROR}[fault.fatal]


def _fault_attributes(fault: LinkFault | None, prefix: str) -> EventAttributes:
    """What a kernel-log line said of a link fault, as event attributes (only what it said)."""
    if fault is None:
        return ()
    out: list[tuple[str, EventValue]] = []
    if fault.fatal is not None:
        out.append((f"{prefix}.fatal", fault.fatal))
    if fault.link is not None:
        out.append(("gpu.nvlink.link", fault.link))
    if fault.unit:
        out.append((f"{prefix}.unit", fault.unit))
    if fault.subcode is not None:
        out.append((f"{prefix}.subcode", fault.subcode))
    return tuple(out)


def _switch_attributes(pci: str, name: str) -> EventAttributes:
    """An NVSwitch as a device of its own (semantic conventions' hw.*: a network component)."""
    out: list[tuple[str, EventValue]] = [("hw.id", f"nvswitch-{pci}"), ("hw.type", "network"),
                                         ("hw.vendor", "nvidia"), ("hw.model", "NVSwitch")]
    if name:
        out.append(("hw.name", name))
    out.append(("gpu.pci.bus_id", pci))
    return tuple(out)
