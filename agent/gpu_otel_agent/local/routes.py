"""The local endpoint's route table: one line per route, each a read-only view of the agent.

A feature adds a route by adding what it reads to :class:`Sources` (filled in by
``runtime/agent.py``) and one entry to :func:`build_routes`; the protocol is in ``endpoint.py``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from gpu_otel_agent.local.endpoint import Json, Route
from gpu_otel_agent.local.health import health_view
from gpu_otel_agent.local.recent_events import EventRing
from gpu_otel_agent.local.views import events_view, snapshot_view
from gpu_otel_agent.model.snapshot import SnapshotStore


@dataclass(frozen=True)
class Sources:
    """What the routes read: state the agent holds anyway, never a GPU library."""

    store: SnapshotStore
    events: EventRing | None  # None: health events are off
    agent: Mapping[str, Any]  # who serves: version, pid, node, socket (static)


def _snapshot(sources: Sources, query: Mapping[str, str]) -> Json:
    """``/v1/snapshot``: every device with readings, health state and processes."""
    return snapshot_view(sources.store.current(time.time_ns()), dict(sources.agent))


def _events(sources: Sources, query: Mapping[str, str]) -> Json:
    """``/v1/events?after=SEQ``: the recent health events newer than SEQ (default: all)."""
    text = query.get("after", "0")
    try:
        after = int(text)
    except ValueError:
        raise ValueError(f"after={text!r}: expected a sequence number") from None
    if sources.events is None:
        return {"last_seq": 0, "missed": 0, "events": [], "health_events": False}
    return {**events_view(sources.events.after(after)), "health_events": True}


def _health(sources: Sources, query: Mapping[str, str]) -> Json:
    """``/v1/health``: per GPU, per subsystem, the state and the reasons (``gpu-agent npd``)."""
    return health_view(sources.store.current(time.time_ns()))


def build_routes(sources: Sources) -> dict[str, Route]:
    """The route table: path -> handler."""
    return {
        "/v1/snapshot": partial(_snapshot, sources),
        "/v1/events": partial(_events, sources),
        "/v1/health": partial(_health, sources),
    }
