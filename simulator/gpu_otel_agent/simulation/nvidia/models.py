"""Static properties of the GPU models a scenario may name.

Values are the public data-sheet / `nvidia-smi -q` numbers, so a simulated H100
looks like one to every NVML client.  Unknown models get generic defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpu_otel_agent.plugins.nvidia.capture.fields import ARCHITECTURE_NAMES
from gpu_otel_agent.simulation.nvidia import nvlinks

# nvml.h NVML_DEVICE_ARCH_*, NVML_BRAND_*
ARCH_TURING, ARCH_AMPERE, ARCH_ADA, ARCH_HOPPER, ARCH_BLACKWELL = 6, 7, 8, 9, 10
ARCH_UNKNOWN = 0xFFFFFFFF  # NVML_DEVICE_ARCH_UNKNOWN: "anything else, presumably something newer"
BRAND_TESLA, BRAND_GEFORCE, BRAND_NVIDIA_RTX, BRAND_NVIDIA = 2, 5, 13, 14

# Architecture names a scenario or a capture may give (lower case): nvidia-smi's, and "ada".
ARCHITECTURES: Mapping[str, int] = MappingProxyType({
    **{name.lower(): number for number, name in ARCHITECTURE_NAMES.items()}, "ada": ARCH_ADA})


@dataclass(frozen=True)
class ModelInfo:
    name: str
    readings: Mapping[str, float | None] = field(default_factory=lambda: MappingProxyType({}))
    board_part: str = "900-2G133-0000-000"
    vbios: str = "96.00.99.00.01"
    # Where each value comes from (captures first), and which values rest on reading a data
    # sheet or a header alone (no capture of a real machine printed them).
    sources: tuple[str, ...] = ()
    from_reading: tuple[str, ...] = ()


def _m(name: str, part: str, **values: float | tuple[str, ...] | None) -> ModelInfo:
    """A row: readings, and optionally ``sources`` and ``from_reading`` (tuples of text)."""
    cited = {k: values.pop(k, ()) for k in ("sources", "from_reading")}
    readings = {k: v for k, v in values.items() if not isinstance(v, tuple)}
    sources, from_reading = (tuple(str(x) for x in v) if isinstance(v, tuple) else ()
                             for v in cited.values())
    return ModelInfo(name=name, readings=MappingProxyType(readings), board_part=part,
                     sources=sources, from_reading=from_reading)


_HOPPER = {"architecture": ARCH_HOPPER, "cuda_cc_major": 9, "cuda_cc_minor": 0, "gpm_supported": 1}
_AMPERE = {"architecture": ARCH_AMPERE, "cuda_cc_major": 8, "cuda_cc_minor": 0, "gpm_supported": 0}
# Blackwell data-centre (sm_100), Blackwell Ultra (sm_103), RTX Blackwell (GB202, sm_120).
_BLACKWELL = {"architecture": ARCH_BLACKWELL, "cuda_cc_major": 10, "cuda_cc_minor": 0,
              "gpm_supported": 1}
_BLACKWELL_ULTRA = {**_BLACKWELL, "cuda_cc_minor": 3}
_BLACKWELL_RTX = {**_BLACKWELL, "cuda_cc_major": 12, "cuda_cc_minor": 0}
_DRIVER_README = ("NVIDIA/open-gpu-kernel-modules README.md, driver 595.45.04 (commit df1c9a3, "
                  "2026-03-05), supported-GPU table: product name, PCI device id, subsystem id")
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
                nvlink_speed_mbps=25000,
                nvlink_version=3,
                pcie_max_link_gen=4,
                pcie_max_link_width=16,
                multiprocessor_count=108,
                bar1_total_mib=131072,
                sources=("https://github.com/NVIDIA/nccl-tests/issues/228 (nvidia-smi nvlink "
                         "-s, 2024-06-25): A100-SXM4-80GB, Link 0-11 at 25 GB/s",),
                from_reading=("nvlink_version",),
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
            # ---- Added for issue 37 (2026-11-27). PCI device / subsystem ids and product names:
            # _DRIVER_README. Each row's `sources` say where the rest comes from; `from_reading`
            # lists the values no capture of a real machine printed (data sheets, or kept
            # equal to a sibling part's).
            _m(
                "NVIDIA B200",
                "699-2G525-0200-000",
                **_BLACKWELL,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x290110DE,
                pci_subsystem_id=0x199910DE,
                memory_total_mib=183359,
                memory_reserved_mib=620,
                power_limit_w=1000,
                power_min_limit_w=200,
                power_max_limit_w=1000,
                max_sm_clock_mhz=1965,
                max_memory_clock_mhz=3996,
                max_video_clock_mhz=1650,
                nvlink_links=18,
                nvlink_speed_mbps=53125,
                nvlink_version=5,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=148,
                bar1_total_mib=262144,
                sources=(
                    _DRIVER_README,
                    "https://github.com/NVIDIA/TensorRT-LLM/issues/10278 (nvidia-smi, driver "
                    "580.95.05, 2025-12-24): NVIDIA B200, 183359 MiB, 1000 W cap",
                    "https://github.com/pytorch/ao/pull/4002 (deviceQuery and nvidia-smi "
                    "--query-gpu, 2026-03-05): 148 SMs, compute capability 10.0, max memory "
                    "clock 3996 MHz",
                    "a public hashcat benchmark of 8x B200 (driver 570.172.08; the search index "
                    "does not name its repository): CUDA clock 1965 MHz, 148 processors",
                    "https://github.com/vllm-project/vllm/issues/16336 (nvidia-smi topo -m): NV18 "
                    "between every pair of B200s: 18 NVLinks",
                ),
                from_reading=("nvlink_speed_mbps", "nvlink_version", "memory_reserved_mib",
                              "power_min_limit_w", "power_max_limit_w",
                              "max_video_clock_mhz", "pcie_max_link_gen", "bar1_total_mib",
                              "board_part"),
            ),
            _m(
                "NVIDIA GB200",
                "699-2G548-0200-000",
                **_BLACKWELL,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x294110DE,
                pci_subsystem_id=0x204610DE,
                memory_total_mib=189471,
                memory_reserved_mib=640,
                power_limit_w=1200,
                power_min_limit_w=200,
                power_max_limit_w=1200,
                max_sm_clock_mhz=2062,
                max_memory_clock_mhz=3996,
                max_video_clock_mhz=1650,
                nvlink_links=18,
                nvlink_speed_mbps=53125,
                nvlink_version=5,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=152,
                bar1_total_mib=262144,
                sources=(
                    _DRIVER_README,
                    "https://github.com/NVIDIA/k8s-test-infra/issues/371 (nvidia-smi nvlink -s "
                    "on a GB200 tray, 2026-06-11): Link 0-17 at 53.125 GB/s",
                    "public nvidia-smi tables of GB200 trays (driver 580.95.05; bus "
                    "00000008:01:00.0; several GitHub files found by exact-string search, "
                    "repository not named by the index): NVIDIA GB200, 189471 MiB, 1200 W cap",
                    "https://github.com/NVIDIA/gpu-operator/pull/1303 (nvidia-smi mig -lgip on an "
                    "HGX GB200, 2025-03-01): 1g.24gb, 1g.47gb and 2g.47gb (45.50 GiB), 18 SMs "
                    "per 1g instance",
                    "public kernel benchmark notes of a GB200 node (GitHub, 2026-09-16; "
                    "repository not named by the index): NVIDIA GB200, 152 SMs",
                ),
                from_reading=("nvlink_version", "memory_reserved_mib", "power_min_limit_w",
                              "power_max_limit_w", "max_sm_clock_mhz", "max_memory_clock_mhz",
                              "max_video_clock_mhz",
                              "pcie_max_link_gen", "bar1_total_mib", "board_part"),
            ),
            _m(
                "NVIDIA B300 SXM6 AC",
                "699-2G525-0300-000",
                **_BLACKWELL_ULTRA,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x318210DE,
                pci_subsystem_id=0x20E610DE,
                memory_total_mib=275040,
                memory_reserved_mib=900,
                power_limit_w=1100,
                power_min_limit_w=200,
                power_max_limit_w=1100,
                max_sm_clock_mhz=2032,
                max_memory_clock_mhz=3996,
                max_video_clock_mhz=1650,
                nvlink_links=18,
                pcie_max_link_gen=6,
                pcie_max_link_width=16,
                multiprocessor_count=148,
                bar1_total_mib=524288,
                sources=(
                    _DRIVER_README,
                    "public nvidia-smi tables of HGX B300 (several GitHub files found by "
                    "exact-string search, repository not named by the index): NVIDIA B300 SXM6 "
                    "AC, 275040 MiB, 1100 W cap",
                    "https://github.com/NVIDIA/cosmos-framework/pull/114 (2026-07-16): "
                    "torch.cuda.get_device_name() is 'NVIDIA B300 SXM6 AC'",
                    "a public benchmark table (GitHub, repository not named by the index): B300 "
                    "SXM6 AC 2032 MHz, 148 SMs",
                ),
                from_reading=("cuda_cc_minor", "memory_reserved_mib", "power_min_limit_w",
                              "power_max_limit_w", "max_memory_clock_mhz",
                              "max_video_clock_mhz", "pcie_max_link_gen", "bar1_total_mib",
                              "board_part"),
            ),
            _m(
                "NVIDIA GB300",
                "699-2G548-0300-000",
                **_BLACKWELL_ULTRA,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x31C210DE,
                pci_subsystem_id=0x21F110DE,
                memory_total_mib=284208,
                memory_reserved_mib=920,
                power_limit_w=1400,
                power_min_limit_w=200,
                power_max_limit_w=1400,
                max_sm_clock_mhz=2032,
                max_memory_clock_mhz=3996,
                max_video_clock_mhz=1650,
                nvlink_links=18,
                pcie_max_link_gen=6,
                pcie_max_link_width=16,
                multiprocessor_count=152,
                bar1_total_mib=524288,
                sources=(
                    _DRIVER_README,
                    "public nvidia-smi tables of GB300 trays (bus 00000008:06:00.0; several GitHub "
                    "files found by exact-string search, repository not named by the index): "
                    "NVIDIA GB300, 284208 MiB, 1400 W cap",
                    "NVIDIA DGX Station GB300 MIG walk-through (public GitHub copy): -lgip "
                    "profiles 1g.35gb, 1g.70gb, 2g.70gb, 3g.139gb, 4g.139gb, 7g.278gb",
                ),
                from_reading=("cuda_cc_minor", "memory_reserved_mib", "power_min_limit_w",
                              "power_max_limit_w", "max_sm_clock_mhz", "max_memory_clock_mhz",
                              "max_video_clock_mhz", "pcie_max_link_gen",
                              "multiprocessor_count", "bar1_total_mib", "board_part"),
            ),
            _m(
                "NVIDIA GH200 480GB",
                "699-2G530-0200-000",
                **_HOPPER,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x234210DE,
                pci_subsystem_id=0x180910DE,
                memory_total_mib=97871,
                memory_reserved_mib=560,
                power_limit_w=900,
                power_min_limit_w=200,
                power_max_limit_w=900,
                max_sm_clock_mhz=1980,
                max_memory_clock_mhz=2619,
                max_video_clock_mhz=1545,
                nvlink_links=18,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=132,
                bar1_total_mib=131072,
                sources=(
                    _DRIVER_README,
                    "public nvidia-smi tables of GH200 480GB (bus 00000009:01:00.0; several GitHub "
                    "files found by exact-string search): 97871 MiB, caps of 900 W and, on other "
                    "modules, 700 W",
                    "https://github.com/mredenti/PowerCapping configuration/OpenCL_benchmark.md "
                    "(driver 555.42.06): NVIDIA GH200 480GB, 132 compute units at 1980 MHz",
                    "NVIDIA/mig-parted config-default.yaml: 0x2342 (GH200) takes the 96 GB "
                    "profiles 1g.12gb, 2g.24gb, 3g.48gb",
                ),
                from_reading=("memory_reserved_mib", "power_min_limit_w", "power_max_limit_w",
                              "max_memory_clock_mhz", "max_video_clock_mhz", "nvlink_links",
                              "bar1_total_mib", "board_part"),
            ),
            _m(
                "NVIDIA H20",
                "699-2G520-0230-000",
                **_HOPPER,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x232910DE,
                pci_subsystem_id=0x198B10DE,
                memory_total_mib=97871,
                memory_reserved_mib=560,
                power_limit_w=500,
                power_min_limit_w=200,
                power_max_limit_w=500,
                max_sm_clock_mhz=1980,
                max_memory_clock_mhz=2619,
                max_video_clock_mhz=1545,
                nvlink_links=18,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=78,
                bar1_total_mib=131072,
                sources=(
                    _DRIVER_README,
                    "public nvidia-smi tables of H20 (several GitHub files found by exact-string "
                    "search): NVIDIA H20, 97871 MiB, 500 W cap",
                    "examples/captures/nvidia/h20-3e-mig-device.q.txt (Project-HAMi/HAMi#1422): "
                    "an H20-3e GPU instance of 4 slices has 32 SMs (8 per slice)",
                    "a public CUTLASS benchmark log (GitHub, 2026-05-26; repository not named "
                    "by the index): NVIDIA H20, 78 SMs",
                ),
                from_reading=("memory_reserved_mib", "power_min_limit_w", "power_max_limit_w",
                              "max_sm_clock_mhz", "max_memory_clock_mhz", "max_video_clock_mhz",
                              "bar1_total_mib", "board_part"),
            ),
            _m(
                "NVIDIA L40S",
                "900-2G133-0080-000",
                architecture=ARCH_ADA,
                cuda_cc_major=8,
                cuda_cc_minor=9,
                gpm_supported=0,
                **_NO_FAN,
                brand=BRAND_NVIDIA,
                pci_device_id=0x26B910DE,
                pci_subsystem_id=0x185110DE,
                memory_total_mib=46068,
                memory_reserved_mib=500,
                power_limit_w=350,
                power_min_limit_w=100,
                power_max_limit_w=350,
                max_sm_clock_mhz=2520,
                max_memory_clock_mhz=9001,
                max_video_clock_mhz=1965,
                nvlink_links=0,
                pcie_max_link_gen=4,
                pcie_max_link_width=16,
                multiprocessor_count=142,
                bar1_total_mib=65536,
                sources=(
                    _DRIVER_README,
                    "https://github.com/modal-labs/modal-client/pull/2797 (2025-01-23): L40S "
                    "nvidia-smi total 46068MiB",
                    "public nvidia-smi tables of L40S (driver 550.163.01 and others; GitHub files "
                    "found by exact-string search): 350 W cap, passive (fan N/A)",
                    "the README of the cuda-device-query crate (a deviceQuery in Rust, GitHub): "
                    "NVIDIA L40S, CC 8.9, 142 SMs, max clock 2520 MHz, memory clock 9001 MHz",
                ),
                from_reading=("memory_reserved_mib", "power_min_limit_w", "max_video_clock_mhz",
                              "bar1_total_mib", "board_part"),
            ),
            _m(
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "900-2G153-0000-000",
                **_BLACKWELL_RTX,
                **_NO_FAN,
                brand=BRAND_NVIDIA_RTX,
                pci_device_id=0x2BB510DE,
                pci_subsystem_id=0x204E10DE,
                memory_total_mib=97887,
                memory_reserved_mib=580,
                power_limit_w=600,
                power_min_limit_w=150,
                power_max_limit_w=600,
                max_sm_clock_mhz=2430,
                max_memory_clock_mhz=14001,
                max_video_clock_mhz=2370,
                nvlink_links=0,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=188,
                bar1_total_mib=131072,
                sources=(
                    _DRIVER_README,
                    "examples/captures/nvidia/rtx-pro-6000-clock-event-counters.q.txt "
                    "(bigstack-oss/cubecos#312, driver 580.105.06): a Server Edition node",
                    "a public benchmark table (GitHub, repository not named by the index): "
                    "NVIDIA RTX PRO 6000 Blackwell Server Edition, 2430 MHz, 188 SMs",
                    "the Max-Q Workstation Edition's captured 97887 MiB (same GB202 board memory)",
                ),
                from_reading=("memory_total_mib", "memory_reserved_mib", "power_limit_w",
                              "power_min_limit_w", "power_max_limit_w", "max_memory_clock_mhz",
                              "max_video_clock_mhz", "bar1_total_mib", "board_part"),
            ),
            _m(
                "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
                "900-5G153-2200-000",
                **_BLACKWELL_RTX,
                fan_percent=30,
                num_fans=1,
                brand=BRAND_NVIDIA_RTX,
                pci_device_id=0x2BB410DE,
                pci_subsystem_id=0x204C10DE,
                memory_total_mib=97887,
                memory_reserved_mib=580,
                power_limit_w=300,
                power_min_limit_w=150,
                power_max_limit_w=300,
                max_sm_clock_mhz=2280,
                max_memory_clock_mhz=14001,
                max_video_clock_mhz=2370,
                nvlink_links=0,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=188,
                bar1_total_mib=131072,
                sources=(
                    _DRIVER_README,
                    "a public validation log (GitHub, repository not named by the index; driver "
                    "595.71.05): NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, 97887 "
                    "MiB",
                ),
                from_reading=("memory_reserved_mib", "power_limit_w", "power_min_limit_w",
                              "power_max_limit_w", "max_sm_clock_mhz", "max_memory_clock_mhz",
                              "max_video_clock_mhz", "multiprocessor_count", "bar1_total_mib",
                              "board_part"),
            ),
            _m(
                "NVIDIA GeForce RTX 5090",
                "900-1G144-2530-000",
                # GPM: nvml.h promises it on "Hopper or newer fully supported devices"; GeForce
                # is not among NVML's fully supported products.
                **{**_BLACKWELL_RTX, "gpm_supported": 0},
                fan_percent=30,
                num_fans=2,
                brand=BRAND_GEFORCE,
                pci_device_id=0x2B8510DE,
                pci_subsystem_id=0x204410DE,
                memory_total_mib=32607,
                memory_reserved_mib=460,
                power_limit_w=575,
                power_min_limit_w=400,
                power_max_limit_w=600,
                max_sm_clock_mhz=3090,
                max_memory_clock_mhz=14001,
                max_video_clock_mhz=3090,
                nvlink_links=0,
                pcie_max_link_gen=5,
                pcie_max_link_width=16,
                multiprocessor_count=170,
                bar1_total_mib=32768,
                # GeForce: no ECC, no row remapping (nvidia-smi prints N/A in the ECC column).
                ecc_mode=None,
                ecc_sbe_volatile=None,
                ecc_dbe_volatile=None,
                ecc_sbe_aggregate=None,
                ecc_dbe_aggregate=None,
                remapped_rows_correctable=None,
                remapped_rows_uncorrectable=None,
                remapped_rows_pending=None,
                remapped_rows_failure=None,
                sources=(
                    _DRIVER_README + " (no subsystem id listed)",
                    "public nvidia-smi tables of RTX 5090 (driver 595.71.05 and others; GitHub "
                    "files found by exact-string search): 32607 MiB, 575 W cap (one board "
                    "600 W), fan printed, ECC N/A",
                    "public deviceQuery outputs of RTX 5090 (CUDA 13.0 driver; GitHub files "
                    "found by exact-string search): CC 12.0, 170 SMs, memory clock 14001 MHz, "
                    "CUDA max clock 2407 MHz (the GeForce boost NVML reports is higher: 3090 "
                    "here is reading)",
                ),
                from_reading=("pci_subsystem_id", "memory_reserved_mib", "power_min_limit_w",
                              "max_sm_clock_mhz", "max_video_clock_mhz", "bar1_total_mib",
                              "board_part"),
            ),
        )
    }
)

# A model the table does not know is never silently an A100: its identity is what the scenario
# or the capture gives (REQUIRED_FOR_UNKNOWN), else NVML's own "unknown" answers.
GENERIC: Mapping[str, float | None] = MappingProxyType(
    {
        "architecture": ARCH_UNKNOWN,
        "cuda_cc_major": 0,
        "cuda_cc_minor": 0,
        "gpm_supported": 0,
        "brand": BRAND_NVIDIA,
        "pci_device_id": 0x000010DE,  # NVIDIA's vendor id, device id unknown
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


# What a scenario must give for a model the table does not know (the limits a generic default
# would get wrong, and the identity that decides the agent's code paths).
REQUIRED_FOR_UNKNOWN = ("architecture", "pci_device_id", "memory_total_mib", "power_limit_w")

# CUDA compute capability and GPM support that follow from an architecture when a scenario gives
# the architecture of an unknown model but not these (GPM: nvml.h, "Hopper or newer").
ARCH_DEFAULTS: Mapping[int, Mapping[str, float]] = MappingProxyType({
    ARCH_TURING: MappingProxyType({"cuda_cc_major": 7, "cuda_cc_minor": 5, "gpm_supported": 0}),
    ARCH_AMPERE: MappingProxyType({"cuda_cc_major": 8, "cuda_cc_minor": 0, "gpm_supported": 0}),
    ARCH_ADA: MappingProxyType({"cuda_cc_major": 8, "cuda_cc_minor": 9, "gpm_supported": 0}),
    ARCH_HOPPER: MappingProxyType({"cuda_cc_major": 9, "cuda_cc_minor": 0, "gpm_supported": 1}),
    ARCH_BLACKWELL: MappingProxyType({"cuda_cc_major": 10, "cuda_cc_minor": 0,
                                      "gpm_supported": 1}),
})


def architecture_number(value: object) -> int:
    """An architecture as a scenario or a capture gives it: nvml.h's number, or the name
    ``nvidia-smi -q`` prints ("Blackwell", "Ada Lovelace"). ValueError names the choices."""
    if isinstance(value, bool):
        raise ValueError(f"expected an architecture name or number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        name = value.strip().lower()
        if name in ARCHITECTURES:
            return ARCHITECTURES[name]
        if name.isdigit():
            return int(name)
    raise ValueError(f"unknown architecture {value!r} (one of: "
                     f"{', '.join(sorted({k.title() for k in ARCHITECTURES}))}, or nvml.h's "
                     f"NVML_DEVICE_ARCH_* number)")


def model_readings(model: str) -> Mapping[str, float | None]:
    info = MODELS.get(model)
    return info.readings if info is not None else GENERIC


def model_info(model: str) -> ModelInfo:
    return MODELS.get(model) or ModelInfo(name=model, readings=GENERIC)
