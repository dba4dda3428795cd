"""NVML's C functions as pynvml's public library handle holds them, for calls the plugin
marshals itself (kept arrays and out-structures: ``field_batch.py``, ``direct_calls.py``).

pynvml's wrappers allocate a new ctypes structure per call, set its inputs and read its outputs
through ``_PrintableStructure``'s Python ``__getattribute__``/``__setattr__``; on a GPU read
every second that marshalling costs more than the library call itself (issue 41). The direct
callers here reuse their ctypes objects and fail exactly as the wrappers do: a function the
driver lacks or an uninitialised library raise the ``pynvml.NVMLError`` pynvml's own
``_nvmlGetFunctionPointer`` raises, a non-success return the ``NVMLError`` of that code (what
``_nvmlCheckReturn`` raises), so the device's error policy sees the same errors.

Nothing here sets ``argtypes``/``restype`` on the library's function objects: pynvml's own
calls use the same objects, and changing them would change pynvml.
"""

from __future__ import annotations

from typing import Any

import pynvml


def function(name: str) -> Any:
    """The C function ``name`` of the loaded library (``pynvml.nvmlLib``), as pynvml's
    ``_nvmlGetFunctionPointer`` finds it: UNINITIALIZED before the library is loaded,
    FUNCTION_NOT_FOUND when the driver lacks the symbol."""
    library = pynvml.nvmlLib
    if library is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
    try:
        return getattr(library, name)
    except AttributeError:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND) from None


def check(code: int) -> None:
    """Raise what pynvml's ``_nvmlCheckReturn`` raises for a non-success ``code``."""
    if code != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(code)
