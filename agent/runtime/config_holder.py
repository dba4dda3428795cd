"""The running configuration, swappable at run time (SIGHUP or file change)."""

from __future__ import annotations

import asyncio

from agent.config.schema import AgentConfig


class ConfigHolder:
    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self._changed = asyncio.Event()

    @property
    def current(self) -> AgentConfig:
        return self._config

    def replace(self, config: AgentConfig) -> None:
        self._config = config
        # Wake everyone waiting on the old event, then start a fresh one for the next change.
        self._changed.set()
        self._changed = asyncio.Event()

    async def sleep(self, seconds: float) -> bool:
        """Sleep, returning early (True) when the configuration changes meanwhile."""
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout=max(seconds, 0.0))
        except TimeoutError:
            return False
        return True
