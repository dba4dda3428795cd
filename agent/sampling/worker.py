"""One daemon thread per device, so a device whose calls hang stalls only itself.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit; a thread stuck
in a hung NVML call would then hold up shutdown, so the worker uses a daemon thread of its own.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from gpu_otel_agent.runtime.costs import SAMPLING, Stage
from gpu_otel_agent.runtime.threads import NamedThread

T = TypeVar("T")
_Job = tuple[Callable[[], object], "Future[object]"]


class DeviceWorker:
    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._thread = NamedThread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """True while a job runs; samplers skip a cycle rather than queue behind a hang."""
        with self._lock:
            return self._pending > 0

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            self._pending += 1
        self._jobs.put((fn, future))  # type: ignore[arg-type]
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            if future.set_running_or_notify_cancel():
                try:
                    with Stage(SAMPLING):
                        result = fn()
                except BaseException as exc:  # handed to the awaiting task, not lost
                    with self._lock:
                        self._pending -= 1
                    future.set_exception(exc)
                    continue
                with self._lock:
                    self._pending -= 1
                future.set_result(result)
            else:
                with self._lock:
                    self._pending -= 1
