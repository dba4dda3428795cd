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

import ctypes
import math
import struct
import time
from collections.abc import Callable
from typing import Any

import pynvml

from gpu_otel_agent.model.snapshot import Reading
from gpu_otel_agent.plugins.nvidia.library import check, function
from gpu_otel_agent.plugins.nvidia.records import layout_format

METRICS: tuple[tuple[int, str], ...] = (
    (pynvml.NVML_GPM_METRIC_SM_UTIL, "gpu.sm.utilization"),
    (pynvml.NVML_GPM_METRIC_SM_OCCUPANCY, "gpu.sm.occupancy"),
    (pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL, "gpu.tensor.utilization"),
    (pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL, "gpu.dram.utilization"),
)
MIN_INTERVAL_S = 0.1  # nvml.h: samples "greater than 100ms" apart


class _Request:
    """``nvmlGpmMetricsGet``'s request made from bytes, its answers read by one ``struct``.

    pynvml's ``c_nvmlGpmMetricsGet_t`` is a 19 KB structure (room for every metric NVML has)
    whose members are set and read through ``_PrintableStructure``'s Python
    ``__setattr__``/``__getattribute__``, and each ``request.metrics[slot]`` builds a structure
    object: most of a GPM read (issue 41). Here the bytes pynvml's attribute path gives a
    request (version, count and metric ids set, the rest zero) are taken once; each read makes
    a new zeroed request (as transient as pynvml's fresh one: no 19 KB kept per device),
    copies in those bytes up to the last metric asked (beyond them they are zero already),
    writes the two sample pointers at their members' offsets, and unpacks
    each metric's return code and value at the offsets pynvml's types declare. Where a
    layout is not as expected, :func:`make` gives None and pynvml's attribute path answers.
    ``tests/unit/nvidia/test_gpm_request.py`` pins bytes and answers to that path."""

    def __init__(self, samples: struct.Struct, answers: struct.Struct) -> None:
        template = pynvml.c_nvmlGpmMetricsGet_t()
        template.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        template.numMetrics = len(METRICS)
        for slot, (metric_id, _) in enumerate(METRICS):
            template.metrics[slot].metricId = metric_id
        self.fresh = bytes(template)
        asked = pynvml.c_nvmlGpmMetricsGet_t.metrics.offset \
            + ctypes.sizeof(pynvml.c_nvmlGpmMetric_t) * len(METRICS)
        self.head = self.fresh[:asked]  # what differs from zero (the rest is checked below)
        if self.fresh[asked:].count(0) != len(self.fresh) - asked:
            self.head = self.fresh
        self.samples = samples  # sample1, sample2 as pointer-sized integers, at sample1's offset
        self.samples_at = pynvml.c_nvmlGpmMetricsGet_t.sample1.offset
        self.answers = answers  # (nvmlReturn, value) of each metric in METRICS order

    @staticmethod
    def make() -> _Request | None:
        request = pynvml.c_nvmlGpmMetricsGet_t
        pointer = ctypes.sizeof(pynvml.c_nvmlGpmSample_t)
        if pointer != 8 or request.sample2.offset != request.sample1.offset + pointer:
            return None
        record = layout_format(pynvml.c_nvmlGpmMetric_t, ("nvmlReturn", "value"), whole=True)
        metrics = request.metrics
        if record is None or ctypes.sizeof(pynvml.c_nvmlGpmMetric_t) * len(METRICS) \
                > metrics.size:
            return None
        answers = struct.Struct("=" + "x" * metrics.offset + record[1:] * len(METRICS))
        return _Request(struct.Struct("=QQ"), answers)

    def get(self, first: int, second: int) -> tuple[Reading, ...]:
        """``nvmlGpmMetricsGet`` between the samples at ``first`` and ``second`` (addresses):
        raises pynvml's error of a failed call, as its wrapper does."""
        request = pynvml.c_nvmlGpmMetricsGet_t()
        memoryview(request).cast("B")[:len(self.head)] = self.head
        self.samples.pack_into(request, self.samples_at, first, second)
        check(function("nvmlGpmMetricsGet")(ctypes.byref(request)))
        flat = self.answers.unpack_from(request)
        success = pynvml.NVML_SUCCESS
        # A NaN value (no counter refresh between the samples) is no value: DCGM blanks it too.
        return tuple(Reading(name, value / 100)
                     for (_, name), code, value in zip(METRICS, flat[0::2], flat[1::2],
                                                       strict=True)
                     if code == success and not math.isnan(value))


_REQUEST = _Request.make()


def _address(sample: Any) -> int:
    """The address a ``c_nvmlGpmSample_t`` holds (what assigning it to a member writes)."""
    return ctypes.cast(sample, ctypes.c_void_p).value or 0


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
        self._addresses = (0, 0)  # of the previous and current sample (swapped with them)
        self._previous_at = -math.inf  # when the baseline sample was taken

    @staticmethod
    def supported(handle: Any) -> bool:
        return bool(pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)

    def start(self) -> None:
        if self._previous is None:
            self._previous = pynvml.nvmlGpmSampleAlloc()
            self._current = pynvml.nvmlGpmSampleAlloc()
            self._addresses = (_address(self._previous), _address(self._current))
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
        if _REQUEST is not None:
            first, second = self._addresses
            # The newer sample becomes the baseline of the next cycle.
            self._previous, self._current = self._current, self._previous
            self._addresses = (second, first)
            self._previous_at = now
            return _REQUEST.get(first, second)
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
