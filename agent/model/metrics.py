"""The metric catalog: every name the agent emits, defined once.

The OTLP encoder, the Prometheus exporter and ``docs/metrics.md`` all read this table, so a
name, unit or instrument cannot differ between what is documented and what is sent. Names and
units are the public contract of ``shared/specs/telemetry.md``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Instrument(enum.Enum):
    """OpenTelemetry instrument kinds, which decide the OTLP data type."""

    GAUGE = "gauge"
    COUNTER = "counter"  # cumulative monotonic Sum
    UPDOWNCOUNTER = "updowncounter"  # cumulative non-monotonic Sum


@dataclass(frozen=True)
class MetricSpec:
    name: str
    instrument: Instrument
    unit: str
    description: str
    attributes: tuple[str, ...] = ()
    group: str = ""  # the metric group that produces it; "" = produced by the agent itself



G, C, U = Instrument.GAUGE, Instrument.COUNTER, Instrument.UPDOWNCOUNTER

DEVICE_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("hw.gpu.utilization", G, "1", "Fraction of time the GPU engine was busy.",
          ("hw.gpu.task",), "fast (general), slow (encoder, decoder)"),
    MetricSpec("hw.gpu.memory.utilization", G, "1",
          "Fraction of time the memory controller was busy.", (), "fast"),
    MetricSpec("hw.gpu.memory.usage", U, "By", "Used frame buffer memory.", (), "fast"),
    MetricSpec("hw.gpu.memory.limit", U, "By", "Total frame buffer memory.", (), "fast"),
    MetricSpec("gpu.memory.reserved", U, "By", "Frame buffer memory reserved by the driver.", (),
          "fast"),
    MetricSpec("hw.gpu.io", C, "By", "PCIe traffic.", ("network.io.direction",), "fast"),
    MetricSpec("hw.temperature", G, "Cel", "Temperature.", ("hw.sensor_location",), "fast"),
    MetricSpec("hw.power", G, "W", "Power draw.", (), "fast"),
    MetricSpec("hw.energy", C, "J", "Energy consumed since the driver was loaded.", (), "fast"),
    MetricSpec("gpu.clock.frequency", G, "Hz", "Clock frequency.", ("gpu.clock.domain",),
          "fast (sm), slow (memory, graphics, video)"),
    MetricSpec("gpu.power.limit", G, "W", "Enforced power limit.", (), "slow"),
    MetricSpec("gpu.nvlink.io", C, "By", "NVLink traffic over all links.",
          ("network.io.direction",), "slow"),
    MetricSpec("gpu.clock.throttle", G, "1", "1 while the clock-event reason is active.",
          ("gpu.clock.throttle.reason",), "slow"),
    MetricSpec("gpu.violation.time", C, "s", "Time clocks were held below target by a policy.",
          ("gpu.violation.policy",), "slow"),
    MetricSpec("gpu.fan.speed", G, "1", "Fan speed as a fraction of its maximum.", (), "slow"),
    MetricSpec("gpu.performance_state", G, "1", "Performance state (P-state number).", (), "slow"),
    MetricSpec("gpu.pcie.replay", C, "{replay}", "PCIe replay count.", (), "slow"),
    MetricSpec("hw.errors", C, "{error}", "ECC errors since the driver was loaded.",
          ("error.type",), "slow"),
    MetricSpec("gpu.memory.remapped_rows", C, "{row}", "Memory rows remapped.", ("error.type",),
          "slow"),
    MetricSpec("gpu.memory.row_remap.failure", G, "1", "1 if a row remap failed.", (), "slow"),
    MetricSpec("gpu.memory.retired_pages", U, "{page}", "Retired frame buffer pages.",
          ("gpu.retirement.cause",), "slow"),
    MetricSpec("gpu.sm.utilization", G, "1", "Fraction of SMs busy (GPM).", (), "gpm"),
    MetricSpec("gpu.sm.occupancy", G, "1", "Warps resident per SM over the maximum (GPM).", (),
          "gpm"),
    MetricSpec("gpu.tensor.utilization", G, "1", "Tensor core activity (GPM).", (), "gpm"),
    MetricSpec("gpu.dram.utilization", G, "1", "DRAM bandwidth used over peak (GPM).", (), "gpm"),
    MetricSpec("hw.status", U, "1", "1 for the device's current state.", ("hw.state",), ""),
)

# Self-telemetry: how the agent itself is doing (exported over OTLP and Prometheus alike).
AGENT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("gpu_agent.cycles", C, "{cycle}", "Metric-group reads completed.",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.cycles.missed", C, "{cycle}",
               "Sampling cycles skipped because the device was slow or hung.",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.cycle.duration", G, "s",
               "Duration of the latest read of the group: the device library calls of one "
               "cycle, including the wait for the device thread.",
               ("hw.id", "gpu.index", "gpu_agent.group")),
    MetricSpec("gpu_agent.cycle.time", C, "s",
               "Total time spent reading the device (divide by gpu_agent.cycles for the mean).",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.call.overruns", C, "{call}",
               "Device calls that exceeded call_timeout (the device was marked unresponsive).",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.read.errors", C, "{error}", "Group reads that failed.",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.exports", C, "{export}", "Metric exports that ended (OTLP push)."),
    MetricSpec("gpu_agent.export.failures", C, "{export}", "Metric exports that failed."),
    MetricSpec("gpu_agent.exports.skipped", C, "{export}",
               "Export intervals skipped while the previous export was still retrying."),
    MetricSpec("gpu_agent.scrapes", C, "{scrape}", "Prometheus scrapes served."),
)

_BY_NAME = {spec.name: spec for spec in (*DEVICE_METRICS, *AGENT_METRICS)}


def spec_for(name: str) -> MetricSpec:
    """The catalog entry for ``name``; a reading without one is a programming error."""
    return _BY_NAME[name]


DEVICE_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("hw.id", "GPU UUID"),
    ("hw.type", "`gpu`"),
    ("hw.vendor", "`nvidia` or `amd`"),
    ("hw.model", "product name"),
    ("gpu.index", "index on the node"),
    ("gpu.pci.bus_id", "PCI bus id"),
)
