"""Every long-lived thread of the agent survives a bug: killed (an exception raised inside it,
as a bug would), it is logged with the cause, counted in gpu_agent.thread.restarts and
restarted, and goes on doing its work."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.local.client import get
from gpu_otel_agent.local.endpoint import LocalEndpoint
from gpu_otel_agent.local.routes import Sources, build_routes
from gpu_otel_agent.model.snapshot import SnapshotStore
from gpu_otel_agent.plugins.nvidia.kmsg import KmsgXidReader
from gpu_otel_agent.runtime.reliability import reliability_readings
from gpu_otel_agent.threads.device_worker import DeviceWorker
from gpu_otel_agent.threads.supervised import SupervisedThread, restarts
from tests.integration.test_health_events import _kmsg_writable
from tests.polling import DEADLINE_S
from tests.polling import wait_until as wait
from tests.unit.export.events.collectors import Accepting


class Bug(Exception):
    """What a bug raises inside a thread."""


def kill(name: str, started_after: frozenset[threading.Thread] = frozenset()) -> None:
    """Raise :class:`Bug` inside the running thread called ``name`` (at its next bytecode);
    the one started after the threads ``started_after``, where an earlier test may have left
    a thread of the same name behind."""
    (thread,) = [t for t in threading.enumerate() if t.name == name and t not in started_after]
    assert thread.ident is not None
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                      ctypes.py_object(Bug))
    assert done == 1


def test_a_failing_thread_is_logged_counted_and_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: list[int] = []

    def work() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise ValueError(f"bug number {len(runs)}")

    before = restarts().get("test-worker", 0)
    with caplog.at_level(logging.ERROR):
        thread = SupervisedThread(work, "test-worker", first_backoff_s=0.01)
        thread.start()
        thread.join(30)
    assert not thread.is_alive() and len(runs) == 3  # ended once the work returned
    assert restarts()["test-worker"] - before == 2
    failures = [r for r in caplog.records if "thread test-worker failed" in r.getMessage()]
    assert len(failures) == 2 and "bug number 1" in failures[0].getMessage()
    assert failures[0].exc_info is not None  # the traceback: the cause
    readings = {(r.metric, r.attributes) for r in reliability_readings()}
    assert ("gpu_agent.thread.restarts", (("thread.name", "test-worker"),)) in readings


def test_a_thread_stopping_after_a_failure_is_not_restarted() -> None:
    stopping = threading.Event()
    runs: list[int] = []

    def work() -> None:
        runs.append(1)
        stopping.set()
        raise ValueError("at shutdown")

    thread = SupervisedThread(work, "test-stopping", stopping=stopping)
    thread.start()
    thread.join(30)
    assert runs == [1]


@pytest.mark.parametrize("name", ["otlp-events-wal", "otlp-events-sync", "otlp-events"])
def test_each_event_thread_killed_is_restarted_and_events_still_arrive(
    tmp_path: Path, name: str,
) -> None:
    collector = Accepting()
    before = restarts().get(name, 0)
    running = frozenset(threading.enumerate())

    async def main() -> None:
        pusher = EventPusher(collector, Spool(tmp_path / "spool", 1 << 20), retry=0.01)
        task = asyncio.create_task(pusher.run())
        try:
            await asyncio.to_thread(wait, lambda: name in {
                t.name for t in threading.enumerate() if t not in running})
            kill(name, started_after=running)
            # The exception fires only once the thread runs Python again, and a thread blocked
            # waiting for events runs when an event wakes it: keep waking it until the restart
            # is counted (not for a fixed window; on a loaded machine it may take longer).
            deadline = time.monotonic() + DEADLINE_S
            i = 0
            while restarts().get(name, 0) <= before:
                assert time.monotonic() < deadline, f"{name} was never restarted"
                i += 1
                pusher.submit(HealthEvent("gpu.xid", i, Severity.ERROR, "x", ()))
                await asyncio.sleep(0.02)
            pusher.submit(HealthEvent("gpu.xid", 1_000_000, Severity.ERROR, "after", ()))
            await asyncio.to_thread(wait, lambda: 1_000_000 in collector.accepted)
        finally:
            task.cancel()
            pusher.close([], timeout=2.0)

    asyncio.run(main())
    assert restarts()[name] == before + 1


def test_the_local_endpoint_killed_is_restarted_and_still_answers() -> None:
    directory = Path(tempfile.mkdtemp(prefix="ga-"))
    try:
        path = directory / "agent.sock"
        endpoint = LocalEndpoint(path, None, build_routes(Sources(SnapshotStore(), None, {})))
        running = frozenset(threading.enumerate())
        endpoint.start()
        before = restarts().get("local-endpoint", 0)
        try:
            assert "devices" in get(path, "/v1/snapshot", timeout=10.0)  # it is serving
            # The exception fires at the thread's next bytecode. Where that is inside a
            # connection's handler (still closing the request above, on a loaded machine),
            # asyncio logs and swallows it, as it would a bug there, and the endpoint goes on:
            # raise it again until one lands in the loop itself and the restart is counted.
            deadline = time.monotonic() + DEADLINE_S
            while restarts().get("local-endpoint", 0) <= before:
                assert time.monotonic() < deadline, "local-endpoint was never restarted"
                kill("local-endpoint", started_after=running)
                with socket.socket(socket.AF_UNIX) as poke:  # wakes its accept()
                    poke.connect(str(path))
                time.sleep(0.2)
            assert "devices" in get(path, "/v1/snapshot", timeout=10.0)
        finally:
            endpoint.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_a_device_thread_killed_is_restarted_and_still_runs_jobs() -> None:
    running = frozenset(threading.enumerate())
    worker = DeviceWorker("device-test")
    before = restarts().get("device-test", 0)
    try:
        assert worker.submit(lambda: 1).result(10) == 1
        kill("device-test", started_after=running)
        # Wakes it. Killed in its wait, it may lose this one job (a bug in its own code
        # would strike after the batch is in hand, and that batch is finished after the
        # restart); the jobs after it run.
        worker.submit(lambda: 2)
        wait(lambda: restarts().get("device-test", 0) > before)
        assert worker.submit(lambda: 3).result(10) == 3
    finally:
        worker.stop()


def test_the_kernel_log_reader_killed_is_restarted_and_still_reads() -> None:
    if not _kmsg_writable():
        pytest.skip("writing /dev/kmsg needs root")
    seen: list[int] = []
    domain = 0xF000 + os.getpid() % 0xFFF  # a PCI domain no real GPU of this host has
    reader = KmsgXidReader({f"{domain:08x}:3B:00.0": "GPU-test"})
    before = restarts().get("kmsg-xid", 0)
    running = frozenset(threading.enumerate())

    def xid(code: int) -> None:
        with open("/dev/kmsg", "w") as kmsg:
            kmsg.write(f"NVRM: Xid (PCI:{domain:04x}:3b:00): {code}, pid=1, supervised test\n")

    try:
        reader.start(lambda batch: seen.extend(e.code for e in batch))
        # It reads from the end of the log, from when its thread opened it: write until it
        # has read one (not once after a guessed 0.2 s).
        deadline = time.monotonic() + 30
        while 13 not in seen:
            assert time.monotonic() < deadline, "the reader never read an XID line"
            xid(13)
            time.sleep(0.2)
        kill("kmsg-xid", started_after=running)
        xid(31)  # wakes its poll(): the bug fires
        wait(lambda: restarts().get("kmsg-xid", 0) > before)
        xid(43)
        wait(lambda: 43 in seen)
    finally:
        reader.stop()
