"""CPU time and peak memory of one process, read from /proc (Linux only).

CPU is utime + stime of the process itself (not its children, not the simulated node, which runs
in its own process), so a client is charged only for its own work.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    # The command name may contain spaces or ")"; the fields start after the last ")".
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the high-water mark of resident memory, start-up included."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmHWM for process {pid}")


@dataclass(frozen=True)
class ChildRun:
    """A short-lived child process, charged with all the CPU it used (wait4 rusage)."""

    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    stdout: bytes


def run_child(command: Sequence[str], env: Mapping[str, str], timeout: float = 60) -> ChildRun:
    started = time.monotonic()
    process = subprocess.Popen(
        command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    # Read to EOF ourselves and reap with wait4: that returns the rusage of exactly this child
    # (communicate() would reap it first, and RUSAGE_CHILDREN mixes in every child we ever had).
    killer = threading.Timer(timeout, process.kill)
    killer.start()
    try:
        assert process.stdout is not None
        stdout = process.stdout.read()
        process.stdout.close()
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        killer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(
        returncode=process.returncode,
        wall_s=time.monotonic() - started,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mib=usage.ru_maxrss / 1024,  # KiB on Linux
        stdout=stdout,
    )

