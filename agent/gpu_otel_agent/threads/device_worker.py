"""One daemon thread per device, so a device whose calls hang stalls only itself.

``concurrent.futures.ThreadPoolExecutor`` joins its threads at interpreter exit; a thread stuck
in a hung NVML call would then hold up shutdown, so the worker uses a daemon thread of its own.

Jobs submitted before the thread has taken the ones handed over earlier go with them: groups
that fall due at the same moment (at the defaults the fast and processes groups every 5 s, gpm
every 10 s, slow every 30 s, all on one grid) wake the thread once, not once per group. A
thread wake-up costs more than most reads it serves (a cold cache and a contended GIL).

Under a relay the device's jobs usually run on the relay's courier (``threads.relay``) through
this worker, as they would on its thread: the same ``busy`` count, the same ``sampling`` stage.
The thread is the fallback (a released round's leg, a leg behind work of the device's own) and
the path without a relay. Whichever thread runs a batch of the device holds its ``_running``
lock, and a courier takes a leg only when no batch of the device is queued on or running on
its thread: the device's jobs run in the order they were submitted, one at a time.
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
from gpu_otel_agent.threads.relay import Relay, Settle
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


class _Batch:
    """Jobs handed over together: a leg of a relay round (``threads.relay.Leg``) or a batch
    for the device's own thread. Knows how far the thread running it got, so a thread whose
    loop failed in it finishes it after the restart."""

    __slots__ = ("_worker", "claimed", "jobs", "name", "started", "taken")

    def __init__(self, worker: DeviceWorker, jobs: list[_Job]) -> None:
        self._worker = worker
        self.name = worker.name
        self.jobs = jobs
        self.claimed = False  # a courier holds the device's ``_running`` lock for it
        self.started = False  # a thread began its jobs (a second start is a resumption)
        self.taken = 0  # how many of its jobs were taken (see DeviceWorker._work)

    def run_here(self) -> list[Settle] | None:
        return self._worker._run_leg(self)

    def resume_here(self) -> list[Settle]:
        return self._worker._resume_leg(self)

    def send(self) -> None:
        self._worker._send(self)


class DeviceWorker:
    def __init__(self, name: str, relay: Relay | None = None) -> None:
        """``relay``: shared by the devices of one node, so those with jobs at the same moment
        run in turn (``threads.relay``); without it a device's jobs go to its thread at once."""
        self.name = name  # its thread's, and the courier's while it runs the device's jobs
        self._relay = relay
        self._jobs: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._open: list[_Job] | None = None  # handed over, not yet taken by a thread
        self._current: _Batch | None = None  # the batch the device's thread is in
        self._queued = 0  # batches put to the thread and not finished: no courier leg meanwhile
        self._running = threading.Lock()  # held by the thread running a batch of the device
        self._sampling = Stage(SAMPLING)  # the device's, entered once per job (not one each)
        if relay is not None:
            relay.enlist()
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
        """Run ``fn`` on the device's thread (or the relay's courier, under the device's name).
        A job submitted while the jobs handed over before it are not yet taken goes with
        them: groups due at the same moment wake the thread once. ``loop``: the caller's
        running loop, when it has it at hand (looking it up calls getpid() on Python 3.11,
        once per job); None: looked up here."""
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
            self._relay.add(_Batch(self, jobs), loop)
        else:
            self._send(_Batch(self, jobs))

    def stop(self) -> None:
        self._jobs.put(None)
        if self._relay is not None:
            self._relay.leave()

    def _send(self, batch: _Batch) -> None:
        """To the device's thread (which sets the jobs' futures itself)."""
        with self._lock:
            self._queued += 1
        self._jobs.put(batch)

    def _run_leg(self, batch: _Batch) -> list[Settle] | None:
        """A relay leg on the calling thread (the courier), unless the device's thread has
        a batch queued or running, or another thread is inside a batch of the device (a
        courier stuck in a hung call): then the leg goes behind them, to the device's thread
        (None). Never blocks."""
        with self._lock:
            here = self._queued == 0 and self._running.acquire(blocking=False)
            if here:
                batch.claimed = True
                if self._open is batch.jobs:
                    self._open = None  # taken: a job submitted from now on is a new batch
            else:
                self._queued += 1
        if not here:
            self._jobs.put(batch)
            return None
        return self._claimed_leg(batch)

    def _resume_leg(self, batch: _Batch) -> list[Settle]:
        """The leg a courier's loop failed in, on the restarted courier: finished from where
        it was, or run if it was not begun (its results go with the round's)."""
        if batch.claimed:
            return self._claimed_leg(batch)
        return self._run_leg(batch) or []

    def _claimed_leg(self, batch: _Batch) -> list[Settle]:
        """Runs a leg whose ``_running`` lock the calling thread holds; releases it once the
        leg is done. Not on a failure: the courier restarted finishes the leg first, and the
        device's thread waits until then (a later batch must not run before it)."""
        results = self._work(batch)
        batch.claimed = False
        self._running.release()
        return results

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
            # A batch the loop was in when it failed is finished after the restart, not lost.
            batch = self._current if self._current is not None else self._jobs.get()
            self._current = batch
            if batch is None:
                return
            if not batch.started:
                with self._lock:
                    if self._open is batch.jobs:
                        self._open = None  # taken: a job submitted from now on is a new batch
            # Behind a leg of the device that a courier runs (one released while inside it,
            # or stuck in a hung call): the device's jobs never run on two threads at once.
            with self._running:
                results = self._work(batch)
            with self._lock:
                self._current = None
                self._queued -= 1
            for result in results:
                result()

    def _work(self, batch: _Batch) -> list[Settle]:
        """Runs the batch's jobs, returns what sets their futures (the caller chooses when).
        How far into the batch a loop that failed got: the restart goes on from there, and a
        job it had taken was counted off ``busy`` then, not again now. A batch begun now has
        no job started or counted yet: each goes straight to ``_run_one`` (a job cancelled
        meanwhile never runs: its ``set_running_or_notify_cancel`` says so, and it is counted
        off ``busy`` there)."""
        resumed, batch.started = batch.started, True
        results = []
        for index, job in enumerate(batch.jobs):
            results.append(self._resume(job, counted=index < batch.taken) if resumed
                           else self._run_one(job))
            batch.taken = index + 1
        return results

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
                "the thread running the device's jobs failed while running this one (it was "
                "restarted)"))
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
