"""One thread that runs blocking jobs for an event loop, their outcomes set on loop futures.

What ``loop.run_in_executor`` on a one-thread ``ThreadPoolExecutor`` does for the metric
pusher (issue 41), for a third of the instructions: the pool's ``submit`` and its worker go
through pure-Python locks and conditions per job (the executor's shutdown lock, the
``concurrent.futures.Future``'s condition three times, the idle semaphore), and
``wrap_future`` chains a second future to it. Here a job is one put on a C ``SimpleQueue``,
and its outcome one ``call_soon_threadsafe`` that sets the loop future the caller holds:
101k -> 34k instructions per hand-off and wait (callgrind, a job returning at once).

The thread starts with the first job and is a daemon: what must finish is awaited on the loop
(the pusher's final export, bounded by its close), and a job stuck in a peer's socket must not
hold the interpreter's exit. ``shutdown`` cancels jobs not yet started; the running one ends
on its own (its outcome, if the loop still runs, is set as any other).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
from collections.abc import Callable
from typing import Any, TypeVar

from gpu_otel_agent.threads.named import NamedThread

T = TypeVar("T")
log = logging.getLogger(__name__)
# A posted job has neither loop nor future: nothing is handed back.
_Job = tuple[asyncio.AbstractEventLoop | None, Callable[[], Any], "asyncio.Future[Any] | None"]


class LoopWorker:
    """Runs ``submit``ted jobs one at a time on its own thread, named ``name``."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = NamedThread(target=self._run, name=name, daemon=True)

    @property
    def name(self) -> str:
        return self._thread.name

    def submit(self, loop: asyncio.AbstractEventLoop, job: Callable[[], T]) -> asyncio.Future[T]:
        """A future of ``loop`` (call this on its thread) that ends with ``job``'s result or
        exception, or is cancelled if the worker shuts down before ``job`` starts."""
        if self._closed:
            raise RuntimeError("the worker was shut down")
        future: asyncio.Future[T] = loop.create_future()
        if self._thread.ident is None:  # started with the first job, as a pool's thread
            self._thread.start()
        self._jobs.put((loop, job, future))
        return future

    def post(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the thread, after the jobs before it; nothing comes back to the
        loop (``job`` reports its own outcome). Dropped if the worker shuts down first."""
        if self._closed:
            raise RuntimeError("the worker was shut down")
        if self._thread.ident is None:
            self._thread.start()
        self._jobs.put((None, job, None))

    def shutdown(self) -> None:
        """No new jobs; those not started are cancelled (call on their loop's thread)."""
        self._closed = True
        with contextlib.suppress(queue.Empty):
            while (job := self._jobs.get_nowait()) is not None:
                if job[2] is not None:
                    job[2].cancel()
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, work, future = job
            if loop is None or future is None:  # posted: it reports its own outcome
                try:
                    work()
                except Exception:  # a bug in one job must not end the thread for the rest
                    log.exception("a job on %s raised", self.name)
                del job, work
                continue
            try:
                result = work()
            except BaseException as error:  # as ThreadPoolExecutor: the caller sees it
                _hand_back(loop, _fail, future, error)
            else:
                _hand_back(loop, _succeed, future, result)
            del job, work, future  # not kept alive while waiting for the next


def _hand_back(loop: asyncio.AbstractEventLoop, setter: Callable[[Any, Any], None],
               future: asyncio.Future[Any], value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
        loop.call_soon_threadsafe(setter, future, value)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # cancelled meanwhile
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
