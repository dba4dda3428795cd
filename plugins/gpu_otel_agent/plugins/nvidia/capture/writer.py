"""``gpu-agent capture``: the node the agent sees, written as ``nvidia-smi -q -x`` would print it.

Every value is read through pynvml (a real driver or the simulated node alike) and placed at its
field's XML path from ``fields.py``, so what this writes, the readers read back. Process names
are scrubbed (``[scrubbed]``) unless asked for: a capture is meant to be attached to a public bug
report. The XML form carries no host name and no command line.

Calls that answer an error print as nvidia-smi prints them: ``[N/A]`` for NOT_SUPPORTED, else
``[<NVML error string>]``.
"""

from __future__ import annotations

import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pynvml

from gpu_otel_agent.extensions.capture import write_whole
from gpu_otel_agent.plugins.nvidia.capture import fields

MIB = 1024 * 1024
SCRUBBED = "[scrubbed]"
Handle = Any


def _mib(value: int) -> str:
    return f"{int(value) // MIB} MiB"


def _flag(value: object, on: str = "Enabled", off: str = "Disabled") -> str:
    return on if value else off


def _memory(part: str) -> Callable[[Handle], str]:
    def read(h: Handle) -> str:
        return _mib(getattr(pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
                            part))
    return read


def _bar1(part: str) -> Callable[[Handle], str]:
    return lambda h: _mib(getattr(pynvml.nvmlDeviceGetBAR1MemoryInfo(h), f"bar1{part}"))


def _percent(fn: Callable[[Handle], object], part: str | int) -> Callable[[Handle], str]:
    def read(h: Handle) -> str:
        value = fn(h)
        number = value[part] if isinstance(part, int) else getattr(value, part)  # type: ignore[index]
        return f"{int(number)} %"
    return read


def _clock(fn: Callable[[Handle, int], int], domain: int) -> Callable[[Handle], str]:
    return lambda h: f"{fn(h, domain)} MHz"


def _watts(fn: Callable[[Handle], int]) -> Callable[[Handle], str]:
    return lambda h: f"{fn(h) / 1000:.2f} W"


def _ecc(error: int, counter: int) -> Callable[[Handle], str]:
    return lambda h: str(pynvml.nvmlDeviceGetTotalEccErrors(h, error, counter))


def _remapped(part: int, flag: bool = False) -> Callable[[Handle], str]:
    def read(h: Handle) -> str:
        value = pynvml.nvmlDeviceGetRemappedRows(h)[part]
        return _flag(value, "Yes", "No") if flag else str(value)
    return read


def _constraints(h: Handle) -> tuple[int, int]:
    low, high = pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
    return int(low), int(high)


def _app_clock(h: Handle) -> str:
    mhz = pynvml.nvmlDeviceGetClock(h, pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_ID_APP_CLOCK_TARGET)
    return f"{mhz} MHz"


def _temperature(h: Handle) -> int:
    """nvmlDeviceGetTemperatureV where the library has it (the older call is deprecated)."""
    try:
        return int(pynvml.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU))
    except pynvml.NVMLError as error:
        if error.value != pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
            raise
        return int(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))


_VALUE_MEMBERS = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal", pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
}


def _field_value(h: Handle, field_id: int, unit: str, watts: float | None = None) -> str:
    """One field's value printed as nvidia-smi does (``watts``: mW scale, printed as W)."""
    value = pynvml.nvmlDeviceGetFieldValues(h, [field_id])[0]
    if value.nvmlReturn != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(value.nvmlReturn)
    number = getattr(value.value, _VALUE_MEMBERS.get(value.valueType, "ullVal"))
    if watts is not None:
        return f"{number * watts:.2f} W"
    return f"{int(number)}{unit}"


_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

# Field key -> how to read it, printed. One entry per fields.FIELDS row marked writer=True.
READERS: Mapping[str, Callable[[Handle], str]] = MappingProxyType({
    "model": pynvml.nvmlDeviceGetName,
    "uuid": pynvml.nvmlDeviceGetUUID,
    "pci_bus_id": lambda h: pynvml.nvmlDeviceGetPciInfo_v3(h).busId,
    "serial": pynvml.nvmlDeviceGetSerial,
    "vbios": pynvml.nvmlDeviceGetVbiosVersion,
    "board_part": pynvml.nvmlDeviceGetBoardPartNumber,
    "architecture": lambda h: fields.ARCHITECTURE_NAMES.get(
        pynvml.nvmlDeviceGetArchitecture(h), "Unknown"),
    # The XML form prints the ids as 8 hex digits without 0x (233010DE).
    "pci_device_id": lambda h: f"{pynvml.nvmlDeviceGetPciInfo_v3(h).pciDeviceId:08X}",
    "pci_subsystem_id": lambda h: f"{pynvml.nvmlDeviceGetPciInfo_v3(h).pciSubSystemId:08X}",
    "minor_number": lambda h: str(pynvml.nvmlDeviceGetMinorNumber(h)),
    "persistence_mode": lambda h: _flag(pynvml.nvmlDeviceGetPersistenceMode(h)),
    "display_mode": lambda h: _flag(pynvml.nvmlDeviceGetDisplayMode(h)),
    "display_active": lambda h: _flag(pynvml.nvmlDeviceGetDisplayActive(h)),
    "ecc_mode": lambda h: _flag(pynvml.nvmlDeviceGetEccMode(h)[0]),
    "compute_mode": lambda h: _COMPUTE_MODES.get(pynvml.nvmlDeviceGetComputeMode(h), "Unknown"),
    "memory_total_mib": _memory("total"),
    "memory_reserved_mib": _memory("reserved"),
    "memory_used_mib": _memory("used"),
    "bar1_total_mib": _bar1("Total"),
    "bar1_used_mib": _bar1("Used"),
    "utilization_gpu": _percent(pynvml.nvmlDeviceGetUtilizationRates, "gpu"),
    "utilization_memory": _percent(pynvml.nvmlDeviceGetUtilizationRates, "memory"),
    "encoder_util": _percent(pynvml.nvmlDeviceGetEncoderUtilization, 0),
    "decoder_util": _percent(pynvml.nvmlDeviceGetDecoderUtilization, 0),
    "jpg_util": _percent(pynvml.nvmlDeviceGetJpgUtilization, 0),
    "ofa_util": _percent(pynvml.nvmlDeviceGetOfaUtilization, 0),
    "temperature_c": lambda h: f"{_temperature(h)} C",
    "memory_temperature_c": lambda h: _field_value(h, pynvml.NVML_FI_DEV_MEMORY_TEMP, " C"),
    "temperature_slowdown_c": lambda h: f"{pynvml.nvmlDeviceGetTemperatureThreshold(h, 1)} C",
    "power_w": lambda h: _field_value(h, pynvml.NVML_FI_DEV_POWER_INSTANT, "", 1e-3),
    "power_average_w": _watts(pynvml.nvmlDeviceGetPowerUsage),
    "power_limit_w": _watts(pynvml.nvmlDeviceGetEnforcedPowerLimit),
    "power_default_limit_w": _watts(pynvml.nvmlDeviceGetPowerManagementDefaultLimit),
    "power_min_limit_w": _watts(lambda h: _constraints(h)[0]),
    "power_max_limit_w": _watts(lambda h: _constraints(h)[1]),
    "graphics_clock_mhz": _clock(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_GRAPHICS),
    "sm_clock_mhz": _clock(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM),
    "memory_clock_mhz": _clock(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_MEM),
    "video_clock_mhz": _clock(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_VIDEO),
    "app_sm_clock_mhz": _app_clock,
    "app_memory_clock_mhz": _clock(pynvml.nvmlDeviceGetApplicationsClock, pynvml.NVML_CLOCK_MEM),
    "max_graphics_clock_mhz": _clock(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_GRAPHICS),
    "max_sm_clock_mhz": _clock(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM),
    "max_memory_clock_mhz": _clock(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM),
    "max_video_clock_mhz": _clock(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_VIDEO),
    "pstate": lambda h: f"P{pynvml.nvmlDeviceGetPerformanceState(h)}",
    "fan_percent": lambda h: f"{pynvml.nvmlDeviceGetFanSpeed(h)} %",
    "pcie_max_link_gen": lambda h: str(pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
    "pcie_link_gen": lambda h: str(pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    "pcie_max_link_width": lambda h: f"{pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)}x",
    "pcie_link_width": lambda h: f"{pynvml.nvmlDeviceGetCurrPcieLinkWidth(h)}x",
    "pcie_replay_counter": lambda h: str(pynvml.nvmlDeviceGetPcieReplayCounter(h)),
    "pcie_replay_rollover": lambda h: _field_value(
        h, pynvml.NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER, ""),
    "pcie_tx_kb_s": lambda h: f"{pynvml.nvmlDeviceGetPcieThroughput(h, 0)} KB/s",
    "pcie_rx_kb_s": lambda h: f"{pynvml.nvmlDeviceGetPcieThroughput(h, 1)} KB/s",
    "ecc_sbe_volatile": _ecc(pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC),
    "ecc_dbe_volatile": _ecc(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                             pynvml.NVML_VOLATILE_ECC),
    "ecc_sbe_aggregate": _ecc(pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                              pynvml.NVML_AGGREGATE_ECC),
    "ecc_dbe_aggregate": _ecc(pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                              pynvml.NVML_AGGREGATE_ECC),
    "retired_pages_sbe": lambda h: str(len(pynvml.nvmlDeviceGetRetiredPages(
        h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS))),
    "retired_pages_dbe": lambda h: str(len(pynvml.nvmlDeviceGetRetiredPages(
        h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))),
    "retired_pages_pending": lambda h: _flag(
        pynvml.nvmlDeviceGetRetiredPagesPendingStatus(h), "Yes", "No"),
    "remapped_rows_correctable": _remapped(0),
    "remapped_rows_uncorrectable": _remapped(1),
    "remapped_rows_pending": _remapped(2, flag=True),
    "remapped_rows_failure": _remapped(3, flag=True),
})

# Where a field goes when it has several alternatives: the plain (non-sum) path of the oldest
# schema that holds the whole NVML value (nvmlDeviceGetTotalEccErrors does not split SRAM/DRAM).
_ECC_PATHS = {
    "ecc_sbe_volatile": "ecc_errors/volatile/single_bit/total",
    "ecc_dbe_volatile": "ecc_errors/volatile/double_bit/total",
    "ecc_sbe_aggregate": "ecc_errors/aggregate/single_bit/total",
    "ecc_dbe_aggregate": "ecc_errors/aggregate/double_bit/total",
}


def _printed(read: Callable[[Handle], object], handle: Handle) -> str:
    try:
        value = read(handle)
    except pynvml.NVMLError as error:
        # The error classes pynvml makes at import (NVMLError_NotSupported) are not names of
        # its source: compare the code (tests/unit/nvidia/test_pynvml_symbols.py).
        return "[N/A]" if error.value == pynvml.NVML_ERROR_NOT_SUPPORTED else f"[{error}]"
    return value.decode() if isinstance(value, bytes) else str(value)


def xml_path(field: fields.CaptureField) -> str:
    """Where the writer puts a field."""
    if field.key in _ECC_PATHS:
        return _ECC_PATHS[field.key]
    return next(p for p in field.xml if "+" not in p and not p.startswith("@"))


def _put(parent: ET.Element, path: str, text: str) -> None:
    node = parent
    for part in path.split("/"):
        found = node.find(part)
        node = found if found is not None else ET.SubElement(node, part)
    node.text = text


def capture_xml(*, keep_names: bool = False) -> str:
    """The node as ``nvidia-smi -q -x`` XML (NVML must be initialised by the caller)."""
    root = ET.Element("nvidia_smi_log")
    ET.SubElement(root, "timestamp").text = time.strftime("%a %b %d %H:%M:%S %Y")
    ET.SubElement(root, "driver_version").text = _printed(
        lambda _h: pynvml.nvmlSystemGetDriverVersion(), None)
    cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
    ET.SubElement(root, "cuda_version").text = f"{cuda // 1000}.{cuda % 1000 // 10}"
    count = pynvml.nvmlDeviceGetCount()
    ET.SubElement(root, "attached_gpus").text = str(count)
    for index in range(count):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        bus = _printed(READERS["pci_bus_id"], handle)
        gpu = ET.SubElement(root, "gpu", {"id": bus})
        for field in fields.FIELDS:
            if field.writer and field.key in READERS:
                _put(gpu, xml_path(field), _printed(READERS[field.key], handle))
        _clock_events(gpu, handle)
        _mig(gpu, handle)
        _processes(gpu, handle, keep_names)
    ET.indent(root, space="\t")
    return ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
            + ET.tostring(root, encoding="unicode") + "\n")


def _process_name(pid: int) -> str:
    return str(pynvml.nvmlSystemGetProcessName(pid))


def _clock_events(gpu: ET.Element, handle: Handle) -> None:
    section, prefix = fields.CLOCK_EVENTS_XML[0]
    try:
        mask: int | None = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    except pynvml.NVMLError:
        mask = None
    node = ET.SubElement(gpu, section)
    for _name, bit, tag, _label in fields.CLOCK_EVENT_REASONS:
        text = "[N/A]" if mask is None else ("Active" if mask & bit else "Not Active")
        ET.SubElement(node, prefix + tag).text = text


def _mig(gpu: ET.Element, handle: Handle) -> None:
    try:
        current, pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:
        _put(gpu, "mig_mode/current_mig", "[N/A]")
        return
    _put(gpu, "mig_mode/current_mig", _flag(current))
    _put(gpu, "mig_mode/pending_mig", _flag(pending))
    if not current:
        return
    holder = ET.SubElement(gpu, "mig_devices")
    # Every index up to the maximum: an empty slot answers NOT_FOUND (nvml.h), later ones may
    # still hold instances (go-nvlib's VisitMigDevices walks them all).
    for index in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except pynvml.NVMLError:
            continue
        entry = ET.SubElement(holder, "mig_device")
        ET.SubElement(entry, "index").text = str(index)
        ET.SubElement(entry, "gpu_instance_id").text = _printed(
            pynvml.nvmlDeviceGetGpuInstanceId, mig)
        ET.SubElement(entry, "compute_instance_id").text = _printed(
            pynvml.nvmlDeviceGetComputeInstanceId, mig)
        _put(entry, "device_attributes/shared/multiprocessor_count", _printed(
            lambda h: pynvml.nvmlDeviceGetAttributes(h).multiprocessorCount, mig))
        _put(entry, "fb_memory_usage/total", _printed(_memory("total"), mig))
        _put(entry, "fb_memory_usage/used", _printed(_memory("used"), mig))


_KINDS = (("C", pynvml.nvmlDeviceGetComputeRunningProcesses),
          ("G", pynvml.nvmlDeviceGetGraphicsRunningProcesses),
          ("M+C", pynvml.nvmlDeviceGetMPSComputeRunningProcesses))


def _processes(gpu: ET.Element, handle: Handle, keep_names: bool) -> None:
    holder = ET.SubElement(gpu, "processes")
    seen: set[int] = set()
    for kind, fn in _KINDS:
        try:
            found = fn(handle)
        except pynvml.NVMLError:
            continue
        for proc in found:
            if proc.pid in seen:
                continue
            seen.add(proc.pid)
            info = ET.SubElement(holder, "process_info")
            gi = getattr(proc, "gpuInstanceId", 0xFFFFFFFF)
            ci = getattr(proc, "computeInstanceId", 0xFFFFFFFF)
            ET.SubElement(info, "gpu_instance_id").text = "N/A" if gi == 0xFFFFFFFF else str(gi)
            ET.SubElement(info, "compute_instance_id").text = (
                "N/A" if ci == 0xFFFFFFFF else str(ci))
            ET.SubElement(info, "pid").text = str(proc.pid)
            ET.SubElement(info, "type").text = kind
            name = SCRUBBED
            if keep_names:
                name = _printed(_process_name, proc.pid)
            ET.SubElement(info, "process_name").text = name
            used = proc.usedGpuMemory
            ET.SubElement(info, "used_memory").text = "N/A" if used is None else _mib(used)


def run(out: Path | None, *, keep_names: bool) -> int:
    """``gpu-agent capture --vendor nvidia`` (its entry point of gpu_otel_agent.capture_writers)."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        print(f"gpu-agent capture: cannot open NVML: {error}", file=sys.stderr)
        return 1
    try:
        text = capture_xml(keep_names=keep_names)
    finally:
        pynvml.nvmlShutdown()
    return write_whole(text, out)
