"""The series an OTLP export no longer carries, so the encoder can mark their end.

A Prometheus scrape marks a series stale at the first scrape it is missing from. An OTLP push
has no such thing unless the sender says so: a data point flagged ``FLAG_NO_RECORDED_VALUE``
(metrics.proto ``DataPointFlags``), which Prometheus's OTLP translator -- and Mimir's, the same
code -- stores as a staleness marker. Without it a withdrawn series (a lost GPU's power, an
exited process's memory) stays visible for the backend's 5-minute lookback, and an alert that
waits for its absence (``GpuLost``) fires 5 minutes late.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from operator import attrgetter

from gpu_otel_agent.export.metrics.series import Points, Run, RunShape, ShapedRun, run_shapes
from gpu_otel_agent.model.snapshot import Attributes

_SERIES = attrgetter("attributes", "start_time_ns")
# What holds a run's series: its shape (``ShapedRun``) or its list of points. Both are never
# changed once made, and series.py hands the same object while the series are the same.
_Key = Points | RunShape


def _key(run: Run) -> _Key:
    return run.shape if isinstance(run, ShapedRun) else run


def _series(keys: Sequence[_Key]) -> dict[Attributes, int]:
    """The series of runs with these keys, as one dict: attributes -> counter start (a
    series in two runs keeps its first place and its last start)."""
    series: dict[Attributes, int] = {}
    for key in keys:
        series.update(zip(key.attributes, key.starts, strict=True) if isinstance(key, RunShape)
                      else map(_SERIES, key))
    return series


class SeriesEnds:
    """Remembers each export's series (by metric name, the objects that hold its runs' series)
    and tells which of the last export's are missing from this one. One per encoder: per
    destination.

    Only the keys are held, never a set of the series: a metric whose keys are the same
    objects has the same series, and none ended; only for a metric whose keys changed are
    the series of the last and this export collected, and dropped once compared (a set per
    run and one per metric, held from export to export, cost 0.8 MiB at 8 x 2,048)."""

    def __init__(self) -> None:
        self._last: dict[str, Sequence[_Key]] = {}

    def unchanged(self) -> None:
        """This export's runs are the last call's layout (``series.SeriesLayout``, which
        ended none): none ended, and the state stays as it is, in a new dict, as ``ended``
        makes it. Measured, not understood: with the earlier state (sets of series per run
        and per metric), keeping the very dicts of the last ``ended`` across kept exports
        raised 8 x 2,048's peak RSS by 1.0-1.7 MiB in three bench runs; a new dict is one
        entry per metric, so it stays so until a run shows it is not needed."""
        self._last = dict(self._last)

    def ended(self, grouped: Mapping[str, list[Run]]) -> dict[str, list[tuple[Attributes, int]]]:
        """Series of the last call that ``grouped`` lacks, as (attributes, start), by name."""
        current: dict[str, Sequence[_Key]] = {}
        for name, runs in grouped.items():
            # In a steady state every run is shaped: their shapes in a C call.
            shapes = run_shapes(runs)
            current[name] = shapes if shapes is not None else list(map(_key, runs))
        ended: dict[str, list[tuple[Attributes, int]]] = {}
        for name, held in self._last.items():
            keys = current.get(name)
            if keys is not None and len(keys) == len(held) \
                    and all(map(operator.is_, keys, held)):
                continue  # the same series
            now = _series(keys) if keys else {}
            gone = [(attributes, start) for attributes, start in _series(held).items()
                    if attributes not in now]
            if gone:
                ended[name] = gone
        self._last = current
        return ended
