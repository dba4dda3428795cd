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


def test_percentages_read_as_samples_read() -> None:
    """The sampler's path (records as the answer's bytes give them) keeps what the sample
    path keeps: the same cursor and figures, answer after answer, in any order, with
    repeated PIDs, stale samples and percentages past 100."""
    import random

    from gpu_otel_agent.plugins.nvidia.process_utilization import FIGURES_HELD, figures_of

    rng = random.Random(41)
    clock = Clock()
    by_samples, by_records = ProcessUtilization(clock), ProcessUtilization(clock)
    for _ in range(200):
        clock.us += rng.choice([0, 250_000, 1_500_000])
        answer = [(rng.randint(1, 12), clock.us - rng.randint(0, 2_000_000),
                   rng.choice([0, 1, 50, 100, 101, 2**32 - 1]), rng.randint(0, 3),
                   rng.randint(0, 3)) for _ in range(rng.randint(0, 20))]
        by_samples.add([UtilSample.from_percent(*record) for record in answer])
        by_records.add_percentages(answer)
        assert by_records.cursor == by_samples.cursor
        listed = set(rng.sample(range(1, 13), rng.randint(0, 12)))
        answered = rng.random() < 0.8
        assert by_records.figures(listed, answered) == by_samples.figures(listed, answered)
    # Each triple's figures are the fractions, capped; made once, shared, and bounded.
    assert figures_of(150, 7, 0) == (("general", 1.0), ("encoder", 0.07), ("decoder", 0.0))
    assert figures_of(150, 7, 0) is figures_of(150, 7, 0)
    for sm in range(2 * FIGURES_HELD):
        assert figures_of(sm, 0, 0)[0] == ("general", min(sm, 100) / 100.0)
    from gpu_otel_agent.plugins.nvidia import process_utilization

    assert len(process_utilization._figures) <= FIGURES_HELD
