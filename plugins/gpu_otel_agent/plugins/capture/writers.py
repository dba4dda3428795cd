"""The vendors' capture writers (``gpu-agent capture --vendor V``) and how a capture is written.

Each vendor plugin writes its own GPUs (``nvidia.capture.writer``, ``amd.capture_command``);
they are named here as ``"module:function"`` and imported only when that vendor is asked for,
so ``gpu-agent capture --vendor amd`` never loads pynvml and the reverse.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from importlib import import_module
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

# `gpu-agent capture --vendor V`: "module:function" of a CaptureWriter per vendor.
CAPTURE_WRITERS: Mapping[str, str] = MappingProxyType({
    "nvidia": "gpu_otel_agent.plugins.nvidia.capture.writer:run",
    "amd": "gpu_otel_agent.plugins.amd.capture_command:run",
})


class NoCaptureWriter(LookupError):
    """No writer is registered for that vendor."""


class CaptureWriter(Protocol):
    """Writes the vendor's GPUs this node shows as its tool's capture; returns the exit code."""

    def __call__(self, out: Path | None, *, keep_names: bool) -> int: ...


def capture_writer(vendor: str) -> CaptureWriter:
    """The registered writer of ``vendor``; NoCaptureWriter if there is none."""
    entry = CAPTURE_WRITERS.get(vendor)
    if entry is None:
        raise NoCaptureWriter(f"no capture writer for {vendor!r} (have: "
                              f"{', '.join(CAPTURE_WRITERS)})")
    module, _, attribute = entry.partition(":")
    writer: CaptureWriter = getattr(import_module(module), attribute)
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
