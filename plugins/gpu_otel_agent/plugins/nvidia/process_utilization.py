"""Per-process utilization as ``nvmlDeviceGetProcessUtilization`` documents it (nvml.h).

NVML returns "one utilization sample structure ... per process running, that had some non-zero
utilization during the last sample period", each with "the CPU timestamp at which the samples
were recorded", only samples newer than ``lastSeenTimeStamp``, and ``NVML_ERROR_NOT_FOUND`` when
there are none. Three consequences, each of which a naive reader gets wrong:

- A process absent from the answer was idle: its utilization is 0, not its last figure (or a
  process that goes idle would keep its last busy figure until it exits).
- The driver's buffer can hold several samples of one process; the answer has no promised
  order, so the newest sample (largest timestamp) wins, not the last one in the array.
- ``NOT_FOUND`` means "nothing newer than the cursor"; a sample read earlier still describes the
  process while it is younger than the sample period. Older than that, the process is idle.

The timestamps are CPU time in microseconds since the Unix epoch (what nvitop compares them
with too), so freshness is judged against the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from gpu_otel_agent.model.process import TASK_DECODER, TASK_ENCODER, TASK_GENERAL

Figures = tuple[tuple[str, float], ...]

# NVML does not report the period of its per-process sample buffer. One second is the window
# nvitop reads with (time.time() - 1 s as lastSeenTimeStamp) and the interval nvidia-smi pmon
# reports per-process utilization at; the driver records samples more often than that (the
# simulated node every 0.5 s), so a busy process always has a sample younger than this.
SAMPLE_PERIOD_US = 1_000_000
IDLE: Figures = ((TASK_GENERAL, 0.0), (TASK_ENCODER, 0.0), (TASK_DECODER, 0.0))


# The figures of each (sm, enc, dec) percentage triple, made once and shared: a sample costs
# a dictionary look-up instead of three tuples and three divisions, and processes at the same
# percentages share one tuple (issue 41: a process's cost). Percentages are few (0..100 each
# in practice); a driver answering garbage cannot grow this past FIGURES_HELD. Every device
# thread uses it: each dict operation is atomic, and a race only makes one triple twice (equal).
FIGURES_HELD = 4096
_figures: dict[tuple[int, int, int], Figures] = {}


def figures_of(sm: int, enc: int, dec: int) -> Figures:
    """A sample's percentages as fractions by task (each capped at 100 %)."""
    key = (sm, enc, dec)
    figures = _figures.get(key)
    if figures is None:
        if len(_figures) >= FIGURES_HELD:
            _figures.clear()
        figures = _figures[key] = ((TASK_GENERAL, min(sm, 100) / 100.0),
                                   (TASK_ENCODER, min(enc, 100) / 100.0),
                                   (TASK_DECODER, min(dec, 100) / 100.0))
    return figures


def _wall_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class UtilSample:
    """One entry of nvmlDeviceGetProcessUtilization's answer, as fractions."""

    pid: int
    time_us: int
    figures: Figures

    @classmethod
    def from_percent(cls, pid: int, time_us: int, sm: int, enc: int, dec: int) -> UtilSample:
        return cls(pid, time_us, figures_of(sm, enc, dec))


class ProcessUtilization:
    """One device's read cursor and the newest sample of each process."""

    def __init__(self, clock_us: Callable[[], int] = _wall_us,
                 period_us: int = SAMPLE_PERIOD_US) -> None:
        self._clock_us = clock_us
        self._period_us = period_us
        self.cursor = 0  # lastSeenTimeStamp for the next call: the newest timestamp seen
        self._newest: dict[int, tuple[int, Figures]] = {}  # pid -> (time_us, figures)

    def add(self, samples: Iterable[UtilSample]) -> None:
        """Samples of one answer, in whatever order the driver gave them."""
        for sample in samples:
            self.cursor = max(self.cursor, sample.time_us)
            held = self._newest.get(sample.pid)
            if held is None or sample.time_us > held[0]:
                self._newest[sample.pid] = (sample.time_us, sample.figures)

    def add_percentages(self, records: Iterable[tuple[int, int, int, int, int]]) -> None:
        """:meth:`add` of ``UtilSample.from_percent(*record)`` for each record (pid, time_us,
        sm, enc, dec), as the answer's bytes give them, without a sample object each."""
        newest = self._newest
        cursor = self.cursor
        for pid, time_us, sm, enc, dec in records:
            if time_us > cursor:  # noqa: PLR1730 - a comparison, not a call, per sample
                cursor = time_us
            held = newest.get(pid)
            if held is None or time_us > held[0]:  # the newest wins, whatever the order
                newest[pid] = (time_us, figures_of(sm, enc, dec))
        self.cursor = cursor

    def figures(self, pids: Collection[int], answered: bool) -> dict[int, Figures]:
        """Each listed process's figures now.

        ``answered``: this cycle's call succeeded (samples or NOT_FOUND). If it failed, a process
        without a fresh sample is unknown (absent), not idle.
        """
        now = self._clock_us()
        self._newest = {pid: s for pid, s in self._newest.items() if pid in pids}
        out: dict[int, Figures] = {}
        for pid in pids:
            held = self._newest.get(pid)
            if held is not None and now - held[0] <= self._period_us:
                out[pid] = held[1]
            else:
                out[pid] = IDLE if answered else ()
        return out
