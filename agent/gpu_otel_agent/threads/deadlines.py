"""Device calls' deadlines: waiters due at the same moment share one timer.

Every device's group loop falls due on the same grid tick and submits its job in the same
loop pass, so their deadlines (``loop.time()`` + the call deadline) are the same moment on a
loop whose clock is read once per pass (uvloop's). A timer handle costs about what the rest of
a call's hand-off does (made, started in the loop's heap, cancelled); one per moment instead of
one per call is the saving. On a loop whose clock moves within a pass, each call keeps a timer
of its own, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Deadlines:
    """Fails each armed waiter with ``TimeoutError`` at its deadline unless it is done or
    disarmed first. On the waiters' loop."""

    def __init__(self) -> None:
        self._due: dict[tuple[asyncio.AbstractEventLoop, float], _Due] = {}

    def arm(self, loop: asyncio.AbstractEventLoop, when: float,
            waiter: asyncio.Future[Any]) -> None:
        key = (loop, when)
        due = self._due.get(key)
        if due is None:
            due = self._due[key] = _Due(loop.call_at(when, self._expire, key))
        due.waiters.add(waiter)

    def disarm(self, loop: asyncio.AbstractEventLoop, when: float,
               waiter: asyncio.Future[Any]) -> None:
        """``waiter`` no longer needs its deadline (it got its result, or gave up)."""
        key = (loop, when)
        due = self._due.get(key)
        if due is None:
            return  # expired already
        due.waiters.discard(waiter)
        if not due.waiters:
            del self._due[key]
            due.timer.cancel()

    def _expire(self, key: tuple[asyncio.AbstractEventLoop, float]) -> None:
        due = self._due.pop(key, None)
        for waiter in due.waiters if due is not None else ():
            if not waiter.done():
                waiter.set_exception(TimeoutError())


class _Due:
    __slots__ = ("timer", "waiters")

    def __init__(self, timer: asyncio.TimerHandle) -> None:
        self.timer = timer
        self.waiters: set[asyncio.Future[Any]] = set()
