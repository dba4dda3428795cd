"""Shutdown must never be lost: a cancelled sleeper stays cancelled, even if woken meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load


def test_cancellation_is_not_swallowed_when_a_reload_wakes_the_sleeper() -> None:
    async def scenario() -> None:
        config = load(None, environ={})
        holder = ConfigHolder(config)
        sleeper = asyncio.create_task(holder.sleep(10))
        await asyncio.sleep(0.01)
        holder.replace(replace(config, export_interval=3.0))  # wakes the sleeper ...
        sleeper.cancel()  # ... in the same loop iteration as the shutdown
        with pytest.raises(asyncio.CancelledError):
            await sleeper

    asyncio.run(scenario())


def test_sleep_reports_a_change_and_times_out_otherwise() -> None:
    async def scenario() -> None:
        config = load(None, environ={})
        holder = ConfigHolder(config)
        assert await holder.sleep(0.01) is False
        waiting = asyncio.create_task(holder.sleep(10))
        await asyncio.sleep(0.01)
        holder.replace(replace(config, export_interval=3.0))
        assert await asyncio.wait_for(waiting, 1) is True
        assert holder.current.export_interval == 3.0

    asyncio.run(scenario())


class _CountingLoop(asyncio.SelectorEventLoop):
    """A real loop that counts the timers made with call_at (call_later goes through it)."""

    timers = 0

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None
                ) -> asyncio.TimerHandle:
        self.timers += 1
        return super().call_at(when, callback, *args, context=context)


def test_sleepers_until_one_moment_share_a_timer_and_wake_at_it() -> None:
    async def scenario(loop: _CountingLoop) -> None:
        holder = ConfigHolder(load(None, environ={}))
        when = loop.time() + 0.05
        before = loop.timers
        woke = await asyncio.gather(*(holder.sleep_until(loop, when) for _ in range(8)))
        assert woke == [False] * 8
        assert loop.time() >= when
        assert loop.timers - before == 1

    loop = _CountingLoop()
    try:
        loop.run_until_complete(scenario(loop))
    finally:
        loop.close()


def test_a_shared_sleep_is_cut_short_by_a_reload_and_one_cancelled_sleeper_wakes_no_other(
) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        config = load(None, environ={})
        holder = ConfigHolder(config)
        when = loop.time() + 0.2
        first, second, third = (asyncio.create_task(holder.sleep_until(loop, when))
                                for _ in range(3))
        await asyncio.sleep(0.01)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert not second.done() and not third.done()
        holder.replace(replace(config, export_interval=3.0))  # wakes the sleepers ...
        third.cancel()  # ... and a shutdown in the same iteration is not swallowed
        assert await asyncio.wait_for(second, 1) is True
        with pytest.raises(asyncio.CancelledError):
            await third
        # Afterwards the same moment has a timer of its own again.
        assert await asyncio.wait_for(holder.sleep_until(loop, when), 5) is False
        assert loop.time() >= when

    asyncio.run(scenario())
