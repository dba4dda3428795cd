"""The fast group's three calls without a field id, marshalled here instead of by pynvml.

Utilization, memory and the SM clock are read every cycle from every GPU and NVML has no field
for them to join the field-values batch. pynvml's wrappers allocate a new structure per call
and read its members through ``_PrintableStructure.__getattribute__`` (Python, once per
member): several times what the library call costs. Here each device thread keeps its own
out-structures (thread-local: a released relay round runs several devices' legs at once),
the call goes to the library as pynvml makes it (``library.py``: the same errors), and the
answer is unpacked by one ``struct`` call at the offsets pynvml's public types declare
(``records.layout_format``). Where a type's layout is not as expected, pynvml's wrapper
answers instead. ``tests/unit/nvidia/test_direct_calls.py`` pins these to pynvml's wrappers.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import pynvml

from gpu_otel_agent.plugins.nvidia.library import check, function
from gpu_otel_agent.plugins.nvidia.records import Records

_UTILIZATION = Records(pynvml.c_nvmlUtilization_t, ("gpu", "memory")).format
_MEMORY_V2 = Records(pynvml.c_nvmlMemory_v2_t, ("total", "reserved", "used")).format


class _Outs:
    """One thread's out-structures. Utilization and the clock are outputs only, read after a
    SUCCESS (every member written); memory_v2 has an input (its version), so it is reset
    from its first bytes before each call, as pynvml's fresh structure holds it."""

    def __init__(self) -> None:
        self.utilization = pynvml.c_nvmlUtilization_t()
        self.utilization_ref = ctypes.byref(self.utilization)
        self.memory = pynvml.c_nvmlMemory_v2_t()
        self.memory.version = pynvml.nvmlMemory_v2
        self.memory_fresh = bytes(self.memory)
        # Reset by a slice assignment (not ``ctypes.memmove``, a foreign call of its own).
        self.memory_bytes = memoryview(self.memory).cast("B")
        self.memory_ref = ctypes.byref(self.memory)
        self.clock = ctypes.c_uint()
        self.clock_ref = ctypes.byref(self.clock)
        # The C functions once found (``library.function``: the lookup raises what pynvml's
        # does; pynvml never unloads the library, so a function found stays the one to call).
        self.functions: dict[str, Any] = {}

    def bind(self, name: str) -> Any:
        fn = self.functions[name] = function(name)
        return fn


_kept = threading.local()
_SUCCESS = pynvml.NVML_SUCCESS


def _outs() -> _Outs:
    outs: _Outs | None = getattr(_kept, "outs", None)
    if outs is None:
        outs = _kept.outs = _Outs()
    return outs


def utilization_rates(handle: object) -> tuple[int, int]:
    """``nvmlDeviceGetUtilizationRates``: (gpu, memory) percent."""
    if _UTILIZATION is None:
        rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return int(rates.gpu), int(rates.memory)
    outs = _outs()
    name = "nvmlDeviceGetUtilizationRates"
    code = (outs.functions.get(name) or outs.bind(name))(handle, outs.utilization_ref)
    if code != _SUCCESS:
        check(code)  # raises pynvml's error of the code (a call less while all is well)
    gpu, memory = _UTILIZATION.unpack_from(outs.utilization)
    return gpu, memory


def memory_v2(handle: object) -> tuple[int, int, int]:
    """``nvmlDeviceGetMemoryInfo_v2``: (total, reserved, used) bytes."""
    if _MEMORY_V2 is None:
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        return int(memory.total), int(memory.reserved), int(memory.used)
    outs = _outs()
    outs.memory_bytes[:] = outs.memory_fresh
    name = "nvmlDeviceGetMemoryInfo_v2"
    code = (outs.functions.get(name) or outs.bind(name))(handle, outs.memory_ref)
    if code != _SUCCESS:
        check(code)
    total, reserved, used = _MEMORY_V2.unpack_from(outs.memory)
    return total, reserved, used


def clock_type(clock: int) -> ctypes.c_uint:
    """The clock type as pynvml passes it (``_nvmlClockType_t`` is ``c_uint``), made once per
    reading: passed by value, never written, so every thread may share it."""
    return ctypes.c_uint(clock)


def clock_info(handle: object, clock: ctypes.c_uint) -> int:
    """``nvmlDeviceGetClockInfo``: MHz of the clock ``clock`` (from :func:`clock_type`)."""
    outs = _outs()
    name = "nvmlDeviceGetClockInfo"
    code = (outs.functions.get(name) or outs.bind(name))(handle, clock, outs.clock_ref)
    if code != _SUCCESS:
        check(code)
    return outs.clock.value
