"""CPU time and peak memory of one process, read from /proc (Linux only).

CPU is utime + stime of the process itself (not its children, not the simulated node, which runs
in its own process), so a client is charged only for its own work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    # The command name may contain spaces or ")"; the fields start after the last ")".
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def run_seconds(pid: int) -> float:
    """CPU time of the process's live threads from the scheduler (ns resolution, where
    utime + stime move in clock ticks): for short windows and small differences."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the high-water mark of resident memory, start-up included."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmHWM for process {pid}")


def rss_mib(pid: int) -> float:
    """VmRSS: resident memory now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for process {pid}")


SPAWN_HELPER = Path(__file__).with_name("spawn_child.py")


@dataclass(frozen=True)
class ChildRun:
    """A short-lived child process, charged with all the CPU it used (wait4 rusage)."""

    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    stdout: bytes


def run_child(command: Sequence[str], env: Mapping[str, str], timeout: float = 60) -> ChildRun:
    """Run ``command`` through the spawn helper (see spawn_child.py for why)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(SPAWN_HELPER), *command],
        env=dict(env), capture_output=True, timeout=timeout, check=False,
    )
    wall = time.monotonic() - started
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode or not lines:
        raise RuntimeError(f"spawn helper failed: {done.stderr[-2000:]!r}")
    usage = json.loads(lines[-1])
    return ChildRun(
        returncode=int(usage["returncode"]),
        wall_s=wall,
        cpu_s=float(usage["cpu_s"]),
        peak_rss_mib=int(usage["maxrss_kib"]) / 1024,  # KiB on Linux
        stdout=done.stdout,
    )
