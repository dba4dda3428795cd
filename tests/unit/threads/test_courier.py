"""The relay's courier: a round's legs run back to back on one thread, and a hung GPU still
stalls only itself (its leg is released, the next round gets a new courier, at most one
courier per hung call, and a device's jobs never run on two threads at once or out of order).

Every wait is bounded by a generous deadline; nothing here times anything."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from gpu_otel_agent.threads import costs, supervised
from gpu_otel_agent.threads.device_worker import DeviceWorker
from gpu_otel_agent.threads.handoff import LoopJob
from gpu_otel_agent.threads.relay import Relay
from gpu_otel_agent.threads.supervised import restarts
from tests.polling import DEADLINE_S, until, wait_until


class Bug(Exception):
    """A fault in the threads' own code (not a job's)."""


def _workers(count: int, pass_on_after_s: float) -> list[DeviceWorker]:
    relay = Relay(pass_on_after_s)
    return [DeviceWorker(f"gpu-{i}", relay) for i in range(count)]


@pytest.fixture
def new_threads() -> Iterator[Callable[[], set[threading.Thread]]]:
    """The live threads started since the test began."""
    before = set(threading.enumerate())
    yield lambda: set(threading.enumerate()) - before


def _own_threads(workers: list[DeviceWorker]) -> list[int]:
    """Each device thread's id: a job submitted outside a loop goes to its thread."""
    return [w.submit(threading.get_ident).result(DEADLINE_S) for w in workers]


async def _results(futures: list[Future[Any]]) -> list[Any]:
    async with asyncio.timeout(DEADLINE_S):
        return [await asyncio.wrap_future(f) for f in futures]


def test_a_rounds_legs_run_on_one_thread_in_submission_order() -> None:
    workers = _workers(4, pass_on_after_s=60)  # never released early, even on a slow CI
    own = _own_threads(workers)
    ran: list[tuple[str, int]] = []  # (job, thread)

    def job(name: str) -> None:
        ran.append((name, threading.get_ident()))

    async def main() -> None:
        futures = []
        for n in range(3):  # one loop iteration: every device twice, and gpu-2 thrice
            for i in (2, 0, 3, 1) if n < 2 else (2,):
                futures.append(workers[i].submit(lambda i=i, n=n: job(f"{i}.{n}")))  # type: ignore[misc]
        await _results(futures)

    try:
        asyncio.run(main())
        assert [name for name, _ in ran] == ["2.0", "2.1", "2.2", "0.0", "0.1", "3.0", "3.1",
                                             "1.0", "1.1"]  # each device's jobs in one leg
        threads = {thread for _, thread in ran}
        assert len(threads) == 1  # one courier ran every leg
        assert threads.isdisjoint(own) and threading.get_ident() not in threads
    finally:
        for worker in workers:
            worker.stop()


def test_a_hung_leg_is_released_and_the_next_rounds_run_on_a_new_courier(
        new_threads: Callable[[], set[threading.Thread]]) -> None:
    workers = _workers(3, pass_on_after_s=0.05)
    own = _own_threads(workers)
    stuck = threading.Event()
    events: list[str] = []
    hung_on: list[int] = []

    def hang() -> str:
        hung_on.append(threading.get_ident())
        stuck.wait(DEADLINE_S * 2)
        events.append("hung call returned")
        return "late"

    def after_the_hang() -> int:
        events.append("next job of gpu-0")
        return threading.get_ident()

    async def main() -> None:
        hung = workers[0].submit(hang)
        others = [w.submit(threading.get_ident) for w in workers[1:]]
        # Released at the pass-on deadline: the other legs run on their own threads.
        assert await _results(others) == own[1:]
        assert not hung.done() and workers[0].busy
        # The next rounds, while the courier is still inside the hung call: a new courier
        # runs the healthy devices' legs; gpu-0's goes to its own thread, behind the hung one.
        queued = workers[0].submit(after_the_hang)
        couriers = set()
        for _ in range(3):
            couriers.update(await _results([w.submit(threading.get_ident) for w in workers[1:]]))
        (courier,) = couriers
        assert courier not in (*own, *hung_on)
        assert not queued.done() and events == []
        # The device threads, the stuck courier and the new one: no more threads than that.
        assert len(new_threads()) == 3 + 2
        stuck.set()
        assert await _results([hung, queued]) == ["late", own[0]]
        assert events == ["hung call returned", "next job of gpu-0"]
        # The stuck courier ended once out of its call; the new one carries on.
        await until(lambda: len(new_threads()) == 3 + 1, what="the stuck courier is still alive")
        assert await _results([w.submit(threading.get_ident) for w in workers]) == [courier] * 3
        await until(lambda: not any(w.busy for w in workers), what="a device is still busy")

    try:
        asyncio.run(main())
    finally:
        stuck.set()
        for worker in workers:
            worker.stop()
    wait_until(lambda: not new_threads(), what="a device thread or courier outlived stop()")


def test_a_courier_out_of_a_slow_leg_before_the_next_round_carries_on(
        new_threads: Callable[[], set[threading.Thread]]) -> None:
    """A leg slow enough for its round to be released, over before the next round starts:
    no new thread, the same courier runs the next round."""
    workers = _workers(3, pass_on_after_s=0.05)
    slow = threading.Event()
    ran_on: list[int] = []

    def slow_leg() -> None:
        ran_on.append(threading.get_ident())
        slow.wait(DEADLINE_S * 2)

    async def main() -> None:
        first = workers[0].submit(slow_leg)
        others = [w.submit(threading.get_ident) for w in workers[1:]]
        await _results(others)  # released: they ran on their own threads
        slow.set()
        await _results([first])
        for _ in range(3):
            assert await _results([w.submit(threading.get_ident) for w in workers]) == ran_on * 3
        assert len(new_threads()) == 3 + 1

    try:
        asyncio.run(main())
    finally:
        slow.set()
        for worker in workers:
            worker.stop()


def test_a_device_busy_on_its_own_thread_is_not_run_by_the_courier_meanwhile() -> None:
    workers = _workers(3, pass_on_after_s=60)
    own = _own_threads(workers)
    release = threading.Event()
    events: list[str] = []

    def first() -> int:
        events.append("first started")
        release.wait(DEADLINE_S * 2)
        events.append("first ended")
        return threading.get_ident()

    def second() -> int:
        events.append("second started")
        return threading.get_ident()

    async def main() -> None:
        # Handed to gpu-1's own thread (outside a loop, as the relay-less path does).
        earlier = await asyncio.to_thread(workers[1].submit, first)
        await until(lambda: events == ["first started"], what="the first job never started")
        later = workers[1].submit(second)  # a round's leg, behind the job on gpu-1's thread
        others = [workers[0].submit(threading.get_ident), workers[2].submit(threading.get_ident)]
        couriers = set(await _results(others))
        assert len(couriers) == 1 and couriers.isdisjoint(own)  # the courier did not wait
        assert events == ["first started"] and not later.done()
        release.set()
        assert await _results([earlier, later]) == [own[1], own[1]]
        assert events == ["first started", "first ended", "second started"]

    try:
        asyncio.run(main())
    finally:
        release.set()
        for worker in workers:
            worker.stop()


def test_a_leg_waits_behind_a_batch_its_devices_thread_resumes_after_a_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu-1's thread fails in the middle of a batch (a fault in its own loop, after job a)
    and a round brings gpu-1 a job while the thread waits to restart: that leg goes behind
    the batch, which the restarted thread finishes first (a ends with an error, b runs)."""
    workers = _workers(3, pass_on_after_s=60)
    worker = workers[1]
    hold, handled = threading.Event(), threading.Event()
    order: list[str] = []

    def job(name: str, then: threading.Event | None = None) -> str:
        order.append(name)
        if then is not None:
            then.wait(DEADLINE_S * 2)
        return name

    run_one = worker._run_one

    def run_one_then_fail(batch_job: Any) -> Any:
        settle = run_one(batch_job)
        if order[-1] == "a":
            raise Bug("in the device thread's loop")
        return settle

    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        later: list[Future[Any]] = []

        def a_round() -> None:
            later.append(worker.submit(lambda: job("c")))
            def d() -> str:
                name = job("d")
                handled.set()
                return name

            later.append(workers[2].submit(d))

        class DuringTheRestart(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                # On gpu-1's thread, its loop failed, before the restart: a round runs now.
                if record.args and record.args[0] == "gpu-1":  # type: ignore[index]
                    loop.call_soon_threadsafe(a_round)
                    handled.wait(DEADLINE_S)

        handler = DuringTheRestart()
        logging.getLogger(supervised.__name__).addHandler(handler)
        try:
            first = await asyncio.to_thread(worker.submit, lambda: job("z", hold))
            await until(lambda: order == ["z"], what="job z never started")
            # One batch for gpu-1's own thread, behind z.
            a = await asyncio.to_thread(worker.submit, lambda: job("a"))
            b = await asyncio.to_thread(worker.submit, lambda: job("b"))
            monkeypatch.setattr(worker, "_run_one", run_one_then_fail)
            hold.set()
            await until(lambda: len(later) == 2, what="the round never ran")
            outcomes: list[object] = []
            for future in (first, a, b, *later):
                try:
                    outcomes.append(await _results([future]))
                except RuntimeError as error:
                    outcomes.append(error)
            return outcomes
        finally:
            logging.getLogger(supervised.__name__).removeHandler(handler)

    try:
        z, a, b, c, d = asyncio.run(main())
        assert (z, b, c, d) == (["z"], ["b"], ["c"], ["d"])
        assert isinstance(a, RuntimeError) and "restarted" in str(a)
        assert order == ["z", "a", "d", "b", "c"]  # gpu-1's b before c: submission order
    finally:
        hold.set()
        for worker_ in workers:
            worker_.stop()


def test_an_exception_in_a_job_reaches_its_waiter() -> None:
    workers = _workers(3, pass_on_after_s=60)

    def fails() -> None:
        raise ValueError("device said no")

    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        jobs: list[LoopJob[Any]] = [
            workers[0].run_on_loop(lambda: 1, loop), workers[1].run_on_loop(fails, loop),
            workers[2].run_on_loop(lambda: 3, loop)]
        done, _ = await asyncio.wait([j.waiter for j in jobs], timeout=DEADLINE_S)
        assert len(done) == 3
        return [j.waiter.exception() or j.waiter.result() for j in jobs]

    try:
        first, error, third = asyncio.run(main())
        assert (first, third) == (1, 3)
        assert isinstance(error, ValueError) and str(error) == "device said no"
        wait_until(lambda: not any(w.busy for w in workers), what="a device is still busy")
    finally:
        for worker in workers:
            worker.stop()


def test_a_courier_whose_loop_fails_is_restarted_and_every_job_is_settled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault strikes after gpu-1's first job ran, outside the job: that job ends with an
    error, the rest of its leg and the round run on the restarted courier."""
    workers = _workers(3, pass_on_after_s=60)
    worker = workers[1]
    run_one = worker._run_one
    failed: list[bool] = []

    def run_one_then_fail(job: Any) -> Any:
        settle = run_one(job)
        if not failed:
            failed.append(True)
            raise Bug("in the courier's loop")
        return settle

    monkeypatch.setattr(worker, "_run_one", run_one_then_fail)
    before = restarts().get("gpu-courier-1", 0)

    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        jobs: list[LoopJob[Any]] = [
            workers[0].run_on_loop(lambda: 0, loop), worker.run_on_loop(lambda: 1, loop),
            worker.run_on_loop(lambda: 2, loop), workers[2].run_on_loop(lambda: 3, loop)]
        done, _ = await asyncio.wait([j.waiter for j in jobs], timeout=DEADLINE_S)
        assert len(done) == 4
        return [j.waiter.exception() or j.waiter.result() for j in jobs]

    try:
        zero, lost, two, three = asyncio.run(main())
        assert (zero, two, three) == (0, 2, 3)
        assert isinstance(lost, RuntimeError) and "restarted" in str(lost)
        assert restarts().get("gpu-courier-1", 0) == before + 1
        wait_until(lambda: not any(w.busy for w in workers), what="a device is still busy")
    finally:
        for worker_ in workers:
            worker_.stop()


def test_the_couriers_cpu_is_counted_with_the_device_threads() -> None:
    """The agent's CPU figures (``threads.costs``) count the courier as a device thread,
    whatever its name (its own between rounds, a device's during that device's leg)."""
    workers = _workers(2, pass_on_after_s=60)

    async def main() -> None:
        await _results([w.submit(lambda: None) for w in workers])

    try:
        asyncio.run(main())
        courier = [t for t in threading.enumerate() if t.name.startswith("gpu-courier-")]
        assert courier and all(getattr(t, "family", None) == "gpu" for t in courier)
        assert not [name for name in costs.threads() if "courier" in name]
        assert "gpu" in costs.threads()
    finally:
        for worker in workers:
            worker.stop()
