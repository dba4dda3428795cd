"""Deadlines: waiters due at one moment share one timer, and each still ends by its own
deadline unless it got its result or was disarmed first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gpu_otel_agent.threads.deadlines import Deadlines


class _CountingLoop(asyncio.SelectorEventLoop):
    """A real loop that keeps the timers made with call_at."""

    def __init__(self) -> None:
        super().__init__()
        self.timers: list[asyncio.TimerHandle] = []

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None
                ) -> asyncio.TimerHandle:
        timer = super().call_at(when, callback, *args, context=context)
        self.timers.append(timer)
        return timer


def _run(scenario: Any) -> None:
    loop = _CountingLoop()
    try:
        loop.run_until_complete(scenario(loop))
    finally:
        loop.close()


def test_waiters_due_at_one_moment_share_a_timer_and_each_times_out() -> None:
    async def scenario(loop: _CountingLoop) -> None:
        deadlines = Deadlines()
        when = loop.time() + 0.05
        waiters: list[asyncio.Future[int]] = [loop.create_future() for _ in range(8)]
        for waiter in waiters:
            deadlines.arm(loop, when, waiter)
        waiters[0].set_result(1)  # answered in time: keeps its result
        deadlines.disarm(loop, when, waiters[0])
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert results[0] == 1
        assert all(isinstance(r, TimeoutError) for r in results[1:])
        assert loop.time() >= when
        assert len(loop.timers) == 1

    _run(scenario)


def test_a_disarmed_waiter_does_not_time_out_and_the_last_one_cancels_the_timer() -> None:
    async def scenario(loop: _CountingLoop) -> None:
        deadlines = Deadlines()
        soon, later = loop.time() + 0.05, loop.time() + 0.1
        first: asyncio.Future[int] = loop.create_future()
        second: asyncio.Future[int] = loop.create_future()
        deadlines.arm(loop, soon, first)
        deadlines.arm(loop, later, second)
        deadlines.disarm(loop, soon, first)
        assert loop.timers[0].cancelled()  # nobody left at that moment
        with pytest.raises(TimeoutError):
            await second
        assert not first.done()
        deadlines.disarm(loop, later, second)  # after it expired: nothing to do

    _run(scenario)
