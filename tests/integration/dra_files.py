"""The node files NVIDIA's GPU DRA driver and kernel driver leave for a claim, in a host root.

What is written, and where each format comes from:

- ``var/run/cdi/k8s.gpu.nvidia.com-claim_<claim uid>.yaml``: the transient CDI spec the DRA
  driver's kubelet plugin writes when it prepares a claim (NVIDIA/k8s-dra-driver-gpu
  @22407113785e78c7763b4637689a201eb39c6199, cmd/gpu-kubelet-plugin/cdi.go
  ``CreateClaimSpecFile``): kind ``k8s.gpu.nvidia.com/claim``, one device per prepared device
  named ``<claim uid>-<canonical name>`` (``gpu-<minor>``, ``gpu-<minor>-mig-<profile>-<profile
  id>-<placement>`` from mig.go ``ToCanonicalName``), whose edits hold the GPU's node
  ``/dev/nvidia<minor>`` (nvidia-container-toolkit's full-GPU discoverer) and, for a MIG
  device, the two ``/dev/nvidia-caps/nvidia-cap<minor>`` character devices of its GPU and
  compute instance (``GetDevNodesForMigDevice``: path, type ``c``, mode, major, minor); the
  spec-level edits are the driver's common ones (control nodes, hooks). The file name is CDI's
  ``GenerateTransientSpecName`` (tags.cncf.io/container-device-interface v1.1.0, pkg/cdi/
  spec.go); the layout follows the CDI specification (SPEC.md, cdiVersion 0.6.0 as the
  driver's own mock-GPU CI writes, hack/ci/mock-nvml/setup-mock-gpu.sh).
- ``proc/driver/nvidia/gpus/<bus id>/information``: the kernel driver's per-GPU file
  (``GPU UUID:``, ``Device Minor:``, ``Bus Location:`` lines, tab-separated as it prints them).
- ``proc/driver/nvidia-caps/mig-minors``: the kernel driver's capability minors, laid out as
  k8s-dra-driver-gpu's internal/common/nvcaps.go quotes them (``gpu0/gi0/access 3``,
  ``gpu0/gi0/ci0/access 4`` ... ``gpu6/gi11/ci7/access 920``: 15 GPU instances of 1 + 8
  minors per GPU, after ``config 1`` and ``monitor 2``).

The values (UUIDs, minors, bus ids, GPU/compute instance ids) are read from the simulated node
through NVML by the caller, so the files describe the node the agent samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

CDI_KIND = "k8s.gpu.nvidia.com/claim"
CAPS_MAJOR = 508  # nvidia-caps' dynamic major on the machine the driver's docs quote
GPU_INSTANCES, COMPUTE_INSTANCES = 15, 8


def cap_minor(gpu: int, gi: int, ci: int | None = None) -> int:
    base = 3 + gpu * GPU_INSTANCES * (1 + COMPUTE_INSTANCES) + gi * (1 + COMPUTE_INSTANCES)
    return base if ci is None else base + 1 + ci


@dataclass(frozen=True)
class Gpu:
    uuid: str
    minor: int
    bus_id: str


@dataclass(frozen=True)
class ClaimedDevice:
    name: str  # the DRA device name: gpu-0, gpu-3-mig-1g10gb-19-0
    gpu_minor: int
    mig: tuple[int, int] | None = None  # (gpu instance, compute instance)


def write_driver(root: Path, gpus: list[Gpu], gpu_count: int = 8) -> None:
    for gpu in gpus:
        folder = root / "proc" / "driver" / "nvidia" / "gpus" / gpu.bus_id.lower()[4:]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "information").write_text(
            "Model: \t\t NVIDIA H100 80GB HBM3\n"
            f"GPU UUID: \t {gpu.uuid}\n"
            "Bus Type: \t PCIe\n"
            f"Bus Location: \t {gpu.bus_id.lower()[4:]}\n"
            f"Device Minor: \t {gpu.minor}\n"
            "GPU Excluded:\t No\n", encoding="utf-8")
    lines = ["config 1", "monitor 2"]
    for g in range(gpu_count):
        for gi in range(GPU_INSTANCES):
            lines.append(f"gpu{g}/gi{gi}/access {cap_minor(g, gi)}")
            lines.extend(f"gpu{g}/gi{gi}/ci{ci}/access {cap_minor(g, gi, ci)}"
                         for ci in range(COMPUTE_INSTANCES))
    caps = root / "proc" / "driver" / "nvidia-caps"
    caps.mkdir(parents=True, exist_ok=True)
    (caps / "mig-minors").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _device_nodes(device: ClaimedDevice) -> list[dict[str, object]]:
    nodes: list[dict[str, object]] = [{"path": f"/dev/nvidia{device.gpu_minor}",
                                       "hostPath": f"/dev/nvidia{device.gpu_minor}"}]
    if device.mig is not None:
        gi, ci = device.mig
        for minor in (cap_minor(device.gpu_minor, gi), cap_minor(device.gpu_minor, gi, ci)):
            nodes.append({"path": f"/dev/nvidia-caps/nvidia-cap{minor}", "type": "c",
                          "permissions": "r", "fileMode": 0o444, "major": CAPS_MAJOR,
                          "minor": minor})
    return nodes


def spec_path(root: Path, claim_uid: str) -> Path:
    return root / "var" / "run" / "cdi" / f"k8s.gpu.nvidia.com-claim_{claim_uid}.yaml"


def write_claim(root: Path, claim_uid: str, devices: list[ClaimedDevice]) -> list[str]:
    """The claim's spec file; returns the qualified CDI names pod-resources lists."""
    spec = {
        "cdiVersion": "0.6.0",
        "kind": CDI_KIND,
        "devices": [{"name": f"{claim_uid}-{d.name}",
                     "containerEdits": {"deviceNodes": _device_nodes(d)}} for d in devices],
        "containerEdits": {
            "env": ["NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu"],
            "deviceNodes": [{"path": "/dev/nvidiactl", "hostPath": "/dev/nvidiactl"},
                            {"path": "/dev/nvidia-uvm", "hostPath": "/dev/nvidia-uvm"}],
            "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                       "args": ["nvidia-cdi-hook", "update-ldcache", "--folder",
                                "/usr/lib/x86_64-linux-gnu"]}],
        },
    }
    path = spec_path(root, claim_uid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return [f"{CDI_KIND}={claim_uid}-{d.name}" for d in devices]
