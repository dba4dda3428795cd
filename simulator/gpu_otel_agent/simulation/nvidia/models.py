"""Static properties of the GPU models a scenario may name.

Values are the public data-sheet / `nvidia-smi -q` numbers, so a simulated H100
looks like one to every NVML client.  Unknown models get generic defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpu_otel_agent.simulation.nvidia import nvlinks

# nvml.h NVML_DEVICE_ARCH_*, NVML_BRAND_*
ARCH_TURING, ARCH_AMPERE, ARCH_ADA, ARCH_HOPPER, ARCH_BLACKWELL = 6, 7, 8, 9, 10
BRAND_TESLA, BRAND_NVIDIA = 2, 14


@dataclass(frozen=True)
class ModelInfo:
    name: str
    readings: Mapping[str, float | None] = field(default_factory=lambda: MappingProxyType({}))
    board_part: str = "900-2G133-0000-000"
    vbios: str = "96.00.99.00.01"


def _m(name: str, part: str, **readings: float | None) -> ModelInfo:
    return ModelInfo(name=name, readings=MappingProxyType(dict(readings)), board_part=part)


_HOPPER = {"architecture": ARCH_HOPPER, "cuda_cc_major": 9, "cuda_cc_minor": 0, "gpm_supported": 1}
_AMPERE = {"architecture": ARCH_AMPERE, "cuda_cc_major": 8, "cuda_cc_minor": 0, "gpm_supported": 0}
_NO_FAN: dict[str, float | None] = {"fan_percent": None, "num_fans": 0}

MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    {
        m.name: m
        for m in (
            _m(
                "NVIDIA H100 80GB HBM3",
                "692-2G520-0200-000",
                **_HOPPER,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x233010DE,
                pci_subsystem_id=0x16C110DE,
                memory_total_mib=81559,
                memory_reserved_mib=520,
                power_limit_w=700,
                power_min_limit_w=200,
                power_max_limit_w=700,
                max_sm_clock_mhz=1980,
                max_memory_clock_mhz=2619,
                max_video_clock_mhz=1545,
                nvlink_links=18,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=132,
                bar1_total_mib=131072,
            ),
            _m(
                "NVIDIA H100 PCIe",
                "900-21010-0000-000",
                **_HOPPER,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x233110DE,
                pci_subsystem_id=0x162610DE,
                memory_total_mib=81559,
                memory_reserved_mib=520,
                power_limit_w=350,
                power_min_limit_w=200,
                power_max_limit_w=350,
                max_sm_clock_mhz=1755,
                max_memory_clock_mhz=1593,
                max_video_clock_mhz=1395,
                nvlink_links=0,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=114,
                bar1_total_mib=131072,
            ),
            _m(
                "NVIDIA H200",
                "692-2G520-0280-000",
                **_HOPPER,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x233510DE,
                pci_subsystem_id=0x18BE10DE,
                memory_total_mib=143771,
                memory_reserved_mib=560,
                power_limit_w=700,
                power_min_limit_w=200,
                power_max_limit_w=700,
                max_sm_clock_mhz=1980,
                max_memory_clock_mhz=3201,
                max_video_clock_mhz=1545,
                nvlink_links=18,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=132,
                bar1_total_mib=262144,
            ),
            _m(
                "NVIDIA A100-SXM4-80GB",
                "692-2G506-0210-002",
                **_AMPERE,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x20B210DE,
                pci_subsystem_id=0x147F10DE,
                memory_total_mib=81920,
                memory_reserved_mib=450,
                power_limit_w=400,
                power_min_limit_w=100,
                power_max_limit_w=400,
                max_sm_clock_mhz=1410,
                max_memory_clock_mhz=1593,
                max_video_clock_mhz=1290,
                nvlink_links=12,
                pcie_max_link_gen=4,
                pcie_max_link_width=16,
                multiprocessor_count=108,
                bar1_total_mib=131072,
            ),
            _m(
                "NVIDIA A100-SXM4-40GB",
                "692-2G506-0200-002",
                **_AMPERE,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x20B010DE,
                pci_subsystem_id=0x134F10DE,
                memory_total_mib=40960,
                memory_reserved_mib=400,
                power_limit_w=400,
                power_min_limit_w=100,
                power_max_limit_w=400,
                max_sm_clock_mhz=1410,
                max_memory_clock_mhz=1215,
                max_video_clock_mhz=1290,
                nvlink_links=12,
                pcie_max_link_gen=4,
                pcie_max_link_width=16,
                multiprocessor_count=108,
                bar1_total_mib=65536,
            ),
            _m(
                "Tesla T4",
                "900-2G183-0000-001",
                architecture=ARCH_TURING,
                cuda_cc_major=7,
                cuda_cc_minor=5,
                gpm_supported=0,
                fan_percent=None,
                num_fans=0,
                brand=BRAND_TESLA,
                pci_device_id=0x1EB810DE,
                pci_subsystem_id=0x12A210DE,
                memory_total_mib=15360,
                memory_reserved_mib=250,
                power_limit_w=70,
                power_min_limit_w=60,
                power_max_limit_w=70,
                max_sm_clock_mhz=1590,
                max_memory_clock_mhz=5001,
                max_video_clock_mhz=1470,
                nvlink_links=0,
                pcie_max_link_gen=3,
                pcie_max_link_width=16,
                multiprocessor_count=40,
                bar1_total_mib=256,
                # Turing retires pages; row remapping is Ampere and newer (nvml.h,
                # nvmlDeviceGetRemappedRows): NOT_SUPPORTED here.
                remapped_rows_correctable=None,
                remapped_rows_uncorrectable=None,
                remapped_rows_pending=None,
                remapped_rows_failure=None,
            ),
            _m(
                "NVIDIA L4",
                "900-2G193-0000-001",
                architecture=ARCH_ADA,
                cuda_cc_major=8,
                cuda_cc_minor=9,
                gpm_supported=0,
                fan_percent=None,
                num_fans=0,
                brand=BRAND_NVIDIA,
                pci_device_id=0x27B810DE,
                pci_subsystem_id=0x16CA10DE,
                memory_total_mib=23034,
                memory_reserved_mib=300,
                power_limit_w=72,
                power_min_limit_w=40,
                power_max_limit_w=72,
                max_sm_clock_mhz=2040,
                max_memory_clock_mhz=6251,
                max_video_clock_mhz=1770,
                nvlink_links=0,
                pcie_max_link_gen=4,
                pcie_max_link_width=16,
                multiprocessor_count=58,
                bar1_total_mib=32768,
            ),
            _m(
                "NVIDIA A10",
                "900-2G133-0000-000",
                architecture=ARCH_AMPERE,
                cuda_cc_major=8,
                cuda_cc_minor=6,
                gpm_supported=0,
                fan_percent=None,
                num_fans=0,
                brand=BRAND_NVIDIA,
                pci_device_id=0x223610DE,
                pci_subsystem_id=0x148210DE,
                memory_total_mib=23028,
                memory_reserved_mib=300,
                power_limit_w=150,
                power_min_limit_w=100,
                power_max_limit_w=150,
                max_sm_clock_mhz=1695,
                max_memory_clock_mhz=6251,
                max_video_clock_mhz=1560,
                nvlink_links=0,
                pcie_max_link_gen=4,
                pcie_max_link_width=16,
                multiprocessor_count=72,
                bar1_total_mib=32768,
            ),
        )
    }
)

GENERIC: Mapping[str, float | None] = MappingProxyType(
    {
        "architecture": ARCH_AMPERE,
        "cuda_cc_major": 8,
        "cuda_cc_minor": 0,
        "gpm_supported": 0,
        "brand": BRAND_NVIDIA,
        "pci_device_id": 0x20B010DE,
        "pci_subsystem_id": 0,
        "memory_total_mib": 16384,
        "memory_reserved_mib": 256,
        "power_limit_w": 300,
        "power_min_limit_w": 100,
        "power_max_limit_w": 300,
        "max_sm_clock_mhz": 1500,
        "max_memory_clock_mhz": 1500,
        "max_video_clock_mhz": 1300,
        "nvlink_links": 0,
        "pcie_max_link_gen": 4,
        "pcie_max_link_width": 16,
        "multiprocessor_count": 80,
        "bar1_total_mib": 32768,
        "fan_percent": 30,
        "num_fans": 1,
    }
)

# Defaults for every device before model data and the scenario are applied.
BASE: Mapping[str, float | None] = MappingProxyType(
    {
        "utilization_gpu": 0,
        "utilization_memory": 0,
        "memory_used_mib": 0,
        "bar1_used_mib": 2,
        "temperature_c": 34,
        "memory_temperature_c": 40,
        "power_w": 60,
        "pstate": 0,
        "encoder_util": 0,
        "decoder_util": 0,
        "jpg_util": 0,
        "ofa_util": 0,
        "clocks_event_reasons": 1,
        # pcie_link_gen / pcie_link_width: absent here, so they follow the max
        # (node.daemon._DERIVED) until a scenario or `sim set` trains the link down.
        "energy_mj": 0,
        "pcie_tx_bytes": 0,
        "pcie_rx_bytes": 0,
        "nvlink_tx_kib": 0,
        "nvlink_rx_kib": 0,
        "pcie_replay_counter": 0,
        "pcie_replay_rollover": 0,  # NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER
        "pcie_counter_bits": 64,  # PCIe byte fields wrap at this width ("can be wrapped")
        "ecc_sbe_volatile": 0,
        "ecc_dbe_volatile": 0,
        "ecc_sbe_aggregate": 0,
        "ecc_dbe_aggregate": 0,
        "retired_pages_sbe": 0,
        "retired_pages_dbe": 0,
        "retired_pages_pending": 0,
        "remapped_rows_correctable": 0,
        "remapped_rows_uncorrectable": 0,
        "remapped_rows_pending": 0,
        "remapped_rows_failure": 0,
        "violation_power_ns": 0,
        "violation_thermal_ns": 0,
        "violation_sync_boost_ns": 0,
        "violation_board_limit_ns": 0,
        "violation_low_util_ns": 0,
        "violation_reliability_ns": 0,
        "violation_app_clocks_ns": 0,
        "violation_base_clocks_ns": 0,
        "violation_sw_thermal_ns": 0,
        "violation_hw_thermal_ns": 0,
        "violation_hw_power_brake_ns": 0,
        "persistence_mode": 1,
        "compute_mode": 0,
        "ecc_mode": 1,
        "display_mode": 0,
        "display_active": 0,
        "mig_mode": 0,
        "power_source": 0,
        "recovery_action": 0,  # NVML_GPU_RECOVERY_ACTION_NONE
        # nvmlDeviceGetTemperatureThreshold(SLOWDOWN): a data-centre part's HW slowdown point
        # (nvidia-smi -q "GPU Slowdown Temp"); the scenario may set its own.
        "temperature_slowdown_c": 90,
        # No NVLink fabric probe (NOT_SUPPORTED) and no link speed/version unless a model row
        # or the scenario gives them (a scenario's `fabric:` entry, nvlink_speed_mbps).
        **dict.fromkeys(("fabric_state", "fabric_status", "fabric_clique_id",
                         "fabric_health_mask", "fabric_health_summary", "fabric_cluster_uuid_0",
                         "fabric_cluster_uuid_1", "fabric_cluster_uuid_2",
                         "fabric_cluster_uuid_3", "nvlink_speed_mbps", "nvlink_version")),
        # Every link up with clean counters (a model without NVLink serves NOT_SUPPORTED).
        **{nvlinks.reading(link, field): (1.0 if field == "state" else 0.0)
           for link in range(nvlinks.MAX_LINKS) for field in nvlinks.FIELDS},
    }
)


def model_readings(model: str) -> Mapping[str, float | None]:
    info = MODELS.get(model)
    return info.readings if info is not None else GENERIC


def model_info(model: str) -> ModelInfo:
    return MODELS.get(model) or ModelInfo(name=model, readings=GENERIC)
