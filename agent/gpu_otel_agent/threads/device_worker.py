"""One daemon thread per device, so a device whose calls hang stalls only itself.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit; a thread stuck
in a hung NVML call would then hold up shutdown, so the worker uses a daemon thread of its own.

Jobs submitted before the thread has taken the ones handed over earlier go with them: groups
that fall due at the same moment (at the defaults the fast and processes groups every 5 s, gpm
every 10 s, slow every 30 s, all on one grid) wake the thread once, not once per group. A
thread wake-up costs more than most reads it serves (a cold cache and a contended GIL).
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from gpu_otel_agent.threads.costs import SAMPLING, Stage
from gpu_otel_agent.threads.handoff import LoopJob
from gpu_otel_agent.threads.relay import Relay, Round, Settle
from gpu_otel_agent.threads.supervised import SupervisedThread

T = TypeVar("T")


class _Outcome(Protocol):
    """What the thread needs of a job's future: ``concurrent.futures.Future`` (``submit``) or
    a ``threads.handoff.LoopJob`` (``run_on_loop``)."""

    def done(self) -> bool: ...

    def running(self) -> bool: ...

    def set_running_or_notify_cancel(self) -> bool: ...

    def set_result(self, result: Any) -> None: ...

    def set_exception(self, exception: BaseException | None) -> None: ...


_Job = tuple[Callable[[], object], _Outcome]
_Batch = tuple[list[_Job], Round | None]


class DeviceWorker:
    def __init__(self, name: str, relay: Relay | None = None) -> None:
        """``relay``: shared by the devices of one node, so those with jobs at the same moment
        run in turn (``threads.relay``); without it a device's jobs go to its thread at once."""
        self._relay = relay
        self._jobs: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._open: list[_Job] | None = None  # handed over, not yet taken by the thread
        self._current: _Batch | None = None  # the batch the thread is in
        self._taken = 0  # how many of its jobs the thread has taken (see _loop)
        self._sampling = Stage(SAMPLING)  # the thread's, entered once per job (not one each)
        # Supervised: the loop itself raising (not a job: a job's exception goes to its
        # future) is logged, counted and the loop restarted on the same queue.
        self._thread = SupervisedThread(self._run, name, first_backoff_s=0.01)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """True while a job runs; samplers skip a cycle rather than queue behind a hang."""
        with self._lock:
            return self._pending > 0

    def submit(self, fn: Callable[[], T],
               loop: asyncio.AbstractEventLoop | None = None) -> Future[T]:
        """Run ``fn`` on the device thread. A job submitted while the jobs handed over before
        it are not yet taken by the thread goes with them: groups due at the same moment wake
        the thread once. ``loop``: the caller's running loop, when it has it at hand (looking
        it up calls getpid() on Python 3.11, once per job); None: looked up here."""
        future: Future[T] = Future()
        self._hand_over((fn, future), loop)
        return future

    def run_on_loop(self, fn: Callable[[], T], loop: asyncio.AbstractEventLoop) -> LoopJob[T]:
        """``submit`` for a caller on ``loop`` (its running loop): the outcome goes to the
        job's ``waiter``, a future of ``loop``, without a ``concurrent.futures.Future`` in
        between (``threads.handoff.LoopJob`` says what that saves)."""
        job: LoopJob[T] = LoopJob(loop)
        self._hand_over((fn, job), loop)
        return job

    def _hand_over(self, job: _Job, loop: asyncio.AbstractEventLoop | None) -> None:
        with self._lock:
            self._pending += 1
            if self._open is not None:
                self._open.append(job)
                return
            jobs = self._open = [job]
        if self._relay is not None and loop is None:
            loop = _running_loop()
        if self._relay is not None and loop is not None:
            self._relay.add(lambda baton: self._jobs.put((jobs, baton)), loop)
        else:
            self._jobs.put((jobs, None))

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException:
            with self._lock:
                # Jobs submitted from now on go in a batch of their own, not one that may
                # be lost with the loop that failed (a batch still queued runs all the same).
                self._open = None
            raise

    def _loop(self) -> None:
        while True:
            # A batch the loop was in when it failed is finished after the restart (its
            # baton passed on, so the other devices' relay goes on), not lost.
            resumed = self._current is not None
            batch = self._current if resumed else self._jobs.get()
            self._current = batch
            if batch is None:
                return
            jobs, baton = batch
            with self._lock:
                if self._open is jobs:
                    self._open = None  # taken: a job submitted from now on is a new batch
            # How far into the batch a loop that failed got: the restart goes on from there,
            # and a job it had taken was counted off ``busy`` then, not again now. A batch
            # from the queue has no job started or counted yet: each goes straight to
            # ``_run_one`` (a job cancelled meanwhile never runs: its
            # ``set_running_or_notify_cancel`` says so, and it is counted off ``busy`` there).
            results = []
            for index, job in enumerate(jobs):
                results.append(self._resume(job, counted=index < self._taken) if resumed
                               else self._run_one(job))
                self._taken = index + 1
            self._current, self._taken = None, 0
            if baton is None:
                for result in results:
                    result()
            else:
                # Held until the relay ends (the loop gets them together), and the next
                # device's turn.
                baton.finish(results)

    def _resume(self, job: _Job, *, counted: bool) -> Settle:
        """Runs a job not run yet; one the failure interrupted (or ran and did not settle)
        ends with the error instead of hanging its caller. ``counted``: the loop that failed
        had taken it already (and counted it off ``busy``)."""
        future = job[1]
        if future.done():  # cancelled before the thread took it: it never runs
            if not counted:
                with self._lock:
                    self._pending -= 1
            return _nothing
        if future.running():
            return functools.partial(future.set_exception, RuntimeError(
                "the device thread failed while running this job (it was restarted)"))
        return self._run_one(job)

    def _run_one(self, job: _Job) -> Settle:
        """Runs the job; returns what sets its future (the caller chooses when)."""
        fn, future = job
        try:
            if not future.set_running_or_notify_cancel():
                return _nothing
            try:
                with self._sampling:
                    result = fn()
            except BaseException as exc:  # handed to the awaiting task, not lost
                return functools.partial(future.set_exception, exc)
            return functools.partial(future.set_result, result)
        finally:
            with self._lock:
                self._pending -= 1


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _nothing() -> None:
    """A cancelled job's future is already settled."""
