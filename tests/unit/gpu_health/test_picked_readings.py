"""The slow read's per-reading loops go over the readings they use only, picked in C calls:
counter restarts (``CounterRestarts.observe``), throttles and conditions
(``PolledWatcher.update``) and the gray watch's rate history. Over random reads (the watched
metrics among many others, counters that drop, throttles that start and end, violation time
that grows, conditions that come and go), each must answer what its old loop over every
reading answers (kept below as the reference).
"""

from __future__ import annotations

import random

from gpu_otel_agent.gpu_health import polled
from gpu_otel_agent.gpu_health.debounce import DebounceSettings
from gpu_otel_agent.gpu_health.gray import RATE_METRICS
from gpu_otel_agent.gpu_health.polled import Condition, PolledWatcher, Throttle
from gpu_otel_agent.gpu_health.watch import GrayWatch
from gpu_otel_agent.model.counters import COUNTER_METRICS, CounterKey, CounterRestarts
from gpu_otel_agent.model.snapshot import Reading

OTHERS = ("hw.temperature", "gpu.nvlink.link.state", "hw.gpu.utilization", "hw.power")
COUNTERS = sorted(COUNTER_METRICS)[:6]
REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "gpu_idle")


def _read(rng: random.Random) -> tuple[Reading, ...]:
    readings = [Reading(rng.choice(OTHERS), rng.random(), (("n", rng.randrange(4)),))
                for _ in range(rng.randrange(0, 40))]
    readings += [Reading(metric, rng.choice((5, 4, 100, 3.5, 0)), (("n", rng.randrange(2)),),
                         rng.choice((0, 7)))
                 for metric in rng.sample(COUNTERS, rng.randrange(0, len(COUNTERS)))]
    readings += [Reading(rng.choice(sorted(RATE_METRICS)), rng.randrange(9))
                 for _ in range(rng.randrange(0, 4))]
    readings += [Reading("gpu.clock.throttle", int(rng.random() < 0.3),
                         (("gpu.clock.throttle.reason", reason),))
                 for reason in rng.sample(REASONS, rng.randrange(0, len(REASONS)))]
    readings += [Reading("gpu.violation.time", rng.uniform(0, 10) + step,
                         (("gpu.violation.policy", policy),))
                 for step, policy in enumerate(("power", "thermal", "other"))
                 if rng.random() < 0.7]
    readings += [Reading(metric, int(rng.random() < 0.3)) for metric in polled.CONDITIONS
                 if rng.random() < 0.5]
    rng.shuffle(readings)
    return tuple(readings)


class _OldRestarts:
    """``CounterRestarts.observe`` as it was: every reading looked up."""

    def __init__(self) -> None:
        self.last: dict[CounterKey, tuple[float, int]] = {}
        self.starts: dict[CounterKey, int] = {}
        self.restarts = 0

    def observe(self, readings: tuple[Reading, ...], time_ns: int) -> bool:
        changed = False
        for reading in readings:
            if reading.metric not in COUNTER_METRICS:
                continue
            key = (reading.metric, reading.attributes)
            before = self.last.get(key)
            if before is not None and reading.value < before[0]:
                self.starts[key] = before[1] + 1
                self.restarts += 1
                changed = True
            self.last[key] = (reading.value, reading.time_ns or time_ns)
        return changed


class _OldPolled:
    """``PolledWatcher.update`` as it was: every reading compared."""

    def __init__(self) -> None:
        self.throttling: dict[str, bool] = {}
        self.violation: dict[str, float] = {}
        self.conditions: dict[str, bool] = {}

    def update(self, readings: tuple[Reading, ...]) -> tuple[list[Throttle], list[Condition]]:
        throttles: list[Throttle] = []
        conditions: list[Condition] = []
        reasons: dict[str, bool] = {}
        violation: dict[str, float] = {}
        for reading in readings:
            if reading.metric == "gpu.clock.throttle":
                reason = str(dict(reading.attributes).get("gpu.clock.throttle.reason", ""))
                if reason in polled.SLOWDOWN_REASONS:
                    reasons[reason] = bool(reading.value)
            elif reading.metric == "gpu.violation.time":
                policy = str(dict(reading.attributes).get("gpu.violation.policy", ""))
                if policy in polled._POLICY_REASONS:
                    violation[policy] = float(reading.value)
            elif reading.metric in polled.CONDITIONS:
                cause, text = polled.CONDITIONS[reading.metric]
                active = bool(reading.value)
                if self.conditions.get(cause, False) != active:
                    conditions.append(Condition(cause, active, text))
                self.conditions[cause] = active
        for reason, active in sorted(reasons.items()):
            if active != self.throttling.get(reason, False):
                throttles.append(Throttle(reason, "start" if active else "end"))
        for policy, seconds in sorted(violation.items()):
            before = self.violation.get(policy)
            explained = any(reasons.get(r) or self.throttling.get(r)
                            for r in polled._POLICY_REASONS[policy])
            if before is not None and seconds > before and not explained:
                throttles.append(Throttle(f"{policy}_violation", "transient", seconds - before))
        self.throttling.update(reasons)
        self.violation.update(violation)
        return throttles, conditions


def test_picked_loops_answer_what_the_loops_over_every_reading_did() -> None:
    rng = random.Random(3)
    restarts, old_restarts = CounterRestarts(1), _OldRestarts()
    watcher, old_watcher = PolledWatcher(), _OldPolled()
    answers: list[object] = []
    for step in range(600):
        readings = _read(rng)
        changed = restarts.observe(readings, step)
        assert changed == old_restarts.observe(readings, step)
        assert restarts.starts() == old_restarts.starts
        assert restarts.restarts == old_restarts.restarts
        answer = watcher.update(readings)
        assert answer == old_watcher.update(readings)
        answers.append(answer)
    assert restarts.restarts > 50
    assert sum(bool(throttles) for throttles, _ in answers) > 50
    assert sum(bool(conditions) for _, conditions in answers) > 50


def test_the_rate_history_keeps_the_rate_counters_in_order() -> None:
    rng = random.Random(4)
    watch = GrayWatch(DebounceSettings(degrade_after=3, clear_after=1))
    for step in range(200):
        readings = _read(rng)
        watch.update(readings, float(step), None, [])
        kept = watch._history[-1]
        expected = {(r.metric, r.attributes): float(r.value) for r in readings
                    if r.metric in RATE_METRICS}
        assert kept._values == expected and list(kept._values) == list(expected)
