"""One daemon thread per device, so a device whose calls hang stalls only itself.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit; a thread stuck
in a hung NVML call would then hold up shutdown, so the worker uses a daemon thread of its own.

Jobs submitted from the event loop in one loop iteration reach the thread together, at the end
of that iteration: groups that fall due at the same moment (at the defaults the fast and
processes groups every 5 s, gpm every 10 s, slow every 30 s, all on one grid) wake the thread
once, not once per group. A thread wake-up costs more than most reads it serves (a cold cache
and a contended GIL: measured at ~6 context switches per job with eight GPUs due at once).
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from gpu_otel_agent.runtime.costs import SAMPLING, Stage
from gpu_otel_agent.runtime.threads import NamedThread
from gpu_otel_agent.sampling.relay import Relay, Round, Settle

T = TypeVar("T")
_Job = tuple[Callable[[], object], "Future[object]"]
_Batch = tuple[list[_Job], Round | None]


class DeviceWorker:
    def __init__(self, name: str, relay: Relay | None = None) -> None:
        """``relay``: shared by the devices of one node, so those due together run in turn
        (``sampling.relay``); without it a device's jobs go to its thread at once."""
        self._relay = relay
        self._jobs: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._gathering: list[_Job] | None = None  # this loop iteration's jobs, not yet handed
        self._thread = NamedThread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """True while a job runs; samplers skip a cycle rather than queue behind a hang."""
        with self._lock:
            return self._pending > 0

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the device thread. From the event loop, the job leaves with the rest
        of this loop iteration's jobs; from anywhere else, at once."""
        future: Future[T] = Future()
        job: _Job = (fn, future)  # type: ignore[assignment]
        with self._lock:
            self._pending += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._jobs.put(([job], None))
            return future
        if self._gathering is None:
            self._gathering = []
            loop.call_soon(self._hand_over)
        self._gathering.append(job)
        return future

    def _hand_over(self) -> None:
        jobs, self._gathering = self._gathering, None
        if not jobs:
            return
        if self._relay is None:
            self._jobs.put((jobs, None))
        else:
            self._relay.add(lambda baton: self._jobs.put((jobs, baton)))

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while True:
            batch = self._jobs.get()
            if batch is None:
                return
            jobs, baton = batch
            results = [self._run_one(job) for job in jobs]
            if baton is None:
                for result in results:
                    result()
            else:
                baton.settle(results)  # the loop gets them when the relay ends
                baton.next()  # the next device's turn

    def _run_one(self, job: _Job) -> Settle:
        """Runs the job; returns what sets its future (the caller chooses when)."""
        fn, future = job
        if not future.set_running_or_notify_cancel():
            with self._lock:
                self._pending -= 1
            return _nothing
        try:
            with Stage(SAMPLING):
                result = fn()
        except BaseException as exc:  # handed to the awaiting task, not lost
            with self._lock:
                self._pending -= 1
            return functools.partial(future.set_exception, exc)
        with self._lock:
            self._pending -= 1
        return functools.partial(future.set_result, result)


def _nothing() -> None:
    """A cancelled job's future is already settled."""
