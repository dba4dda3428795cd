"""Per-process GPU memory and utilization from NVML.

Memory comes from the compute and graphics running-process lists, and the MPS list where the
driver has it (under MPS the compute list shows only the MPS server; its clients, which are
the pods sharing the GPU, are in the MPS list). A process in several lists is one process: its
largest figure counts. Utilization comes from ``nvmlDeviceGetProcessUtilization``,
asked only for samples newer than the last one seen; what its answer means (idle processes are
absent, several samples per process in no order) is ``process_utilization.py``'s concern.

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

from gpu_otel_agent.backends.protocol import ReadSkipped
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.plugins.nvidia.error_policy import Policy, policy
from gpu_otel_agent.plugins.nvidia.library import function
from gpu_otel_agent.plugins.nvidia.nvml import Unavailable
from gpu_otel_agent.plugins.nvidia.process_utilization import ProcessUtilization
from gpu_otel_agent.plugins.nvidia.records import Records

log = logging.getLogger(__name__)

HANDSHAKE_TRIES = 4
HEADROOM = 8  # extra slots, so a process starting between the calls still fits
LIST_CALLS = ("nvmlDeviceGetComputeRunningProcesses_v3",
              "nvmlDeviceGetGraphicsRunningProcesses_v3",
              "nvmlDeviceGetMPSComputeRunningProcesses_v3")
UTIL_CALL = "nvmlDeviceGetProcessUtilization"
_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory when the driver cannot tell (WDDM)
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId of a process on a GPU without MIG


# These raise pynvml's own errors: the device's call wrapper (``invoke``) counts and classifies
# them, like every other NVML error. ``library.function`` finds the very function object
# ``pynvml._nvmlGetFunctionPointer`` does and fails as it does, from pynvml's public library
# handle, without that lookup's lock and cache.
_function = function


def _handshake(call: Callable[[Any, ctypes.c_uint], int],
               struct: type[ctypes.Structure]) -> tuple[Any, int]:
    """NVML's count handshake: ask the size, allocate with headroom, retry if it grew. The
    filled array and how many records it holds."""
    count = ctypes.c_uint(0)
    ret = call(None, count)
    for _ in range(HANDSHAKE_TRIES):
        if ret == pynvml.NVML_SUCCESS and count.value == 0:
            return None, 0
        if ret not in (pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_INSUFFICIENT_SIZE):
            raise pynvml.NVMLError(ret)
        size = count.value + HEADROOM
        array = (struct * size)()
        count = ctypes.c_uint(size)
        ret = call(array, count)
        if ret == pynvml.NVML_SUCCESS:
            return array, count.value
    raise pynvml.NVMLError(ret)


# The fields read of each record, in offset order (records.py reads them from the bytes).
_INFO = Records(pynvml.c_nvmlProcessInfo_v3_t,
                ("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"))
_UTIL = Records(pynvml.c_nvmlProcessUtilizationSample_t,
                ("pid", "timeStamp", "smUtil", "encUtil", "decUtil"))


def read_running(handle: Any, name: str) -> list[tuple[int, int, int, int]]:
    """(pid, usedGpuMemory, gpuInstanceId, computeInstanceId) of each listed process."""
    fn = _function(name)
    array, count = _handshake(
        lambda array, count: int(fn(handle, ctypes.byref(count), array)), _INFO.structure)
    return _INFO.read(array, count)


class ProcessSampler:
    """Keeps the utilization cursor and newest samples of one device between reads."""

    def __init__(self, handle: Any, invoke: Callable[..., Any],
                 util: ProcessUtilization | None = None) -> None:
        self._handle = handle
        self._invoke = invoke  # the device's call wrapper (names the call while it runs)
        self._lists: tuple[str, ...] = ()
        self._utilization = False
        self._util = util or ProcessUtilization()
        # pid -> the MIG (GPU instance, compute instance) it runs on, from the last read (a
        # MIG-enabled parent's lists carry every instance's processes, each with its
        # gpuInstanceId and computeInstanceId).
        self.instances: dict[int, tuple[int, int]] = {}

    def rebind(self, handle: Any) -> None:
        """The device's handle after NVML was initialised again (a driver reload)."""
        self._handle = handle

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
        instances: dict[int, tuple[int, int]] = {}
        for name in self._lists:
            try:
                infos = self._invoke(name, read_running, self._handle, name)
            except pynvml.NVMLError as error:
                # The error policy's transient and backed-off codes (UNKNOWN, NO_PERMISSION
                # ...): counted and logged by it (error_log); this cycle has no process list.
                if policy(error.value) in (Policy.TRANSIENT, Policy.BACKOFF):
                    raise ReadSkipped(f"{name}: {error}") from error
                raise
            for pid, used_memory, gpu_instance, compute_instance in infos:
                if gpu_instance != NO_INSTANCE:
                    instances[pid] = (gpu_instance, compute_instance)
                used = None if used_memory == _NOT_AVAILABLE else used_memory
                before = memory.get(pid)
                memory[pid] = used if before is None else max(before, used or 0)
        self.instances = instances
        if not self._utilization:
            return tuple(ProcessUsage(pid, used) for pid, used in sorted(memory.items()))
        answered = True
        try:
            self._invoke(UTIL_CALL, self._read_utilization)
        except (Unavailable, pynvml.NVMLError) as error:
            log.debug("%s this cycle: %s", UTIL_CALL, error)
            answered = False
        figures = self._util.figures(memory.keys(), answered)
        return tuple(ProcessUsage(pid, used, figures[pid]) for pid, used in sorted(memory.items()))

    def _read_utilization(self) -> None:
        fn = _function(UTIL_CALL)
        last = ctypes.c_ulonglong(self._util.cursor)
        try:
            array, count = _handshake(
                lambda array, count: int(fn(self._handle, array, ctypes.byref(count), last)),
                _UTIL.structure)
        except pynvml.NVMLError as error:
            if error.value == pynvml.NVML_ERROR_NOT_FOUND:
                return  # no sample newer than the cursor: a successful, empty answer
            raise
        self._util.add_percentages(_UTIL.read(array, count))
