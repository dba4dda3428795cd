"""A full file system, for the spool's full-disk tests (on the ``small_fs`` tmpfs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def fill(directory: Path) -> Path:
    """Fill the file system ``directory`` is on (a ballast file, returned for removal)."""
    ballast = directory / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"x" * 4096)
    finally:
        os.close(fd)
    return ballast
