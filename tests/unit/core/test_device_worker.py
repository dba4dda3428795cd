"""The device thread: jobs from one loop iteration are handed over together."""

from __future__ import annotations

import asyncio
import threading
import time

from gpu_otel_agent.sampling.worker import DeviceWorker


def test_jobs_of_one_loop_iteration_reach_the_thread_together_after_it() -> None:
    worker = DeviceWorker("gpu-test")
    started: list[str] = []

    def job(name: str) -> str:
        started.append(name)
        return threading.current_thread().name

    async def main() -> list[str]:
        first = worker.submit(lambda: job("fast"))
        time.sleep(0.1)  # the loop is busy: a job handed over at once would have started
        assert started == []
        second = worker.submit(lambda: job("processes"))
        assert worker.busy
        return [await asyncio.wrap_future(first), await asyncio.wrap_future(second)]

    try:
        assert asyncio.run(main()) == ["gpu-test", "gpu-test"]
        assert started == ["fast", "processes"]  # in the order submitted
        assert not worker.busy
    finally:
        worker.stop()


def test_outside_a_loop_a_job_is_handed_over_at_once_and_errors_reach_the_caller() -> None:
    worker = DeviceWorker("gpu-test")

    def fails() -> None:
        raise ValueError("device said no")

    try:
        assert worker.submit(lambda: 42).result(timeout=30) == 42
        error = worker.submit(fails).exception(timeout=30)
        assert isinstance(error, ValueError)
        assert not worker.busy
    finally:
        worker.stop()
