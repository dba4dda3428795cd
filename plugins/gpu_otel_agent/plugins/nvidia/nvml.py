"""The one place that turns an NVML error into what the rest of the plugin acts on.

Each code's meaning is ``error_policy.py``'s table (read from ``nvml.h``); :func:`classify`
maps it to an exception: :class:`Unavailable` (the call or field cannot work here: dropped),
``DeviceLost`` / ``DeviceNeedsReset`` (the device is down), :class:`NvmlUninitialized` (the
library lost its state: initialise again), or the pynvml error itself (transient, or retried
at a backed-off interval: absent this time).
"""

from __future__ import annotations

import logging
import threading

import pynvml

from gpu_otel_agent.backends.protocol import DeviceLost, DeviceNeedsReset
from gpu_otel_agent.plugins.nvidia.error_policy import Policy, policy

log = logging.getLogger(__name__)


class Unavailable(Exception):
    """The call or field does not exist on this driver/device; probing drops it for good."""


class NvmlUninitialized(Exception):
    """NVML answers as if never initialised (a driver reload): re-initialise, find handles
    again by UUID. ``code`` is the NVML return code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


_missing_lock = threading.Lock()
_missing_logged: set[str] = set()


def note_missing_function(name: str) -> None:
    """An older driver lacks a symbol: say so once per process, not once per GPU per cycle."""
    with _missing_lock:
        if name in _missing_logged:
            return
        _missing_logged.add(name)
    log.info("NVML function %s is not in this driver; its metrics are absent", name)


def classify(error: pynvml.NVMLError, call: str) -> Exception:
    """The exception that says what ``error`` (from ``call``) means to the caller."""
    code: int = error.value
    kind = policy(code)
    if kind is Policy.DEVICE_LOST:
        return DeviceLost(f"{call}: {error}")
    if kind is Policy.RESET_REQUIRED:
        return DeviceNeedsReset(f"{call}: {error}")
    if kind is Policy.REINIT:
        return NvmlUninitialized(f"{call}: {error}", code)
    if kind is Policy.PERMANENT:
        if code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
            note_missing_function(call)
        return Unavailable(f"{call}: {error}")
    transient: Exception = error  # TRANSIENT and BACKOFF: absent this time
    return transient


def field_value(value: pynvml.c_nvmlFieldValue_t) -> float | int:
    """The number held in a field value's union, chosen by its valueType."""
    kind = value.valueType
    union = value.value
    if kind == pynvml.NVML_VALUE_TYPE_DOUBLE:
        return float(union.dVal)
    if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT:
        return int(union.uiVal)
    if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG:
        return int(union.ulVal)
    if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return int(union.ullVal)
    if kind == pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return int(union.sllVal)
    if kind == pynvml.NVML_VALUE_TYPE_SIGNED_INT:
        return int(union.siVal)
    if kind == pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT:
        return int(union.usVal)
    raise ValueError(f"unknown NVML value type {kind}")
