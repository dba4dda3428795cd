"""NVML_ERROR_DEPRECATED is a permanent answer: a withdrawn call is dropped, not retried."""

from __future__ import annotations

import pynvml

from gpu_otel_agent.plugins.nvidia.nvml import Unavailable, classify


def test_deprecated_is_unavailable_for_good() -> None:
    error = pynvml.NVMLError(pynvml.NVML_ERROR_DEPRECATED)
    assert isinstance(classify(error, "nvmlDeviceGetTemperature"), Unavailable)
