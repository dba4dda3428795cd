"""The one-shot peer's peak RSS must be its own, not the benchmark's (see spawn_child.py)."""

from __future__ import annotations

import os

from tests.bench.procstat import run_child


def test_child_peak_rss_does_not_inherit_a_large_parent() -> None:
    ballast = bytearray(200 * 1024 * 1024)
    ballast[:: 4096] = b"\x01" * len(ballast[:: 4096])  # touch every page: really resident
    run = run_child(["true"], os.environ)
    assert run.returncode == 0
    assert 0 < run.peak_rss_mib < 100  # the 200 MiB parent is not counted
    assert len(ballast) > 0


def test_child_stdout_and_exit_code_pass_through() -> None:
    run = run_child(["sh", "-c", "echo hello; exit 3"], os.environ)
    assert run.returncode == 3
    assert run.stdout == b"hello\n"
    assert run.cpu_s >= 0
