"""Runs ``gpu-agent capture --vendor amd``: the AMD GPUs amdsmi shows, as ``amd-smi
static/metric --json`` (:func:`~.capture.capture_json`), registered as the ``amd`` entry point
of ``gpu_otel_agent.capture_writers``. The JSON holds no process list, so
there are no names to scrub."""

from __future__ import annotations

import sys
from pathlib import Path

from gpu_otel_agent.backends.protocol import BackendUnavailable
from gpu_otel_agent.extensions.capture import write_whole
from gpu_otel_agent.plugins.amd import smi
from gpu_otel_agent.plugins.amd.capture import capture_json


def run(out: Path | None, *, keep_names: bool) -> int:
    del keep_names  # amd-smi's static/metric JSON names no process
    try:
        module = smi.load()
        module.amdsmi_init(module.AmdSmiInitFlags.INIT_AMD_GPUS)
    except BackendUnavailable as error:
        print(f"gpu-agent capture: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # amdsmi's own exception classes live in the module it loaded
        print(f"gpu-agent capture: amdsmi could not be initialised: {error}", file=sys.stderr)
        return 1
    try:
        text = capture_json(module, list(module.amdsmi_get_processor_handles()))
    finally:
        module.amdsmi_shut_down()
    return write_whole(text, out)
