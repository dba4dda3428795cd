"""``on_loop``: a device job's result reaches its loop future as ``asyncio.wrap_future``'s
would, at once when it is set on the loop's thread."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from gpu_otel_agent.threads.handoff import on_loop, settled


def test_a_result_set_on_the_loop_thread_is_there_at_once() -> None:
    async def main() -> None:
        job: Future[int] = Future()
        waiter = on_loop(asyncio.get_running_loop(), job)
        job.set_result(7)
        assert waiter.done() and waiter.result() == 7  # no loop pass in between
        failed: Future[int] = Future()
        waiter = on_loop(asyncio.get_running_loop(), failed)
        failed.set_exception(ValueError("device said no"))
        with pytest.raises(ValueError, match="device said no"):
            waiter.result()

    asyncio.run(main())


def test_a_result_set_on_another_thread_arrives_and_an_error_with_it() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        jobs: list[Future[int]] = [Future(), Future()]
        waiters = [on_loop(loop, job) for job in jobs]

        def settle() -> None:
            jobs[0].set_result(3)
            jobs[1].set_exception(KeyError("gone"))

        thread = threading.Thread(target=settle)
        thread.start()
        async with asyncio.timeout(30):
            assert await waiters[0] == 3
            with pytest.raises(KeyError):
                await waiters[1]
        thread.join()

    asyncio.run(main())


def test_a_cancelled_job_cancels_its_waiter_and_a_given_up_waiter_ignores_the_result() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        job: Future[int] = Future()
        waiter = on_loop(loop, job)
        job.cancel()
        assert waiter.cancelled()
        late: Future[int] = Future()
        given_up = on_loop(loop, late)
        given_up.set_exception(TimeoutError())  # the deadline passed first
        late.set_result(1)  # the call returned after all: no InvalidStateError
        with pytest.raises(TimeoutError):
            given_up.result()

    asyncio.run(main())


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
