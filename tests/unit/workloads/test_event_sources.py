"""The event sources against the real kernel: netlink proc connector and inotify."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

from gpu_otel_agent.config.schema import AttributionConfig
from gpu_otel_agent.runtime.attribution_setup import build_attribution
from gpu_otel_agent.workloads import cn_proc, pid_filter
from gpu_otel_agent.workloads.inotify import IN_CREATE, IN_DELETE, IN_ISDIR, Inotify
from gpu_otel_agent.workloads.netlink import ProcConnector, kernel_filters
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver
from tests.polling import until as _until


async def _ended(process: asyncio.subprocess.Process, exits: list[int]) -> None:
    """End ``process`` (if it still runs) and wait for its exit event."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await process.wait()
    await _until(lambda: process.pid in exits)


def test_exec_and_exit_of_a_real_process_arrive() -> None:
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs CAP_NET_ADMIN")
    execs: list[int] = []
    exits: list[int] = []

    async def scenario() -> None:
        connector = ProcConnector(execs.append, exits.append, lambda: None)
        assert connector.start(asyncio.get_running_loop())
        try:
            child = subprocess.Popen(["true"])
            child.wait()
            await _until(lambda: child.pid in exits)
            assert child.pid in execs
        finally:
            connector.stop()

    asyncio.run(scenario())


def test_thread_exits_are_not_process_exits() -> None:
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs CAP_NET_ADMIN")
    exits: list[int] = []

    async def scenario() -> None:
        connector = ProcConnector(lambda pid: None, exits.append, lambda: None)
        assert connector.start(asyncio.get_running_loop())
        try:
            code = ("import threading; t = threading.Thread(target=lambda: None); t.start(); "
                    "t.join(); print(t.native_id)")
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE)
            out, _ = await child.communicate()
            thread = int(out)
            await _until(lambda: child.pid in exits)
            # The thread ended before its process, so its event was decoded before this one.
            assert thread != child.pid and thread not in exits
        finally:
            connector.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("filtered", [True, False], ids=["event-mask", "all-events"])
def test_both_control_messages_are_understood_by_the_kernel(filtered: bool) -> None:
    """The 6.6+ ``struct proc_input`` (exec and exit only) and the bare operation (all)."""
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs CAP_NET_ADMIN")
    if filtered and not kernel_filters():
        pytest.skip("this kernel predates event masks (Linux 6.6)")
    forks: list[int] = []
    exits: list[int] = []

    async def scenario() -> None:
        connector = ProcConnector(lambda pid: None, exits.append, lambda: None,
                                  on_fork=forks.append)
        connector.filtered = filtered
        assert connector.start(asyncio.get_running_loop())
        try:
            child = subprocess.Popen(["true"])
            child.wait()
            await _until(lambda: child.pid in exits)
            # A fork precedes its exit on the socket: by now it has arrived if it was sent.
            if filtered:
                assert forks == []
            else:
                assert child.pid in forks
        finally:
            connector.stop()

    asyncio.run(scenario())


def test_the_kernel_drops_events_of_processes_not_watched() -> None:
    """With a PID filter, host churn never reaches the agent: only the watched process's
    exit arrives, not the exec/exit of the processes started around it."""
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs CAP_NET_ADMIN")
    execs: list[int] = []
    exits: list[int] = []

    async def scenario() -> None:
        connector = ProcConnector(execs.append, exits.append, lambda: None)
        watched = await asyncio.create_subprocess_exec("sleep", "60")
        connector.watch({watched.pid})
        assert connector.start(asyncio.get_running_loop())
        try:
            assert connector.filtering
            churn = [subprocess.Popen(["true"]) for _ in range(20)]
            for child in churn:
                child.wait()
            await _ended(watched, exits)
            # The churn ended before the watched exit was sent, so it would have come first.
            assert not {c.pid for c in churn} & {*execs, *exits}
            assert connector.process_events == 1
            # None: every process again (the filter is detached).
            connector.watch(None)
            assert not connector.filtering
            await _ended(await asyncio.create_subprocess_exec("true"), exits)
        finally:
            connector.stop()

    asyncio.run(scenario())


def test_the_filter_follows_the_watched_set() -> None:
    """A PID added later is let through from then on; more PIDs than one filter holds fall
    back to every event rather than losing any."""
    if os.geteuid() != 0:
        pytest.skip("the proc connector needs CAP_NET_ADMIN")
    exits: list[int] = []

    async def scenario() -> None:
        connector = ProcConnector(lambda pid: None, exits.append, lambda: None)
        assert connector.start(asyncio.get_running_loop())
        try:
            connector.watch(set())
            first = await asyncio.create_subprocess_exec("sleep", "60")
            connector.watch({first.pid})
            await _ended(first, exits)
            connector.watch(range(1, pid_filter.MAX_PIDS + 2))
            assert not connector.filtering
            await _ended(await asyncio.create_subprocess_exec("true"), exits)
        finally:
            connector.stop()

    asyncio.run(scenario())


def test_the_filter_program_is_what_the_kernel_takes() -> None:
    """Jump offsets fit their 8 bits and the program fits BPF_MAXINSNS at MAX_PIDS."""
    code = pid_filter.program(range(1, pid_filter.MAX_PIDS + 1))
    assert len(code) <= pid_filter.BPF_MAXINSNS
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in code)
    for index, (op, jt, jf, k) in enumerate(code):
        targets = [index + 1 + jt, index + 1 + jf] if op != pid_filter.BPF_JMP_JA else \
            [index + 1 + k]
        if op in (pid_filter.BPF_JMP_JEQ_K, pid_filter.BPF_JMP_JGT_K, pid_filter.BPF_JMP_JA):
            assert all(t < len(code) for t in targets)


def _proc_event(what: int, pid: int) -> bytes:
    """A proc connector message as the kernel lays it out: ``what`` about ``pid``."""
    message = bytearray(cn_proc.MIN_EVENT_LENGTH)
    struct.pack_into("=I", message, cn_proc.WHAT_OFFSET, what)
    offset = {cn_proc.PROC_EVENT_FORK: cn_proc.FORK_CHILD_OFFSET,
              cn_proc.PROC_EVENT_EXEC: cn_proc.EXEC_PID_OFFSET}.get(what, cn_proc.EXIT_PID_OFFSET)
    struct.pack_into("=ii", message, offset, pid, pid)
    return bytes(message)


def test_the_kernel_runs_the_filter_as_meant() -> None:
    """The program, attached to a real socket, is run by the kernel on crafted messages: the
    watched PID's fork/exec/exit and acknowledgements pass; other PIDs' process events and
    every other event type (here PROC_EVENT_COMM, 0x200, of the watched PID) are dropped."""
    comm = 0x00000200  # linux/cn_proc.h PROC_EVENT_COMM
    watched, other = 4242, 4243
    receiver, sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with receiver, sender:
        pid_filter.attach(receiver, {watched})
        receiver.setblocking(False)
        cases = [(cn_proc.PROC_EVENT_EXIT, watched, True), (cn_proc.PROC_EVENT_EXIT, other, False),
                 (cn_proc.PROC_EVENT_EXEC, watched, True), (cn_proc.PROC_EVENT_EXEC, other, False),
                 (cn_proc.PROC_EVENT_FORK, watched, True), (cn_proc.PROC_EVENT_FORK, other, False),
                 (cn_proc.PROC_EVENT_NONE, 0, True), (comm, watched, False)]
        passed = []
        for what, pid, _ in cases:
            sender.send(_proc_event(what, pid))
            with contextlib.suppress(BlockingIOError):
                receiver.recv(4096)
                passed.append((what, pid))
        assert passed == [(what, pid) for what, pid, through in cases if through]


def test_the_netlink_source_leaves_pyroute2_alone() -> None:
    """Starting the connector imports no pyroute2 module (a user's own import stays intact)."""
    code = """
import asyncio, importlib.util, os, sys
from gpu_otel_agent.workloads.netlink import ProcConnector, kernel_filters

async def main():
    connector = ProcConnector(lambda pid: None, lambda pid: None, lambda: None)
    connector.start(asyncio.get_running_loop())
    connector.stop()

asyncio.run(main())
assert not [m for m in sys.modules if m.split(".")[0] == "pyroute2"], "pyroute2 was imported"
if importlib.util.find_spec("pyroute2") is not None:
    from pyroute2 import IPRoute
    with IPRoute() as ipr:
        assert ipr.link_lookup(ifname="lo")
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_directories_appearing_and_vanishing(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []

    async def scenario() -> None:
        watcher = Inotify(lambda d, name, mask: seen.append((name, mask)), lambda: None)
        assert watcher.start(asyncio.get_running_loop())
        try:
            assert watcher.watch(tmp_path)
            (tmp_path / "pod-x").mkdir()
            await _until(lambda: any(n == "pod-x" and m & IN_CREATE for n, m in seen))
            (tmp_path / "pod-x").rmdir()
            await _until(lambda: any(n == "pod-x" and m & IN_DELETE for n, m in seen))
            assert all(m & IN_ISDIR for _, m in seen)
        finally:
            watcher.stop()

    asyncio.run(scenario())


class _NoProcessEvents:
    """A process event source that never starts: reconciliation alone (no root needed)."""

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        return False

    def stop(self) -> None:
        pass

    def watch(self, pids: Collection[int] | None) -> None:
        pass


PRIVATE_CGROUP_NS = "the agent runs in a private cgroup namespace"
HIDDEN_PID = "does not share the host PID namespace"


def test_private_cgroup_namespace_is_reported_once(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    for who in ("self", "1"):
        (tmp_path / who / "ns").mkdir(parents=True)
        (tmp_path / who / "ns" / "cgroup").write_text(who)  # two files: two inodes
    config = AttributionConfig(proc_root=str(tmp_path), cgroup_root=str(tmp_path / "cgroup"))
    with caplog.at_level(logging.WARNING):
        _, service = build_attribution(config, lambda callbacks: _NoProcessEvents())
        assert caplog.text.count(PRIVATE_CGROUP_NS) == 1  # said at start...
        for cycle in range(3):  # ...and not again on the cycles and reconciles that follow
            service.resolver.process(200 + cycle)
            service.resolver.reconcile()
            service.resolver.on_cgroup_change()
    assert caplog.text.count(PRIVATE_CGROUP_NS) == 1, caplog.text


def test_missing_host_pid_namespace_is_reported_once(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    resolver = WorkloadResolver(ProcReader(tmp_path))  # an empty /proc: no GPU PID visible
    with caplog.at_level(logging.WARNING):
        for pid in (100, 101, 102):
            facts = resolver.process(pid)
            assert facts is not None and not facts.exists
        assert caplog.text.count(HIDDEN_PID) == 1
        # The next cycles: the same PIDs forgotten and looked up again, new PIDs, reconciles.
        for cycle in range(3):
            resolver.reconcile()
            resolver.retain(set())
            for pid in (100, 101, 102, 300 + cycle):
                facts = resolver.process(pid)
                assert facts is not None and not facts.exists
    assert resolver.resolutions >= 7  # the lookups really went to /proc again
    assert caplog.text.count(HIDDEN_PID) == 1, caplog.text


def test_kernel_filters_reads_the_release_platform_reads() -> None:
    # netlink reads os.uname() instead of importing platform (issue 41): the same release.
    import platform

    assert os.uname().release == platform.release()
    assert kernel_filters() is kernel_filters(platform.release())
