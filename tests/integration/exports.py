"""Reading what the agent exported to a test receiver: the last whole export, its points by
metric and attributes, and waiting for an export that satisfies a check."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpu_otel_agent.gpu_health.ulid import ALPHABET, LENGTH, ulid_time_ms
from tests.receivers import decode
from tests.receivers.records import LogEvent, Point
from tests.receivers.store import Store


def last_export(store: Store) -> list[Point]:
    received = store.received("metrics")
    if not received:
        return []
    last = received[-1]
    return list(decode.points(last.request, last.received_at))


def select(points: list[Point], metric: str, **attrs: object) -> list[Point]:
    """Points of ``metric`` with these attributes (``k8s__pod__name`` for ``k8s.pod.name``)."""
    wanted = {k.replace("__", "."): v for k, v in attrs.items()}
    return [p for p in points if p.metric == metric
            and all(p.attributes.get(k) == v for k, v in wanted.items())]


def wait_export(store: Store, check: Callable[[list[Point]], object], what: str,
                timeout: float = 20) -> list[Point]:
    """The first whole export for which ``check(points)`` is truthy."""
    return store.wait_for(lambda s: (pts := last_export(s)) and check(pts) and pts,
                          timeout=timeout, what=what)


def assert_event_identity(events: Iterable[LogEvent]) -> dict[str, tuple[object, ...]]:
    """Every health event carries ``log.record.uid`` (telemetry.md, "Event identity"): a ULID
    (26 Crockford base32 characters, github.com/ulid/spec) whose time is the event's, naming
    one event only. Returns uid -> (event name, device, time, body)."""
    named: dict[str, tuple[object, ...]] = {}
    for event in events:
        uid = event.attributes.get("log.record.uid")
        assert isinstance(uid, str) and len(uid) == LENGTH and set(uid) <= set(ALPHABET), (
            f"{event.event_name} without a ULID log.record.uid: {event.attributes}")
        assert ulid_time_ms(uid) == event.time_unix_nano // 1_000_000, (uid, event)
        what = (event.event_name, event.attributes.get("hw.id"), event.time_unix_nano,
                event.body)
        assert named.setdefault(uid, what) == what, f"{uid} names two events: {what}"
    return named
