"""The running configuration, swappable at run time (SIGHUP or file change)."""

from __future__ import annotations

import asyncio
import math

from gpu_otel_agent.config.schema import AgentConfig


def grid_after(time_s: float, interval: float) -> float:
    """The first multiple of ``interval`` after ``time_s`` on the loop clock: the ticks every
    device's group loops and the metric export fall due on, so those due together share one
    timer (``ConfigHolder.sleep_until``) and one loop wake-up. A loop's first read is at once,
    the following ones land on the grid, half an interval to an interval and a half after the
    read before (never two reads in a row)."""
    return (math.floor(time_s / interval + 1e-9) + 1) * interval


class ConfigHolder:
    """Holds the configuration and wakes every sleeping loop when it changes.

    Sleepers wait on a plain future with a timer rather than ``asyncio.wait_for`` on an
    event: on Python 3.11 ``wait_for`` swallows a cancellation that arrives together with the
    wake-up, and a swallowed cancellation is an agent that ignores SIGTERM.
    """

    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self._sleepers: set[asyncio.Future[bool]] = set()
        # Sleepers until the same moment of the same loop (every device's group loops on one
        # grid tick) and the one timer that wakes them all.
        self._ticks: dict[tuple[asyncio.AbstractEventLoop, float], _Tick] = {}

    @property
    def current(self) -> AgentConfig:
        return self._config

    def replace(self, config: AgentConfig) -> None:
        self._config = config
        for sleeper in [*self._sleepers,
                        *(s for tick in self._ticks.values() for s in tick.sleepers)]:
            if not sleeper.done():
                sleeper.set_result(True)

    async def sleep(self, seconds: float) -> bool:
        """Sleep, returning early (True) when the configuration changes meanwhile."""
        loop = asyncio.get_running_loop()
        sleeper: asyncio.Future[bool] = loop.create_future()
        timer = loop.call_later(max(seconds, 0.0), _resolve, sleeper, False)
        self._sleepers.add(sleeper)
        try:
            return await sleeper
        finally:
            timer.cancel()
            self._sleepers.discard(sleeper)

    async def sleep_until(self, loop: asyncio.AbstractEventLoop, when: float) -> bool:
        """Sleep until ``loop.time()`` reaches ``when``, returning early (True) when the
        configuration changes meanwhile. On ``loop``.

        Sleepers until the same moment share one timer: at eight GPUs every group loop that
        falls due on a grid tick waits for the same ``when``, and one timer handle (made,
        started, fired) costs about what the rest of a sleep does. Each sleeper keeps a future
        of its own, so cancelling one task wakes no other.
        """
        sleeper: asyncio.Future[bool] = loop.create_future()
        key = (loop, when)
        tick = self._ticks.get(key)
        if tick is None:
            tick = self._ticks[key] = _Tick(loop.call_at(when, self._wake, key))
        # Found by ``replace`` through its tick (not in ``_sleepers`` as well: a set entry
        # added and removed per read of every group).
        tick.sleepers[sleeper] = None
        try:
            return await sleeper
        finally:
            tick.sleepers.pop(sleeper, None)
            if not tick.sleepers and self._ticks.get(key) is tick:
                del self._ticks[key]  # the last one left early (reload, cancel): no timer
                tick.timer.cancel()

    def _wake(self, key: tuple[asyncio.AbstractEventLoop, float]) -> None:
        tick = self._ticks.pop(key, None)
        for sleeper in tick.sleepers if tick is not None else ():
            if not sleeper.done():
                sleeper.set_result(False)


class _Tick:
    __slots__ = ("sleepers", "timer")

    def __init__(self, timer: asyncio.TimerHandle) -> None:
        self.timer = timer
        # In the order they went to sleep: woken in it, as their own timers would have been
        # (the devices' tasks then submit their jobs, and the relay runs them, in GPU order).
        self.sleepers: dict[asyncio.Future[bool], None] = {}


def _resolve(sleeper: asyncio.Future[bool], value: bool) -> None:
    if not sleeper.done():
        sleeper.set_result(value)
