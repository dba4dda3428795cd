"""What each NVML return code means to the agent, read from ``nvml.h``.

One row per ``nvmlReturn_t`` code: its policy and why, quoting the enum's doc comment in
``nvml.h`` (NVML 13, lines 1522-1553) or the function comments that give it meaning. A few
functions document a code as their normal answer (``NORMAL_ANSWERS``); their callers handle
it before the policy is asked. ``gpu-agent docs nvml-error-policy`` (with the simulator installed:
the generator reads its tables) writes
``docs/nvml-error-policy.md`` from this table and the documented ``@return`` lists of the
functions the agent calls; a test compares the committed file.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import pynvml


class Policy(enum.Enum):
    PERMANENT = "permanent"  # this call/field cannot work on this device and driver: dropped
    BACKOFF = "backoff"  # may change without a restart: asked again at a backed-off interval
    TRANSIENT = "transient"  # this answer failed: absent this cycle, asked again next cycle
    DEVICE_LOST = "device lost"  # health failed; the device is re-probed at a low rate
    RESET_REQUIRED = "reset required"  # health failed ("reset required"); re-probed
    REINIT = "re-initialise NVML"  # library state: nvmlInit again, handles found by UUID


@dataclass(frozen=True)
class CodePolicy:
    code: int
    name: str
    policy: Policy
    why: str  # the nvml.h text the decision rests on


def _row(name: str, policy: Policy, why: str) -> CodePolicy:
    return CodePolicy(int(getattr(pynvml, name)), name, policy, why)


P, B, T = Policy.PERMANENT, Policy.BACKOFF, Policy.TRANSIENT

CODES: tuple[CodePolicy, ...] = (
    # nvml.h: "NVML was not first initialized with nvmlInit()". The agent did initialise, so
    # the library lost its state under us (a driver reload): initialise again.
    _row("NVML_ERROR_UNINITIALIZED", Policy.REINIT,
         '"NVML was not first initialized with nvmlInit()": the driver was reloaded under us'),
    # "A supplied argument is invalid": the same arguments will never become valid.
    _row("NVML_ERROR_INVALID_ARGUMENT", P, '"A supplied argument is invalid"'),
    # "The requested operation is not available on target device".
    _row("NVML_ERROR_NOT_SUPPORTED", P,
         '"The requested operation is not available on target device"'),
    # "The current user does not have permission for operation": a container's device
    # permissions and capabilities can be granted later (or taken away) without a restart.
    _row("NVML_ERROR_NO_PERMISSION", B,
         '"The current user does not have permission for operation": container permissions '
         'can change at run time'),
    # "Deprecated: Multiple initializations are now allowed through ref counting".
    _row("NVML_ERROR_ALREADY_INITIALIZED", T, '"Deprecated: ... allowed through ref counting"'),
    # "A query to find an object was unsuccessful": an empty answer (no sample, no process).
    _row("NVML_ERROR_NOT_FOUND", T, '"A query to find an object was unsuccessful"'),
    # "An input argument is not large enough": the size handshake retries with the new count.
    _row("NVML_ERROR_INSUFFICIENT_SIZE", T,
         '"An input argument is not large enough" (the list grew between the two calls)'),
    # "A device's external power cables are not properly attached": fixed by hand, not soon.
    _row("NVML_ERROR_INSUFFICIENT_POWER", B,
         '"A device\'s external power cables are not properly attached"'),
    # "NVIDIA driver is not loaded": during a driver reload; initialise again later.
    _row("NVML_ERROR_DRIVER_NOT_LOADED", Policy.REINIT, '"NVIDIA driver is not loaded"'),
    # "User provided timeout passed": this answer was late; the next may not be.
    _row("NVML_ERROR_TIMEOUT", T, '"User provided timeout passed"'),
    # "NVIDIA Kernel detected an interrupt issue with a GPU".
    _row("NVML_ERROR_IRQ_ISSUE", B, '"NVIDIA Kernel detected an interrupt issue with a GPU"'),
    # "NVML Shared Library couldn't be found or loaded": only at nvmlInit (backend skipped).
    _row("NVML_ERROR_LIBRARY_NOT_FOUND", Policy.REINIT,
         '"NVML Shared Library couldn\'t be found or loaded"'),
    # "Local version of NVML doesn't implement this function": an older driver.
    _row("NVML_ERROR_FUNCTION_NOT_FOUND", P,
         '"Local version of NVML doesn\'t implement this function"'),
    # "infoROM is corrupted": stays until the board is serviced; re-asked rarely.
    _row("NVML_ERROR_CORRUPTED_INFOROM", B, '"infoROM is corrupted"'),
    _row("NVML_ERROR_GPU_IS_LOST", Policy.DEVICE_LOST,
         '"The GPU has fallen off the bus or has otherwise become inaccessible"'),
    # "The GPU requires a reset before it can be used again": a health state of its own,
    # not a gap in healthy data.
    _row("NVML_ERROR_RESET_REQUIRED", Policy.RESET_REQUIRED,
         '"The GPU requires a reset before it can be used again"'),
    _row("NVML_ERROR_OPERATING_SYSTEM", T, '"A generic operating system error occurred"'),
    # "RM detects a driver/library version mismatch": a driver upgrade in progress; the
    # library must be loaded again (nvmlInit), which the agent retries.
    _row("NVML_ERROR_LIB_RM_VERSION_MISMATCH", Policy.REINIT,
         '"RM detects a driver/library version mismatch"'),
    _row("NVML_ERROR_IN_USE", T,
         '"An operation cannot be performed because the GPU is currently in use"'),
    _row("NVML_ERROR_MEMORY", T, '"Insufficient memory"'),
    _row("NVML_ERROR_NO_DATA", T, '"No data"'),
    _row("NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", P,
         '"The requested vgpu operation is not available on target device, because ECC is '
         'enabled"'),
    _row("NVML_ERROR_INSUFFICIENT_RESOURCES", T,
         '"Ran out of critical resources, other than memory"'),
    # nvml.h's comment repeats INSUFFICIENT_RESOURCES' text; the name is a capability answer.
    _row("NVML_ERROR_FREQ_NOT_SUPPORTED", P,
         "(comment copied from INSUFFICIENT_RESOURCES) the frequency is not supported"),
    _row("NVML_ERROR_ARGUMENT_VERSION_MISMATCH", P,
         '"The provided version is invalid/unsupported"'),
    # "The requested functionality has been deprecated": permanent for that call; the
    # replacement (e.g. nvmlDeviceGetTemperatureV) is the next alternative.
    _row("NVML_ERROR_DEPRECATED", P, '"The requested functionality has been deprecated"'),
    _row("NVML_ERROR_NOT_READY", T, '"The system is not ready for the request"'),
    _row("NVML_ERROR_GPU_NOT_FOUND", Policy.DEVICE_LOST, '"No GPUs were found"'),
    _row("NVML_ERROR_INVALID_STATE", T,
         '"Resource not in correct state to perform requested operation"'),
    _row("NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", P,
         '"Reset not supported for given device/parameters"'),
    # "An internal driver error occurred": the one-in-a-thousand failure; ask next cycle.
    _row("NVML_ERROR_UNKNOWN", T, '"An internal driver error occurred"'),
)

BY_CODE: Mapping[int, CodePolicy] = {row.code: row for row in CODES}

# Codes a function documents as its ordinary answer, handled by its caller (not a fault).
NORMAL_ANSWERS: Mapping[str, frozenset[str]] = {
    # "NVML_ERROR_NOT_FOUND if sample entries are not found" (no sample newer than the cursor)
    "nvmlDeviceGetProcessUtilization": frozenset({"NVML_ERROR_NOT_FOUND"}),
    # "NVML_ERROR_TIMEOUT if no event arrived in specified timeout"
    "nvmlEventSetWait_v2": frozenset({"NVML_ERROR_TIMEOUT"}),
    # an empty MIG device index: a hole below the max count, or past the last instance
    "nvmlDeviceGetMigDeviceHandleByIndex": frozenset({"NVML_ERROR_NOT_FOUND"}),
    # the size handshake's first answer
    "nvmlDeviceGetComputeRunningProcesses_v3": frozenset({"NVML_ERROR_INSUFFICIENT_SIZE"}),
    "nvmlDeviceGetGraphicsRunningProcesses_v3": frozenset({"NVML_ERROR_INSUFFICIENT_SIZE"}),
    "nvmlDeviceGetMPSComputeRunningProcesses_v3": frozenset({"NVML_ERROR_INSUFFICIENT_SIZE"}),
}


# Where a function gives a code a meaning of its own.
FUNCTION_POLICY: Mapping[str, Mapping[str, Policy]] = {
    # "NVML_ERROR_NOT_FOUND if \a uuid does not match a valid device on the system": after a
    # re-initialisation, the GPU we monitored is not there any more.
    "nvmlDeviceGetHandleByUUID": {"NVML_ERROR_NOT_FOUND": Policy.DEVICE_LOST},
}


def policy(code: int, function: str = "") -> Policy:
    """The policy of ``code`` (as ``function`` answers it); a code newer than this table is
    treated as transient."""
    row = BY_CODE.get(code)
    if row is None:
        return Policy.TRANSIENT
    special = FUNCTION_POLICY.get(function)
    if special is not None and row.name in special:
        return special[row.name]
    return row.policy


def code_name(code: int) -> str:
    row = BY_CODE.get(code)
    return row.name if row is not None else f"NVML_ERROR_{code}"
