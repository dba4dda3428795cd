"""What each metric group reads from NVML, and how a raw value becomes a contract metric.

Values NVML offers as fields are read in one ``nvmlDeviceGetFieldValues`` batch per group; the
rest are individual calls. Items sharing a ``key`` are alternatives: the first that works on a
device (in list order, fields first) serves it and the others are never called there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pynvml

from gpu_otel_agent.model.memory import memory_readings
from gpu_otel_agent.model.snapshot import Attributes, Reading
from gpu_otel_agent.plugins.nvidia import direct_calls, fabric

Handle = object
UINT_MAX = 0xFFFFFFFF
MIB = 1024 * 1024


@dataclass(frozen=True)
class FieldReading:
    field_id: int
    metric: str
    scale: float  # multiply the raw value by this to get the contract unit
    attributes: Attributes = ()
    scope_id: int | None = None
    key: str | None = None


@dataclass(frozen=True)
class CallReading:
    name: str  # the NVML function, for logs and for naming a call that hung
    read: Callable[[Handle], tuple[Reading, ...]]
    key: str | None = None


# The last answer of each direct call per device handle, and the readings made of it.
#
# A fast read builds 13 ``Reading`` objects (frozen dataclasses: four ``object.__setattr__``
# each), and the direct calls' answers are often the same as a second ago (memory total and
# reserve always, memory used and clocks while a job is steady): an answer equal to the last
# one gets the readings made of it again (the same immutable objects). A reading depends on
# the answer's integers alone, never on the key: the key (the function and the handle's id)
# only decides how often an answer is met again, so a stale or reused id costs a miss, never
# a wrong reading. Each device's calls run on its own thread, so no two threads share a key;
# each dict operation is atomic, and the dict is emptied past ``KEPT_HELD`` entries (handles
# found again after driver reloads).
KEPT_HELD = 1024
_last: dict[tuple[object, int], tuple[Any, tuple[Reading, ...]]] = {}


def _keep(key: tuple[object, int], answer: Any, readings: tuple[Reading, ...]) -> None:
    if len(_last) >= KEPT_HELD:
        _last.clear()
    _last[key] = (answer, readings)


def _utilization(handle: Handle) -> tuple[Reading, ...]:
    rates = direct_calls.utilization_rates(handle)
    key = (_utilization, id(handle))
    held = _last.get(key)
    if held is not None and held[0] == rates:  # integers: equal is the same reading
        return held[1]
    gpu, memory = rates
    readings = (
        Reading("hw.gpu.utilization", gpu / 100, (("hw.gpu.task", "general"),)),
        # The memory controller's busy time (dcgm MEM_COPY_UTIL), not memory used.
        Reading("gpu.memory.controller.utilization", memory / 100),
    )
    _keep(key, rates, readings)
    return readings


# hw.gpu.memory.usage is allocated frame buffer, without what the driver/firmware reserves
# (that is gpu.memory.reserved): nvml.h nvmlMemory_v2_t.used, "Allocated device memory". A driver
# without nvmlDeviceGetMemoryInfo_v2 only serves the v1 struct, whose used is "Sum of Reserved
# and Allocated": that figure is sent (memory in use, as the conventions' "GPU memory used"
# reads) rather than nothing, and the reserve is absent there.
def _memory_v2(handle: Handle) -> tuple[Reading, ...]:
    answer = direct_calls.memory_v2(handle)
    key = (_memory_v2, id(handle))
    held = _last.get(key)
    if held is not None and held[0] == answer:  # integers (see _last)
        return held[1]
    total, reserved, used = answer
    readings = (*memory_readings(used, total), Reading("gpu.memory.reserved", reserved))
    _keep(key, answer, readings)
    return readings


def _memory_v1(handle: Handle) -> tuple[Reading, ...]:
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return memory_readings(int(memory.used), int(memory.total))


def _temperature_v(handle: Handle) -> tuple[Reading, ...]:
    celsius = pynvml.nvmlDeviceGetTemperatureV(handle, pynvml.NVML_TEMPERATURE_GPU)
    return (Reading("hw.temperature", celsius, (("hw.sensor_location", "gpu"),)),)


def _temperature(handle: Handle) -> tuple[Reading, ...]:
    """Deprecated in NVML 13 (nvml.h: "Use nvmlDeviceGetTemperatureV instead"): only where the
    replacement is missing; a DEPRECATED answer drops it at probe (nvml.classify)."""
    celsius = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    return (Reading("hw.temperature", celsius, (("hw.sensor_location", "gpu"),)),)


def _power(handle: Handle) -> tuple[Reading, ...]:
    """Only where the instant field (186, nvml.h since CUDA 12.2 / R535) is not served: nvml.h
    says this call averages over 1 s on Ampere (except GA100) and newer, instant on GA100 and
    older (the metric's vendor note says so)."""
    return (Reading("hw.power", pynvml.nvmlDeviceGetPowerUsage(handle) / 1000),)


def _energy(handle: Handle) -> tuple[Reading, ...]:
    return (Reading("hw.energy", pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000),)


def _clock(domain: str, clock_type: int) -> Callable[[Handle], tuple[Reading, ...]]:
    kind = direct_calls.clock_type(clock_type)

    def read(handle: Handle) -> tuple[Reading, ...]:
        mhz = direct_calls.clock_info(handle, kind)
        key = (read, id(handle))
        held = _last.get(key)
        if held is not None and held[0] == mhz:  # an integer (see _last)
            return held[1]
        readings = (Reading("gpu.clock.frequency", mhz * 1_000_000,
                            (("gpu.clock.domain", domain),)),)
        _keep(key, mhz, readings)
        return readings

    return read


def _codec(task: str, fn: Callable[[Handle], list[int]]) -> Callable[[Handle], tuple[Reading, ...]]:
    def read(handle: Handle) -> tuple[Reading, ...]:
        percent = fn(handle)[0]
        return (Reading("hw.gpu.utilization", percent / 100, (("hw.gpu.task", task),)),)

    return read


def _fan(handle: Handle) -> tuple[Reading, ...]:
    return (Reading("hw.fan.speed_ratio", pynvml.nvmlDeviceGetFanSpeed(handle) / 100),)


def _pstate(handle: Handle) -> tuple[Reading, ...]:
    pstate = pynvml.nvmlDeviceGetPerformanceState(handle)
    if pstate == pynvml.NVML_PSTATE_UNKNOWN:  # nvml.h: 32, "Unknown performance state"
        return ()
    return (Reading("gpu.performance_state", pstate),)


def _power_limit(handle: Handle) -> tuple[Reading, ...]:
    return (Reading("gpu.power.limit", pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000),)


THROTTLE_REASONS: tuple[tuple[str, int], ...] = (
    ("gpu_idle", pynvml.nvmlClocksEventReasonGpuIdle),
    ("applications_clocks_setting", pynvml.nvmlClocksEventReasonApplicationsClocksSetting),
    ("sw_power_cap", pynvml.nvmlClocksEventReasonSwPowerCap),
    ("hw_slowdown", pynvml.nvmlClocksEventReasonHwSlowdown),
    ("sync_boost", pynvml.nvmlClocksEventReasonSyncBoost),
    ("sw_thermal_slowdown", pynvml.nvmlClocksEventReasonSwThermalSlowdown),
    ("hw_thermal_slowdown", pynvml.nvmlClocksEventReasonHwThermalSlowdown),
    ("hw_power_brake_slowdown", pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown),
    ("display_clock_setting", pynvml.nvmlClocksEventReasonDisplayClockSetting),
    # nvml.h nvmlClocksEventReasonBoardLimit / nvmlClocksEventReasonReliability (pynvml names
    # them ...ThrottleReason...); named like their gpu.violation.policy.
    ("board_limit", 0x200),
    ("reliability", 0x400),
)


def _throttle(handle: Handle) -> tuple[Reading, ...]:
    mask = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    return tuple(
        Reading("gpu.clock.throttle", int(bool(mask & bit)), (("gpu.clock.throttle.reason", name),))
        for name, bit in THROTTLE_REASONS
    )


def _pcie(metric: str, fn: Callable[[Handle], int]) -> Callable[[Handle], tuple[Reading, ...]]:
    """One PCIe link value. Each is its own call (an error is counted against the function
    that returned it). The max is what device and slot allow together (nvml.h
    nvmlDeviceGetMaxPcieLinkGeneration: "possible with this device and system"), the right
    reference for a link that trained down."""
    def read(handle: Handle) -> tuple[Reading, ...]:
        return (Reading(metric, fn(handle)),)

    return read


def _max_clock(handle: Handle) -> tuple[Reading, ...]:
    """The SM clock the GPU runs at when nothing holds it back (nvml.h: P0 clocks "can differ
    from max clocks by a few MHz"), as DCGM's DCGM_FI_DEV_MAX_SM_CLOCK reads it. Application
    clocks are deprecated in nvml.h 13: nvmlDeviceGetApplicationsClock is DEPRECATED(13.0)
    ("will be removed in CUDA 14.0") and nvmlDeviceGetClock's NVML_CLOCK_ID_APP_CLOCK_TARGET
    says "Deprecated, do not use" (what this read before)."""
    mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
    return (Reading("gpu.clock.limit", mhz * 1_000_000, (("gpu.clock.domain", "sm"),)),)


def _slowdown_threshold(handle: Handle) -> tuple[Reading, ...]:
    celsius = pynvml.nvmlDeviceGetTemperatureThreshold(
        handle, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
    return (Reading("hw.temperature.limit", celsius, (("hw.limit_type", "high.degraded"),)),)


def _direction(value: str) -> Attributes:
    return (("network.io.direction", value),)


def _error_type(value: str) -> Attributes:
    return (("error.type", value),)


NS = 1e-9
# NVML_FI_DEV_CLOCKS_EVENT_REASON_{SW_THERM,HW_THERM,HW_POWER_BRAKE}_SLOWDOWN (nvml.h 13.0.87+)
CLOCK_EVENT_SW_THERMAL, CLOCK_EVENT_HW_THERMAL, CLOCK_EVENT_HW_POWER_BRAKE = 269, 270, 271
NVLINK_LINKS = 18  # the most links a GPU has today (H100, B200); more are never asked for
NVLINK_LINK_RECOVERY_EVENTS = 215  # nvml.h NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS

FAST_FIELDS: tuple[FieldReading, ...] = (
    FieldReading(308, "hw.temperature", 1.0, (("hw.sensor_location", "gpu"),),
                 key="temperature.gpu"),  # NVML_FI_DEV_GPU_TEMP
    FieldReading(pynvml.NVML_FI_DEV_MEMORY_TEMP, "hw.temperature", 1.0,
                 (("hw.sensor_location", "memory"),)),
    # hw.power is instantaneous (semantic conventions: "Instantaneous power consumed"): field
    # 186, not 185 (NVML_FI_DEV_POWER_AVERAGE, "averaged over 1 sec interval").
    FieldReading(pynvml.NVML_FI_DEV_POWER_INSTANT, "hw.power", 1e-3, key="power"),  # mW
    FieldReading(pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, "hw.energy", 1e-3,
                 key="energy"),  # mJ
    FieldReading(pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, "hw.gpu.io", 1.0,
                 _direction("transmit")),
    FieldReading(pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, "hw.gpu.io", 1.0,
                 _direction("receive")),
)

FAST_CALLS: tuple[CallReading, ...] = (
    CallReading("nvmlDeviceGetUtilizationRates", _utilization),
    CallReading("nvmlDeviceGetMemoryInfo_v2", _memory_v2, key="memory"),
    CallReading("nvmlDeviceGetMemoryInfo", _memory_v1, key="memory"),
    CallReading("nvmlDeviceGetTemperatureV", _temperature_v, key="temperature.gpu"),
    CallReading("nvmlDeviceGetTemperature", _temperature, key="temperature.gpu"),
    CallReading("nvmlDeviceGetPowerUsage", _power, key="power"),
    CallReading("nvmlDeviceGetTotalEnergyConsumption", _energy, key="energy"),
    CallReading("nvmlDeviceGetClockInfo", _clock("sm", pynvml.NVML_CLOCK_SM)),
)

SLOW_FIELDS: tuple[FieldReading, ...] = (
    FieldReading(pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, "hw.errors", 1.0, _error_type("corrected")),
    FieldReading(pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, "hw.errors", 1.0,
                 _error_type("uncorrected")),
    FieldReading(pynvml.NVML_FI_DEV_RETIRED_SBE, "gpu.memory.page_retirement.count", 1.0,
                 (("gpu.retirement.cause", "single_bit"),)),
    FieldReading(pynvml.NVML_FI_DEV_RETIRED_DBE, "gpu.memory.page_retirement.count", 1.0,
                 (("gpu.retirement.cause", "double_bit"),)),
    FieldReading(pynvml.NVML_FI_DEV_RETIRED_PENDING, "gpu.memory.page_retirement.pending", 1.0),
    FieldReading(pynvml.NVML_FI_DEV_REMAPPED_COR, "gpu.memory.row_remap.count", 1.0,
                 _error_type("corrected")),
    FieldReading(pynvml.NVML_FI_DEV_REMAPPED_UNC, "gpu.memory.row_remap.count", 1.0,
                 _error_type("uncorrected")),
    FieldReading(pynvml.NVML_FI_DEV_REMAPPED_FAILURE, "gpu.memory.row_remap.failure", 1.0),
    # Ampere and newer remap rows instead of retiring pages (nvmlDeviceGetRemappedRows'
    # isPending, as a field in the same batch): a reset is needed to apply the remap.
    FieldReading(pynvml.NVML_FI_DEV_REMAPPED_PENDING, "gpu.memory.row_remap.pending", 1.0),
    FieldReading(pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER, "gpu.pcie.replay", 1.0),
    # nvml.h 95 "PCIe replay rollover counter": replays of one TLP past REPLAY_NUM's rollover,
    # after which the link retrains; a count of its own, not more replays.
    FieldReading(pynvml.NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER, "gpu.pcie.replay_rollovers",
                 1.0),
    # NVLink health, as DCGM's NVLink watch reads it: error totals over all links, and each
    # link's state (the link in scopeId; links the GPU does not have answer
    # INVALID_ARGUMENT at probe and are never read again).
    *(FieldReading(field_id, "gpu.nvlink.errors", 1.0, _error_type(kind))
      for field_id, kind in ((pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, "crc_flit"),
                             (pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, "replay"),
                             (pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
                              "recovery"))),
    *(FieldReading(pynvml.NVML_FI_DEV_NVLINK_GET_STATE, "gpu.nvlink.link.state", 1.0,
                   (("gpu.nvlink.link", link),), scope_id=link)
      for link in range(NVLINK_LINKS)),
    # The same counters per link (the link in scopeId), so a link whose recovery count climbs
    # for days before an XID 149 is seen as that link. nvml.h: fields 161-163 are "unsupported
    # for Blackwell+", which counts link recoveries in NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_
    # EVENTS (215) instead: the alternative for `recovery` where 162 is not served.
    *(FieldReading(field_id, "gpu.nvlink.link.errors", 1.0,
                   (("gpu.nvlink.link", link), ("error.type", kind)), scope_id=link,
                   key=f"nvlink.{kind}.{link}")
      for link in range(NVLINK_LINKS)
      for field_id, kind in ((pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_CRC, "crc_flit"),
                             (pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, "replay"),
                             (pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY, "recovery"),
                             (NVLINK_LINK_RECOVERY_EVENTS, "recovery"))),
    # Per-link speed in MBps (nvml.h "NVLink Speed in MBps"; nvidia-smi nvlink -s prints 53125
    # as "53.125 GB/s" on a GB200, so decimal megabytes).
    *(FieldReading(pynvml.NVML_FI_DEV_NVLINK_GET_SPEED, "gpu.nvlink.link.speed", 1e6,
                   (("gpu.nvlink.link", link),), scope_id=link)
      for link in range(NVLINK_LINKS)),
    FieldReading(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, "gpu.nvlink.io", 1024.0,
                 _direction("transmit"), scope_id=UINT_MAX),  # KiB, all links
    FieldReading(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, "gpu.nvlink.io", 1024.0,
                 _direction("receive"), scope_id=UINT_MAX),
    *(
        FieldReading(field_id, "gpu.violation.time", NS, (("gpu.violation.policy", policy),))
        for field_id, policy in (
            (pynvml.NVML_FI_DEV_PERF_POLICY_POWER, "power"),
            (pynvml.NVML_FI_DEV_PERF_POLICY_THERMAL, "thermal"),
            (pynvml.NVML_FI_DEV_PERF_POLICY_SYNC_BOOST, "sync_boost"),
            (pynvml.NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT, "board_limit"),
            (pynvml.NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION, "low_utilization"),
            (pynvml.NVML_FI_DEV_PERF_POLICY_RELIABILITY, "reliability"),
            # The clock-event reason counters (ns) nvml.h 13.0.87+ numbers 269-271. By number,
            # not pynvml's names: nvml.h 12.9 / 13.0.39 and pynvml up to 13.580.65 give them
            # 251-253, which nvml.h 12.8 and 13.0.87+ give NVML_FI_PWR_SMOOTHING_* (251 is
            # "Enablement (0/DISABLED or 1/ENABLED)"): read by that name, a driver serving the
            # later numbering would answer a power-smoothing flag as nanoseconds. A driver that
            # does not serve 269-271 answers an error at probe and they are dropped. DCGM 4.6
            # reads them at 269-271 (sdk/nvidia/nvml/dcgm_nvml.h).
            (CLOCK_EVENT_SW_THERMAL, "sw_thermal_slowdown"),
            (CLOCK_EVENT_HW_THERMAL, "hw_thermal_slowdown"),
            (CLOCK_EVENT_HW_POWER_BRAKE, "hw_power_brake_slowdown"),
        )
    ),
)

SLOW_CALLS: tuple[CallReading, ...] = (
    CallReading("nvmlDeviceGetEncoderUtilization",
                _codec("encoder", pynvml.nvmlDeviceGetEncoderUtilization)),
    CallReading("nvmlDeviceGetDecoderUtilization",
                _codec("decoder", pynvml.nvmlDeviceGetDecoderUtilization)),
    CallReading("nvmlDeviceGetFanSpeed", _fan),
    CallReading("nvmlDeviceGetPerformanceState", _pstate),
    CallReading("nvmlDeviceGetEnforcedPowerLimit", _power_limit),
    # The memory clock only moves with the P-state, so it costs a call per slow cycle only.
    CallReading("nvmlDeviceGetClockInfo", _clock("memory", pynvml.NVML_CLOCK_MEM)),
    CallReading("nvmlDeviceGetClockInfo", _clock("graphics", pynvml.NVML_CLOCK_GRAPHICS)),
    CallReading("nvmlDeviceGetClockInfo", _clock("video", pynvml.NVML_CLOCK_VIDEO)),
    CallReading("nvmlDeviceGetCurrentClocksEventReasons", _throttle),
    # pynvml's functions by attribute (not by name string), so the names the plugin needs
    # can be read from its source (tests/unit/nvidia/pynvml_symbols.py).
    *(CallReading(fn.__name__, _pcie(metric, fn)) for fn, metric in (
        (pynvml.nvmlDeviceGetCurrPcieLinkGeneration, "gpu.pcie.link.generation"),
        (pynvml.nvmlDeviceGetMaxPcieLinkGeneration, "gpu.pcie.link.max_generation"),
        (pynvml.nvmlDeviceGetCurrPcieLinkWidth, "gpu.pcie.link.width"),
        (pynvml.nvmlDeviceGetMaxPcieLinkWidth, "gpu.pcie.link.max_width"))),
    CallReading("nvmlDeviceGetMaxClockInfo", _max_clock),
    CallReading(pynvml.nvmlDeviceGetGpuFabricInfoV.__name__, fabric.read),
    CallReading("nvmlDeviceGetTemperatureThreshold", _slowdown_threshold),
)

class Group(NamedTuple):
    """What one metric group reads: field values (one nvmlDeviceGetFieldValues call for all)
    and calls of their own."""

    fields: tuple[FieldReading, ...]
    calls: tuple[CallReading, ...]


GROUPS: Mapping[str, Group] = {
    "fast": Group(FAST_FIELDS, FAST_CALLS),
    "slow": Group(SLOW_FIELDS, SLOW_CALLS),
}
