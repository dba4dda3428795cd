"""Which NVIDIA GPU or MIG device a set of device nodes opens, from the driver's /proc files.

A DRA claim names its device by driver, pool and device name (``gpu.nvidia.com``, the node,
``gpu-0``); what ties it to a GPU on the node without the API server is the CDI spec the DRA
driver writes for the claim, whose device-level edits hold the device nodes the container
gets. NVIDIA's DRA driver (k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/cdi.go) writes there:

- for a whole GPU, the GPU's node ``/dev/nvidia<minor>``;
- for a MIG device, its parent's ``/dev/nvidia<minor>`` plus the two capability nodes
  ``/dev/nvidia-caps/nvidia-cap<m>`` of its GPU instance and compute instance (the minors
  the kernel driver lists in ``/proc/driver/nvidia-caps/mig-minors`` as
  ``gpu<minor>/gi<gi>/access`` and ``gpu<minor>/gi<gi>/ci<ci>/access``).

The GPU minor is tied to the GPU's UUID by ``/proc/driver/nvidia/gpus/<bus id>/information``
(``GPU UUID:`` and ``Device Minor:``). The result is in the ids device plugins use
(``GPU-<uuid>``, ``MIG-GPU-<uuid>/<gi>/<ci>``), which the resolver already matches.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.plugins.kubernetes.cdi import DeviceNode

log = logging.getLogger(__name__)
_GPU_NODE = re.compile(r"/dev/nvidia(\d+)$")
_CAP_NODE = re.compile(r"/dev/nvidia-caps/nvidia-cap(\d+)$")
_MIG_MINOR = re.compile(r"gpu(\d+)/gi(\d+)(?:/ci(\d+))?/access\s+(\d+)$")


@dataclass(frozen=True)
class Capability:
    gpu_minor: int
    gpu_instance: int
    compute_instance: int | None  # None: the GPU instance's own capability


@dataclass(frozen=True)
class DriverView:
    """What the kernel driver says about the node's GPUs: minor -> UUID, cap minor -> MIG."""

    uuids: dict[int, str]
    capabilities: dict[int, Capability]


def read_driver(proc_driver: Path) -> DriverView:
    """``proc_driver`` is ``/proc/driver`` (or a copy of it); missing files give empty maps."""
    uuids: dict[int, str] = {}
    gpus = proc_driver / "nvidia" / "gpus"
    try:
        entries = sorted(gpus.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        try:
            text = (entry / "information").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = dict(_field(line) for line in text.splitlines() if ":" in line)
        uuid, minor = fields.get("GPU UUID", ""), fields.get("Device Minor", "")
        if uuid and minor.isdigit():
            uuids[int(minor)] = uuid
    capabilities: dict[int, Capability] = {}
    try:
        lines = (proc_driver / "nvidia-caps" / "mig-minors").read_text(
            encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        found = _MIG_MINOR.match(line.strip())
        if found:
            gpu, gi, ci, minor = found.groups()
            capabilities[int(minor)] = Capability(int(gpu), int(gi),
                                                  int(ci) if ci is not None else None)
    return DriverView(uuids, capabilities)


def _field(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


def _minor(node: DeviceNode, pattern: re.Pattern[str]) -> int | None:
    for path in (node.host_path, node.path):
        found = pattern.search(path)
        if found:
            return node.minor if node.minor is not None and pattern is _CAP_NODE \
                else int(found.group(1))
    return None


def device_ids(nodes: tuple[DeviceNode, ...], driver: DriverView) -> tuple[str, ...]:
    """The GPU or MIG ids the nodes open; empty when the driver's files do not say."""
    gpu_minors = [m for n in nodes if (m := _minor(n, _GPU_NODE)) is not None]
    caps = [driver.capabilities.get(m) for n in nodes
            if (m := _minor(n, _CAP_NODE)) is not None]
    instances = sorted({(c.gpu_minor, c.gpu_instance, c.compute_instance) for c in caps
                        if c is not None and c.compute_instance is not None})
    if instances:
        # A MIG device: its compute instance's capability names parent, GI and CI.
        return tuple(f"MIG-{driver.uuids[gpu]}/{gi}/{ci}" for gpu, gi, ci in instances
                     if gpu in driver.uuids)
    return tuple(driver.uuids[m] for m in sorted(set(gpu_minors)) if m in driver.uuids)
