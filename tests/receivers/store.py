"""Transport-independent store of everything a test receiver was sent.

Tests query flattened points and log events instead of walking protobufs, and
wait on conditions instead of sleeping; ``wait_for`` reports what *did* arrive
when it times out, because "expected X, got nothing" is rarely enough to debug
an exporter.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from typing import TypeVar, cast

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from tests.receivers import decode
from tests.receivers.records import LogEvent, Point, Received, Signal, Transport

__all__ = ["LogEvent", "Point", "Received", "Signal", "Store", "Transport"]

T = TypeVar("T")

_MISSING = object()


def _matches(actual: Mapping[str, object], wanted: Mapping[str, object]) -> bool:
    """Every wanted key is present with an equal value (extra keys are fine)."""
    return all(actual.get(key, _MISSING) == value for key, value in wanted.items())


def _merge(attrs: Mapping[str, object] | None, kwargs: Mapping[str, object]) -> dict[str, object]:
    """Combine the dotted-key mapping with keyword filters (for keys that are identifiers)."""
    merged: dict[str, object] = dict(attrs or {})
    merged.update(kwargs)
    return merged


class Store:
    """Thread-safe record of received requests plus flattened query helpers.

    Receivers call ``add``; tests call the query methods. Rejected requests are
    kept separately (``received(accepted=False)``) so they never show up as data.
    """

    def __init__(self, name: str = "receiver") -> None:
        self.name = name
        self._cond = threading.Condition(threading.RLock())
        self._received: list[Received] = []
        self._points: list[Point] = []
        self._logs: list[LogEvent] = []
        self._names: set[str] = set()
        self._version = 0
        self._context: list[Callable[[], str]] = []

    # -- writing -----------------------------------------------------------------

    def add(self, received: Received) -> None:
        """Record one request; accepted metrics/logs are flattened immediately."""
        new_points: list[Point] = []
        new_logs: list[LogEvent] = []
        new_names: set[str] = set()
        if received.accepted and received.signal == "metrics":
            request = cast(ExportMetricsServiceRequest, received.request)
            new_points = list(decode.points(request, received.received_at))
            new_names = set(decode.metric_names(request))
        elif received.accepted and received.signal == "logs":
            request_logs = cast(ExportLogsServiceRequest, received.request)
            new_logs = list(decode.log_events(request_logs, received.received_at))
        with self._cond:
            self._received.append(received)
            self._points.extend(new_points)
            self._logs.extend(new_logs)
            self._names |= new_names
            self._version += 1
            self._cond.notify_all()

    def add_context(self, provider: Callable[[], str]) -> None:
        """Register extra text (e.g. a collector's log) appended to timeout reports."""
        with self._cond:
            self._context.append(provider)

    def clear(self) -> None:
        """Forget everything received so far (context providers are kept)."""
        with self._cond:
            self._received.clear()
            self._points.clear()
            self._logs.clear()
            self._names.clear()
            self._version += 1

    # -- querying ----------------------------------------------------------------

    def received(
        self, signal: Signal | None = None, *, accepted: bool | None = True
    ) -> list[Received]:
        """Raw requests in arrival order; ``accepted=None`` includes rejected ones."""
        with self._cond:
            return [
                r
                for r in self._received
                if (signal is None or r.signal == signal)
                and (accepted is None or r.accepted == accepted)
            ]

    def points(
        self,
        metric: str | None = None,
        attrs: Mapping[str, object] | None = None,
        *,
        resource: Mapping[str, object] | None = None,
        **attr_filters: object,
    ) -> list[Point]:
        """Data points in arrival order, filtered by metric name and attribute equality.

        Use ``attrs`` for OTel keys with dots (``{"hw.id": uuid}``); keyword
        filters are merged in for simple keys. ``resource`` filters on resource
        attributes the same way.
        """
        wanted = _merge(attrs, attr_filters)
        with self._cond:
            candidates = list(self._points)
        return [
            p
            for p in candidates
            if (metric is None or p.metric == metric)
            and _matches(p.attributes, wanted)
            and (resource is None or _matches(p.resource, resource))
        ]

    def latest(
        self,
        metric: str,
        attrs: Mapping[str, object] | None = None,
        *,
        resource: Mapping[str, object] | None = None,
        **attr_filters: object,
    ) -> Point | None:
        """The matching point with the newest timestamp (later arrival wins ties)."""
        best: Point | None = None
        for point in self.points(metric, attrs, resource=resource, **attr_filters):
            if best is None or point.time_unix_nano >= best.time_unix_nano:
                best = point
        return best

    def latest_values(self, metric: str, *keys: str) -> dict[tuple[str, ...], float]:
        """The newest value of each series of ``metric``, keyed by the given attributes."""
        latest: dict[tuple[str, ...], Point] = {}
        for point in self.points(metric):
            key = tuple(str(point.attributes.get(k)) for k in keys)
            if key not in latest or point.time_unix_nano >= latest[key].time_unix_nano:
                latest[key] = point
        return {key: float(p.value) for key, p in latest.items()}

    def logs(
        self,
        event_name: str | None = None,
        attrs: Mapping[str, object] | None = None,
        *,
        resource: Mapping[str, object] | None = None,
        **attr_filters: object,
    ) -> list[LogEvent]:
        """Log events in arrival order, filtered like ``points``."""
        wanted = _merge(attrs, attr_filters)
        with self._cond:
            candidates = list(self._logs)
        return [
            e
            for e in candidates
            if (event_name is None or e.event_name == event_name)
            and _matches(e.attributes, wanted)
            and (resource is None or _matches(e.resource, resource))
        ]

    def metric_names(self) -> set[str]:
        """Names of every metric received (including types not flattened to points)."""
        with self._cond:
            return set(self._names)

    def event_names(self) -> set[str]:
        """Distinct log ``event_name`` values received (empty string for plain logs)."""
        with self._cond:
            return {e.event_name for e in self._logs}

    # -- waiting -----------------------------------------------------------------

    def wait_for(
        self,
        predicate: Callable[[Store], T | None],
        timeout: float = 5.0,
        *,
        what: str = "",
    ) -> T:
        """Re-evaluate ``predicate`` whenever data arrives until it returns a truthy value.

        Any falsy result (``None``, ``False``, an empty list) means "not yet", so
        ``wait_for(lambda s: s.points("m"))`` waits for at least one point. On
        timeout raises AssertionError with ``summary()`` of what was received.
        """
        __tracebackhide__ = True  # point pytest at the caller, not this loop
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                version = self._version
            result = predicate(self)
            if result:
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                label = what or getattr(predicate, "__name__", "predicate")
                raise AssertionError(
                    f"timed out after {timeout:.1f}s waiting for {label} "
                    f"(last result {result!r})\n{self.summary()}"
                )
            with self._cond:
                self._cond.wait_for(partial(self._changed_since, version), timeout=remaining)

    def _changed_since(self, version: int) -> bool:
        return self._version != version

    def summary(self, max_series: int = 40) -> str:
        """Human-readable digest of what arrived, for assertion messages."""
        with self._cond:
            received = list(self._received)
            points = list(self._points)
            logs = list(self._logs)
            names = set(self._names)
            context = list(self._context)
        counts = Counter((r.signal, r.accepted) for r in received)
        lines = [f"{self.name}: {len(received)} request(s)"]
        lines += [
            f"  {signal}: {n} {'accepted' if ok else 'REJECTED'}"
            for (signal, ok), n in sorted(counts.items())
        ]
        latest: dict[tuple[str, str], Point] = {}
        for p in points:
            latest[(p.metric, repr(sorted(p.attributes.items())))] = p
        lines.append(f"  metric names ({len(names)}): {sorted(names)}")
        for (metric, attrs), p in sorted(latest.items())[:max_series]:
            lines.append(f"    {metric}{attrs} = {p.value!r} {p.unit} ({p.kind})")
        if len(latest) > max_series:
            lines.append(f"    ... {len(latest) - max_series} more series")
        lines.append(f"  log events ({len(logs)}):")
        lines += [
            f"    {e.event_name or '<no event_name>'} sev={e.severity_number} "
            f"attrs={dict(e.attributes)} body={e.body[:80]!r}"
            for e in logs[-max_series:]
        ]
        lines += [provider() for provider in context]
        return "\n".join(lines)
