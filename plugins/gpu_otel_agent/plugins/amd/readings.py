"""What each metric group reads through ``amdsmi``, and how a value becomes a contract metric.

Most readings come from the firmware's metrics table (``amdsmi_get_gpu_metrics_info``): one
call, one sysfs read, where the individual amdsmi functions would each read that same table
again. It is read through the package's ctypes wrapper directly, because the package's
``amdsmi_get_gpu_metrics_info`` builds a dict of ~90 entries and ~800 per-partition values in
Python on every call. The individual calls follow as fallbacks (``fallback=True``): probing
keeps one only where it serves a value the table did not.

The names are NVIDIA's (``shared/specs/telemetry.md``); where AMD measures something else
the difference is in the attribute value (``hw.sensor_location=edge``, AMD throttle reasons,
``error.type=deferred``) or in an AMD-only name (``gpu.xgmi.io``), never in a reused name.
Every function takes the imported ``amdsmi`` module and a processor handle.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.model.memory import memory_readings
from gpu_otel_agent.model.snapshot import Attributes, Reading
from gpu_otel_agent.plugins.amd import sentinels
from gpu_otel_agent.plugins.amd.accumulators import MonotonicCounter, ResidencyThrottle
from gpu_otel_agent.plugins.amd.sentinels import NA16, NA32, NA64
from gpu_otel_agent.plugins.amd.smi import STATUS_NOT_SUPPORTED, number, status_of

MIB = 1024 * 1024
KIB = 1024

Read = Callable[[Any, Any], tuple[Reading, ...]]


@dataclass(frozen=True)
class CallReading:
    name: str  # the amdsmi function, for logs and for naming a call that hung
    read: Read
    fallback: bool = False  # dropped at probe when earlier calls already serve its values


def reading_key(reading: Reading) -> tuple[str, Attributes]:
    return reading.metric, reading.attributes


def _v16(value: int) -> int | None:
    return None if value == NA16 else int(value)


def metrics_table(smi: Any, h: Any) -> Any:
    """The raw ``amdsmi_gpu_metrics_t``; a failed call raises like the package's functions."""
    wrapper = smi.amdsmi_wrapper
    table = wrapper.amdsmi_gpu_metrics_t()
    status = wrapper.amdsmi_get_gpu_metrics_info(h, ctypes.byref(table))
    if status != wrapper.AMDSMI_STATUS_SUCCESS:
        raise smi.AmdSmiLibraryException(status)
    return table


def _table_pct(value: int) -> float | None:
    return None if value == NA16 or value > 100 else value / 100


def _table_fast(smi: Any, h: Any) -> tuple[Reading, ...]:
    t = metrics_table(smi, h)
    out: list[Reading] = []
    for value, metric, attributes in (
        (t.average_gfx_activity, "hw.gpu.utilization", (("hw.gpu.task", "general"),)),
        (t.average_umc_activity, "gpu.memory.controller.utilization", ()),
        (t.average_mm_activity, "gpu.multimedia.utilization", ()),
    ):
        if (fraction := _table_pct(value)) is not None:
            out.append(Reading(metric, fraction, attributes))
    for value, location in ((t.temperature_hotspot, "gpu"), (t.temperature_edge, "edge"),
                            (t.temperature_mem, "memory")):
        if (celsius := _v16(value)) is not None:
            out.append(Reading("hw.temperature", celsius, (("hw.sensor_location", location),)))
    # MI300 (v1.4+) fills current_socket_power; MI200 (v1.3) only average_socket_power, on
    # the GCD that owns the package (0 on its sibling: absent there, never 0 W).
    watts = sentinels.watts(t.current_socket_power, 16)
    if watts is None:
        watts = sentinels.watts(t.average_socket_power, 16)
    if watts is not None:
        out.append(Reading("hw.power", watts))
    # MI300 reports a clock per XCC and leaves the single GFX clock N/A (MI200: the reverse).
    clocks = [c for c in (t.current_gfxclk, *t.current_gfxclks) if c != NA16]
    if clocks:
        out.append(Reading("gpu.clock.frequency", max(clocks) * 1_000_000,
                           (("gpu.clock.domain", "graphics"),)))
    return tuple(out)


def _table_slow(throttle: ResidencyThrottle) -> Read:
    def read(smi: Any, h: Any) -> tuple[Reading, ...]:
        t = metrics_table(smi, h)
        out: list[Reading] = []
        memory = _v16(t.current_uclk)
        if memory is None:
            memory = _v16(t.average_uclk_frequency)
        video = next((c for c in (t.current_vclk0, *t.current_vclk0s) if c != NA16), None)
        for mhz, domain in ((memory, "memory"), (video, "video")):
            if mhz is not None:
                out.append(Reading("gpu.clock.frequency", mhz * 1_000_000,
                                   (("gpu.clock.domain", domain),)))
        if t.pcie_replay_count_acc != NA64:
            out.append(Reading("gpu.pcie.replay", int(t.pcie_replay_count_acc)))
        reads = [int(v) for v in t.xgmi_read_data_acc if v != NA64]
        writes = [int(v) for v in t.xgmi_write_data_acc if v != NA64]
        if reads and writes:  # KB per link, summed over the links
            out.append(Reading("gpu.xgmi.io", sum(reads) * KIB,
                               (("network.io.direction", "receive"),)))
            out.append(Reading("gpu.xgmi.io", sum(writes) * KIB,
                               (("network.io.direction", "transmit"),)))
        out.extend(throttle.readings(t))
        return tuple(out)

    return read


def _pct(value: Any) -> float | None:
    v = number(value)
    return None if v is None or v > 100 else v / 100  # >100: firmware's "not available"


def _activity(smi: Any, h: Any) -> tuple[Reading, ...]:
    a = smi.amdsmi_get_gpu_activity(h)
    out = []
    if (gfx := _pct(a["gfx_activity"])) is not None:
        out.append(Reading("hw.gpu.utilization", gfx, (("hw.gpu.task", "general"),)))
    if (umc := _pct(a["umc_activity"])) is not None:
        out.append(Reading("gpu.memory.controller.utilization", umc))
    # The multimedia engine (VCN, and JPEG): not the conventions' `decoder` task.
    if (mm := _pct(a["mm_activity"])) is not None:
        out.append(Reading("gpu.multimedia.utilization", mm))
    return tuple(out)


def _vram(smi: Any, h: Any) -> tuple[Reading, ...]:
    v = smi.amdsmi_get_gpu_vram_usage(h)
    used, total = number(v["vram_used"]), number(v["vram_total"])  # MB (2^20)
    return memory_readings(None if used is None else int(used) * MIB,
                           None if total is None else int(total) * MIB)


def _temperature(sensor: str, location: str) -> Read:
    def read(smi: Any, h: Any) -> tuple[Reading, ...]:
        celsius = smi.amdsmi_get_temp_metric(
            h, smi.AmdSmiTemperatureType[sensor], smi.AmdSmiTemperatureMetric.CURRENT
        )
        return (Reading("hw.temperature", celsius, (("hw.sensor_location", location),)),)

    return read


def _power(smi: Any, h: Any) -> tuple[Reading, ...]:
    info = smi.amdsmi_get_power_info(h)
    watts = sentinels.watts(info["socket_power"], 64)
    for key in ("current_socket_power", "average_socket_power"):
        if watts is None:
            watts = sentinels.watts(info[key], 32)
    return () if watts is None else (Reading("hw.power", watts),)


# The firmware counts energy in 2^-16 J ("Energy (15.259uJ (2^-16) units)", gpu_metrics in the
# kernel's kgd_pp_interface.h); rocm_smi reports that resolution rounded to 15.3
# (kEnergyCounterResolution = 15.3F, rocm_smi.cc at ROCm/amdsmi 0ceca28), 0.27 % high.
ENERGY_UNIT_UJ = 1e6 / 65536
_ROUNDED_UNIT = 0.1  # a reported resolution this close to the unit is that unit, rounded


def energy_resolution_uj(reported: float) -> float:
    """The counter's real unit: 2^-16 J where the library reports it rounded."""
    return ENERGY_UNIT_UJ if abs(reported - ENERGY_UNIT_UJ) < _ROUNDED_UNIT else reported


def _energy(counter: MonotonicCounter) -> Read:
    def read(smi: Any, h: Any) -> tuple[Reading, ...]:
        e = smi.amdsmi_get_energy_count(h)
        count = sentinels.value(e["energy_accumulator"], 64)
        reported = number(e["counter_resolution"])
        if count is None or reported is None:
            return ()
        resolution = energy_resolution_uj(float(reported))
        # counter x uJ per count -> J, never backwards on the wire
        return (Reading("hw.energy", counter.update(count * resolution * 1e-6)),)

    return read


def _clock(clock: str, domain: str) -> Read:
    def read(smi: Any, h: Any) -> tuple[Reading, ...]:
        # amdsmi copies the metrics table's uint16 clock into a uint32: a table that reports
        # clocks per instance (MI300) leaves it 0xFFFF, answered with SUCCESS (amdsmi
        # amd_smi.cc at 0ceca28, amdsmi_get_clock_info): not 65.5 GHz, no reading.
        mhz = sentinels.value(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType[clock])["clk"], 32)
        if mhz is None:
            return ()
        return (Reading("gpu.clock.frequency", mhz * 1_000_000, (("gpu.clock.domain", domain),)),)

    return read


def _power_cap(smi: Any, h: Any) -> tuple[Reading, ...]:
    cap = number(smi.amdsmi_get_power_cap_info(h)["power_cap"])
    return () if cap is None else (Reading("gpu.power.limit", cap / 1e6),)  # uW -> W


def _error_type(value: str) -> Attributes:
    return (("error.type", value),)


def _ecc() -> Read:
    """ECC totals, only where RAS is on. ``amdsmi_get_gpu_total_ecc_count`` sums the blocks
    whose RAS feature is enabled and answers SUCCESS with 0/0/0 when none is (amdsmi
    ``amd_smi.cc`` at 0ceca28): a count of nothing, not a count of zero errors. The enabled
    blocks come from ``amdsmi_get_gpu_ecc_enabled`` (a bit mask of ``amdsmi_gpu_block_t``),
    read from the device's ``ras/features`` file, which amdgpu creates only with RAS on: with
    RAS off it answers NOT_SUPPORTED (``rsmi_dev_ecc_enabled_get``, rocm_smi.cc at 0ceca28),
    and no ECC reading is made (absent, never 0). A NOT_SUPPORTED answer is not kept (it is
    also what a GPU in reset answers); a mask is: RAS is set at driver load."""
    enabled: list[bool] = []

    def read(smi: Any, h: Any) -> tuple[Reading, ...]:
        if not enabled:
            try:
                enabled.append(bool(smi.amdsmi_get_gpu_ecc_enabled(h)))
            except smi.AmdSmiLibraryException as error:
                if status_of(error) == STATUS_NOT_SUPPORTED:
                    return ()  # RAS off (no ras/features), or a reset: ask again next time
                raise  # transient: ask again next time
        if not enabled[0]:
            return ()
        e = smi.amdsmi_get_gpu_total_ecc_count(h)
        out = []
        if (corrected := sentinels.value(e["correctable_count"], 64)) is not None:
            out.append(Reading("hw.errors", corrected, _error_type("corrected")))
        # The conventions give a GPU's hw.errors two values, corrected and uncorrected; a
        # deferred error is uncorrectable (poisoned, deferred to the consumer), so it counts
        # there. Both parts only ever grow, so their sum is a counter too.
        uncorrected = sentinels.value(e["uncorrectable_count"], 64)
        deferred = sentinels.value(e["deferred_count"], 64)
        if uncorrected is not None:
            out.append(Reading("hw.errors", uncorrected + (deferred or 0),
                               _error_type("uncorrected")))
        return tuple(out)

    return read


# PCIe transfer rate per lane (MT/s, as amdsmi reports pcie_speed and max_pcie_speed) of each
# generation: 2.5, 5, 8, 16, 32, 64 GT/s.
_PCIE_GENERATION_MTS = (2500, 5000, 8000, 16000, 32000, 64000)


def pcie_generation(mts: float) -> int:
    """The generation a link runs at from its rate (the highest whose rate it reaches)."""
    return max([gen for gen, rate in enumerate(_PCIE_GENERATION_MTS, 1) if mts >= rate],
               default=1)


def _pcie_replay(smi: Any, h: Any) -> tuple[Reading, ...]:
    replays = number(smi.amdsmi_get_pcie_info(h)["pcie_metric"]["pcie_replay_count"])
    return () if replays is None else (Reading("gpu.pcie.replay", replays),)


def _pcie_link(smi: Any, h: Any) -> tuple[Reading, ...]:
    """The link against what device and slot allow (amdsmi_pcie_info_t pcie_metric /
    pcie_static), for the same gray-failure conditions as on NVIDIA. A call of its own: the
    metrics table has no maximum, so this one is kept while the replay fallback is not."""
    info = smi.amdsmi_get_pcie_info(h)
    metric, static = info["pcie_metric"], info["pcie_static"]
    out: list[Reading] = []
    for name, raw, convert in (
        ("gpu.pcie.link.width", metric.get("pcie_width"), int),  # lanes, as NVML counts them
        ("gpu.pcie.link.max_width", static.get("max_pcie_width"), int),
        ("gpu.pcie.link.generation", metric.get("pcie_speed"), pcie_generation),
        ("gpu.pcie.link.max_generation", static.get("max_pcie_speed"), pcie_generation),
    ):
        value = number(raw)
        if value and value not in (NA16, NA32):  # absent, 0 or a sentinel: no reading
            out.append(Reading(name, convert(value)))
    return tuple(out)


def _fan(smi: Any, h: Any) -> tuple[Reading, ...]:
    speed = smi.amdsmi_get_gpu_fan_speed(h, 0)
    top = smi.amdsmi_get_gpu_fan_speed_max(h, 0)
    return () if not top else (Reading("hw.fan.speed_ratio", speed / top),)


def _xgmi(smi: Any, h: Any) -> tuple[Reading, ...]:
    """amdsmi copies the table's per-link counters and always says 8 links: a link whose
    counters are all ones does not exist (a part without XGMI answers SUCCESS with 8 of
    them), and a device with no real link has no XGMI reading at all."""
    metrics = smi.amdsmi_get_link_metrics(h)
    links = [link for link in metrics["links"][: int(metrics["num_links"])]
             if sentinels.value(link["read"], 64) is not None
             and sentinels.value(link["write"], 64) is not None]
    if not links:
        return ()
    read = sum(int(link["read"]) for link in links)
    write = sum(int(link["write"]) for link in links)
    return (  # KB per link, summed over the links
        Reading("gpu.xgmi.io", read * KIB, (("network.io.direction", "receive"),)),
        Reading("gpu.xgmi.io", write * KIB, (("network.io.direction", "transmit"),)),
    )


def build_groups() -> dict[str, tuple[CallReading, ...]]:
    """One device's calls per metric group (fresh each time: some carry state between reads).

    ``amdsmi_get_violation_status`` is not among them: it sleeps 100 ms inside and computes
    what the slow group's table read already yields (see :mod:`.accumulators`).
    """
    fast = (
        CallReading("amdsmi_get_gpu_metrics_info", _table_fast),
        CallReading("amdsmi_get_gpu_vram_usage", _vram),
        # the table's count has no resolution
        CallReading("amdsmi_get_energy_count", _energy(MonotonicCounter())),
        CallReading("amdsmi_get_gpu_activity", _activity, fallback=True),
        CallReading("amdsmi_get_temp_metric", _temperature("HOTSPOT", "gpu"), fallback=True),
        CallReading("amdsmi_get_temp_metric", _temperature("EDGE", "edge"), fallback=True),
        CallReading("amdsmi_get_temp_metric", _temperature("VRAM", "memory"), fallback=True),
        CallReading("amdsmi_get_power_info", _power, fallback=True),
        CallReading("amdsmi_get_clock_info", _clock("GFX", "graphics"), fallback=True),
    )
    slow = (
        CallReading("amdsmi_get_gpu_metrics_info", _table_slow(ResidencyThrottle())),
        CallReading("amdsmi_get_power_cap_info", _power_cap),
        CallReading("amdsmi_get_gpu_total_ecc_count", _ecc()),
        CallReading("amdsmi_get_gpu_fan_speed", _fan),
        CallReading("amdsmi_get_clock_info", _clock("MEM", "memory"), fallback=True),
        CallReading("amdsmi_get_clock_info", _clock("VCLK0", "video"), fallback=True),
        CallReading("amdsmi_get_pcie_info", _pcie_replay, fallback=True),
        CallReading("amdsmi_get_pcie_info", _pcie_link, fallback=True),
        CallReading("amdsmi_get_link_metrics", _xgmi, fallback=True),
    )
    return {"fast": fast, "slow": slow}
