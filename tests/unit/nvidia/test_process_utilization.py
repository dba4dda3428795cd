"""The reading rules of nvmlDeviceGetProcessUtilization's answer, on a controlled clock."""

from __future__ import annotations

from gpu_otel_agent.plugins.nvidia.process_utilization import (
    IDLE,
    SAMPLE_PERIOD_US,
    ProcessUtilization,
    UtilSample,
)


class Clock:
    def __init__(self) -> None:
        self.us = 1_700_000_000_000_000

    def __call__(self) -> int:
        return self.us


def _general(figures: tuple[tuple[str, float], ...]) -> float | None:
    return dict(figures).get("general")


def test_newest_sample_wins_in_any_order() -> None:
    clock = Clock()
    older = UtilSample.from_percent(7, clock.us - 300_000, 80, 0, 0)
    newer = UtilSample.from_percent(7, clock.us - 100_000, 20, 0, 0)
    for answer in ([older, newer], [newer, older]):
        util = ProcessUtilization(clock)
        util.add(answer)
        assert _general(util.figures({7}, answered=True)[7]) == 0.2
        assert util.cursor == newer.time_us


def test_a_process_without_a_fresh_sample_is_idle_not_its_last_figure() -> None:
    clock = Clock()
    util = ProcessUtilization(clock)
    util.add([UtilSample.from_percent(7, clock.us, 90, 10, 0)])
    assert _general(util.figures({7, 8}, answered=True)[7]) == 0.9
    # NOT_FOUND (nothing newer) within the sample period: the sample still describes it.
    clock.us += SAMPLE_PERIOD_US // 2
    assert _general(util.figures({7, 8}, answered=True)[7]) == 0.9
    # Past the sample period with nothing new: the process was idle.
    clock.us += SAMPLE_PERIOD_US
    assert util.figures({7, 8}, answered=True) == {7: IDLE, 8: IDLE}


def test_a_failed_read_leaves_unknown_processes_absent() -> None:
    clock = Clock()
    util = ProcessUtilization(clock)
    util.add([UtilSample.from_percent(7, clock.us, 50, 0, 0)])
    assert util.figures({7, 8}, answered=False) == {7: util.figures({7}, True)[7], 8: ()}


def test_a_process_that_left_is_forgotten() -> None:
    clock = Clock()
    util = ProcessUtilization(clock)
    util.add([UtilSample.from_percent(7, clock.us, 50, 0, 0)])
    util.figures(set(), answered=True)
    assert util.figures({7}, answered=True) == {7: IDLE}
