"""Long-lived threads that cannot die of a bug: an unexpected exception is logged with its
cause, counted, and the thread's work started again after a back-off.

Why: a thread that ends on an exception ends quietly ("Exception in thread otlp-events" on
stderr) and what it did stops for good while the process looks healthy: one spool line with a
non-finite time ended the event sender on every start (issue 30). Each restart waits twice as
long as the one before (``FIRST_BACKOFF_S`` up to ``MAX_BACKOFF_S``, back to the start after
``HEALTHY_S`` of running), so a fault that repeats costs a line a minute, not a busy loop.
Restarts are counted per thread name in ``gpu_agent.thread.restarts``. The work must be
restartable (a loop that picks up where the shared state is); returning normally ends the
thread, as does an exception while ``stopping`` is set.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gpu_otel_agent.threads.named import NamedThread

log = logging.getLogger(__name__)
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 60.0
HEALTHY_S = 60.0

_restarts: dict[str, int] = {}
_restarts_lock = threading.Lock()


def restarts() -> dict[str, int]:
    """Restarts so far per thread name (a thread never restarted has no entry)."""
    with _restarts_lock:
        return dict(_restarts)


def _count(name: str) -> None:
    with _restarts_lock:
        _restarts[name] = _restarts.get(name, 0) + 1


class SupervisedThread(NamedThread):
    """A daemon :class:`NamedThread` whose ``target`` is run again when it raises."""

    def __init__(self, target: Callable[..., object], name: str, *,
                 args: tuple[Any, ...] = (), stopping: threading.Event | None = None,
                 first_backoff_s: float = FIRST_BACKOFF_S) -> None:
        super().__init__(name=name, daemon=True)
        self._work = target
        self._work_args = args
        self._stopping = stopping if stopping is not None else threading.Event()
        self._first_backoff_s = first_backoff_s

    def run(self) -> None:
        super().run()  # names the OS thread; the base ``target`` is None, so nothing else
        backoff = self._first_backoff_s
        while True:
            started = time.monotonic()
            try:
                self._work(*self._work_args)
                return
            except Exception as error:
                if self._stopping.is_set():
                    return
                if time.monotonic() - started >= HEALTHY_S:
                    backoff = self._first_backoff_s
                _count(self.name)
                log.error("thread %s failed (%s: %s); restarting it in %.1fs (counted in "
                          "gpu_agent.thread.restarts)", self.name, type(error).__name__,
                          error, backoff, exc_info=error)
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_S)
