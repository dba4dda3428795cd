"""The series an OTLP export no longer carries, so the encoder can mark their end.

A Prometheus scrape marks a series stale at the first scrape it is missing from. An OTLP push
has no such thing unless the sender says so: a data point flagged ``FLAG_NO_RECORDED_VALUE``
(metrics.proto ``DataPointFlags``), which Prometheus's OTLP translator -- and Mimir's, the same
code -- stores as a staleness marker. Without it a withdrawn series (a lost GPU's power, an
exited process's memory) stays visible for the backend's 5-minute lookback, and an alert that
waits for its absence (``GpuLost``) fires 5 minutes late.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpu_otel_agent.export.metrics.series import Run
from gpu_otel_agent.model.snapshot import Attributes


class SeriesEnds:
    """Remembers each export's series (metric name -> attributes -> counter start) and tells
    which of the last export's are missing from this one. One per encoder: per destination."""

    def __init__(self) -> None:
        self._last: dict[str, dict[Attributes, int]] = {}
        # A run of an unchanged sample is the same list at every export (series.series_runs):
        # its series are collected once, not point by point at every export.
        self._keys: dict[int, tuple[Run, dict[Attributes, int]]] = {}

    def ended(self, grouped: Mapping[str, list[Run]]) -> dict[str, list[tuple[Attributes, int]]]:
        """Series of the last call that ``grouped`` lacks, as (attributes, start), by name."""
        current: dict[str, dict[Attributes, int]] = {}
        keys: dict[int, tuple[Run, dict[Attributes, int]]] = {}
        for name, runs in grouped.items():
            series: dict[Attributes, int] = {}
            for run in runs:
                cached = self._keys.get(id(run))
                if cached is None or cached[0] is not run:
                    cached = (run, {p.attributes: p.start_time_ns for p in run})
                keys[id(run)] = cached
                series.update(cached[1])
            current[name] = series
        ended: dict[str, list[tuple[Attributes, int]]] = {}
        for name, last in self._last.items():
            now = current.get(name, {})
            gone = [(attributes, start) for attributes, start in last.items()
                    if attributes not in now]
            if gone:
                ended[name] = gone
        self._last, self._keys = current, keys
        return ended
