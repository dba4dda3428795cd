"""Runs ``gpu-agent capture --vendor nvidia`` (``CAPTURE_WRITERS`` of simulator_core.captures)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pynvml

from gpu_otel_agent.plugins.nvidia.capture.writer import capture_xml


def run(out: Path | None, *, keep_names: bool) -> int:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        print(f"gpu-agent capture: cannot open NVML: {error}", file=sys.stderr)
        return 1
    try:
        text = capture_xml(keep_names=keep_names)
    finally:
        pynvml.nvmlShutdown()
    if out is None:
        sys.stdout.write(text)
        return 0
    # Whole or not at all: a half-written capture would replay as a different node.
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
