"""The ``dcgm`` scheme: NVIDIA dcgm-exporter's names, units and labels.

Dashboards (grafana.com 12239) and Prometheus Adapter / HPA rules written for dcgm-exporter
keep working after a migration: ``DCGM_FI_DEV_GPU_UTIL`` in percent, ``DCGM_FI_DEV_FB_USED``
in MiB, labels ``gpu``, ``UUID``, ``device``, ``modelName``, ``pci_bus_id``, ``hostname``
(``Hostname`` before 4.6.0-4.8.3), ``DCGM_FI_DRIVER_VERSION`` (and, on a MIG instance's series,
``GPU_I_PROFILE`` and ``GPU_I_ID``, with ``UUID`` its GPU's); and the per-process /
per-container names used to autoscale on shared GPUs
(``DCGM_CUSTOM_PROCESS_SM_UTIL``, ``DCGM_CUSTOM_PROCESS_MEM_USED``,
``DCGM_CUSTOM_CONTAINER_MEM_ALLOCATED`` with ``NamespaceName``, ``PodName``,
``ContainerName``, ``NodeName``, ``ProcessId``). Device series carry ``NodeName`` too, since
the common adapter rules map it to the node resource, and, as in dcgm-exporter's Kubernetes
mode, the ``pod``/``namespace``/``container`` of each pod on the GPU (one series per pod on a
shared GPU, each with the GPU's value: the per-pod share is in the DCGM_CUSTOM_* names).

What dcgm-exporter has no name for (``hw.status``, ``gpu.xid.errors`` — dcgm's XID gauge only
holds the last code, which is the flaw we fix — and the agent's own ``gpu_agent.*``) is served
under its OpenTelemetry name, so the GPU alerts work in either scheme and nothing is lost.

The labels follow one stated dcgm-exporter release (``prometheus.dcgm_exporter_version``,
default :data:`CURRENT`), since dashboards key on them and releases moved them:

- 4.6.0-4.8.3 (2026-07-14, NVIDIA/dcgm-exporter#711) is the first release with #655
  (d5e5f510, 2026-05-12): the host label ``Hostname`` became ``hostname``. Older pins keep
  ``Hostname``.
- 4.3.1-4.4.0 added the DRA labels (#501, 8fd69334): on the series of a GPU a pod holds through
  a ResourceClaim, ``dra_claim_name``, ``dra_claim_namespace``, ``dra_driver_name``,
  ``dra_pool_name``, ``dra_device_name``, and on a MIG device ``dra_mig_profile`` and
  ``dra_mig_device_uuid`` (internal/pkg/transformation/const.go, kubernetes.go). dcgm-exporter
  resolves claims through ResourceSlices; here they come from the node
  (gpu_otel_agent/plugins/kubernetes).
- ``DCGM_FI_DRIVER_VERSION`` is a label on every device series (a ``label`` field of the
  default counters since 2.4.6-2.6.10, #89), valued with the NVIDIA driver version.

The ``dcgm-4.9`` scheme is dcgm-exporter 4.9's (DCGM 4.7): the same series, with the renamed
default fields under their new names and units (``DCGM_FI_DEV_GPU_UTIL_RATIO`` 0-1,
``DCGM_FI_DEV_FB_USED_BYTES`` in bytes, ...) and the driver label
``DCGM_FI_SYSTEM_DRIVER_VERSION``, the labels of the latest release otherwise. Which names move
and by what factor is read from one table, :mod:`gpu_otel_agent.model.dcgm_names`, that
``docs/migration.md`` is generated from too: a >= 4.9 value is the <= 4.8 value times the
row's factor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpu_otel_agent.export.metrics.series import SeriesPoint
from gpu_otel_agent.export.prometheus.exposition import Families, Family, Labels
from gpu_otel_agent.export.prometheus.otel_scheme import (
    add_otel_series,
    add_target_info,
    label_value,
)
from gpu_otel_agent.model.dcgm_names import BY_OLD, DcgmRename
from gpu_otel_agent.model.metrics import Instrument, spec_for
from gpu_otel_agent.model.snapshot import Attributes, AttributeValue

CURRENT = "4.6.0-4.8.3"  # the latest dcgm-exporter release (2026-07-14): label ``hostname``
HOSTNAME_RENAMED = "4.6.0-4.8.3"
DRA_LABELS = "4.3.1-4.4.0"
MIB = 1024 * 1024
# The two dcgm schemes (prometheus.scheme): dcgm-exporter <= 4.8's names, and >= 4.9's.
SCHEME = "dcgm"
SCHEME_49 = "dcgm-4.9"
DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"
# How a help text names a unit after the rename.
_UNIT_WORDS = {"Hz": "Hz", "J": "J", "1": "ratio 0-1", "By": "bytes", "By/s": "bytes/s"}


@dataclass(frozen=True)
class DcgmField:
    name: str
    scale: float
    help: str
    custom: bool = False  # a DCGM_CUSTOM_* name: Alibaba-style workload labels


def _f(name: str, scale: float, help_: str) -> DcgmField:
    return DcgmField(name, scale, help_)


def _c(name: str, scale: float, help_: str) -> DcgmField:
    return DcgmField(name, scale, help_, custom=True)


# (OpenTelemetry name, the one attribute that selects the field or None) -> dcgm field
FIELDS: Mapping[tuple[str, tuple[str, str] | None], DcgmField] = {
    ("hw.gpu.utilization", ("hw.gpu.task", "general")):
        _f("DCGM_FI_DEV_GPU_UTIL", 100, "GPU utilization (in %)."),
    ("hw.gpu.utilization", ("hw.gpu.task", "encoder")):
        _f("DCGM_FI_DEV_ENC_UTIL", 100, "Encoder utilization (in %)."),
    ("hw.gpu.utilization", ("hw.gpu.task", "decoder")):
        _f("DCGM_FI_DEV_DEC_UTIL", 100, "Decoder utilization (in %)."),
    ("gpu.memory.controller.utilization", None):
        _f("DCGM_FI_DEV_MEM_COPY_UTIL", 100, "Memory utilization (in %)."),
    ("hw.gpu.memory.usage", None): _f("DCGM_FI_DEV_FB_USED", 1 / MIB,
                                      "Framebuffer memory used (in MiB)."),
    ("hw.gpu.memory.limit", None): _f("DCGM_FI_DEV_FB_TOTAL", 1 / MIB,
                                      "Framebuffer memory total (in MiB)."),
    ("gpu.memory.reserved", None): _f("DCGM_FI_DEV_FB_RESERVED", 1 / MIB,
                                      "Framebuffer memory reserved (in MiB)."),
    ("hw.temperature", ("hw.sensor_location", "gpu")):
        _f("DCGM_FI_DEV_GPU_TEMP", 1, "GPU temperature (in C)."),
    ("hw.temperature", ("hw.sensor_location", "memory")):
        _f("DCGM_FI_DEV_MEMORY_TEMP", 1, "Memory temperature (in C)."),
    # dcgm-exporter's DCGM_FI_DEV_POWER_USAGE is nvmlDeviceGetPowerUsage (DCGM
    # DcgmCacheManager.cpp, DCGM_FI_DEV_BOARD_POWER_WATTS), a 1 s average on Ampere (except
    # GA100) and newer; hw.power is the instant figure (its DCGM_FI_DEV_POWER_USAGE_INSTANT).
    # Kept under the name dashboards query, and said in the help.
    ("hw.power", None): _f("DCGM_FI_DEV_POWER_USAGE", 1,
                           "Power draw (in W), instantaneous (not a 1 s average)."),
    ("gpu.power.limit", None): _f("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 1,
                                  "Enforced power limit (in W)."),
    ("hw.energy", None): _f("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1000,
                            "Total energy consumption since boot (in mJ)."),
    ("gpu.clock.frequency", ("gpu.clock.domain", "sm")):
        _f("DCGM_FI_DEV_SM_CLOCK", 1e-6, "SM clock frequency (in MHz)."),
    ("gpu.clock.frequency", ("gpu.clock.domain", "memory")):
        _f("DCGM_FI_DEV_MEM_CLOCK", 1e-6, "Memory clock frequency (in MHz)."),
    ("gpu.clock.frequency", ("gpu.clock.domain", "video")):
        _f("DCGM_FI_DEV_VIDEO_CLOCK", 1e-6, "Video encoder/decoder clock (in MHz)."),
    ("gpu.pcie.replay", None): _f("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 1,
                                  "Total number of PCIe retries."),
    ("hw.fan.speed_ratio", None): _f("DCGM_FI_DEV_FAN_SPEED", 100, "Fan speed (in %)."),
    ("gpu.performance_state", None): _f("DCGM_FI_DEV_PSTATE", 1, "Performance state."),
    ("hw.errors", ("error.type", "corrected")):
        _f("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 1, "Single-bit volatile ECC errors."),
    ("hw.errors", ("error.type", "uncorrected")):
        _f("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, "Double-bit volatile ECC errors."),
    ("gpu.memory.row_remap.count", ("error.type", "corrected")):
        _f("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 1,
           "Number of remapped rows for correctable errors."),
    ("gpu.memory.row_remap.count", ("error.type", "uncorrected")):
        _f("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1,
           "Number of remapped rows for uncorrectable errors."),
    ("gpu.memory.row_remap.failure", None): _f("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1,
                                               "Whether remapping of rows has failed."),
    ("gpu.memory.page_retirement.count", ("gpu.retirement.cause", "single_bit")):
        _f("DCGM_FI_DEV_RETIRED_SBE", 1, "Pages retired for single-bit errors."),
    ("gpu.memory.page_retirement.count", ("gpu.retirement.cause", "double_bit")):
        _f("DCGM_FI_DEV_RETIRED_DBE", 1, "Pages retired for double-bit errors."),
    ("gpu.violation.time", ("gpu.violation.policy", "power")):
        _f("DCGM_FI_DEV_POWER_VIOLATION", 1e6, "Throttling duration due to power (in us)."),
    ("gpu.violation.time", ("gpu.violation.policy", "thermal")):
        _f("DCGM_FI_DEV_THERMAL_VIOLATION", 1e6, "Throttling duration due to thermal (in us)."),
    ("gpu.violation.time", ("gpu.violation.policy", "sync_boost")):
        _f("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", 1e6,
           "Throttling duration due to sync boost (in us)."),
    ("gpu.violation.time", ("gpu.violation.policy", "board_limit")):
        _f("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", 1e6,
           "Throttling duration due to board limit (in us)."),
    ("gpu.violation.time", ("gpu.violation.policy", "low_utilization")):
        _f("DCGM_FI_DEV_LOW_UTIL_VIOLATION", 1e6,
           "Throttling duration due to low utilization (in us)."),
    ("gpu.violation.time", ("gpu.violation.policy", "reliability")):
        _f("DCGM_FI_DEV_RELIABILITY_VIOLATION", 1e6,
           "Throttling duration due to reliability (in us)."),
    # DCGM 4.6 dcgm_fields.h 1422-1424 (from NVML fields 269-271), in ns.
    ("gpu.violation.time", ("gpu.violation.policy", "sw_thermal_slowdown")):
        _f("DCGM_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN_NS", 1e9,
           "Throttling to keep GPU and memory under their max operating temperature (in ns)."),
    ("gpu.violation.time", ("gpu.violation.policy", "hw_thermal_slowdown")):
        _f("DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS", 1e9,
           "Throttling due to temperature being too high (in ns)."),
    ("gpu.violation.time", ("gpu.violation.policy", "hw_power_brake_slowdown")):
        _f("DCGM_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN_NS", 1e9,
           "Throttling due to external power brake assertion (in ns)."),
    ("gpu.sm.utilization", None): _f("DCGM_FI_PROF_SM_ACTIVE", 1,
                                     "Ratio of cycles an SM has at least 1 warp assigned."),
    ("gpu.sm.occupancy", None): _f("DCGM_FI_PROF_SM_OCCUPANCY", 1,
                                   "Ratio of warps resident on an SM to the maximum."),
    ("gpu.tensor.utilization", None): _f("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1,
                                         "Ratio of cycles the tensor pipe is active."),
    ("gpu.dram.utilization", None): _f("DCGM_FI_PROF_DRAM_ACTIVE", 1,
                                       "Ratio of cycles the memory interface is active."),
    ("gpu.process.utilization", ("hw.gpu.task", "general")):
        _c("DCGM_CUSTOM_PROCESS_SM_UTIL", 100, "SM utilization of the process (in %)."),
    ("gpu.process.utilization", ("hw.gpu.task", "encoder")):
        _c("DCGM_CUSTOM_PROCESS_ENC_UTIL", 100, "Encoder utilization of the process (in %)."),
    ("gpu.process.utilization", ("hw.gpu.task", "decoder")):
        _c("DCGM_CUSTOM_PROCESS_DEC_UTIL", 100, "Decoder utilization of the process (in %)."),
    ("gpu.process.memory.usage", None):
        _c("DCGM_CUSTOM_PROCESS_MEM_USED", 1 / MIB, "GPU memory used by the process (in MiB)."),
    ("gpu.container.memory.limit", None):
        _c("DCGM_CUSTOM_CONTAINER_MEM_ALLOCATED", 1 / MIB,
           "GPU memory allocated to the container on a shared GPU (in MiB)."),
}
_SELECTORS: Mapping[str, frozenset[str]] = {
    name: frozenset(sel[0] for (n, sel) in FIELDS if n == name and sel is not None)
    for name, _ in FIELDS
}

# NVML clock-event reason bits, so DCGM_FI_DEV_CLOCK_THROTTLE_REASONS keeps its bitmask.
THROTTLE_BITS: Mapping[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
    "board_limit": 0x200,
    "reliability": 0x400,
}

_DEVICE_KEYS = {"hw.id", "hw.type", "hw.vendor", "hw.model", "gpu.index", "gpu.pci.bus_id",
                "hw.driver_version", "hw.serial_number", "hw.firmware_version",
                "hw.parent", "gpu.mig.profile", "gpu.mig.gpu_instance.id",
                "gpu.mig.compute_instance.id", "gpu.mig.compute_instance.profile",
                "amd.partition.id", "amd.partition.compute_mode",
                "amd.partition.memory_mode"}
_WORKLOAD_DCGM = {"k8s.namespace.name": "namespace", "k8s.pod.name": "pod",
                  "k8s.container.name": "container"}
_WORKLOAD_CUSTOM = {"k8s.namespace.name": "NamespaceName", "k8s.pod.name": "PodName",
                    "k8s.container.name": "ContainerName", "process.pid": "ProcessId"}


def _mig_labels(attrs: Mapping[str, object]) -> Labels:
    """dcgm-exporter's instance labels: the GPU instance's profile and id. A compute
    instance smaller than its GPU instance (``gpu.mig.compute_instance.profile``, NVML's
    ``1c.3g.40gb``) adds ``GPU_CI_ID`` (dcgm-exporter has no label for it): without it, alike
    compute instances of one GPU instance share every label, and all but one of their series
    would be dropped from the scrape as repeats."""
    labels = (("GPU_I_PROFILE", str(attrs["gpu.mig.profile"])),
              ("GPU_I_ID", str(attrs.get("gpu.mig.gpu_instance.id", ""))))
    if "gpu.mig.compute_instance.profile" not in attrs:
        return labels
    return (*labels, ("GPU_CI_ID", str(attrs.get("gpu.mig.compute_instance.id", ""))))


def release(tag: str) -> tuple[int, ...]:
    """A release tag ("<DCGM version>-<exporter version>") as a comparable exporter version."""
    _, sep, exporter = tag.partition("-")
    parts = exporter.split(".")
    if not sep or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a dcgm-exporter release tag (like {CURRENT}): {tag!r}")
    return tuple(int(p) for p in parts)


def renamed_help(help_: str, rename: DcgmRename) -> str:
    """A <= 4.8 help text with its unit as >= 4.9 serves it."""
    if not rename.unit_changed:
        return help_
    return re.sub(r"\(in [^)]*\)", f"(in {_UNIT_WORDS[rename.unit_after]})", help_)


def _scaled(value: float | int, scale: float) -> float | int:
    if scale == 1:
        return value
    result = round(value * scale, 6)  # 0.37 * 100 is 37.00000000000001
    return int(result) if result == int(result) else result


_CONTAINER_METRICS = ("gpu.container.utilization", "gpu.container.memory.usage",
                      "gpu.container.memory.limit")


def _dra_labels(attrs: Mapping[str, object]) -> Labels:
    """dcgm-exporter's labels of a pod holding the GPU through a claim (kubernetes.go)."""
    if "k8s.resourceclaim.name" not in attrs:
        return ()
    namespace = attrs.get("k8s.resourceclaim.namespace", attrs.get("k8s.namespace.name", ""))
    labels = [("dra_claim_name", attrs["k8s.resourceclaim.name"]),
              ("dra_claim_namespace", namespace),
              ("dra_driver_name", attrs.get("gpu.dra.driver", "")),
              ("dra_pool_name", attrs.get("gpu.dra.pool", "")),
              ("dra_device_name", attrs.get("gpu.dra.device", ""))]
    if "gpu.mig.profile" in attrs:
        labels += [("dra_mig_profile", attrs["gpu.mig.profile"]),
                   ("dra_mig_device_uuid", attrs.get("hw.id", ""))]
    return tuple((label, label_value(value)) for label, value in labels)


def pods_by_gpu(series: Mapping[str, Sequence[SeriesPoint]], dra: bool = True,
                ) -> dict[object, tuple[Labels, ...]]:
    """GPU UUID -> the pod/namespace/container labels of the Kubernetes containers on it (and,
    with ``dra``, the claim they hold it through)."""
    found: dict[object, dict[Labels, None]] = {}
    for name in _CONTAINER_METRICS:
        for point in series.get(name, ()):
            attrs = dict(point.attributes)
            if "k8s.pod.name" not in attrs:
                continue  # a Slurm job or a bare container: dcgm has no label for it
            labels = tuple((label, label_value(attrs[key]))
                           for key, label in _WORKLOAD_DCGM.items() if key in attrs)
            if dra:
                labels += _dra_labels(attrs)
            found.setdefault(attrs.get("hw.id"), {})[labels] = None
    return {uuid: tuple(sorted(pods)) for uuid, pods in found.items()}


class DcgmTranslator:
    """The snapshot under dcgm-exporter's names: <= 4.8's, or with ``renamed`` >= 4.9's (the
    rows of :data:`~gpu_otel_agent.model.dcgm_names.RENAMES_49`)."""

    def __init__(self, resource: Mapping[str, object], version: str = CURRENT, *,
                 renamed: bool = False) -> None:
        self._resource = resource
        self.renamed = renamed
        self._renames: Mapping[str, DcgmRename] = BY_OLD if renamed else {}
        self._driver_label = self._renames[DRIVER_LABEL].new if renamed else DRIVER_LABEL
        node = resource.get("k8s.node.name") or resource.get("host.name") or ""
        self._host = str(node)
        self.version = version
        follows = release(version)
        self._host_label = "hostname" if follows >= release(HOSTNAME_RENAMED) else "Hostname"
        self._dra = follows >= release(DRA_LABELS)
        self._pods: dict[object, tuple[Labels, ...]] = {}
        self._identity: dict[object, dict[str, AttributeValue]] = {}

    def labels(self, attributes: Attributes, custom: bool) -> Labels:
        attrs = dict(attributes)
        # hw.power, hw.temperature and a fan's points carry only the conventional attributes
        # their metric lists; dcgm-exporter labels every series with the GPU's model and
        # driver, so those come from the device's own identity (its hw.status point).
        known = (self._identity.get(attrs.get("hw.id"))
                 or self._identity.get(attrs.get("hw.parent")))
        if known:
            attrs = {**known, **attrs}
        index = attrs.get("gpu.index")
        labels: list[tuple[str, str]] = []
        if index is not None:
            # A MIG instance's series are its GPU's (UUID, gpu, device) plus the instance's
            # profile and GPU instance id, as dcgm-exporter labels them.
            uuid = attrs.get("hw.parent", attrs.get("hw.id", ""))
            labels += [("gpu", str(index)), ("UUID", str(uuid)),
                       ("device", f"nvidia{index}" if attrs.get("hw.vendor") != "AMD"
                        else f"amd{index}"),
                       ("modelName", str(attrs.get("hw.model", ""))),
                       ("pci_bus_id", str(attrs.get("gpu.pci.bus_id", "")))]
            if "gpu.mig.profile" in attrs:
                labels += _mig_labels(attrs)
            elif "amd.partition.id" in attrs:
                # An AMD compute partition, labelled the same way: its mode and XCP index.
                labels += [("GPU_I_PROFILE", str(attrs.get("amd.partition.compute_mode", ""))),
                           ("GPU_I_ID", str(attrs["amd.partition.id"]))]
        labels.append((self._host_label, self._host))
        # The device's own driver (hw.driver_version): on a mixed node NVIDIA series name
        # NVIDIA's driver, AMD series amdgpu's, never both joined.
        driver = attrs.get("hw.driver_version")
        if driver and index is not None and not custom:
            labels.append((self._driver_label, str(driver)))
        labels.append(("NodeName", self._host))
        workload = _WORKLOAD_CUSTOM if custom else _WORKLOAD_DCGM
        labels += [(label, label_value(attrs[key])) for key, label in workload.items()
                   if key in attrs]
        return tuple(labels)

    def families(self, series: Mapping[str, Sequence[SeriesPoint]]) -> Families:
        families = Families()
        # The resource as target_info, as in the default scheme: dashboards and rules join
        # on it for the node name (dcgm-exporter has no such series; one more is harmless).
        add_target_info(families, self._resource)
        passthrough: dict[str, list[SeriesPoint]] = {}
        throttle: dict[Attributes, int] = {}
        self._pods = pods_by_gpu(series, self._dra)
        self._identity = {dict(p.attributes).get("hw.id"): dict(p.attributes)
                          for p in series.get("hw.status", ())}
        for name, points in series.items():
            selectors = _SELECTORS.get(name)
            for point in points:
                field = self._field(name, point.attributes, selectors)
                if field is None:
                    if name == "gpu.clock.throttle":
                        self._throttle_bit(throttle, point)
                    else:
                        passthrough.setdefault(name, []).append(point)
                    continue
                self._add(families, name, field, point)
        self._add_free_memory(families, series)
        for device, mask in throttle.items():  # not one of 4.9's renames: one name for both
            family = families.family("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
                                     "Current clock throttle reasons (bitmask).")
            if family is not None:
                self._add_device(family, device, mask)
        for name, points in passthrough.items():
            add_otel_series(families, name, points)
        return families

    def _add_device(self, family: Family, attributes: Attributes, value: float | int) -> None:
        """A device series, once per pod on the GPU with its pod/namespace/container, as
        dcgm-exporter labels it (dashboards and adapter rules filter on them); once, without
        them, on a GPU no pod uses."""
        labels = self.labels(attributes, custom=False)
        for workload in self._pods.get(dict(attributes).get("hw.id"), ((),)):
            family.add((*labels, *workload), value)

    @staticmethod
    def _field(
        name: str, attributes: Attributes, selectors: frozenset[str] | None
    ) -> DcgmField | None:
        if selectors is None:
            return None
        if not selectors:
            return FIELDS.get((name, None))
        for key, value in attributes:
            if key in selectors:
                return FIELDS.get((name, (key, str(value))))
        return None

    def _add(self, families: Families, name: str, field: DcgmField,
             point: SeriesPoint) -> None:
        try:
            counter = spec_for(name).instrument is Instrument.COUNTER
        except KeyError:
            counter = False
        type_ = "counter" if counter else "gauge"
        name, scale, help_ = self.named(field.name, field.scale, field.help)
        family = families.family(name, type_, help_)
        if family is None:
            return
        if field.custom:
            family.add(self.labels(point.attributes, True), _scaled(point.value, scale))
        else:
            self._add_device(family, point.attributes, _scaled(point.value, scale))

    def named(self, name: str, scale: float, help_: str) -> tuple[str, float, str]:
        """A <= 4.8 field's name, scale (from the OpenTelemetry unit) and help as this scheme
        serves it: renamed and rescaled by the table's factor in ``dcgm-4.9``. The factors
        undo the <= 4.8 scales exactly (100 * 0.01, 1e-6 * 1e6 and MiB / MiB are 1.0), so a
        >= 4.9 value is the OpenTelemetry value itself."""
        rename = self._renames.get(name)
        if rename is None:
            return name, scale, help_
        return rename.new, scale * rename.factor, renamed_help(help_, rename)

    def _add_free_memory(self, families: Families,
                         series: Mapping[str, Sequence[SeriesPoint]]) -> None:
        """DCGM_FI_DEV_FB_FREE = total - reserved - used, as NVML's own free figure."""
        used = {_uuid(p): p.value for p in series.get("hw.gpu.memory.usage", ())}
        reserved = {_uuid(p): p.value for p in series.get("gpu.memory.reserved", ())}
        for point in series.get("hw.gpu.memory.limit", ()):
            uuid = _uuid(point)
            if uuid in used:
                free = point.value - used[uuid] - reserved.get(uuid, 0)
                name, scale, help_ = self.named("DCGM_FI_DEV_FB_FREE", 1 / MIB,
                                                "Framebuffer memory free (in MiB).")
                family = families.family(name, "gauge", help_)
                if family is not None:
                    self._add_device(family, point.attributes, _scaled(free, scale))

    @staticmethod
    def _throttle_bit(masks: dict[Attributes, int], point: SeriesPoint) -> None:
        device = tuple((k, v) for k, v in point.attributes if k in _DEVICE_KEYS)
        reason = dict(point.attributes).get("gpu.clock.throttle.reason")
        masks.setdefault(device, 0)
        if point.value and isinstance(reason, str):
            masks[device] |= THROTTLE_BITS.get(reason, 0)


def _uuid(point: SeriesPoint) -> object:
    return dict(point.attributes).get("hw.id")
