"""A device job's result on the event loop, for less than ``asyncio.wrap_future`` costs.

``wrap_future`` hands every result over with ``call_soon_threadsafe``, even when the result is
set on the loop's own thread (a ``concurrent.futures.Future`` has no loop to compare with), and
chains cancellation both ways with two more callbacks. The relay sets a round's results on the
loop in one call (``threads.relay``); ``on_loop`` then moves each one into its waiter at once,
in that same loop pass. A result set on another thread (a lone job, a released round, a job
that outlived its deadline) still goes through ``call_soon_threadsafe``.

Cancelling is the caller's: what ``wrap_future`` did on the waiter's cancellation (cancel the
job if it has not started) the caller does itself.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def on_loop(loop: asyncio.AbstractEventLoop, job: Future[T]) -> asyncio.Future[T]:
    """A future of ``loop`` that ends as ``job`` does. Call it on ``loop``'s thread."""
    waiter: asyncio.Future[T] = loop.create_future()
    thread = threading.get_ident()

    def settled(done: Future[T]) -> None:  # on whichever thread set the job's result
        if threading.get_ident() == thread:
            _copy(done, waiter)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(_copy, done, waiter)

    job.add_done_callback(settled)
    return waiter


def _copy(job: Future[T], waiter: asyncio.Future[T]) -> None:
    if waiter.done():  # given up (deadline, cancellation) before the result came
        return
    if job.cancelled():
        waiter.cancel()
        return
    error = job.exception()
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(job.result())


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
