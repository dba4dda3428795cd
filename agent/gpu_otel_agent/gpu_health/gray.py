"""Gray failures: conditions that say a GPU subsystem is degrading before it fails.

Evaluated on every slow-group read of a GPU, from that read and the GPU's latest fast-group
read (utilization, SM clock, temperature, power). Each condition answers bad / good / cannot
tell (``None``: idle, a reading absent, no previous read for a rate); :mod:`debounce` turns
answers into raise and clear. Where a value is continuous, the condition clears at a threshold
on the safe side of the one that raised it (hysteresis), given through ``active``.

:data:`CONDITIONS` is the catalog ``docs/events.md`` is generated from: what, threshold, why,
and the readings (NVML calls) it rests on. Thresholds are constants, each with its source.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpu_otel_agent.gpu_health import subsystems as sub
from gpu_otel_agent.model.snapshot import Attributes, Reading

BUSY = 0.5  # hw.gpu.utilization{general} at or above which a GPU is "under load"
# What "under load" reads on a MIG-enabled GPU, which has no utilization of its own.
MIG_LOAD = "the busiest instance's GPM SM activity, gpu.sm.utilization"
THERMAL_MARGIN_C, THERMAL_CLEAR_C = 5.0, 8.0
SM_CLOCK_LOW, SM_CLOCK_CLEAR = 0.7, 0.8  # of the application clock
NVLINK_CRC_PER_S, NVLINK_CRC_CLEAR_PER_S = 100.0, 50.0
ECC_CORRECTED_PER_MIN, ECC_CORRECTED_CLEAR_PER_MIN = 10.0, 5.0
# DCGM's expected PCIe replays per minute per lane, by generation: a bit error rate of 1e-12
# at the lane rate (DcgmHealthWatch::GetExpectedPcieReplayRate).
_PCIE_REPLAYS_PER_LANE_MIN = (0.15, 0.3, 0.48, 0.96, 1.92, 3.84)
# nvml.h NVML_NVLINK_STATE_*: INACTIVE 0, ACTIVE 1, SLEEP 2 (a power state, not a fault),
# ACTIVE_TRAFFIC_DISABLED 3.
_NVLINK_DOWN_STATES = (0, 3)


# The counters conditions take rates of (``Reads.rate``): the earlier reads a watch keeps for
# rates hold these only, not a GPU's whole slow and fast read (8 GPUs: 0.2 MiB, issue 41).
RATE_METRICS = frozenset({"gpu.pcie.replay", "gpu.nvlink.errors", "gpu.nvlink.link.errors",
                          "hw.errors"})


# The metrics the conditions below read with ``Reads.each``.
EACH_METRICS = frozenset({"gpu.clock.throttle", "gpu.nvlink.link.state",
                          "gpu.nvlink.link.errors", "gpu.fabric.status", "gpu.fabric.fault"})


class Reads:
    """One GPU's readings at one evaluation: this slow read, the latest fast read, and an
    earlier read to take counter rates against (the oldest of the debounce window, so a burst
    of errors between two reads counts for as many reads as it takes to raise)."""

    def __init__(self, readings: tuple[Reading, ...], time_s: float,
                 previous: Reads | None = None, instances_load: float | None = None) -> None:
        """``instances_load``: on a MIG-enabled GPU, which reports no utilization of its own
        (nvml.h: nvmlDeviceGetUtilizationRates is not supported in MIG mode), the SM activity
        of its busiest instance (GPM, nvmlGpmMigSampleGet): the GPU is under load when one of
        its instances is."""
        self._values: dict[tuple[str, Attributes], float] = {
            (r.metric, r.attributes): float(r.value) for r in readings}
        self.time_s = time_s
        self.previous = previous
        self.instances_load = instances_load
        # ``each``'s answers for the metrics the conditions ask it for (``EACH_METRICS``),
        # made at its first call in one pass: scanning a slow and a fast read's every value
        # for each of half a dozen calls was a fifth of a slow read's health evaluation
        # (issue 41). Another metric is scanned for as before.
        self._each: dict[str, list[tuple[Attributes, float]]] | None = None

    def get(self, metric: str, *attributes: tuple[str, str | int | float | bool]) -> float | None:
        value = self._values.get((metric, attributes))
        return value if value is not None and math.isfinite(value) else None

    def each(self, metric: str) -> list[tuple[Attributes, float]]:
        """The values of ``metric`` with their attributes, in the order the readings came."""
        if metric not in EACH_METRICS:
            return [(attrs, v) for (name, attrs), v in self._values.items() if name == metric]
        index = self._each
        if index is None:
            index = self._each = {name: [] for name in EACH_METRICS}
            for (name, attrs), value in self._values.items():
                if name in EACH_METRICS:
                    index[name].append((attrs, value))
        return list(index[metric])

    def rate(self, metric: str, *attributes: tuple[str, str | int | float | bool]
             ) -> float | None:
        """Growth per second of a counter since the earlier read; None without one or when
        it went backwards (a reset restarts it)."""
        if metric not in RATE_METRICS:  # an earlier read would not have kept it
            raise ValueError(f"{metric} is not in RATE_METRICS")
        now = self.get(metric, *attributes)
        before = self.previous.get(metric, *attributes) if self.previous else None
        if now is None or before is None or self.previous is None or now < before:
            return None
        elapsed = self.time_s - self.previous.time_s
        return (now - before) / elapsed if elapsed > 0 else None

    def busy(self) -> bool | None:
        util = self.get("hw.gpu.utilization", ("hw.gpu.task", "general"))
        if util is None:
            util = self.instances_load
        return None if util is None else util >= BUSY

    def throttle(self, reason: str) -> bool:
        return bool(self.get("gpu.clock.throttle", ("gpu.clock.throttle.reason", reason)))

    def any_throttle(self) -> bool:
        return any(v for _, v in self.each("gpu.clock.throttle"))


@dataclass(frozen=True)
class Verdict:
    bad: bool | None
    detail: str = ""  # the values behind it, for the event's reason


Evaluate = Callable[[Reads, bool], Verdict]  # (reads, currently raised) -> verdict


@dataclass(frozen=True)
class ConditionSpec:
    name: str
    subsystem: str
    what: str
    threshold: str
    why: str
    source: str  # the readings and NVML calls it rests on
    evaluate: Evaluate


UNKNOWN = Verdict(None)


def _pcie_below(kind: str, unit: str) -> Evaluate:
    def evaluate(reads: Reads, active: bool) -> Verdict:
        now = reads.get(f"gpu.pcie.link.{kind}")
        top = reads.get(f"gpu.pcie.link.max_{kind}")
        if now is None or top is None:
            return UNKNOWN
        if not reads.busy():  # idle GPUs lower link speed and width to save power
            return UNKNOWN
        return Verdict(now < top, f"PCIe link {kind} {unit}{now:g} of {unit}{top:g} under load")
    return evaluate


def expected_replays_per_min(generation: float, width: float) -> float:
    """DCGM's bound: ceil(per-lane rate of the generation x lanes)."""
    gen = min(max(int(generation), 1), len(_PCIE_REPLAYS_PER_LANE_MIN))
    return float(math.ceil(_PCIE_REPLAYS_PER_LANE_MIN[gen - 1] * width))


def _pcie_replays(reads: Reads, active: bool) -> Verdict:
    rate = reads.rate("gpu.pcie.replay")
    gen, width = reads.get("gpu.pcie.link.generation"), reads.get("gpu.pcie.link.width")
    if rate is None or gen is None or width is None or width <= 0:
        return UNKNOWN
    per_min, bound = rate * 60, expected_replays_per_min(gen, width)
    limit = bound / 2 if active else bound
    return Verdict(per_min > limit, f"PCIe replays {per_min:.1f}/min, expected at most "
                   f"{bound:g}/min at gen {gen:g} x{width:g}")


def _nvlink_down(reads: Reads, active: bool) -> Verdict:
    links = reads.each("gpu.nvlink.link.state")
    if not links:
        return UNKNOWN
    down = sorted(int(dict(a).get("gpu.nvlink.link", -1)) for a, v in links
                  if int(v) in _NVLINK_DOWN_STATES)
    return Verdict(bool(down), f"NVLink link(s) {', '.join(map(str, down))} down of "
                   f"{len(links)}" if down else f"all {len(links)} NVLink links up")


def _nvlink_errors(reads: Reads, active: bool) -> Verdict:
    rates = {kind: reads.rate("gpu.nvlink.errors", ("error.type", kind))
             for kind in ("crc_flit", "replay", "recovery")}
    if all(r is None for r in rates.values()):
        return UNKNOWN
    crc = rates["crc_flit"] or 0.0
    crc_limit = NVLINK_CRC_CLEAR_PER_S if active else NVLINK_CRC_PER_S
    rising = [kind for kind in ("replay", "recovery") if (rates[kind] or 0.0) > 0]
    bad = crc >= crc_limit or bool(rising)
    parts = [f"CRC flit errors {crc:.1f}/s"] + [f"{kind} errors rising" for kind in rising]
    return Verdict(bad, "NVLink " + ", ".join(parts))


def _nvlink_errors_by_link(reads: Reads) -> str:
    """The links whose replay or recovery counters grew, for the reason (``link 7 recovery``):
    an operator replaces a cable or a tray by the link, not by the GPU's sum."""
    grown = []
    for attrs, _ in reads.each("gpu.nvlink.link.errors"):
        named = dict(attrs)
        if named.get("error.type") in ("replay", "recovery") and (
                reads.rate("gpu.nvlink.link.errors", *attrs) or 0.0) > 0:
            grown.append((int(named.get("gpu.nvlink.link", -1)), str(named["error.type"])))
    return ", ".join(f"link {link} {kind}" for link, kind in sorted(grown))


def _nvlink_errors_detailed(reads: Reads, active: bool) -> Verdict:
    verdict = _nvlink_errors(reads, active)
    links = _nvlink_errors_by_link(reads) if verdict.bad else ""
    return Verdict(verdict.bad, f"{verdict.detail} ({links})" if links else verdict.detail)


# The faults DCGM's NVLink health watch fails on (DcgmHealthWatch::MonitorFabricFields), and the
# registration states it fails on (not started, completed with an error status); a probe still
# in progress is only a warning there and is not judged here.
_FABRIC_FAILED_STATES = ("not_started", "failed")


def _fabric_unhealthy(reads: Reads, active: bool) -> Verdict:
    states = [dict(a).get("gpu.fabric.state") for a, v in reads.each("gpu.fabric.status") if v]
    faults = sorted(str(dict(a).get("gpu.fabric.fault.type")) for a, v
                    in reads.each("gpu.fabric.fault") if v)
    if not states and not reads.each("gpu.fabric.fault"):
        return UNKNOWN  # not on a fabric (or not read yet)
    failed = [s for s in states if s in _FABRIC_FAILED_STATES]
    parts = [f"fabric registration {failed[0]}"] if failed else []
    parts += [f"fabric fault {name}" for name in faults]
    return Verdict(bool(parts), ", ".join(parts) if parts else "fabric healthy")


def _sm_clock_low(reads: Reads, active: bool) -> Verdict:
    clock = reads.get("gpu.clock.frequency", ("gpu.clock.domain", "sm"))
    target = reads.get("gpu.clock.limit", ("gpu.clock.domain", "sm"))
    if clock is None or target is None or target <= 0 or not reads.busy():
        return UNKNOWN
    if reads.any_throttle():  # a clock-event reason explains it: a throttle, not gray
        return Verdict(False)
    ratio = clock / target
    return Verdict(ratio < (SM_CLOCK_CLEAR if active else SM_CLOCK_LOW),
                   f"SM clock {clock / 1e6:.0f} MHz is {ratio:.0%} of its maximum "
                   f"{target / 1e6:.0f} MHz under load with no clock-event reason")


def _reason_held(reason: str, text: str) -> Evaluate:
    def evaluate(reads: Reads, active: bool) -> Verdict:
        if not reads.each("gpu.clock.throttle"):
            return UNKNOWN
        return Verdict(reads.throttle(reason), text)
    return evaluate


def _thermal_margin(reads: Reads, active: bool) -> Verdict:
    temp = reads.get("hw.temperature", ("hw.sensor_location", "gpu"))
    limit = reads.get("hw.temperature.limit", ("hw.limit_type", "high.degraded"))
    if temp is None or limit is None:
        return UNKNOWN
    margin = limit - temp
    return Verdict(margin < THERMAL_CLEAR_C if active else margin <= THERMAL_MARGIN_C,
                   f"GPU at {temp:g} C, {margin:g} C below its slowdown threshold {limit:g} C")


def _ecc_corrected(reads: Reads, active: bool) -> Verdict:
    rate = reads.rate("hw.errors", ("error.type", "corrected"))
    if rate is None:
        return UNKNOWN
    per_min = rate * 60
    limit = ECC_CORRECTED_CLEAR_PER_MIN if active else ECC_CORRECTED_PER_MIN
    return Verdict(per_min > limit, f"corrected ECC errors {per_min:.1f}/min")


CONDITIONS: tuple[ConditionSpec, ...] = (
    ConditionSpec(
        "pcie_link_width", sub.PCIE, "PCIe link width below the maximum while the GPU is busy",
        "current width < max width, utilization >= 50 % (MIG: " + MIG_LOAD + ")",
        "A link that trained down to x8 halves host bandwidth. nvidia-smi documents that the "
        "current width and generation \"may be reduced when the GPU is not in use\", so an "
        "idle GPU is not judged.",
        "nvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth (what device and slot "
        "allow)", _pcie_below("width", "x")),
    ConditionSpec(
        "pcie_link_generation", sub.PCIE,
        "PCIe link generation below the maximum while the GPU is busy",
        "current generation < max generation, utilization >= 50 % (MIG: " + MIG_LOAD + ")",
        "Idle GPUs lower the link generation to save power (nvidia-smi: \"may be reduced when "
        "the GPU is not in use\"); under load a lower generation is a link that trained down.",
        "nvmlDeviceGetCurrPcieLinkGeneration, nvmlDeviceGetMaxPcieLinkGeneration (the lower of "
        "device and system, nvml.h)", _pcie_below("generation", "gen ")),
    ConditionSpec(
        "pcie_replay_rate", sub.PCIE, "PCIe replay counter rising",
        "replays/min > ceil(lanes x per-lane rate of the generation: 0.15 / 0.3 / 0.48 / 0.96 "
        "/ 1.92 / 3.84 for gen 1-6); clears at half",
        "DCGM's PCIe health watch bound: a bit error rate of 1e-12 at the lane rate.",
        "NVML_FI_DEV_PCIE_REPLAY_COUNTER with the current generation and width",
        _pcie_replays),
    ConditionSpec(
        "nvlink_link_down", sub.NVLINK, "An NVLink link the GPU has is down",
        "a link answering NVML_NVLINK_STATE_INACTIVE or ACTIVE_TRAFFIC_DISABLED (SLEEP is a "
        "power state, not a fault)",
        "DCGM fails its NVLink health watch on any link down; collective bandwidth drops "
        "with it. Links the GPU does not have are never read; nor are a MIG-enabled GPU's, "
        "which NVML reports down (DCGM skips them too).",
        "NVML_FI_DEV_NVLINK_GET_STATE per link (scopeId = link)", _nvlink_down),
    ConditionSpec(
        "nvlink_errors", sub.NVLINK, "NVLink error counters rising",
        "replay or recovery errors growing at all, or CRC flit errors >= 100/s (clears below "
        "50/s and no replay/recovery growth)",
        "DCGM's NVLink health watch: replay and recovery errors are failures at the first one; "
        "CRC errors \"only matter at rates of 100+ per second\" (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR).",
        "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, _REPLAY_ERROR_COUNT_TOTAL, "
        "_RECOVERY_ERROR_COUNT_TOTAL; per link NVML_FI_DEV_NVLINK_ERROR_DL_* (scopeId = link) to "
        "name the links in the reason", _nvlink_errors_detailed),
    ConditionSpec(
        "fabric_unhealthy", sub.NVLINK, "The NVLink fabric reports the GPU unhealthy",
        "a health-mask fault (route unhealthy, bandwidth degraded, route recovery, access-"
        "timeout recovery, incorrect configuration), or the fabric registration not started "
        "or completed with an error status",
        "DCGM's NVLink health watch fails on each of these (MonitorFabricFields); on an NVL72 "
        "rack a degraded route cuts the bandwidth of every collective the GPU is in, before "
        "any XID. A registration in progress is Fabric Manager still training, not judged.",
        "nvmlDeviceGetGpuFabricInfoV (state, status, healthMask)", _fabric_unhealthy),
    ConditionSpec(
        "sm_clock_low", sub.SM, "SM clock well below its maximum under load with no "
        "clock-event reason active",
        "SM clock < 70 % of the maximum SM clock, utilization >= 50 % (MIG: " + MIG_LOAD
        + "), no clock-event reason (clears at 80 %)",
        "Clocks held low that NVML cannot explain are the signature of a board-level fault "
        "(power delivery, firmware); explained slowdowns are `gpu.throttle` events.",
        "nvmlDeviceGetClockInfo(SM), nvmlDeviceGetMaxClockInfo(SM), "
        "nvmlDeviceGetCurrentClocksEventReasons", _sm_clock_low),
    ConditionSpec(
        "hw_slowdown", sub.SM, "Sustained HW slowdown", "clock-event reason HW slowdown held "
        "for `health.degrade_after` reads",
        "nvml.h (nvmlClocksThrottleReasonHwSlowdown): the core clocks cut by a factor of 2 or "
        "more for heat, an external power brake or fast-trigger power protection; it \"may be "
        "also reported during PState or clock change\", so only a held one counts.",
        "nvmlDeviceGetCurrentClocksEventReasons (nvmlClocksEventReasonHwSlowdown)",
        _reason_held("hw_slowdown", "HW slowdown (clocks halved or lower) held")),
    ConditionSpec(
        "power_brake", sub.POWER, "Sustained HW power brake slowdown",
        "clock-event reason HW power brake held for `health.degrade_after` reads",
        "nvml.h: the external power brake assertion (the system's power supply) holds the "
        "clocks down: a node power problem, not the workload.",
        "nvmlDeviceGetCurrentClocksEventReasons (nvmlClocksEventReasonHwPowerBrakeSlowdown)",
        _reason_held("hw_power_brake_slowdown", "HW power brake slowdown held")),
    ConditionSpec(
        "thermal_margin", sub.THERMAL, "Temperature within a margin of the slowdown threshold",
        "GPU temperature >= slowdown threshold - 5 C (clears below threshold - 8 C)",
        "Within 5 C the GPU has no headroom left before NVML's HW slowdown (a cooling fault); "
        "the 3 C band is wider than the sensor's 1 C steps.",
        "hw.temperature{gpu} (NVML_FI_DEV_GPU_TEMP), nvmlDeviceGetTemperatureThreshold("
        "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)", _thermal_margin),
    ConditionSpec(
        "ecc_corrected_rate", sub.MEMORY, "Corrected ECC error rate rising",
        "> 10 corrected (single-bit) errors per minute (clears at 5)",
        "DCGM's memory watch bound DCGM_LIMIT_MAX_SBE_RATE (10; DCGM calls it provisional): a "
        "rising corrected rate precedes row remaps and uncorrectable errors.",
        "NVML_FI_DEV_ECC_SBE_VOL_TOTAL", _ecc_corrected),
)

# Conditions the health engine already holds from the slow group (polled.py); documented here
# with the gray ones because they report through the same events and subsystem.
POLLED_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("row_remap_pending", "Remapped rows wait for a GPU reset", "NVML_FI_DEV_REMAPPED_PENDING = 1",
     "nvml.h nvmlDeviceGetRemappedRows isPending: the remap applies at the next reset."),
    ("row_remap_failure", "A row remap failed", "NVML_FI_DEV_REMAPPED_FAILURE = 1",
     "DCGM's memory watch fails on it: \"unrecoverable memory hardware damage. Reset the GPU "
     "or reboot the node immediately\" (dcgm_errors.h DCGM_FR_ROW_REMAP_FAILURE_NEXT)."),
    ("retired_pages_pending", "Retired pages wait for a GPU reset",
     "NVML_FI_DEV_RETIRED_PENDING = 1", "Pre-Ampere page retirement applies at the next reset."),
)
