"""The one place that loads ``amdsmi`` and knows how it reports failure.

The ``amdsmi`` package's ctypes wrapper opens ``libamd_smi.so`` when it is imported; without
the library it prints two lines to stdout and dies of a KeyError. So the library is looked
for first, the same way the wrapper does, and the package is imported only when it is there
(with its prints captured), so a node without ROCm gets one clear log line instead.

Errors become the outcomes the rest of the plugin cares about: the call cannot work with this
library (never try again), the call is not supported *now* (retry later), the device is lost,
or this one read failed (absent this cycle).

A GPU that fell off the bus does not answer NOT_FOUND: amdsmi keeps the processor it found at
init, so only a handle it never gave out is NOT_FOUND (``handle_to_processor``, amd_smi.cc at
0ceca28). Its sysfs files are gone (ENOENT: NOT_SUPPORTED, which a reset answers too) and its
DRM ioctls fail: ``amdsmi_get_gpu_vram_usage`` asks ``AMDGPU_INFO_VRAM_USAGE``, which touches
no hardware and works through a reset, and answers AMDSMI_STATUS_DRM_ERROR only when the DRM
device is gone (``AMDSmiDrm::amdgpu_query_info``, amd_smi_drm.cc). That is the loss signal.

NOT_SUPPORTED is not a property of the device alone. rocm_smi maps the errno of a failed sysfs
access with ``ErrnoToRsmiStatus``: EPERM and ENOENT become RSMI_STATUS_NOT_SUPPORTED, EBUSY
becomes RSMI_STATUS_BUSY (amdsmi ``rocm_smi/src/rocm_smi_utils.cc`` at 0ceca28), and amdsmi
passes both through as AMDSMI_STATUS_NOT_SUPPORTED / AMDSMI_STATUS_BUSY (``rsmi_status_map``
in ``include/amd_smi/impl/amd_smi_common.h``). amdgpu answers EPERM (older kernels) or EBUSY
to sysfs reads while the GPU is in reset, so a probe that runs during a reset sees
NOT_SUPPORTED from calls that work a second later. Hence: NOT_SUPPORTED at probe defers the
call (re-probed with backoff), NOT_SUPPORTED or BUSY while sampling costs one cycle only.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import io
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_otel_agent.backends.protocol import BackendUnavailable, DeviceLost

log = logging.getLogger(__name__)

LIBRARY = "libamd_smi.so"

# amdsmi_status_t values (amdsmi_wrapper.py).
STATUS_INVAL = 1
STATUS_NOT_SUPPORTED = 2
STATUS_NOT_YET_IMPLEMENTED = 3
STATUS_DRM_ERROR = 6
STATUS_FAIL_LOAD_SYMBOL = 5
STATUS_NO_PERM = 10
STATUS_BUSY = 30
STATUS_NOT_FOUND = 31
STATUS_DRIVER_NOT_LOADED = 34
STATUS_NO_DATA = 40

# "This library cannot do that for us", whatever moment it is asked: a symbol missing, a
# function not written, an argument it rejects, a permission the agent lacks.
_PERMANENT = frozenset(
    {STATUS_INVAL, STATUS_NOT_YET_IMPLEMENTED, STATUS_FAIL_LOAD_SYMBOL, STATUS_NO_PERM}
)
# An unknown handle, no driver at all.
_LOST = frozenset({STATUS_NOT_FOUND, STATUS_DRIVER_NOT_LOADED})
# (call, status) that only a device gone from the bus answers (see the module docstring).
LOST_SIGNS = frozenset({("amdsmi_get_gpu_vram_usage", STATUS_DRM_ERROR)})


class Unavailable(Exception):
    """The call does not work with this library; probing drops it for good."""


class NotSupportedNow(Exception):
    """NOT_SUPPORTED: true of the device, or of this moment (a reset); probing defers it."""


def library_candidates() -> list[str]:
    """Where the wrapper looks for the library, in its order (amdsmi_wrapper.find_smi_library)."""
    places: list[str] = []
    rocm = os.environ.get("ROCM_HOME", os.environ.get("ROCM_PATH"))
    if rocm:
        places.append(os.path.join(rocm, "lib", LIBRARY))
    places.append(LIBRARY)  # the dynamic linker: LD_LIBRARY_PATH, ld.so.conf
    spec = importlib.util.find_spec("amdsmi")
    if spec is not None and spec.submodule_search_locations:
        places.append(str(Path(next(iter(spec.submodule_search_locations))) / LIBRARY))
    places.append(str(Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / "lib" / LIBRARY))
    return places


def _find_library() -> str | None:
    for place in library_candidates():
        try:
            ctypes.CDLL(place)
        except OSError:
            continue
        return place
    return None


def load() -> ModuleType:
    """Import ``amdsmi``; raises BackendUnavailable naming exactly what is missing."""
    if importlib.util.find_spec("amdsmi") is None:
        raise BackendUnavailable(
            "the 'amdsmi' Python package is not installed (pip install amdsmi)"
        )
    if _find_library() is None:
        raise BackendUnavailable(
            f"{LIBRARY} not found ($ROCM_HOME/lib, $ROCM_PATH/lib, the dynamic linker's path, "
            "/opt/rocm/lib): install ROCm's amd-smi-lib to monitor AMD GPUs"
        )
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            return importlib.import_module("amdsmi")
    except AttributeError as error:  # the library lacks a symbol the wrapper binds
        raise BackendUnavailable(
            f"{LIBRARY} is older than the installed amdsmi package expects: {error}"
        ) from error
    except Exception as error:  # the wrapper fails in several ways; say what it said
        said = " ".join(printed.getvalue().split())
        raise BackendUnavailable(f"amdsmi could not be loaded: {error} {said}".strip()) from error


def status_of(error: BaseException) -> int | None:
    get = getattr(error, "get_error_code", None)
    return int(get()) if callable(get) else None


def classify(error: Exception, call: str) -> Exception:
    """Map an amdsmi error to Unavailable, NotSupportedNow, DeviceLost or (transient, BUSY
    among them) the error itself."""
    code = status_of(error)
    if code in _LOST or (call, code) in LOST_SIGNS:
        return DeviceLost(f"{call}: amdsmi status {code} (device gone)")
    if code in _PERMANENT:
        return Unavailable(f"{call}: amdsmi status {code}")
    if code == STATUS_NOT_SUPPORTED:
        return NotSupportedNow(f"{call}: amdsmi status {code}")
    return error


def number(value: Any) -> float | int | None:
    """A reading from an amdsmi dict: AMD reports unreadable values in band as ``"N/A"``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value
