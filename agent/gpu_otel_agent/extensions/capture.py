"""Capture writers: a vendor plugin writes the GPUs this node shows as its own tool prints them
(``gpu-agent capture --vendor <name>``), one entry point of ``CAPTURE_WRITER_GROUP`` per vendor.

Why an entry-point group: the ``capture`` command (a plugin) would otherwise import the vendor
plugins by name, and plugins import the core's doors, never each other. A writer is loaded only
when its vendor is asked for, so ``--vendor amd`` never loads pynvml and the reverse.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Protocol

from gpu_otel_agent.distributions import entry_points_of

CAPTURE_WRITER_GROUP = "gpu_otel_agent.capture_writers"


class CaptureWriter(Protocol):
    """Writes the vendor's GPUs this node shows as its tool's capture; returns the exit code."""

    def __call__(self, out: Path | None, *, keep_names: bool) -> int: ...


class NoCaptureWriter(LookupError):
    """No writer is registered for that vendor."""


def capture_vendors() -> tuple[str, ...]:
    """The vendors a writer is installed for (the entry points' names; nothing is imported)."""
    return tuple(sorted({entry.name for entry in entry_points_of(CAPTURE_WRITER_GROUP)}))


def capture_writer(vendor: str) -> CaptureWriter:
    """The installed writer of ``vendor``; NoCaptureWriter if there is none."""
    found = [entry for entry in entry_points_of(CAPTURE_WRITER_GROUP) if entry.name == vendor]
    if not found:
        raise NoCaptureWriter(f"no capture writer for {vendor!r} (have: "
                              f"{', '.join(capture_vendors())})")
    writer: CaptureWriter = found[0].load()
    return writer


def write_whole(text: str, out: Path | None) -> int:
    """A writer's output to ``out`` (standard output if None), whole or not at all: a
    half-written capture would replay as a different node."""
    if out is None:
        sys.stdout.write(text)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"gpu-agent capture: wrote {out}", file=sys.stderr)
    return 0
