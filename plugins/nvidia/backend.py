"""The NVIDIA backend: NVML through pynvml (real driver or the simulated node)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import (
    BackendInfo,
    BackendUnavailable,
    Device,
    EventSource,
    EventSourceOptions,
)
from gpu_otel_agent.model.snapshot import DeviceIdentity
from gpu_otel_agent.model.workload import WorkloadLookup
from gpu_otel_agent.plugins.nvidia.device import NvidiaDevice

log = logging.getLogger(__name__)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvidiaBackend:
    name = "nvidia"

    def __init__(self) -> None:
        self._open = False
        self._handles: dict[str, Any] = {}

    def open(self) -> BackendInfo:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            raise BackendUnavailable(f"NVML could not be initialised: {error}") from error
        self._open = True
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            driver = "unknown"
        return BackendInfo(vendor="nvidia", driver_version=driver)

    def devices(self) -> list[Device]:
        found: list[Device] = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                identity = DeviceIdentity(
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    index=index,
                    vendor="nvidia",
                    model=_text(pynvml.nvmlDeviceGetName(handle)),
                    pci_bus_id=_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
                )
            except pynvml.NVMLError as error:
                # Without its UUID a device cannot be named in any series; say so loudly.
                log.error("GPU %d cannot be identified and is not monitored: %s", index, error)
                continue
            self._handles[identity.uuid] = handle
            found.append(NvidiaDevice(handle, identity))
        return found

    def event_sources(
        self, devices: Sequence[Device], options: EventSourceOptions
    ) -> list[EventSource]:
        """An NVML event thread per GPU, and the kernel log reader if enabled."""
        from gpu_otel_agent.plugins.nvidia.events import NvmlEventWatcher
        from gpu_otel_agent.plugins.nvidia.kmsg import KmsgXidReader

        sources: list[EventSource] = []
        for device in devices:
            handle = self._handles.get(device.identity.uuid)
            if handle is not None:
                partition_of = (device.partition_of if isinstance(device, NvidiaDevice)
                                else lambda gpu_instance: "")
                sources.append(NvmlEventWatcher(handle, device.identity.uuid,
                                                device.identity.index, partition_of))
        if options.kmsg:
            sources.append(KmsgXidReader({d.identity.pci_bus_id: d.identity.uuid
                                          for d in devices}))
        return sources

    def workload_lookup(self) -> WorkloadLookup:
        from gpu_otel_agent.plugins.nvidia.event_processes import nvml_process_lookup

        return nvml_process_lookup(self._handles)

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError as error:
                log.debug("nvmlShutdown: %s", error)
