"""Shutdown must never be lost: a cancelled sleeper stays cancelled, even if woken meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import replace

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
