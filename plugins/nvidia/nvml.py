"""The one place that knows how NVML reports failure.

Every NVML call of the plugin goes through :func:`classify`, which turns pynvml's errors into
the three outcomes the rest of the code cares about: the call is not available on this device
(never try again), the device is lost, or this one read failed (absent this cycle).
"""

from __future__ import annotations

import logging
import threading

import pynvml

from gpu_otel_agent.backends.protocol import DeviceLost

log = logging.getLogger(__name__)


class Unavailable(Exception):
    """The call or field does not exist on this driver/device; probing drops it for good."""


# Errors that mean "this device or driver cannot do that", as opposed to a transient failure.
_PERMANENT = frozenset(
    {
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_INVALID_ARGUMENT,
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
        # The driver has withdrawn the call (nvmlDeviceGetTemperature in NVML 13): asking again
        # every cycle cannot succeed; the replacement serves the value where there is one.
        pynvml.NVML_ERROR_DEPRECATED,
    }
)
_LOST = frozenset({pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_GPU_NOT_FOUND})

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
    """Map a pynvml error to Unavailable, DeviceLost or (transient) the error itself."""
    code: int = error.value
    if code in _LOST:
        return DeviceLost(f"{call}: {error}")
    if code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
        note_missing_function(call)
    if code in _PERMANENT:
        return Unavailable(f"{call}: {error}")
    transient: Exception = error
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
