"""DRA claims of the pod-resources answer, tied to GPUs with what is on the node alone.

The kubelet's ``dynamic_resources`` (pod-resources v1, Kubernetes 1.27+ behind the
``KubeletPodResourcesDynamicResources`` gate, on by default since 1.34) name each claimed
device by driver, pool and device, with the CDI devices the container got. The CDI spec
defining those devices (:mod:`.cdi`) gives the device nodes, and the kernel driver's /proc
files tie nodes to GPUs (:mod:`.nvidia_nodes`). No API server is asked: ResourceSlices are not
needed, the node has everything.
"""

from __future__ import annotations

import logging
from pathlib import Path

from gpu_otel_agent.plugins.kubernetes.cdi import CdiRegistry
from gpu_otel_agent.plugins.kubernetes.nvidia_nodes import DriverView, device_ids, read_driver
from gpu_otel_agent.plugins.kubernetes.wire import ClaimResource, DynamicResource
from gpu_otel_agent.workloads.pods import ClaimAllocation, ClaimDevice

log = logging.getLogger(__name__)


class ClaimMapper:
    def __init__(self, host_root: Path) -> None:
        self._cdi = CdiRegistry(host_root)
        self._proc_driver = host_root / "proc" / "driver"
        self._driver = DriverView({}, {})
        self._unmapped: set[str] = set()  # drivers already reported as not tied to a GPU

    def refresh(self) -> None:
        """Re-read the spec directories and the driver's files (once per kubelet answer)."""
        self._cdi.refresh()
        self._driver = read_driver(self._proc_driver)

    def claim(self, message: DynamicResource) -> ClaimAllocation:
        return ClaimAllocation(message.claim_name, message.claim_namespace,
                               tuple(self._device(r) for r in message.claim_resources))

    def _device(self, resource: ClaimResource) -> ClaimDevice:
        cdi = resource.cdi_devices
        ids: list[str] = []
        for name in cdi:
            nodes = self._cdi.nodes(name)
            if nodes:
                ids.extend(i for i in device_ids(nodes, self._driver) if i not in ids)
        driver = resource.driver_name
        if not ids and driver not in self._unmapped:
            self._unmapped.add(driver)
            log.info("DRA devices of driver %s (e.g. %s/%s, CDI %s) are not tied to a GPU: no "
                     "CDI spec with NVIDIA device nodes for them on this node; their pods are "
                     "named by their processes' HOSTNAME only", driver or "?",
                     resource.pool_name, resource.device_name, ", ".join(cdi) or "none")
        return ClaimDevice(
            driver=driver, pool=resource.pool_name, device=resource.device_name,
            share_id=resource.share_id,
            cdi_devices=cdi, device_ids=tuple(ids))
