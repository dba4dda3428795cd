"""Fixtures of the health-event tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB file system (tmpfs), to fill up or remount read-only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "fs"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(point)],
                   check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)
