"""The device threads: jobs from one loop iteration are handed over together, devices due
together run in turn (a relay) and their results reach the loop together, a stuck device
holding the others back only briefly."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest

from gpu_otel_agent.threads.device_worker import DeviceWorker
from gpu_otel_agent.threads.relay import Relay
from tests.polling import wait_until


def test_jobs_submitted_before_the_thread_takes_its_batch_go_with_it() -> None:
    """A device's jobs queued behind another device's turn form one batch (one wake-up of its
    thread), whatever other devices submitted in between."""
    workers = _relay_workers(3, pass_on_after_s=60)  # never released early, even on a slow CI
    order: list[str] = []
    blocker = threading.Event()

    def job(name: str) -> str:
        order.append(name)
        return threading.current_thread().name

    async def main() -> list[str]:
        first = workers[2].submit(lambda: blocker.wait(30))  # holds the baton
        a = workers[0].submit(lambda: job("a"))
        b = workers[1].submit(lambda: job("b"))
        c = workers[0].submit(lambda: job("c"))
        blocker.set()
        await asyncio.wrap_future(first)
        return [await asyncio.wrap_future(f) for f in (a, b, c)]

    try:
        assert asyncio.run(main()) == ["gpu-0", "gpu-1", "gpu-0"]
        assert order == ["a", "c", "b"]  # gpu-0's two jobs in one turn, before gpu-1's
    finally:
        blocker.set()
        for worker in workers:
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


def test_a_job_cancelled_before_the_thread_takes_it_leaves_the_device_idle() -> None:
    """``busy`` counts the jobs handed over and not finished; one cancelled while queued (its
    deadline passed behind a hung call, or the agent is shutting down) never runs and is
    finished too: at exit the agent closes the GPU library only when no device is busy."""
    worker = DeviceWorker("gpu-test")
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30)

    try:
        first = worker.submit(hold)
        assert started.wait(30)
        queued = worker.submit(lambda: 1)  # a batch of its own: the first one is taken
        assert queued.cancel()
        assert worker.busy
        release.set()
        first.result(timeout=30)
        wait_until(lambda: not worker.busy,
                   what="the cancelled job is still counted as pending")
    finally:
        release.set()
        worker.stop()


def _relay_workers(count: int, pass_on_after_s: float) -> list[DeviceWorker]:
    relay = Relay(pass_on_after_s)
    return [DeviceWorker(f"gpu-{i}", relay) for i in range(count)]


def test_devices_due_together_run_one_after_another() -> None:
    workers = _relay_workers(4, pass_on_after_s=60)  # never released early, even on a slow CI
    spans: list[tuple[str, float, float]] = []

    def job() -> None:
        started = time.monotonic()
        time.sleep(0.01)  # drops the GIL, as an NVML call does: another thread could run
        spans.append((threading.current_thread().name, started, time.monotonic()))

    settled: list[float] = []

    async def main() -> None:
        futures = [w.submit(job) for w in workers]  # one loop iteration
        for future in futures:
            future.add_done_callback(lambda _: settled.append(time.monotonic()))
        await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))

    try:
        asyncio.run(main())
    finally:
        for worker in workers:
            worker.stop()
    assert [name for name, _, _ in spans] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    for (_, _, ended), (_, started, _) in itertools.pairwise(spans):
        assert started >= ended  # each leg began after the one before it ended
    # The results went to the loop together, once the last device was done.
    assert len(settled) == 4 and min(settled) >= spans[-1][2]


def test_a_device_stuck_in_its_leg_holds_the_others_back_only_briefly() -> None:
    workers = _relay_workers(3, pass_on_after_s=0.05)
    stuck = threading.Event()

    async def main() -> list[str]:
        hung = workers[0].submit(lambda: stuck.wait(60))
        others = [w.submit(lambda: threading.current_thread().name) for w in workers[1:]]
        # The other two finish while the first device is still inside its call.
        async with asyncio.timeout(30):
            names = [await asyncio.wrap_future(f) for f in others]
        assert not hung.done()
        stuck.set()
        await asyncio.wrap_future(hung)
        return names

    try:
        assert asyncio.run(main()) == ["gpu-1", "gpu-2"]
    finally:
        stuck.set()
        for worker in workers:
            worker.stop()


def test_a_rounds_results_are_set_on_the_loop_together() -> None:
    """The relay sets every device's results on the loop's own thread, in one loop callback
    (one hand-off per round, not one per job); each job ran on its own device's thread."""
    workers = _relay_workers(4, pass_on_after_s=60)  # never released early, even on a slow CI
    settled: list[tuple[int, int]] = []  # (thread that set the result, loop callbacks run)
    passes = 0

    async def main() -> list[str]:
        nonlocal passes
        loop = asyncio.get_running_loop()

        def tick() -> None:  # counts loop callbacks until the results are in
            nonlocal passes
            passes += 1
            if len(settled) < 4:
                loop.call_soon(tick)

        futures = [w.submit(lambda: threading.current_thread().name) for w in workers]
        for future in futures:
            future.add_done_callback(lambda _: settled.append((threading.get_ident(), passes)))
        loop.call_soon(tick)
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))

    try:
        assert asyncio.run(main()) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    finally:
        for worker in workers:
            worker.stop()
    assert {thread for thread, _ in settled} == {threading.get_ident()}
    assert len({seen for _, seen in settled}) == 1  # all in the same callback


def test_jobs_given_the_callers_loop_join_the_relay_without_looking_it_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that passes its running loop (the sampler does, per call) gets the same relay
    round as one that lets the worker look it up, and nothing asks asyncio for the loop (on
    Python 3.11 that is a getpid() per job)."""
    workers = _relay_workers(4, pass_on_after_s=60)
    looked_up = 0
    look_up = asyncio.get_running_loop

    def counting() -> asyncio.AbstractEventLoop:
        nonlocal looked_up
        looked_up += 1
        return look_up()

    async def main(given: bool) -> tuple[list[str], int]:
        nonlocal looked_up
        loop = look_up()
        looked_up = 0
        futures = [w.submit(lambda: threading.current_thread().name, loop if given else None)
                   for w in workers]
        asked = looked_up
        settled: list[int] = []
        for future in futures:
            future.add_done_callback(lambda _: settled.append(threading.get_ident()))
        names = list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))
        assert set(settled) == {threading.get_ident()}  # a relay round: set on the loop
        return names, asked

    monkeypatch.setattr(asyncio, "get_running_loop", counting)
    try:
        assert asyncio.run(main(True)) == (["gpu-0", "gpu-1", "gpu-2", "gpu-3"], 0)
        names, asked = asyncio.run(main(False))
        assert names == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"] and asked >= 4
    finally:
        for worker in workers:
            worker.stop()
