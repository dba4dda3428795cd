"""MIG instances as devices of their own (partitions of their physical GPU).

A MIG device (one GPU instance with its compute instance) is read through its MIG handle for
what NVML serves per instance: memory (one ``nvmlDeviceGetMemoryInfo_v2``), GPM activity
(``nvmlGpmMigSampleGet`` on the parent plus ``nvmlGpmMetricsGet``, where the GPU has GPM) and
its processes, which come for free from the parent's process lists read just before in the
same job (they carry each process's ``gpuInstanceId``); only when that split is missing are
the instance's own lists read. Everything physical stays with the parent.

NVML reuses MIG handles ("their properties can change"), so instances are told apart by UUID
at each enumeration; a call on a destroyed instance answers INVALID_ARGUMENT or NOT_FOUND,
which becomes :class:`PartitionGone`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, PartitionGone
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity, DevicePartition, Reading
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
            pci_bus_id=parent.pci_bus_id,
            partition=DevicePartition(
                parent.uuid, MIG_KIND, self.profile,
                (("gpu.mig.profile", self.profile),
                 ("gpu.mig.gpu_instance.id", self.gpu_instance),
                 ("gpu.mig.compute_instance.id", self.compute_instance)),
                # The device plugin's older id form (newer ones hand out the MIG- UUID).
                (f"MIG-{parent.uuid}/{self.gpu_instance}/{self.compute_instance}",)))


def profile_of(name: str) -> str:
    """NVML names a MIG device "<GPU name> MIG <profile>" ("... MIG 3g.40gb")."""
    _, sep, profile = name.rpartition(" MIG ")
    return profile.strip() if sep else "unknown"


class NvidiaMigDevice:
    def __init__(self, handle: Any, place: MigPlace, parent_handle: Any, invoke: Invoke,
                 gpm: bool) -> None:
        self._handle = handle
        self._place = place
        self._identity = place.identity()
        self._parent_handle = parent_handle
        self._invoke_parent = invoke  # the parent's wrapper: names the call, counts it
        self._memory: tuple[str, Callable[[Any], tuple[Reading, ...]]] | None = None
        self._gpm_possible = gpm
        self._gpm: GpmReader | None = None
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

    def rebind(self, handle: Any) -> None:
        """The same instance under the handle NVML gave out this time."""
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
            self._memory = (name, read)
            groups.add("fast")
            break
        if self._gpm_possible:
            gi = self._place.gpu_instance
            reader = GpmReader(self._parent_handle, lambda buffer: pynvml.nvmlGpmMigSampleGet(
                self._parent_handle, gi, buffer))
            try:
                self._invoke("nvmlGpmMigSampleGet", reader.start)
                self._gpm = reader
                groups.add("gpm")
            except (Unavailable, pynvml.NVMLError) as error:
                log.debug("%s: no GPM per instance: %s", self._identity.uuid, error)
        groups.add(PROCESS_GROUP)
        return frozenset(groups)

    def read(self, group: str) -> tuple[Reading, ...]:
        if group == "fast" and self._memory is not None:
            name, read = self._memory
            try:
                return tuple(self._invoke(name, read, self._handle))
            except (Unavailable, pynvml.NVMLError) as error:
                log.debug("%s: %s failed this cycle: %s", self._identity.uuid, name, error)
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
