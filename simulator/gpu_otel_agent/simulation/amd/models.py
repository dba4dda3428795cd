"""Static properties of the AMD Instinct models a scenario may name.

Public data-sheet / ``amd-smi static`` numbers, so a simulated MI300X looks like one to
every amdsmi client. Unknown models get generic defaults.

``gpu_metrics_content_revision`` is the ``gpu_metrics`` table version the part's firmware
serves (format 1): MI200 (MI210, MI250X; the kernel's aldebaran_ppt.c) fills
``gpu_metrics_v1_3``, MI300 (smu_v13_0_6_ppt.c) ``gpu_metrics_v1_4``/``v1_5`` with older PMFW
and ``gpu_metrics_v1_6`` with current PMFW (struct definitions in the kernel's
``drivers/gpu/drm/amd/include/kgd_pp_interface.h``). Only v1.6 has the throttle-residency
accumulators and the per-XCP busy (``xcp_stats[].gfx_busy_inst``); v1.5 has neither. The
simulated MI300X serves v1.6, what amd-smi shows on ROCm 7.0.2 (``gfx_busy_inst`` per XCP,
ROCm/amdsmi issue 134); ``gpu_metrics_content_revision: 5`` models older firmware. An MI250X
OAM is two GCDs, each its own amdsmi processor; the package's power is reported on one of
them (``package_power_here``) and 0 W on the other (see the node's pairing of MI250X GCDs).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from gpu_otel_agent.simulation.amd.partitions import family

_NO_FAN: dict[str, float | None] = {"fan_percent": None}

MODELS: Mapping[str, Mapping[str, float | None]] = MappingProxyType(
    {
        "AMD Instinct MI300X": MappingProxyType({
            # No edge temperature sensor on MI300.
            **_NO_FAN, "temperature_c": None, "pci_device_id": 0x74A1, "pci_revision": 0,
            "compute_units": 304,
            "memory_total_mib": 196592, "power_limit_w": 750, "power_default_limit_w": 750,
            "power_min_limit_w": 0, "power_max_limit_w": 750, "max_gfx_clock_mhz": 2100,
            "max_memory_clock_mhz": 1300, "pcie_max_link_width": 16,
            "pcie_max_link_speed_mts": 32000, "xgmi_links": 7,
            "gpu_metrics_content_revision": 6,
        }),
        # MI325X: 304 CUs and device id 0x74a5 as amd-smi shows them (the subsystem id of the
        # MI325X VF in examples/captures/amd/mi325x-vf-amd-smi-list-static-partition-process.md);
        # 256 GB HBM3E and 1000 W from AMD's data sheet, its MB figure by the MI300X's rule
        # (196592 = 192 x 1024 - 16); the rest as the MI300X (same XCD layout, partition modes).
        "AMD Instinct MI325X": MappingProxyType({
            **_NO_FAN, "temperature_c": None, "pci_device_id": 0x74A5, "pci_revision": 0,
            "compute_units": 304,
            "memory_total_mib": 262128, "power_limit_w": 1000, "power_default_limit_w": 1000,
            "power_min_limit_w": 0, "power_max_limit_w": 1000, "max_gfx_clock_mhz": 2100,
            "max_memory_clock_mhz": 1300, "pcie_max_link_width": 16,
            "pcie_max_link_speed_mts": 32000, "xgmi_links": 7,
            "gpu_metrics_content_revision": 6,
        }),
        # MI355X (gfx950, 8 XCDs): 256 CUs, 288 GB HBM3E, 1400 W and 2400 MHz from AMD's data
        # sheet (the MI350X's amd-smi static, examples/captures/amd/mi350x-amd-smi-static.txt,
        # shows the family's PCIe Gen 5 x16 and device id 0x75a0; the MI355X's 0x75a3 rests on
        # reading); MB by the MI300X's rule.
        "AMD Instinct MI355X": MappingProxyType({
            **_NO_FAN, "temperature_c": None, "pci_device_id": 0x75A3, "pci_revision": 0,
            "compute_units": 256,
            "memory_total_mib": 294896, "power_limit_w": 1400, "power_default_limit_w": 1400,
            "power_min_limit_w": 0, "power_max_limit_w": 1400, "max_gfx_clock_mhz": 2400,
            "max_memory_clock_mhz": 2000, "pcie_max_link_width": 16,
            "pcie_max_link_speed_mts": 32000, "xgmi_links": 7,
            "gpu_metrics_content_revision": 6,
        }),
        "AMD Instinct MI250X": MappingProxyType({
            **_NO_FAN, "pci_device_id": 0x740C, "pci_revision": 1, "compute_units": 110,
            "memory_total_mib": 65520, "power_limit_w": 560, "power_default_limit_w": 560,
            "power_min_limit_w": 0, "power_max_limit_w": 560, "max_gfx_clock_mhz": 1700,
            "max_memory_clock_mhz": 1600, "pcie_max_link_width": 16,
            "pcie_max_link_speed_mts": 16000, "xgmi_links": 8,
            "gpu_metrics_content_revision": 3,
        }),
        "AMD Instinct MI210": MappingProxyType({
            **_NO_FAN, "pci_device_id": 0x740F, "pci_revision": 2, "compute_units": 104,
            "memory_total_mib": 65520, "power_limit_w": 300, "power_default_limit_w": 300,
            "power_min_limit_w": 0, "power_max_limit_w": 300, "max_gfx_clock_mhz": 1700,
            "max_memory_clock_mhz": 1600, "pcie_max_link_width": 16,
            "pcie_max_link_speed_mts": 16000, "xgmi_links": 0,
            "gpu_metrics_content_revision": 3,
        }),
    }
)

GENERIC: Mapping[str, float | None] = MappingProxyType({
    "fan_percent": 30, "pci_device_id": 0x7400, "pci_revision": 0, "compute_units": 64,
    "memory_total_mib": 32752, "power_limit_w": 300, "power_default_limit_w": 300,
    "power_min_limit_w": 0, "power_max_limit_w": 300, "max_gfx_clock_mhz": 1800,
    "max_memory_clock_mhz": 1200, "pcie_max_link_width": 16, "pcie_max_link_speed_mts": 16000,
    "xgmi_links": 0,
})

# Defaults for every AMD device before model data and the scenario are applied.
BASE: Mapping[str, float | None] = MappingProxyType({
    "utilization_gpu": 0, "utilization_memory": 0, "utilization_mm": 0, "memory_used_mib": 0,
    "temperature_c": 35, "hotspot_temperature_c": 40, "memory_temperature_c": 38,
    "power_w": 120, "soc_clock_mhz": 1000, "video_clock_mhz": 1000, "decoder_clock_mhz": 800,
    "pcie_bandwidth_mbps": 0, "pcie_replay_counter": 0, "ecc_correctable": 0,
    "ecc_uncorrectable": 0, "ecc_deferred": 0, "throttle_ppt": 0, "throttle_socket_thermal": 0,
    "throttle_vr_thermal": 0, "throttle_hbm_thermal": 0, "throttle_prochot": 0,
    "xgmi_read_kb": 0, "xgmi_write_kb": 0, "energy_uj": 0, "violation_acc_counter": 0,
    "violation_ppt_acc": 0, "violation_socket_thermal_acc": 0, "violation_vr_thermal_acc": 0,
    "violation_hbm_thermal_acc": 0, "violation_prochot_acc": 0,
    "gpu_metrics_content_revision": 5, "package_power_here": 1, "ras_enabled": 1,
})

# The MI200 OAM parts that are two GCDs (two amdsmi processors) on one package.
DUAL_GCD = frozenset({"AMD Instinct MI250X", "AMD Instinct MI250"})


# The part of a capture that does not name it (an ``amd-smi metric`` output alone): served with
# the GENERIC limits, by this explicit name, so a scenario cannot get them by a typo.
UNNAMED_CAPTURED = "AMD GPU (capture)"


def model_readings(model: str) -> Mapping[str, float | None]:
    """The model's data; a board variant's name ("AMD Instinct MI300X OAM", "... MI300X-O")
    takes its family's."""
    found = family(model, tuple(MODELS))
    return MODELS[found] if found is not None else GENERIC
