"""``SeriesEnds`` holds only the objects that hold each run's series, not sets of the series
(series_ends.py says why): it must tell exactly what the set-keeping version told, in the
same order, over random exports (shapes kept and replaced, point lists kept and rebuilt,
series shared between runs with other starts, metrics coming and going)."""

from __future__ import annotations

import operator
import random
from collections.abc import Mapping

from gpu_otel_agent.export.metrics.series import (
    Points,
    Run,
    RunShape,
    SeriesPoint,
    ShapedRun,
    run_shapes,
)
from gpu_otel_agent.export.metrics.series_ends import SeriesEnds
from gpu_otel_agent.model.snapshot import Attributes


# The version before (main ce6ebd7), kept as the reference, renamed.
class _ReferenceEnds:
    """Remembers each export's series (metric name -> attributes -> counter start) and tells
    which of the last export's are missing from this one. One per encoder: per destination."""

    def __init__(self) -> None:
        self._last: dict[str, dict[Attributes, int]] = {}
        # A run of an unchanged sample is the same list at every export (series.series_runs),
        # and a run of a sample of an unchanged shape has the same RunShape: its series are
        # collected once, not point by point at every export.
        self._keys: dict[int, tuple[Points | RunShape, dict[Attributes, int]]] = {}
        # Each metric's series sets of the last call, as collected, and their union: a metric
        # whose sets are all the same objects has the same series, and none ended.
        self._parts: dict[str, list[dict[Attributes, int]]] = {}
        # Each metric's run shapes of the last call, where all its runs had one: the same
        # shapes are the same series (a new sample of the fast group every export).
        self._shapes: dict[str, list[RunShape]] = {}

    def ended(self, grouped: Mapping[str, list[Run]]) -> dict[str, list[tuple[Attributes, int]]]:
        """Series of the last call that ``grouped`` lacks, as (attributes, start), by name."""
        current: dict[str, dict[Attributes, int]] = {}
        keys: dict[int, tuple[Points | RunShape, dict[Attributes, int]]] = {}
        parts: dict[str, list[dict[Attributes, int]]] = {}
        unchanged: set[str] = set()
        last_parts, last_shapes = self._parts, self._shapes
        shapes: dict[str, list[RunShape]] = {}
        for name, runs in grouped.items():
            now_shapes = run_shapes(runs)
            if now_shapes is not None:
                shapes[name] = now_shapes
                if last_shapes.get(name) == now_shapes:  # RunShape compares by identity
                    current[name], parts[name] = self._last[name], last_parts[name]
                    unchanged.add(name)
                    continue
            sets: list[dict[Attributes, int]] = []
            for run in runs:
                key: Points | RunShape
                if isinstance(run, ShapedRun):
                    key = run.shape
                    cached = self._keys.get(id(key))
                    if cached is None or cached[0] is not key:
                        cached = (key, dict(key.series))
                else:
                    key = run
                    cached = self._keys.get(id(key))
                    if cached is None or cached[0] is not key:
                        cached = (key, {p.attributes: p.start_time_ns for p in run})
                keys[id(key)] = cached
                sets.append(cached[1])
            parts[name] = sets
            held = last_parts.get(name)
            if held is not None and len(held) == len(sets) \
                    and all(map(operator.is_, held, sets)):
                current[name] = self._last[name]
                unchanged.add(name)
                continue
            series: dict[Attributes, int] = {}
            for one in sets:
                series.update(one)
            current[name] = series
        ended: dict[str, list[tuple[Attributes, int]]] = {}
        for name, last in self._last.items():
            if name in unchanged:
                continue
            now = current.get(name, {})
            gone = [(attributes, start) for attributes, start in last.items()
                    if attributes not in now]
            if gone:
                ended[name] = gone
        self._last, self._keys, self._parts, self._shapes = current, keys, parts, shapes
        return ended


ATTRIBUTES = [(("hw.id", f"GPU-{i % 3}"), ("process.pid", i)) for i in range(12)]


def _shape(rng: random.Random) -> RunShape:
    chosen = rng.sample(ATTRIBUTES, rng.randrange(0, 5))
    return RunShape(tuple(chosen), tuple(rng.randrange(3) for _ in chosen),
                    tuple(True for _ in chosen))


def _points(rng: random.Random) -> Points:
    chosen = rng.sample(ATTRIBUTES, rng.randrange(0, 5))
    return [SeriesPoint(a, rng.randrange(3), 5, 1.0) for a in chosen]


def _run(rng: random.Random, held: list[Run]) -> Run:
    choice = rng.random()
    if held and choice < 0.5:  # the last export's run, or a new sample of its shape
        run = rng.choice(held)
        if isinstance(run, ShapedRun) and choice < 0.3:
            return ShapedRun(run.shape, [2] * len(run), [7] * len(run))
        return run
    if choice < 0.75:
        shape = _shape(rng)
        return ShapedRun(shape, [1] * len(shape.series), [6] * len(shape.series))
    return _points(rng)


def test_the_same_ends_as_the_set_keeping_version() -> None:
    rng = random.Random(41)
    exports_with_ends = 0
    for _ in range(40):
        new, reference = SeriesEnds(), _ReferenceEnds()
        held: dict[str, list[Run]] = {}
        for _ in range(60):
            grouped: dict[str, list[Run]] = {}
            for name in sorted(rng.sample(["a", "b", "c", "d", "e"], rng.randrange(6))):
                if name in held and rng.random() < 0.4:
                    grouped[name] = held[name]  # the metric's runs unchanged
                else:
                    grouped[name] = [_run(rng, held.get(name, []))
                                     for _ in range(rng.randrange(4))]
            held = grouped
            expected = reference.ended(grouped)
            got = new.ended(grouped)
            assert list(got.items()) == list(expected.items())
            exports_with_ends += bool(expected)
    assert exports_with_ends > 400  # of 2,400: the comparison is not of empty answers
