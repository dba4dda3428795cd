"""The running configuration, swappable at run time (SIGHUP or file change)."""

from __future__ import annotations

import asyncio

from gpu_otel_agent.config.schema import AgentConfig


class ConfigHolder:
    """Holds the configuration and wakes every sleeping loop when it changes.

    Sleepers wait on a plain future with a timer rather than ``asyncio.wait_for`` on an
    event: on Python 3.11 ``wait_for`` swallows a cancellation that arrives together with the
    wake-up, and a swallowed cancellation is an agent that ignores SIGTERM.
    """

    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self._sleepers: set[asyncio.Future[bool]] = set()

    @property
    def current(self) -> AgentConfig:
        return self._config

    def replace(self, config: AgentConfig) -> None:
        self._config = config
        for sleeper in self._sleepers:
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


def _resolve(sleeper: asyncio.Future[bool], value: bool) -> None:
    if not sleeper.done():
        sleeper.set_result(value)
