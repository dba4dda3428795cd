"""A started node plugin's bugs stay its own: the snapshot still forms, shutdown goes on."""

from __future__ import annotations

import logging
import time

import pytest

from gpu_otel_agent.model.snapshot import Reading, SnapshotStore
from gpu_otel_agent.runtime.node_plugins import RunningNodePlugin
from gpu_otel_agent.runtime.self_telemetry import SelfTelemetry

LOGGER = "gpu_otel_agent.runtime.node_plugins"


class _Buggy:
    def __init__(self) -> None:
        self.closed = False

    async def run(self) -> None:
        return None

    def readings(self) -> tuple[Reading, ...]:
        raise KeyError("a third party's bug")

    def close(self) -> None:
        self.closed = True
        raise RuntimeError("cannot detach")


def test_failing_readings_leave_the_snapshot_whole_and_are_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    running = RunningNodePlugin("buggy", _Buggy())
    telemetry = SelfTelemetry(time.time_ns())
    telemetry.add(lambda: (Reading("gpu_agent.scrapes", 1),))
    telemetry.add(running.readings)
    store = SnapshotStore()
    store.set_agent_source(telemetry.sample)
    for _ in range(3):  # every export and scrape reads it
        sample = telemetry.sample(time.time_ns())
        assert [r.metric for r in sample.readings] == ["gpu_agent.scrapes"]
        store.current(time.time_ns())
    reports = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(reports) == 1 and "buggy" in reports[0] and "KeyError" in reports[0], reports


def test_a_failing_close_is_reported_and_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    plugin = _Buggy()
    RunningNodePlugin("buggy", plugin).close()
    assert plugin.closed
    assert any("buggy failed to close" in r.getMessage() for r in caplog.records)
