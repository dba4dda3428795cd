"""``settled``: the metric pusher's wait for an export, as ``asyncio.wait`` with a timeout
would, without cancelling the export. (A device job's hand-off, ``LoopJob``, is
tests/unit/threads/test_loop_job.py's.)"""

from __future__ import annotations

import asyncio

import pytest

from gpu_otel_agent.threads.handoff import settled


def test_settled_returns_when_the_future_is_done_and_leaves_it_alone() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        loop.call_soon(future.set_result, 5)
        await settled(loop, future, 3600.0)  # an hour: only the result can end it
        assert future.result() == 5
        await settled(loop, future, 3600.0)  # already done: at once

    asyncio.run(main())


def test_settled_gives_up_at_its_timeout_without_cancelling_the_future() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        await settled(loop, future, 0.01)
        assert not future.done()  # still running: a late result still counts
        future.set_result(1)
        assert future.result() == 1

    asyncio.run(main())


def test_cancelling_the_wait_cancels_only_the_wait() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        waiting = asyncio.ensure_future(settled(loop, future, 3600.0))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not future.done()
        future.set_result(2)  # its wake-up was removed: nothing left to call
        await asyncio.sleep(0)

    asyncio.run(main())
