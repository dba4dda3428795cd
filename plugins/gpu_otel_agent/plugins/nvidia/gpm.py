"""GPU Performance Monitoring (Hopper and newer): SM, tensor and DRAM activity.

GPM metrics are computed between two samples, so the reader keeps the previous sample and
each cycle costs two calls: take a sample, compute against the last one. nvml.h
(nvmlGpmMetricsGet, nvmlGpmSampleGet): "The interval between these two nvmlGpmSampleGet()
calls should be greater than 100ms due to the internal sample refresh rate". A read sooner than
that after the baseline (the first read comes right after the probe took the baseline) takes no
sample and reports nothing: the baseline stays for the next read, as DCGM does
(dcgmlib/src/DcgmGpmManager.cpp: no value until a baseline one update interval old exists).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pynvml

from gpu_otel_agent.model.snapshot import Reading

METRICS: tuple[tuple[int, str], ...] = (
    (pynvml.NVML_GPM_METRIC_SM_UTIL, "gpu.sm.utilization"),
    (pynvml.NVML_GPM_METRIC_SM_OCCUPANCY, "gpu.sm.occupancy"),
    (pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL, "gpu.tensor.utilization"),
    (pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL, "gpu.dram.utilization"),
)
MIN_INTERVAL_S = 0.1  # nvml.h: samples "greater than 100ms" apart


class GpmReader:
    """Owns the two GPM sample buffers of one device."""

    def __init__(self, handle: Any, sample: Callable[[Any], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``sample`` fills a sample buffer (default: the whole GPU's, ``nvmlGpmSampleGet``;
        a MIG instance's is ``nvmlGpmMigSampleGet`` on its parent)."""
        self._handle = handle
        self._sample = sample or (lambda buffer: pynvml.nvmlGpmSampleGet(handle, buffer))
        self._clock = clock
        self._previous: Any = None
        self._current: Any = None
        self._previous_at = -math.inf  # when the baseline sample was taken

    @staticmethod
    def supported(handle: Any) -> bool:
        return bool(pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)

    def start(self) -> None:
        if self._previous is None:
            self._previous = pynvml.nvmlGpmSampleAlloc()
            self._current = pynvml.nvmlGpmSampleAlloc()
        self._sample(self._previous)
        self._previous_at = self._clock()

    def due(self) -> bool:
        """More than the minimum interval has passed since the baseline sample."""
        return self._clock() - self._previous_at > MIN_INTERVAL_S

    def read(self) -> tuple[Reading, ...]:
        now = self._clock()
        if now - self._previous_at <= MIN_INTERVAL_S:
            return ()  # too soon after the baseline: keep it for the next read
        self._sample(self._current)
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(METRICS)
        request.sample1 = self._previous
        request.sample2 = self._current
        for slot, (metric_id, _) in enumerate(METRICS):
            request.metrics[slot].metricId = metric_id
        # The newer sample becomes the baseline of the next cycle.
        self._previous, self._current = self._current, self._previous
        self._previous_at = now
        pynvml.nvmlGpmMetricsGet(request)
        # A NaN value (no counter refresh between the samples) is no value: DCGM blanks it too.
        return tuple(
            Reading(name, request.metrics[slot].value / 100)
            for slot, (_, name) in enumerate(METRICS)
            if request.metrics[slot].nvmlReturn == pynvml.NVML_SUCCESS
            and not math.isnan(request.metrics[slot].value)
        )
