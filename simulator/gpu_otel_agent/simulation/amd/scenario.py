"""What an AMD device entry of a scenario may say: its reading keys and amdsmi functions.

Both are read from the C source, the one place that defines them, so the scenario parser
needs neither the compiled library nor the ``amdsmi`` package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from gpu_otel_agent.simulation.amd.amdsmi_control import EVENT_TYPES
from gpu_otel_agent.simulation.core.tables import macro_names

SOURCE = Path(__file__).with_name("libamd_smi_sim.c")

# Identity comes from the model, not from the scenario.
_IDENTITY = frozenset({"pci_device_id", "pci_revision", "minor_number"})


def reading_names() -> tuple[str, ...]:
    return macro_names(SOURCE, "AMD_READINGS")


def function_names() -> tuple[str, ...]:
    """The amdsmi functions the simulator serves (the others always answer NOT_SUPPORTED)."""
    return macro_names(SOURCE, "AMD_FUNCS")


def settable_readings() -> frozenset[str]:
    return frozenset(reading_names()) - _IDENTITY


# Readings computed from others unless the scenario (or a `set`) gives them.
DERIVED: Mapping[str, Callable[[Mapping[str, float | None]], float]] = {
    "gfx_clock_mhz": lambda r: (
        (r.get("max_gfx_clock_mhz") or 0.0)
        * (0.3 + 0.7 * min(1.0, (r.get("utilization_gpu") or 0.0) / 30))
    ),
    "memory_clock_mhz": lambda r: r.get("max_memory_clock_mhz") or 0.0,
    "pcie_link_width": lambda r: r.get("pcie_max_link_width") or 0.0,
    "pcie_link_speed_mts": lambda r: r.get("pcie_max_link_speed_mts") or 0.0,
    "xgmi_read_kb_s": lambda r: (
        40000.0 * (r.get("utilization_gpu") or 0.0) if r.get("xgmi_links") else 0.0
    ),
    "xgmi_write_kb_s": lambda r: (
        35000.0 * (r.get("utilization_gpu") or 0.0) if r.get("xgmi_links") else 0.0
    ),
}

EVENT_KINDS = tuple(EVENT_TYPES)  # the `event` control operation's types
