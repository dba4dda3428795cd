"""The health engine's parts: XID catalog, state machine, storm control, de-duplication,
polled transitions."""

from __future__ import annotations

from gpu_otel_agent.gpu_health.dedup import CrossSourceDedup
from gpu_otel_agent.gpu_health.polled import PolledWatcher
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.state import HealthMachine
from gpu_otel_agent.gpu_health.storm import StormControl, StormKey
from gpu_otel_agent.gpu_health.xid import ACTIONS, CATALOG, lookup
from gpu_otel_agent.model.snapshot import HealthState, Reading


def test_catalog_covers_the_critical_codes_with_actions() -> None:
    for code, state in ((79, HealthState.FAILED), (48, HealthState.DEGRADED),
                        (119, HealthState.FAILED), (120, HealthState.FAILED),
                        (95, HealthState.FAILED), (13, HealthState.OK), (31, HealthState.OK)):
        assert lookup(code).state is state, code
    assert lookup(79).severity is Severity.FATAL
    assert all(info.action in ACTIONS for info in CATALOG.values())
    assert all(info.code == code for code, info in CATALOG.items())
    assert len({info.name for info in CATALOG.values()}) == len(CATALOG)


def test_unknown_code_is_still_reported_with_what_is_known() -> None:
    info = lookup(9999)
    assert (info.code, info.name, info.action) == (9999, "XID_9999", "CHECK_CATALOG")
    assert info.state is HealthState.OK


def test_state_is_the_worst_condition_and_a_reset_clears_sticky_ones() -> None:
    machine = HealthMachine()
    change = machine.set("xid:48", HealthState.DEGRADED, "XID 48")
    assert change is not None and (change.previous, change.current) == (
        HealthState.OK, HealthState.DEGRADED)
    change = machine.set("lost", HealthState.FAILED, "lost")
    assert change is not None and change.current is HealthState.FAILED
    assert machine.set("unresponsive", HealthState.DEGRADED, "hung") is None  # still failed
    change = machine.clear("lost", "back")
    assert change is not None and change.current is HealthState.DEGRADED
    assert change.reason in ("XID 48", "hung")  # names what still holds it down
    machine.clear("unresponsive", "answers")
    assert machine.state is HealthState.DEGRADED  # the XID holds until a reset
    change = machine.reset("reset")
    assert change is not None and change.current is HealthState.OK


def test_storm_first_out_then_one_summary_per_window_then_quiet_again() -> None:
    storm = StormControl(window_s=1.0)
    key = StormKey("gpu", "gpu.xid", code=13)
    assert storm.admit(key, 0.0)
    assert not any(storm.admit(key, 0.001 * i) for i in range(1, 1000))
    assert storm.due(0.5) == []
    (summary,) = storm.due(1.0)
    assert summary.count == 999
    assert not storm.admit(key, 1.2)  # the storm goes on: counted into the next window
    assert [s.count for s in storm.due(2.2)] == [1]
    assert storm.due(3.3) == []  # a quiet window: forgotten
    assert storm.admit(key, 3.4)  # a new occurrence goes out at once
    assert storm.admit(StormKey("gpu", "gpu.xid", code=79), 3.4)  # other codes: independent
    # the same code on one MIG instance of the GPU is a storm of its own
    assert storm.admit(StormKey("gpu", "gpu.xid", code=13, scope="MIG-1"), 3.5)


def test_storm_next_due_is_the_end_of_the_earliest_window_with_a_count() -> None:
    storm = StormControl(window_s=1.0)
    a, b = StormKey("gpu", "a"), StormKey("gpu", "b")
    assert storm.admit(a, 0.0) and storm.admit(b, 0.5)
    assert storm.next_due() is None  # first occurrences went out: nothing to summarise
    assert not storm.admit(b, 0.6)
    assert storm.next_due() == 1.5
    assert not storm.admit(a, 0.7)
    assert storm.next_due() == 1.0
    assert [s.key for s in storm.due(1.0)] == [a]
    assert storm.next_due() == 1.5
    storm.due(1.5)
    assert storm.next_due() is None


def test_storm_keys_are_bounded() -> None:
    storm = StormControl(window_s=1.0, max_keys=2)
    assert storm.admit("a", 0.0) and storm.admit("b", 0.0)
    assert not storm.admit("c", 0.1)
    assert storm.admit("c", 1.5)  # once the old windows are over


def test_a_fault_seen_by_two_sources_counts_once_repeats_from_one_source_all_count() -> None:
    dedup = CrossSourceDedup(window_s=2.0)
    assert not dedup.is_duplicate("g", 43, "nvml", 0.0)
    assert dedup.is_duplicate("g", 43, "kmsg", 0.5)
    # A second occurrence: new from whichever source reports it first, then matched.
    assert not dedup.is_duplicate("g", 43, "kmsg", 0.6)
    assert dedup.is_duplicate("g", 43, "nvml", 0.7)
    # Repeats from one source never match each other.
    assert not any(dedup.is_duplicate("g", 45, "nvml", 1.0 + i / 10) for i in range(5))
    assert not dedup.is_duplicate("g", 43, "kmsg", 0.8)  # nothing left to match: new
    assert not dedup.is_duplicate("g", 79, "kmsg", 10.0)
    assert not dedup.is_duplicate("g", 79, "nvml", 13.0)  # outside the window: new


def test_polled_throttle_start_end_and_conditions() -> None:
    watcher = PolledWatcher()

    def slow(thermal: int, pending: int, power_s: float) -> tuple[Reading, ...]:
        return (
            Reading("gpu.clock.throttle", thermal,
                    (("gpu.clock.throttle.reason", "hw_thermal_slowdown"),)),
            Reading("gpu.clock.throttle", 1, (("gpu.clock.throttle.reason", "gpu_idle"),)),
            Reading("gpu.memory.page_retirement.pending", pending),
            Reading("gpu.violation.time", power_s, (("gpu.violation.policy", "power"),)),
        )

    throttles, conditions = watcher.update(slow(0, 0, 1.0))
    assert throttles == [] and conditions == []
    throttles, conditions = watcher.update(slow(1, 1, 1.0))
    assert [(t.reason, t.state) for t in throttles] == [("hw_thermal_slowdown", "start")]
    assert [(c.cause, c.active) for c in conditions] == [("retired_pages_pending", True)]
    throttles, _ = watcher.update(slow(0, 1, 1.0))
    assert [(t.reason, t.state) for t in throttles] == [("hw_thermal_slowdown", "end")]
    # Power violation time grew with no power reason ever seen: a short slowdown.
    throttles, conditions = watcher.update(slow(0, 0, 1.5))
    assert [(t.reason, t.state, t.seconds) for t in throttles] == [
        ("power_violation", "transient", 0.5)]
    assert [(c.cause, c.active) for c in conditions] == [("retired_pages_pending", False)]
