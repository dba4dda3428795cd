"""``on_loop``: a device job's result reaches its loop future as ``asyncio.wrap_future``'s
would, at once when it is set on the loop's thread."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from gpu_otel_agent.threads.handoff import on_loop


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
