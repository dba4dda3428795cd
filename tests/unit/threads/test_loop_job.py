"""``LoopJob``: a device job's outcome reaches its loop future as ``submit`` +
``asyncio.wrap_future`` bring it, and a job keeps what the sampler relies on of a
``concurrent.futures.Future``: not run once cancelled, a done callback when a hung call
finally returns, an error for a job the device thread failed in."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import InvalidStateError
from typing import Any

import pytest

from gpu_otel_agent.threads.device_worker import DeviceWorker
from gpu_otel_agent.threads.handoff import LoopJob
from gpu_otel_agent.threads.relay import Relay
from tests.polling import until


def _outcome(future: asyncio.Future[Any]) -> tuple[str, object]:
    if future.cancelled():
        return ("cancelled", None)
    error = future.exception()
    if error is not None:
        return ("error", (type(error), str(error)))
    return ("result", future.result())


@pytest.mark.parametrize("relay", [False, True])
def test_outcomes_equal_those_of_submit_and_wrap_future(relay: bool) -> None:
    """Over changing jobs (results, errors, a None result), with and without the relay, each
    job's waiter ends as the stdlib's path's (a concurrent.futures.Future through
    asyncio.wrap_future)."""
    shared = Relay(pass_on_after_s=60) if relay else None
    workers = [DeviceWorker(f"gpu-{n}", shared) for n in range(3)]

    def job(n: int) -> object:
        if n % 4 == 1:
            raise ValueError(f"device {n} said no")
        if n % 4 == 2:
            return None
        return {"n": n, "square": n * n}

    async def main() -> tuple[list[tuple[str, object]], list[tuple[str, object]]]:
        loop = asyncio.get_running_loop()
        fast: list[asyncio.Future[object]] = []
        reference: list[asyncio.Future[object]] = []
        for n in range(24):
            worker = workers[n % 3]
            fast.append(worker.run_on_loop(lambda n=n: job(n), loop).waiter)  # type: ignore[misc]
            reference.append(asyncio.wrap_future(worker.submit(lambda n=n: job(n), loop)))  # type: ignore[misc]
            if n % 5 == 4:
                await asyncio.sleep(0)  # some rounds end between submissions
        await asyncio.wait([*fast, *reference], timeout=30)
        return [_outcome(f) for f in fast], [_outcome(f) for f in reference]

    try:
        fast, reference = asyncio.run(main())
        assert fast == reference
        assert {kind for kind, _ in fast} == {"result", "error"}
    finally:
        for worker in workers:
            worker.stop()


def test_a_job_cancelled_before_it_starts_never_runs_and_its_waiter_is_cancelled() -> None:
    worker = DeviceWorker("gpu-test")
    blocker = threading.Event()
    ran: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = worker.run_on_loop(lambda: blocker.wait(30), loop)
        await until(first.running)
        second = worker.run_on_loop(lambda: ran.append("second"), loop)
        assert second.cancel() and second.cancelled() and second.done()
        assert second.waiter.cancelled()
        assert not first.cancel()  # running: too late, as for a Future
        blocker.set()
        assert await first.waiter is True
        third = worker.run_on_loop(lambda: ran.append("third"), loop)
        await third.waiter

    try:
        asyncio.run(main())
        assert ran == ["third"]
    finally:
        blocker.set()
        worker.stop()


def test_a_hung_job_tells_its_done_callback_when_it_returns() -> None:
    """What the sampler does past a deadline: the waiter gave up, cancel fails (the call
    runs), a callback hears when it ends, with its error."""
    worker = DeviceWorker("gpu-test")
    blocker = threading.Event()
    heard: list[tuple[bool, str]] = []

    def hangs() -> None:
        blocker.wait(30)
        raise ValueError("answered late")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        job = worker.run_on_loop(hangs, loop)
        await until(job.running)
        job.waiter.set_exception(TimeoutError())  # the deadline (threads.deadlines)
        assert not job.cancel()
        job.add_done_callback(lambda j: heard.append(
            (threading.current_thread() is threading.main_thread(), str(j.exception()))))
        blocker.set()
        await until(lambda: bool(heard))
        assert isinstance(job.waiter.exception(), TimeoutError)  # a late answer is dropped

    try:
        asyncio.run(main())
        assert heard == [(False, "answered late")]  # on the device thread, as a Future's
    finally:
        blocker.set()
        worker.stop()


def test_a_callback_added_after_the_end_runs_at_once_and_a_job_ends_once() -> None:
    async def main() -> None:
        job: LoopJob[int] = LoopJob(asyncio.get_running_loop())
        assert job.set_running_or_notify_cancel()
        job.set_result(5)
        assert job.waiter.result() == 5  # set on the loop's thread: no loop pass in between
        heard: list[LoopJob[int]] = []
        job.add_done_callback(heard.append)
        assert heard == [job] and job.exception() is None
        with pytest.raises(InvalidStateError):
            job.set_result(6)
        cancelled: LoopJob[int] = LoopJob(asyncio.get_running_loop())
        assert cancelled.cancel()
        assert not cancelled.set_running_or_notify_cancel()

    asyncio.run(main())
