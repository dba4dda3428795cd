"""The one table of what an ``nvidia-smi -q`` capture holds and where each value goes.

Each row names a capture field twice (its XML path under ``<gpu>`` in ``nvidia-smi -q -x``, and
its label path under ``GPU <bus id>`` in ``nvidia-smi -q``; several per form where drivers renamed
it), the scenario key that serves it on the simulated node, the NVML call a client reads it
through, and the metric (from the agent's catalog) or attribute it arrives as. The readers
(``gpu_otel_agent.simulation.captures.nvidia_smi``: ``reader``, ``table_reader``), the capture
writer (``gpu-agent capture``), the comparison tests and ``docs/captures.md`` all read this table.

Paths: ``a/b`` is a child; ``a/b+a/c`` is the sum of both (ECC counts, split by memory kind on
newer drivers). Values print as ``81559 MiB``, ``67.03 W``, ``P0``, ``Enabled``, ``Active``;
``N/A``, ``[N/A]``, ``Not Supported`` and the like mean the driver answered "not supported"
(or had no value) and are served as NVML_ERROR_NOT_SUPPORTED.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class CaptureField:
    key: str  # scenario key: a reading (settable) or an identity key (model, uuid, ...)
    xml: tuple[str, ...]  # alternatives, newest schema first
    text: tuple[str, ...]
    nvml: str  # the NVML call (or field id) that serves it
    description: str
    kind: str = "number"  # number | text | flag | pstate | compute_mode | link_width
    metric: str | None = None  # catalog metric name, or "attr:<name>" for a device attribute
    point: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    scale: float = 1.0  # capture unit -> metric unit (MiB -> By, MHz -> Hz, % -> 1)
    writer: bool = True  # `gpu-agent capture` writes it


MIB = 1024.0 * 1024.0
MHZ = 1e6
PCT = 0.01


def _f(key: str, xml: str | tuple[str, ...], text: str | tuple[str, ...], nvml: str,
       description: str, **kw: object) -> CaptureField:
    return CaptureField(key, (xml,) if isinstance(xml, str) else xml,
                        (text,) if isinstance(text, str) else text, nvml, description,
                        **kw)  # type: ignore[arg-type]


def _p(**attrs: str) -> Mapping[str, str]:
    return MappingProxyType({k.replace("__", "."): v for k, v in attrs.items()})


_VOL, _AGG = "ecc_errors/volatile", "ecc_errors/aggregate"
_TVOL, _TAGG = "ECC Errors/Volatile", "ECC Errors/Aggregate"


def _ecc(scope: str, tscope: str, correctable: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """ECC totals across schema versions: v12+ split SRAM/DRAM (550+ split SRAM uncorrectable
    into parity and SEC-DED); older schemas print single/double bit totals."""
    if correctable:
        return ((f"{scope}/sram_correctable+{scope}/dram_correctable",
                 f"{scope}/single_bit/total"),
                (f"{tscope}/SRAM Correctable+{tscope}/DRAM Correctable",
                 f"{tscope}/Single Bit/Total"))
    return ((f"{scope}/sram_uncorrectable_parity+{scope}/sram_uncorrectable_secded"
             f"+{scope}/dram_uncorrectable",
             f"{scope}/sram_uncorrectable+{scope}/dram_uncorrectable",
             f"{scope}/double_bit/total"),
            (f"{tscope}/SRAM Uncorrectable Parity+{tscope}/SRAM Uncorrectable SEC-DED"
             f"+{tscope}/DRAM Uncorrectable",
             f"{tscope}/SRAM Uncorrectable+{tscope}/DRAM Uncorrectable",
             f"{tscope}/Double Bit/Total"))


_GPU_POWER = ("gpu_power_readings", "power_readings")
# Driver 610 moved the limits of the -q text into a "GPU Ceiling Power Limit" sub-section of
# "GPU Power Readings" (NVIDIA's nvidia-smi documentation, change log: "Fields are moved in the
# text output to the 'GPU Ceiling Power Limit' section. Fields are still kept in the old location
# for the XML output"); the sub-section is tried first.
_TGPU_POWER = ("GPU Power Readings/GPU Ceiling Power Limit", "GPU Power Readings",
               "Power Readings")


def _power(*names: tuple[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(XML tag, -q label) alternatives under the GPU power section, newest first."""
    return (tuple(f"{s}/{tag}" for tag, _ in names for s in _GPU_POWER),
            tuple(f"{s}/{label}" for _, label in names for s in _TGPU_POWER))


# Identity: what names the device (served as printed; the agent exports some as attributes).
IDENTITY: tuple[CaptureField, ...] = (
    _f("model", "product_name", "Product Name", "nvmlDeviceGetName",
       "Product name, served verbatim; the simulator's model table supplies what the capture "
       "does not print", kind="text", metric="attr:hw.model"),
    _f("uuid", "uuid", "GPU UUID", "nvmlDeviceGetUUID", "GPU UUID", kind="text",
       metric="attr:hw.id"),
    _f("pci_bus_id", ("pci/pci_bus_id", "@id"), ("PCI/Bus Id", "@id"),
       "nvmlDeviceGetPciInfo_v3 (busId)", "PCI bus id (domain:bus:device.function)",
       kind="text", metric="attr:gpu.pci.bus_id"),
    _f("serial", "serial", "Serial Number", "nvmlDeviceGetSerial",
       "Board serial number", kind="text"),
    _f("vbios", "vbios_version", "VBIOS Version", "nvmlDeviceGetVbiosVersion",
       "VBIOS version", kind="text"),
    _f("board_part", "board_part_number", "Board Part Number", "nvmlDeviceGetBoardPartNumber",
       "Board part number", kind="text"),
    # Served as printed, so that a replayed part the simulator's table does not know answers
    # its own architecture and PCI ids (not a generic part's).
    _f("architecture", "product_architecture", "Product Architecture",
       "nvmlDeviceGetArchitecture", "Architecture name (Hopper, Blackwell ...), served as nvml.h's "
       "NVML_DEVICE_ARCH_* number", kind="text"),
    _f("pci_device_id", "pci/pci_device_id", "PCI/Device Id", "nvmlDeviceGetPciInfo_v3 "
       "(pciDeviceId)", "PCI device and vendor id (0x233010DE; the XML prints 233010DE)",
       kind="text"),
    _f("pci_subsystem_id", "pci/pci_sub_system_id", "PCI/Sub System Id",
       "nvmlDeviceGetPciInfo_v3 (pciSubSystemId)", "PCI subsystem id", kind="text"),
)

# nvml.h NVML_DEVICE_ARCH_* -> the name `nvidia-smi -q` prints as "Product Architecture".
ARCHITECTURE_NAMES: Mapping[int, str] = MappingProxyType({
    2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
    8: "Ada Lovelace", 9: "Hopper", 10: "Blackwell", 13: "Rubin",
})

READINGS: tuple[CaptureField, ...] = (
    _f("minor_number", "minor_number", "Minor Number", "nvmlDeviceGetMinorNumber",
       "Minor number of /dev/nvidiaN"),
    _f("persistence_mode", "persistence_mode", "Persistence Mode",
       "nvmlDeviceGetPersistenceMode", "Persistence mode (Enabled = 1)", kind="flag"),
    _f("display_mode", "display_mode", "Display Mode", "nvmlDeviceGetDisplayMode",
       "A display is connected (Enabled = 1)", kind="flag"),
    _f("display_active", "display_active", "Display Active", "nvmlDeviceGetDisplayActive",
       "A display is initialised (Enabled = 1)", kind="flag"),
    _f("ecc_mode", "ecc_mode/current_ecc", "ECC Mode/Current", "nvmlDeviceGetEccMode",
       "ECC mode in effect (Enabled = 1)", kind="flag"),
    _f("compute_mode", "compute_mode", "Compute Mode", "nvmlDeviceGetComputeMode",
       "Compute mode (Default 0, Exclusive_Thread 1, Prohibited 2, Exclusive_Process 3)",
       kind="compute_mode"),
    _f("memory_total_mib", "fb_memory_usage/total", "FB Memory Usage/Total",
       "nvmlDeviceGetMemoryInfo_v2 (total)", "Frame buffer total, MiB",
       metric="hw.gpu.memory.limit", scale=MIB),
    _f("memory_reserved_mib", "fb_memory_usage/reserved", "FB Memory Usage/Reserved",
       "nvmlDeviceGetMemoryInfo_v2 (reserved)", "Frame buffer reserved by the driver, MiB",
       metric="gpu.memory.reserved", scale=MIB),
    _f("memory_used_mib", "fb_memory_usage/used", "FB Memory Usage/Used",
       "nvmlDeviceGetMemoryInfo_v2 (used)", "Frame buffer allocated, MiB",
       metric="hw.gpu.memory.usage", scale=MIB),
    _f("bar1_total_mib", "bar1_memory_usage/total", "BAR1 Memory Usage/Total",
       "nvmlDeviceGetBAR1MemoryInfo", "BAR1 aperture total, MiB"),
    _f("bar1_used_mib", "bar1_memory_usage/used", "BAR1 Memory Usage/Used",
       "nvmlDeviceGetBAR1MemoryInfo", "BAR1 aperture used, MiB"),
    _f("utilization_gpu", "utilization/gpu_util", ("Utilization/GPU", "Utilization/Gpu"),
       "nvmlDeviceGetUtilizationRates (gpu)", "GPU busy, percent (drivers from 570 print the "
       "-q label \"GPU\", older ones \"Gpu\")",
       metric="hw.gpu.utilization", point=_p(hw__gpu__task="general"), scale=PCT),
    _f("utilization_memory", "utilization/memory_util", "Utilization/Memory",
       "nvmlDeviceGetUtilizationRates (memory)", "Memory controller busy, percent",
       metric="gpu.memory.controller.utilization", scale=PCT),
    _f("encoder_util", "utilization/encoder_util", "Utilization/Encoder",
       "nvmlDeviceGetEncoderUtilization", "Encoder busy, percent",
       metric="hw.gpu.utilization", point=_p(hw__gpu__task="encoder"), scale=PCT),
    _f("decoder_util", "utilization/decoder_util", "Utilization/Decoder",
       "nvmlDeviceGetDecoderUtilization", "Decoder busy, percent",
       metric="hw.gpu.utilization", point=_p(hw__gpu__task="decoder"), scale=PCT),
    _f("jpg_util", "utilization/jpeg_util", "Utilization/JPEG",
       "nvmlDeviceGetJpgUtilization", "JPEG engine busy, percent"),
    _f("ofa_util", "utilization/ofa_util", "Utilization/OFA",
       "nvmlDeviceGetOfaUtilization", "Optical flow engine busy, percent"),
    _f("temperature_c", "temperature/gpu_temp", "Temperature/GPU Current Temp",
       "nvmlDeviceGetTemperatureV (GPU); field 308", "GPU temperature, C",
       metric="hw.temperature", point=_p(hw__sensor_location="gpu")),
    _f("memory_temperature_c", "temperature/memory_temp", "Temperature/Memory Current Temp",
       "nvmlDeviceGetFieldValues (NVML_FI_DEV_MEMORY_TEMP)", "HBM temperature, C",
       metric="hw.temperature", point=_p(hw__sensor_location="memory")),
    _f("temperature_slowdown_c", "temperature/gpu_temp_slow_threshold",
       "Temperature/GPU Slowdown Temp",
       "nvmlDeviceGetTemperatureThreshold (SLOWDOWN)", "HW slowdown threshold, C",
       metric="hw.temperature.limit", point=_p(hw__limit_type="high.degraded")),
    _f("power_w", *_power(("instant_power_draw", "Instantaneous Power Draw"),
                          ("power_draw", "Power Draw")),
       "field NVML_FI_DEV_POWER_INSTANT (186)",
       "Instant power draw, W (-q label \"Instantaneous Power Draw\"). Drivers before the "
       "instant/average split print one \"Power "
       "Draw\" (nvmlDeviceGetPowerUsage: a 1 s average on Ampere-but-GA100 and newer); the node "
       "serves that figure as instant and average alike", metric="hw.power"),
    _f("power_average_w", *_power(("average_power_draw", "Average Power Draw"),
                                  ("power_draw", "Power Draw")),
       "nvmlDeviceGetPowerUsage; field NVML_FI_DEV_POWER_AVERAGE (185)",
       "Power draw averaged over 1 s, W (the Prometheus dcgm scheme's DCGM_FI_DEV_POWER_USAGE)"),
    _f("power_limit_w", *_power(("enforced_power_limit", "Enforced Power Limit"),
              ("current_power_limit", "Current Power Limit")),
       "nvmlDeviceGetEnforcedPowerLimit", "Enforced power limit, W (v12+ prints it as the "
       "current limit)", metric="gpu.power.limit"),
    _f("power_default_limit_w", *_power(("default_power_limit", "Default Power Limit")),
       "nvmlDeviceGetPowerManagementDefaultLimit", "Default power limit, W"),
    _f("power_min_limit_w", *_power(("min_power_limit", "Min Power Limit")),
       "nvmlDeviceGetPowerManagementLimitConstraints (min)", "Lowest settable limit, W"),
    _f("power_max_limit_w", *_power(("max_power_limit", "Max Power Limit")),
       "nvmlDeviceGetPowerManagementLimitConstraints (max)", "Highest settable limit, W"),
    _f("graphics_clock_mhz", "clocks/graphics_clock", "Clocks/Graphics",
       "nvmlDeviceGetClockInfo (GRAPHICS)", "Graphics clock, MHz",
       metric="gpu.clock.frequency", point=_p(gpu__clock__domain="graphics"), scale=MHZ),
    _f("sm_clock_mhz", "clocks/sm_clock", "Clocks/SM", "nvmlDeviceGetClockInfo (SM)",
       "SM clock, MHz", metric="gpu.clock.frequency", point=_p(gpu__clock__domain="sm"),
       scale=MHZ),
    _f("memory_clock_mhz", "clocks/mem_clock", "Clocks/Memory",
       "nvmlDeviceGetClockInfo (MEM)", "Memory clock, MHz", metric="gpu.clock.frequency",
       point=_p(gpu__clock__domain="memory"), scale=MHZ),
    _f("video_clock_mhz", "clocks/video_clock", "Clocks/Video",
       "nvmlDeviceGetClockInfo (VIDEO)", "Video clock, MHz", metric="gpu.clock.frequency",
       point=_p(gpu__clock__domain="video"), scale=MHZ),
    _f("app_sm_clock_mhz", "applications_clocks/graphics_clock",
       "Applications Clocks/Graphics",
       "nvmlDeviceGetClock (SM, APP_CLOCK_TARGET); nvmlDeviceGetApplicationsClock",
       "Application clock target, MHz (nvidia-smi prints the graphics domain; NVML serves "
       "graphics and SM alike); not exported: nvml.h 13 deprecates the target"),
    _f("app_memory_clock_mhz", "applications_clocks/mem_clock", "Applications Clocks/Memory",
       "nvmlDeviceGetApplicationsClock (MEM)", "Memory application clock, MHz"),
    _f("max_graphics_clock_mhz", "max_clocks/graphics_clock", "Max Clocks/Graphics",
       "nvmlDeviceGetMaxClockInfo (GRAPHICS)", "Highest graphics clock, MHz"),
    _f("max_sm_clock_mhz", "max_clocks/sm_clock", "Max Clocks/SM",
       "nvmlDeviceGetMaxClockInfo (SM)", "Highest SM clock, MHz",
       metric="gpu.clock.limit", point=_p(gpu__clock__domain="sm"), scale=MHZ),
    _f("max_memory_clock_mhz", "max_clocks/mem_clock", "Max Clocks/Memory",
       "nvmlDeviceGetMaxClockInfo (MEM)", "Highest memory clock, MHz"),
    _f("max_video_clock_mhz", "max_clocks/video_clock", "Max Clocks/Video",
       "nvmlDeviceGetMaxClockInfo (VIDEO)", "Highest video clock, MHz"),
    _f("pstate", ("performance_state", "gpu_power_readings/power_state",
                  "power_readings/power_state"),
       ("Performance State", "Power Readings/Power State"),
       "nvmlDeviceGetPerformanceState", "Performance state (P0 = 0)", kind="pstate",
       metric="gpu.performance_state"),
    _f("fan_percent", "fan_speed", "Fan Speed", "nvmlDeviceGetFanSpeed",
       "Fan speed, percent (N/A on passively cooled data-centre parts)",
       metric="hw.fan.speed_ratio", scale=PCT),
    _f("pcie_max_link_gen", "pci/pci_gpu_link_info/pcie_gen/max_link_gen",
       "PCI/GPU Link Info/PCIe Generation/Max", "nvmlDeviceGetMaxPcieLinkGeneration",
       "Highest PCIe generation of device and slot", metric="gpu.pcie.link.max_generation"),
    _f("pcie_link_gen", "pci/pci_gpu_link_info/pcie_gen/current_link_gen",
       "PCI/GPU Link Info/PCIe Generation/Current", "nvmlDeviceGetCurrPcieLinkGeneration",
       "Current PCIe generation", metric="gpu.pcie.link.generation"),
    _f("pcie_max_link_width", "pci/pci_gpu_link_info/link_widths/max_link_width",
       "PCI/GPU Link Info/Link Width/Max", "nvmlDeviceGetMaxPcieLinkWidth",
       "Widest PCIe link of device and slot", kind="link_width",
       metric="gpu.pcie.link.max_width"),
    _f("pcie_link_width", "pci/pci_gpu_link_info/link_widths/current_link_width",
       "PCI/GPU Link Info/Link Width/Current", "nvmlDeviceGetCurrPcieLinkWidth",
       "Current PCIe link width", kind="link_width", metric="gpu.pcie.link.width"),
    _f("pcie_replay_counter", "pci/replay_counter", "PCI/Replays Since Reset",
       "nvmlDeviceGetPcieReplayCounter; field NVML_FI_DEV_PCIE_REPLAY_COUNTER",
       "PCIe replays since reset", metric="gpu.pcie.replay"),
    _f("pcie_replay_rollover", "pci/replay_rollover_counter", "PCI/Replay Number Rollovers",
       "field NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER (95)", "PCIe replay counter rollovers",
       metric="gpu.pcie.replay_rollovers"),
    _f("pcie_tx_kb_s", "pci/tx_util", "PCI/Tx Throughput", "nvmlDeviceGetPcieThroughput (TX)",
       "PCIe transmit rate, KB/s (a rate at one moment: the node integrates it into the "
       "byte counter)"),
    _f("pcie_rx_kb_s", "pci/rx_util", "PCI/Rx Throughput", "nvmlDeviceGetPcieThroughput (RX)",
       "PCIe receive rate, KB/s"),
    _f("ecc_sbe_volatile", *_ecc(_VOL, _TVOL, True),
       "field NVML_FI_DEV_ECC_SBE_VOL_TOTAL; nvmlDeviceGetTotalEccErrors",
       "Corrected ECC errors since the driver loaded (SRAM + DRAM)",
       metric="hw.errors", point=_p(error__type="corrected")),
    _f("ecc_dbe_volatile", *_ecc(_VOL, _TVOL, False),
       "field NVML_FI_DEV_ECC_DBE_VOL_TOTAL; nvmlDeviceGetTotalEccErrors",
       "Uncorrected ECC errors since the driver loaded (SRAM + DRAM)",
       metric="hw.errors", point=_p(error__type="uncorrected")),
    _f("ecc_sbe_aggregate", *_ecc(_AGG, _TAGG, True),
       "nvmlDeviceGetTotalEccErrors (AGGREGATE)", "Corrected ECC errors, lifetime"),
    _f("ecc_dbe_aggregate", *_ecc(_AGG, _TAGG, False),
       "nvmlDeviceGetTotalEccErrors (AGGREGATE)", "Uncorrected ECC errors, lifetime"),
    _f("retired_pages_sbe", "retired_pages/multiple_single_bit_retirement/retired_count",
       "Retired Pages/Single Bit ECC", "nvmlDeviceGetRetiredPages (MULTIPLE_SINGLE_BIT)",
       "Pages retired for repeated single-bit errors (pre-Ampere)",
       metric="gpu.memory.page_retirement.count",
       point=_p(gpu__retirement__cause="single_bit")),
    _f("retired_pages_dbe", "retired_pages/double_bit_retirement/retired_count",
       "Retired Pages/Double Bit ECC", "nvmlDeviceGetRetiredPages (DOUBLE_BIT)",
       "Pages retired for double-bit errors (pre-Ampere)",
       metric="gpu.memory.page_retirement.count",
       point=_p(gpu__retirement__cause="double_bit")),
    _f("retired_pages_pending", ("retired_pages/pending_retirement",
                                 "retired_pages/pending_blacklist"),
       ("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending"),
       "nvmlDeviceGetRetiredPagesPendingStatus", "Retirement waiting for a reset (Yes = 1)",
       kind="flag", metric="gpu.memory.page_retirement.pending"),
    _f("remapped_rows_correctable", "remapped_rows/remapped_row_corr",
       "Remapped Rows/Correctable Error", "nvmlDeviceGetRemappedRows (corrRows)",
       "Rows remapped for correctable errors (Ampere and newer)",
       metric="gpu.memory.row_remap.count", point=_p(error__type="corrected")),
    _f("remapped_rows_uncorrectable", "remapped_rows/remapped_row_unc",
       "Remapped Rows/Uncorrectable Error", "nvmlDeviceGetRemappedRows (uncRows)",
       "Rows remapped for uncorrectable errors",
       metric="gpu.memory.row_remap.count", point=_p(error__type="uncorrected")),
    _f("remapped_rows_pending", "remapped_rows/remapped_row_pending", "Remapped Rows/Pending",
       "nvmlDeviceGetRemappedRows (isPending)", "A remap waits for a reset (Yes = 1)",
       kind="flag", metric="gpu.memory.row_remap.pending"),
    _f("remapped_rows_failure", "remapped_rows/remapped_row_failure",
       "Remapped Rows/Remapping Failure Occurred", "nvmlDeviceGetRemappedRows (failureOccurred)",
       "A remap failed (Yes = 1)", kind="flag", metric="gpu.memory.row_remap.failure"),
)

# nvml.h nvmlClocksEventReason* bits; the agent's reason names (readings.THROTTLE_REASONS).
# v12+ print "clocks_event_reasons", older schemas "clocks_throttle_reasons" (same bits).
CLOCK_EVENT_REASONS: tuple[tuple[str, int, str, str], ...] = (
    # (agent reason name, bit, XML tag suffix, -q label)
    ("gpu_idle", 0x1, "gpu_idle", "Idle"),
    ("applications_clocks_setting", 0x2, "applications_clocks_setting",
     "Applications Clocks Setting"),
    ("sw_power_cap", 0x4, "sw_power_cap", "SW Power Cap"),
    ("hw_slowdown", 0x8, "hw_slowdown", "HW Slowdown"),
    ("sync_boost", 0x10, "sync_boost", "Sync Boost"),
    ("sw_thermal_slowdown", 0x20, "sw_thermal_slowdown", "SW Thermal Slowdown"),
    ("hw_thermal_slowdown", 0x40, "hw_thermal_slowdown", "HW Thermal Slowdown"),
    ("hw_power_brake_slowdown", 0x80, "hw_power_brake_slowdown", "HW Power Brake Slowdown"),
    # Every real XML capture spells this one "display_clocks_setting" (telegraf's test data of
    # drivers 418-595, the corpus's own); the -q label is singular.
    ("display_clock_setting", 0x100, "display_clocks_setting", "Display Clock Setting"),
)
CLOCK_EVENTS_NVML = "nvmlDeviceGetCurrentClocksEventReasons"

# Where the T.Limit sensor exists, nvidia-smi prints the temperature thresholds relative to it
# (NVIDIA's nvidia-smi documentation: "when the T.Limit sensor is supported, available
# temperature thresholds are also reported relative to T.Limit instead of absolute
# measurements"; the current T.Limit is "the current margin in degree Celsius to the maximum
# operating temperature"). The absolute slowdown threshold is then the current temperature plus
# the current margin minus the threshold's margin. (current temperature, current T.Limit,
# slowdown T.Limit threshold), each with its alternatives, newest first; driver 610 renamed "GPU
# T.Limit Temp" to "GPU Current T.Limit Temp".
TLIMIT_SLOWDOWN_XML = (("temperature/gpu_temp",), ("temperature/gpu_temp_tlimit",),
                       ("temperature/gpu_temp_slow_tlimit_threshold",))
TLIMIT_SLOWDOWN_TEXT = (("Temperature/GPU Current Temp",),
                        ("Temperature/GPU Current T.Limit Temp", "Temperature/GPU T.Limit Temp"),
                        ("Temperature/GPU Slowdown T.Limit Temp",))

# The node-wide driver version: driver 610 deprecates "Driver Version" in favour of "KMD
# Version" (NVIDIA's nvidia-smi documentation, change log); the first printed is read, and only
# its leading version number is served.
DRIVER_VERSION_XML = ("driver_version", "kmd_version")
DRIVER_VERSION_TEXT = ("Driver Version", "KMD Version")
CUDA_VERSION_XML = ("cuda_version", "cuda_umd_version")
CUDA_VERSION_TEXT = ("CUDA Version", "CUDA UMD Version")
CLOCK_EVENTS_XML = (("clocks_event_reasons", "clocks_event_reason_"),
                    ("clocks_throttle_reasons", "clocks_throttle_reason_"))
CLOCK_EVENTS_TEXT = ("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle Reasons")

FIELDS: tuple[CaptureField, ...] = (*IDENTITY, *READINGS)
BY_KEY: Mapping[str, CaptureField] = MappingProxyType({f.key: f for f in FIELDS})

# Process and MIG entries, for the docs (their parsing is structural: readers).
STRUCTURES: tuple[tuple[str, str, str, str], ...] = (
    # (capture field, NVML call, exported as, description)
    ("processes/process_info (pid, type, used_memory)",
     "nvmlDeviceGetComputeRunningProcesses_v3 / Graphics / MPSCompute",
     "gpu.process.memory.usage{process.pid}",
     "One scenario process per entry: type C -> compute, G -> graphics, M+C/M -> MPS; "
     "used memory in MiB; the process name is not served (the node reads /proc)"),
    ("processes/process_info (gpu_instance_id, compute_instance_id)",
     "nvmlProcessInfo_v2_t.gpuInstanceId / computeInstanceId",
     "the MIG instance's gpu.process.memory.usage",
     "Places the process on its MIG instance"),
    ("mig_devices/mig_device (gpu_instance_id, compute_instance_id, index)",
     "nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetGpuInstanceId, "
     "nvmlDeviceGetComputeInstanceId",
     "gpu.mig.gpu_instance.id, gpu.mig.compute_instance.id",
     "One GPU instance per distinct gpu_instance_id, one compute instance per entry; the "
     "profile is the model's profile whose SM count and memory match"),
    ("mig_devices/mig_device/fb_memory_usage (total, used)",
     "nvmlDeviceGetMemoryInfo_v2 on the MIG handle", "hw.gpu.memory.limit / usage of the "
     "instance", "Memory of the GPU instance, as printed"),
    ("clocks_event_reasons/* (Active / Not Active)", CLOCK_EVENTS_NVML,
     "gpu.clock.throttle{gpu.clock.throttle.reason}",
     "One bit per reason (nvml.h nvmlClocksEventReason*)"),
    ("driver_version, cuda_version", "nvmlSystemGetDriverVersion, "
     "nvmlSystemGetCudaDriverVersion_v2", "hw.driver_version on each device's points",
     "Node-wide: the first capture's (or the scenario's) values"),
)
