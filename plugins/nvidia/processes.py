"""Per-process GPU memory and utilization from NVML.

Memory comes from the compute and graphics running-process lists, and the MPS list where the
driver has it (under MPS the compute list shows only the MPS server; its clients, which are
the pods sharing the GPU, are in the MPS list). A process in several lists is one process: its
largest figure counts. Utilization comes from ``nvmlDeviceGetProcessUtilization``,
asked only for samples newer than the last one seen: ``NVML_ERROR_NOT_FOUND`` then means "no new
samples since", which is normal, and the last figures stand until the process leaves the list.

The lists are read with the size handshake done here rather than in pynvml's wrappers, because a
process starting between the two calls makes the second one fail with INSUFFICIENT_SIZE; we
retry with the new count instead of losing the cycle.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any

import pynvml

from gpu_otel_agent.model.process import TASK_DECODER, TASK_ENCODER, TASK_GENERAL, ProcessUsage
from gpu_otel_agent.plugins.nvidia.nvml import Unavailable, classify

log = logging.getLogger(__name__)

HANDSHAKE_TRIES = 4
HEADROOM = 8  # extra slots, so a process starting between the calls still fits
LIST_CALLS = ("nvmlDeviceGetComputeRunningProcesses_v3",
              "nvmlDeviceGetGraphicsRunningProcesses_v3",
              "nvmlDeviceGetMPSComputeRunningProcesses_v3")
UTIL_CALL = "nvmlDeviceGetProcessUtilization"
_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory when the driver cannot tell (WDDM)
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId of a process on a GPU without MIG


def _function(name: str) -> Any:
    try:
        return pynvml._nvmlGetFunctionPointer(name)
    except pynvml.NVMLError as error:
        raise classify(error, name) from error


def _sized_call(name: str, call: Callable[[Any, ctypes.c_uint], int],
                struct: type[ctypes.Structure]) -> list[Any]:
    """NVML's count handshake: ask the size, allocate with headroom, retry if it grew."""
    count = ctypes.c_uint(0)
    ret = call(None, count)
    for _ in range(HANDSHAKE_TRIES):
        if ret == pynvml.NVML_SUCCESS and count.value == 0:
            return []
        if ret not in (pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_INSUFFICIENT_SIZE):
            raise classify(pynvml.NVMLError(ret), name)
        size = count.value + HEADROOM
        array = (struct * size)()
        count = ctypes.c_uint(size)
        ret = call(array, count)
        if ret == pynvml.NVML_SUCCESS:
            return list(array[: count.value])
    raise classify(pynvml.NVMLError(ret), name)


def read_running(handle: Any, name: str) -> list[Any]:
    fn = _function(name)
    return _sized_call(name, lambda array, count: int(fn(handle, ctypes.byref(count), array)),
                       pynvml.c_nvmlProcessInfo_v3_t)


class ProcessSampler:
    """Keeps the utilization cursor and last figures of one device between reads."""

    def __init__(self, handle: Any, invoke: Callable[..., Any]) -> None:
        self._handle = handle
        self._invoke = invoke  # the device's call wrapper (names the call while it runs)
        self._lists: tuple[str, ...] = ()
        self._utilization = False
        self._last_seen = 0
        self._util: dict[int, tuple[tuple[str, float], ...]] = {}
        # pid -> the MIG GPU instance it runs on, from the last read (a MIG-enabled parent's
        # lists carry every instance's processes, each with its gpuInstanceId).
        self.instances: dict[int, int] = {}

    def probe(self) -> bool:
        """Which of the list calls work here; utilization is optional."""
        lists = []
        for name in LIST_CALLS:
            try:
                self._invoke(name, read_running, self._handle, name)
            except Unavailable as reason:
                log.debug("%s", reason)
                continue
            except pynvml.NVMLError:
                pass  # transient: keep it
            lists.append(name)
        self._lists = tuple(lists)
        try:
            self._invoke(UTIL_CALL, self._read_utilization)
            self._utilization = True
        except Unavailable as reason:
            log.debug("%s", reason)
            self._utilization = False
        except pynvml.NVMLError:
            self._utilization = True
        return bool(self._lists)

    def read(self) -> tuple[ProcessUsage, ...]:
        memory: dict[int, int | None] = {}
        instances: dict[int, int] = {}
        for name in self._lists:
            for info in self._invoke(name, read_running, self._handle, name):
                if info.gpuInstanceId != NO_INSTANCE:
                    instances[info.pid] = int(info.gpuInstanceId)
                used = None if info.usedGpuMemory == _NOT_AVAILABLE else int(info.usedGpuMemory)
                before = memory.get(info.pid)
                memory[info.pid] = used if before is None else max(before, used or 0)
        if self._utilization:
            try:
                self._invoke(UTIL_CALL, self._read_utilization)
            except (Unavailable, pynvml.NVMLError) as error:
                log.debug("%s this cycle: %s", UTIL_CALL, error)
        self.instances = instances
        # A process that left the list has no more figures; forget its last sample.
        self._util = {pid: u for pid, u in self._util.items() if pid in memory}
        return tuple(
            ProcessUsage(pid, used, self._util.get(pid, ()))
            for pid, used in sorted(memory.items())
        )

    def _read_utilization(self) -> None:
        fn = _function(UTIL_CALL)
        last = ctypes.c_ulonglong(self._last_seen)
        try:
            samples = _sized_call(
                UTIL_CALL, lambda array, count: int(fn(self._handle, array, ctypes.byref(count),
                                                       last)),
                pynvml.c_nvmlProcessUtilizationSample_t)
        except pynvml.NVMLError as error:
            if error.value == pynvml.NVML_ERROR_NOT_FOUND:
                return  # no samples newer than the last one: the last figures stand
            raise
        for sample in samples:
            self._last_seen = max(self._last_seen, int(sample.timeStamp))
            self._util[int(sample.pid)] = (
                (TASK_GENERAL, min(int(sample.smUtil), 100) / 100.0),
                (TASK_ENCODER, min(int(sample.encUtil), 100) / 100.0),
                (TASK_DECODER, min(int(sample.decUtil), 100) / 100.0),
            )
