"""A device job's result on the event loop, for less than ``asyncio.wrap_future`` costs.

``wrap_future`` hands every result over with ``call_soon_threadsafe``, even when the result is
set on the loop's own thread (a ``concurrent.futures.Future`` has no loop to compare with), and
chains cancellation both ways with two more callbacks; the future itself makes a
``threading.Condition`` per job. A ``LoopJob`` is what the device thread settles and what the
loop awaits (its ``waiter``): one object and one plain lock per job. The relay sets a round's
results on the loop in one call (``threads.relay``), and each job moves into its waiter at
once, in that same loop pass; a result set on another thread (a lone job, a released round, a
job that outlived its deadline) still goes through ``call_soon_threadsafe``.

Cancelling is the caller's: what ``wrap_future`` did on the waiter's cancellation (cancel the
job if it has not started) the caller does itself.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


_PENDING, _RUNNING, _CANCELLED, _FINISHED = range(4)


class LoopJob(Generic[T]):
    """A device job whose outcome goes straight to ``waiter``, a future of the submitting loop.

    What ``concurrent.futures.Future`` + ``asyncio.wrap_future`` did per job (issue 41: the
    sampler runs one per group read, about 11 a second at 8 GPUs), for less: that Future makes a
    ``threading.Condition`` per job and takes it on every call (start, result, callbacks,
    ``exception()`` and ``result()`` again in the copy), and the wrapping added a closure and a
    done callback. Here a job holds one plain lock, taken where two threads may meet: starting
    (the device thread) against cancelling (the loop, past the deadline), and finishing
    against ``add_done_callback`` (the loop, to hear when a hung call returns). The outcome
    is set on the waiter at once when it is set on the loop's thread (the relay's round end),
    else through ``call_soon_threadsafe`` (a lone job, a released round, a late answer).

    The device thread's side is ``concurrent.futures.Future``'s (``set_running_or_notify_cancel``,
    ``running``, ``done``, ``set_result``, ``set_exception``: ``threads.device_worker`` runs
    either); the loop's side is ``waiter`` plus ``cancel``, ``cancelled``, ``exception`` and
    ``add_done_callback`` as a Future has them. Make it on the loop's thread.
    """

    __slots__ = ("_callbacks", "_error", "_lock", "_loop", "_state", "_thread", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.waiter: asyncio.Future[T] = loop.create_future()
        self._loop = loop
        self._thread = threading.get_ident()
        self._lock = threading.Lock()
        self._state = _PENDING
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[LoopJob[T]], object]] | None = None  # rarely any

    def done(self) -> bool:
        return self._state >= _CANCELLED

    def running(self) -> bool:
        return self._state == _RUNNING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def exception(self) -> BaseException | None:
        """The job's error once it finished (None: it returned, or has not finished)."""
        return self._error

    def cancel(self) -> bool:
        """Cancel the job unless it started: True if it will not run. Its waiter is
        cancelled too, unless it gave up before (its deadline, its own cancellation)."""
        with self._lock:
            if self._state != _PENDING:
                return self._state == _CANCELLED
            self._state = _CANCELLED
            callbacks, self._callbacks = self._callbacks, None
        self._hand(_cancel, None, None)
        self._call_back(callbacks)
        return True

    def set_running_or_notify_cancel(self) -> bool:
        """On the device thread: False if cancelled (the job must not run), else it runs."""
        with self._lock:
            if self._state == _CANCELLED:
                return False
            if self._state != _PENDING:
                raise RuntimeError("the job was started already")
            self._state = _RUNNING
            return True

    def set_result(self, result: T) -> None:
        self._finish(result, None)

    def set_exception(self, exception: BaseException | None) -> None:
        self._finish(None, exception)

    def add_done_callback(self, fn: Callable[[LoopJob[T]], object]) -> None:
        """``fn(job)`` once the job is done (at once if it is), on the thread that ended it."""
        with self._lock:
            if self._state < _CANCELLED:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        self._call_back([fn])

    def _finish(self, result: T | None, error: BaseException | None) -> None:
        with self._lock:
            if self._state >= _CANCELLED:
                raise InvalidStateError("the job is done already")
            self._state = _FINISHED
            self._error = error
            callbacks, self._callbacks = self._callbacks, None
        self._hand(_set, result, error)
        self._call_back(callbacks)

    def _hand(self, fn: Callable[[asyncio.Future[T], Any, BaseException | None], None],
              result: Any, error: BaseException | None) -> None:
        if threading.get_ident() == self._thread:
            fn(self.waiter, result, error)
        elif not self._loop.is_closed():
            # Closed meanwhile (RuntimeError): nobody waits on the loop any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(fn, self.waiter, result, error)

    def _call_back(self, callbacks: list[Callable[[LoopJob[T]], object]] | None) -> None:
        for fn in callbacks or ():
            try:
                fn(self)
            except Exception:  # as concurrent.futures does: one callback's bug stays its own
                log.exception("a device job's done callback raised")


def _set(waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if waiter.done():  # given up (deadline, cancellation) before the result came
        return
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(result)


def _cancel(waiter: asyncio.Future[Any], _: object, __: object) -> None:
    if not waiter.done():
        waiter.cancel()


async def settled(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any],
                  timeout_s: float) -> None:
    """Waits until ``future`` is done or ``timeout_s`` has passed, whichever comes first,
    without cancelling it (``asyncio.wait`` with a timeout does the same through a waiter
    and callbacks of its own, and ``asyncio.timeout`` adds a Timeout object: the export
    pusher waits so every interval, issue 41). Cancelling the caller cancels only the wait."""
    if future.done():
        return
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = loop.call_later(timeout_s, wake)
    future.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        future.remove_done_callback(wake)
