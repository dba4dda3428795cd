"""``LoopWorker``: jobs run one at a time on its named thread, their results and exceptions
set on the caller's loop futures; a shutdown cancels what has not started."""

from __future__ import annotations

import asyncio
import functools
import threading

import pytest

from gpu_otel_agent.threads.loop_worker import LoopWorker


def test_jobs_run_in_order_on_the_named_thread_and_their_outcomes_come_back() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        worker = LoopWorker("otlp-export_0")
        ran: list[tuple[int, str]] = []

        def job(number: int) -> int:
            ran.append((number, threading.current_thread().name))
            if number == 2:
                raise ValueError("job 2 failed")
            return number * 10

        futures = [worker.submit(loop, functools.partial(job, n)) for n in range(4)]
        done = await asyncio.gather(*futures, return_exceptions=True)
        assert done[0] == 0 and done[1] == 10 and done[3] == 30
        assert isinstance(done[2], ValueError)
        assert ran == [(n, "otlp-export_0") for n in range(4)]
        assert threading.current_thread().name != "otlp-export_0"
        worker.shutdown()

    asyncio.run(main())


def test_shutdown_cancels_jobs_not_started_and_the_running_one_finishes() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        worker = LoopWorker("otlp-export_0")
        started, release = threading.Event(), threading.Event()
        threads: list[threading.Thread] = []

        def slow() -> str:
            threads.append(threading.current_thread())
            started.set()
            release.wait(60)
            return "finished"

        running = worker.submit(loop, slow)
        waiting = worker.submit(loop, lambda: "never")
        await asyncio.to_thread(started.wait, 60)
        worker.shutdown()
        assert waiting.cancelled()
        release.set()
        assert await running == "finished"
        with pytest.raises(RuntimeError):
            worker.submit(loop, lambda: "after")
        (thread,) = threads
        await asyncio.to_thread(thread.join, 60)
        assert not thread.is_alive()  # it ends after the job it was running

    asyncio.run(main())


def test_posted_jobs_run_in_turn_with_submitted_ones_and_one_that_raises_stops_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        worker = LoopWorker("otlp-export_0")
        ran: list[str] = []

        def posted(name: str) -> None:
            ran.append(name)
            if name == "bad":
                raise RuntimeError("a posted job's bug")

        worker.post(functools.partial(posted, "first"))
        worker.post(functools.partial(posted, "bad"))
        marker = worker.submit(loop, lambda: ran.append("submitted"))
        worker.post(functools.partial(posted, "after"))
        await marker
        last = worker.submit(loop, threading.current_thread)
        assert (await last).name == "otlp-export_0"
        assert ran == ["first", "bad", "submitted", "after"]
        worker.shutdown()

    asyncio.run(main())
    assert "a posted job's bug" in caplog.text
