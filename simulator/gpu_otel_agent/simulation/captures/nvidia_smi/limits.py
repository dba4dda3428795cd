"""What a replayed capture cannot be, as data: the comparison tests read it (a difference
between a capture and the agent's export fails unless listed here) and ``docs/captures.md``
prints it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Divergence:
    """A capture field whose export differs from what the real machine printed."""

    capture: str  # file name pattern in examples/captures/nvidia/
    field: str  # fields.FIELDS key, or "mig.gpu_instance_id", "mig.memory_total"
    reason: str
    device: int | None = None  # position in the capture; None: every device
    printed: str = "*"  # only where the printed value matches this pattern


DIVERGENCES: tuple[Divergence, ...] = (
    Divergence("a100-sxm4-80gb-mig-*.xml", "ecc_sbe_volatile",
               "this MIG-enabled A100 (driver 535.54.03) printed volatile ECC counts (SRAM and "
               "DRAM correctable 0) on its parent; the simulator answers NOT_SUPPORTED there, as "
               "nvml.h documents for a MIG-enabled GPU (docs/mig.md), so the agent exports none: "
               "which one the driver's NVML does on the parent, no capture settles (the "
               "nvidia-smi table prints 'On' in that column instead of a count)"),
    Divergence("a100-sxm4-80gb-mig-*.xml", "ecc_dbe_volatile",
               "as for ecc_sbe_volatile: uncorrectable (SRAM + DRAM) 0 printed on the MIG-enabled "
               "parent, NOT_SUPPORTED served"),
    Divergence("a100-sxm4-80gb-mig-*.xml", "memory_used_mib",
               "on a MIG-enabled GPU the simulator serves the parent's used memory as the sum "
               "of its instances' (4 x 12 MiB = 48 MiB); the A100 printed 50 MiB"),
    Divergence("*.smi.txt", "model",
               "nvidia-smi's table cuts a long name short ('NVIDIA A100 80G...'): not a model "
               "name, so the node serves a generic one", printed="*..."),
)

# Whatever the capture, these are not served as printed (the reader lists each occurrence in
# the capture's ``not_served``).
RULES: tuple[tuple[str, str], ...] = (
    ("process names", "the node answers nvmlSystemGetProcessName from /proc/<pid>/comm of a "
                      "live process; a captured PID is not alive here (its memory and type are "
                      "served)"),
    ("process type C+G", "a scenario process has one kind: served as compute"),
    ("driver and CUDA version", "node-wide: the scenario's own, else the first capture's; the "
                                "other captures' versions are not served"),
    ("identity strings printed N/A (serial, VBIOS, board part)",
     "NVML answers them with a string; the node serves a generated one"),
    ("[Unknown Error] and other errors", "served as NVML_ERROR_NOT_SUPPORTED (the agent drops "
                                         "the reading either way)"),
    ("architecture, PCI device and subsystem id", "served as printed (Product Architecture, "
                                                  "PCI Device Id, Sub System Id); where not "
                                                  "printed, the simulator's model table, and "
                                                  "for a model it does not know NVML's "
                                                  "NVML_DEVICE_ARCH_UNKNOWN and device id 0"),
    ("CUDA capability, GPM support", "not in nvidia-smi -q: the model table's; for a model it "
                                     "does not know, they follow from the printed "
                                     "architecture"),
    ("clocks event reason counters (SW Power Capping ... us)",
     "not read from captures yet: the node's violation_*_ns counters grow while a reason is "
     "active, so a printed total is a starting point, not a value to compare"),
    ("voltage, inforom, GSP firmware, bank remap histogram, module power readings, encoder "
     "and FBC stats", "no scenario key: not served"),
    ("MIG on models without a profile table (A30, H20, GH200 ...)",
     "the instances are listed as not served; the GPU is served whole"),
)


# Fields printed in the sections the reader reads (the GPU's top level and every section a
# field-table row reads from) that no scenario key serves, by name (XML tag or -q label: lower
# case, "_" read as " "). The reader reports any other field it meets there and cannot place as
# "unplaced" (a line in `gpu-agent sim up`'s output), so a driver's rename is seen, not dropped.
UNREAD: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("identity and board", (
        "product name", "product brand", "product architecture", "addressing mode",
        "accounting mode", "accounting mode buffer size", "multigpu board", "board id",
        "gpu part number", "fru part number", "gpu pdi", "pdi", "module id", "gpu module id",
        "gsp firmware version", "display attached", "multiprocessor count",
        "gpu fabric guid", "minor number", "serial number", "gpu uuid",
        "mig devices", "processes", "remapped rows", "retired pages", "gpu reset status",
        "gpu recovery action", "sparse operation mode", "edpp multiplier", "power smoothing",
        "power readings", "capabilities", "platform info", "platforminfo", "ibmnpu",
        "gpu c2c mode", "gpu virtualization mode", "vgpu device capability",
        "vgpu driver capability", "inforom bbx flush", "cc protected memory usage",
        "conf compute", "compute mode", "hw slowdown", "accounted processes",
        "gpu fru part number", "c2c mode", "pending ecc", "pending")),
    ("PCI", (
        "bus", "device", "domain", "base classcode", "sub classcode", "pci bus", "pci device",
        "pci domain", "pci base class", "pci sub class", "device id", "pci device id",
        "bus id", "sub system id", "pci sub system id", "device current link gen",
        "max device link gen", "max host link gen", "device current", "device max",
        "host max", "atomic caps inbound", "atomic caps outbound", "tx throughput",
        "rx throughput", "tx util", "rx util", "bridge chip type", "bridge chip fw", "type",
        "firmware")),
    ("remapped rows (bank histogram, inactive remaps)", (
        "remapped row corr inactive", "remapped row unc inactive", "row remapper histogram max",
        "row remapper histogram high", "row remapper histogram partial",
        "row remapper histogram low", "row remapper histogram none", "max", "high", "partial",
        "low", "none")),
    ("memory (free, BAR1 and protected memory)", ("free",)),
    ("utilization (samples, engines the node does not serve)", ("jpeg", "ofa")),
    ("temperature (thresholds the node does not serve)", (
        "gpu shutdown temp", "gpu temp max threshold", "gpu max operating temp",
        "gpu temp max gpu threshold", "gpu target temperature", "memory max operating temp",
        "gpu temp max mem threshold", "gpu shutdown t.limit temp",
        "gpu temp max tlimit threshold", "gpu max operating t.limit temp",
        "gpu temp max gpu tlimit threshold", "gpu temp max mem tlimit threshold",
        "memory max operating t.limit temp")),
    ("power (requested limit, management flag, state printed in the power section)", (
        "requested power limit", "power management", "power limit", "power state",
        "current base power", "requested base power", "default base power")),
    ("clocks (default application clocks, boost)", ("default applications clocks",)),
)


def unread_names() -> frozenset[str]:
    return frozenset(name for _section, names in UNREAD for name in names)
