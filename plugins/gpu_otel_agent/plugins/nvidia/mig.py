"""MIG instances as devices of their own (partitions of their physical GPU).

A MIG device is one compute instance of a GPU instance ("A MIG device handle ... maps to a MIG
compute instance", nvml.h); a GPU instance may hold several. It is read through its MIG handle
for what NVML serves per instance: memory (one ``nvmlDeviceGetMemoryInfo_v2``: its GPU
instance's, which its compute instances share), GPM activity (``nvmlGpmSampleGet`` on the MIG
handle plus ``nvmlGpmMetricsGet``, where the GPU has GPM: the compute instance's own, as DCGM
samples a GPU-CI entity -- ``nvmlGpmMigSampleGet`` is its GPU instance's aggregate, the same
figure for each of several compute instances) and its processes, which come for free from the
parent's process lists read just before in the same job (they carry each process's
``gpuInstanceId`` and ``computeInstanceId``); only when that split is missing are the
instance's own lists read. Its ECC count is the one nvml.h keeps per instance: "Per instance
information is currently only supported for non-DRAM uncorrectable volatile errors"
(``nvmlDeviceGetMemoryErrorCounter`` on the MIG handle, location SRAM); a MIG-enabled GPU
serves no volatile ECC count and no remapped rows at all. Everything physical stays with the
parent.

NVML reuses MIG handles ("their properties can change"), so instances are told apart by UUID
at each enumeration; a call on a destroyed instance answers INVALID_ARGUMENT or NOT_FOUND,
which becomes :class:`PartitionGone`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, PartitionGone
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import Attributes, DeviceIdentity, DevicePartition, Reading
from gpu_otel_agent.plugins.nvidia.gpm import GpmReader
from gpu_otel_agent.plugins.nvidia.nvml import Unavailable
from gpu_otel_agent.plugins.nvidia.processes import ProcessSampler
from gpu_otel_agent.plugins.nvidia.readings import _memory_v1, _memory_v2

log = logging.getLogger(__name__)
Invoke = Callable[..., Any]
_GONE = frozenset({pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NOT_FOUND})
MIG_KIND = "mig"


@dataclass(frozen=True)
class MigPlace:
    """Where an instance sits: its parent and its ids (what pod-resources may name it by)."""

    parent: DeviceIdentity
    uuid: str
    profile: str
    gpu_instance: int
    compute_instance: int

    def identity(self) -> DeviceIdentity:
        parent = self.parent
        return DeviceIdentity(
            uuid=self.uuid, index=parent.index, vendor=parent.vendor, model=parent.model,
            pci_bus_id=parent.pci_bus_id, driver_version=parent.driver_version,
            firmware_version=parent.firmware_version,
            partition=DevicePartition(
                parent.uuid, MIG_KIND, self.profile, self._attributes(),
                # The device plugin's older id form (newer ones hand out the MIG- UUID).
                (f"MIG-{parent.uuid}/{self.gpu_instance}/{self.compute_instance}",)))


    def _attributes(self) -> Attributes:
        """``gpu.mig.profile`` is the GPU instance's profile (telemetry.md: ``3g.40gb``), what
        dcgm-exporter's GPU_I_PROFILE and the dashboards group by; a compute instance smaller
        than its GPU instance (NVML names its MIG device ``1c.3g.40gb``) adds its own profile
        as ``gpu.mig.compute_instance.profile``."""
        gpu_instance, compute = split_profile(self.profile)
        return (("gpu.mig.profile", gpu_instance),
                ("gpu.mig.gpu_instance.id", self.gpu_instance),
                ("gpu.mig.compute_instance.id", self.compute_instance),
                *((("gpu.mig.compute_instance.profile", compute),) if compute else ()))


# A compute instance smaller than its GPU instance: NVML names its MIG device "<n>c.<GPU
# instance profile>" ("1c.3g.40gb"); a GPU instance may hold several such (even alike).
_COMPUTE_PROFILE = re.compile(r"^\d+c\.(?P<gpu_instance>.+)$")


def split_profile(profile: str) -> tuple[str, str | None]:
    """A MIG device's profile as (its GPU instance's profile, its compute instance's own
    profile where smaller than the GPU instance, else None)."""
    found = _COMPUTE_PROFILE.match(profile)
    return (profile, None) if found is None else (found["gpu_instance"], profile)


def _sram_errors(handle: Any) -> Reading:
    """The instance's uncorrectable volatile ECC errors: NVML counts them per MIG device for
    non-DRAM memory only (SRAM, "Turing+")."""
    count = pynvml.nvmlDeviceGetMemoryErrorCounter(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC,
        pynvml.NVML_MEMORY_LOCATION_SRAM)
    return Reading("hw.errors", int(count), (("error.type", "uncorrected"),))


def profile_of(name: str) -> str:
    """NVML names a MIG device "<GPU name> MIG <profile>" ("... MIG 3g.40gb")."""
    _, sep, profile = name.rpartition(" MIG ")
    return profile.strip() if sep else "unknown"


class NvidiaMigDevice:
    def __init__(self, handle: Any, place: MigPlace, invoke: Invoke, gpm: bool) -> None:
        self._handle = handle
        self._place = place
        self._identity = place.identity()
        self._invoke_parent = invoke  # the parent's wrapper: names the call, counts it
        self._memory: tuple[str, Callable[[Any], tuple[Reading, ...]]] | None = None
        self._ecc = False  # the instance's SRAM uncorrectable volatile count is served
        self._gpm_possible = gpm  # until GPM answers that it cannot work here
        self._gpm: GpmReader | None = None  # started (a baseline sample taken)
        # One reader for the instance's lifetime: a start that failed keeps its two buffers
        # for the next try (nvmlGpmSampleAlloc'd samples are never freed).
        self._gpm_reader = GpmReader(handle, lambda buffer: pynvml.nvmlGpmSampleGet(
            self._handle, buffer))
        self._own_lists = ProcessSampler(handle, self._invoke)
        self._given: tuple[ProcessUsage, ...] | None = None  # the parent's split, this cycle
        self._own_probed: bool | None = None  # the instance's own lists work (probed lazily)

    @property
    def identity(self) -> DeviceIdentity:
        return self._identity

    @property
    def current_call(self) -> str | None:
        return None  # calls run under the parent's wrapper, which names them

    @property
    def gpu_instance(self) -> int:
        return self._place.gpu_instance

    @property
    def compute_instance(self) -> int:
        return self._place.compute_instance

    @property
    def place(self) -> tuple[int, int]:
        """(GPU instance id, compute instance id): what process records and events name."""
        return self._place.gpu_instance, self._place.compute_instance

    def rebind(self, handle: Any) -> None:
        """The same instance under the handle NVML gave out this time (GPM samples follow it:
        the reader asks ``self._handle`` at each sample)."""
        self._handle = handle
        self._own_lists = ProcessSampler(handle, self._invoke)
        self._own_probed = None

    def _invoke(self, name: str, fn: Any, *args: Any) -> Any:
        try:
            return self._invoke_parent(name, fn, *args)
        except Unavailable as error:
            if isinstance(error.__cause__, pynvml.NVMLError) and error.__cause__.value in _GONE:
                raise PartitionGone(f"{self._identity.uuid}: {error}") from error
            raise
        except pynvml.NVMLError as error:
            if error.value in _GONE:
                raise PartitionGone(f"{self._identity.uuid}: {error}") from error
            raise

    # -- Device ----------------------------------------------------------------------------

    def probe(self) -> frozenset[str]:
        groups = set()
        for name, read in (("nvmlDeviceGetMemoryInfo_v2", _memory_v2),
                           ("nvmlDeviceGetMemoryInfo", _memory_v1)):
            try:
                self._invoke(name, read, self._handle)
            except Unavailable:
                continue
            except pynvml.NVMLError:
                pass  # transient (error_policy): keep the call, absent when it fails
            self._memory = (name, read)
            groups.add("fast")
            break
        try:
            self._invoke("nvmlDeviceGetMemoryErrorCounter", _sram_errors, self._handle)
            self._ecc = True
        except Unavailable:
            pass
        except pynvml.NVMLError:
            self._ecc = True  # transient: kept, absent when it fails
        if self._ecc:
            groups.add("slow")
        if self._gpm_possible:
            self._start_gpm()
            if self._gpm_possible:  # started, or failed this time only: the next read retries
                groups.add("gpm")
        groups.add(PROCESS_GROUP)
        return frozenset(groups)

    def _start_gpm(self) -> None:
        """Take the first GPM sample. Unavailable (GPM cannot work on this instance) ends GPM
        for it; a transient error leaves it to the next read: one failed call must not turn
        GPM off for the instance's lifetime."""
        reader = self._gpm_reader
        try:
            self._invoke("nvmlGpmSampleGet", reader.start)
        except Unavailable as error:
            log.debug("%s: no GPM per instance: %s", self._identity.uuid, error)
            self._gpm_possible = False
            return
        except pynvml.NVMLError as error:
            log.debug("%s: GPM not started this time: %s", self._identity.uuid, error)
            return
        self._gpm = reader

    def read(self, group: str) -> tuple[Reading, ...]:
        if group == "fast" and self._memory is not None:
            name, read = self._memory
            try:
                return tuple(self._invoke(name, read, self._handle))
            except (Unavailable, pynvml.NVMLError) as error:
                log.debug("%s: %s failed this cycle: %s", self._identity.uuid, name, error)
                return ()
        if group == "slow" and self._ecc:
            try:
                return (self._invoke("nvmlDeviceGetMemoryErrorCounter", _sram_errors,
                                     self._handle),)
            except Unavailable:
                self._ecc = False
                return ()
            except pynvml.NVMLError:
                return ()
        if group == "gpm" and self._gpm is None and self._gpm_possible:
            self._start_gpm()  # its probe failed transiently: a baseline now, values next read
            return ()
        if group == "gpm" and self._gpm is not None:
            try:
                return tuple(self._invoke("nvmlGpmMetricsGet", self._gpm.read))
            except (Unavailable, pynvml.NVMLError):
                return ()  # absent this cycle; PartitionGone / DeviceLost propagate
        return ()

    # -- ProcessReader -------------------------------------------------------------------

    def give_processes(self, processes: tuple[ProcessUsage, ...]) -> None:
        """The parent's lists, split: this instance's share of the cycle's read."""
        self._given = processes

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        given, self._given = self._given, None
        if given is not None:
            return given
        if self._own_probed is None:
            self._own_probed = self._own_lists.probe()
        return self._own_lists.read() if self._own_probed else ()
