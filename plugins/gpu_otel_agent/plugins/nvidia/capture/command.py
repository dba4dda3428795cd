"""Runs ``gpu-agent capture --vendor nvidia`` (``CAPTURE_WRITERS`` of simulator_core.captures)."""

from __future__ import annotations

import sys
from pathlib import Path

import pynvml

from gpu_otel_agent.plugins.nvidia.capture.writer import capture_xml
from gpu_otel_agent.plugins.simulator_core.captures import write_whole


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
    return write_whole(text, out)
