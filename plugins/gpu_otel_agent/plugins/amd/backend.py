"""The AMD backend: amdsmi (ROCm's libamd_smi.so, real or the simulated node)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from gpu_otel_agent.backends.protocol import (
    BackendInfo,
    BackendUnavailable,
    Device,
    EventSource,
    EventSourceOptions,
)
from gpu_otel_agent.model.snapshot import DeviceIdentity
from gpu_otel_agent.model.workload import WorkloadLookup
from gpu_otel_agent.plugins.amd import smi

# The device, partition, topology, event and process modules are imported once amdsmi has
# opened (in the methods below): discovery creates every installed backend, and on a node
# without AMD GPUs they are 0.3 MiB resident the agent would never use (issue 41).

log = logging.getLogger(__name__)


class AmdBackend:
    name = "amd"

    def __init__(self) -> None:
        self._smi: ModuleType | None = None
        self._handles: list[Any] = []
        self._by_id: dict[str, Any] = {}  # hw.id -> the handle that lists its processes
        self._driver = ""  # the amdgpu driver's version, "" where the library cannot say

    def open(self) -> BackendInfo:
        module = smi.load()
        try:
            module.amdsmi_init(module.AmdSmiInitFlags.INIT_AMD_GPUS)
        except module.AmdSmiException as error:
            raise BackendUnavailable(f"amdsmi could not be initialised: {error}") from error
        self._smi = module
        try:
            self._handles = list(module.amdsmi_get_processor_handles())
        except module.AmdSmiException as error:
            self.close()
            raise BackendUnavailable(f"amdsmi lists no GPUs: {error}") from error
        driver = "unknown"
        if self._handles:
            with contextlib.suppress(module.AmdSmiException):
                driver = str(module.amdsmi_get_gpu_driver_info(self._handles[0])["driver_version"])
        self._driver = "" if driver == "unknown" else driver
        return BackendInfo(vendor="amd", driver_version=driver)

    def devices(self) -> list[Device]:
        """One device per physical GPU (amdsmi socket), indexed in enumeration order; a
        partitioned one is a tree (see :mod:`.partitioned`). Names never rest on the UUID
        alone (partitions share it on libraries still deployed: see :mod:`.topology`)."""
        module = self._smi
        if module is None:
            return []
        from gpu_otel_agent.plugins.amd import partitioned, topology
        from gpu_otel_agent.plugins.amd.device import AmdDevice

        processors: list[topology.Processor] = []
        for position, handle in enumerate(self._handles):
            try:
                processors.append(topology.describe(module, handle))
            except module.AmdSmiException as error:
                # Without its UUID a device cannot be named in any series; say so loudly.
                log.error("AMD GPU %d cannot be identified and is not monitored: %s",
                          position, error)
        found: list[Device] = []
        taken: set[str] = set()
        for index, socket in enumerate(topology.sockets(processors)):
            if socket.partitioned:
                tree = partitioned.build(module, socket, index, processors, driver=self._driver,
                                         serial=_board_serial(module, socket.primary.handle))
                found.append(tree)
                # An event on the GPU names the processes on every partition.
                self._by_id[tree.identity.uuid] = tuple(p.handle for p in socket.processors)
                for part in tree.partition_devices:
                    self._by_id[part.identity.uuid] = part.handle
                continue
            only = socket.primary
            own = topology.stable_id(only)
            uuid = own if own not in taken else f"{own}/{only.bdf}"
            if uuid != own:
                log.warning("AMD GPUs at %s and another report UUID %s; naming this one %s",
                            only.bdf, only.uuid, uuid)
            taken.add(uuid)
            identity = DeviceIdentity(uuid=uuid, index=index, vendor="amd", model=only.model,
                                      pci_bus_id=only.bdf, driver_version=self._driver,
                                      serial_number=_board_serial(module, only.handle))
            found.append(AmdDevice(module, only.handle, identity))
            self._by_id[uuid] = only.handle
        return found

    def workload_lookup(self) -> WorkloadLookup:
        from gpu_otel_agent.plugins.amd.processes import amd_process_lookup

        return amd_process_lookup(self._smi, self._by_id)

    def event_sources(
        self, devices: Sequence[Device], options: EventSourceOptions
    ) -> list[EventSource]:
        """One thread for every AMD GPU: amdsmi's notification read is process-wide. Every
        partition of a partitioned GPU is subscribed on its own handle: KFD raises a VM fault
        on the node (partition) that faulted."""
        if self._smi is None:
            return []
        from gpu_otel_agent.plugins.amd import partitioned
        from gpu_otel_agent.plugins.amd.device import AmdDevice
        from gpu_otel_agent.plugins.amd.event_notifications import AmdEventReader

        amd: list[AmdDevice] = []
        for device in devices:
            if isinstance(device, partitioned.AmdPartitionedGpu):
                amd.extend(device.partition_devices)
            elif isinstance(device, AmdDevice):
                amd.append(device)
        if not amd:
            return []
        return [AmdEventReader(self._smi, amd)]

    def close(self) -> None:
        module, self._smi = self._smi, None
        if module is not None:
            try:
                module.amdsmi_shut_down()
            except module.AmdSmiException as error:
                log.debug("amdsmi_shut_down: %s", error)


def _board_serial(module: Any, handle: Any) -> str:
    """The board's serial (amd-smi static --board PRODUCT_SERIAL; AMD's device-metrics-exporter
    labels series with it): absent where the library has none."""
    try:
        serial = str(module.amdsmi_get_gpu_board_info(handle).get("product_serial", "")).strip()
    except module.AmdSmiException:
        return ""
    return "" if serial.upper() in ("", "N/A") else serial
