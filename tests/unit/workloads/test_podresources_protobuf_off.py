"""On a Kubernetes node the agent names pods without loading protobuf's runtime (issue 41).

A fresh interpreter imports what ``gpu-agent run`` imports, builds the kubelet source as the
entry point does, and lists and gets a pod (devices and a DRA claim tied to a GPU) from the
test kubelet, which runs here with the generated classes; no ``*_pb2`` or ``google._upb``
module may be loaded there (3.7 MiB resident when one is).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_otel_agent.workloads.pods import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)
from tests.integration.dra_files import ClaimedDevice, Gpu, write_claim, write_driver
from tests.receivers.kubelet import FakeKubelet

PROBE = """
import asyncio, json, sys
import gpu_otel_agent.cli, gpu_otel_agent.runtime.agent
from gpu_otel_agent.config.schema import AttributionConfig, KubeletConfig
from gpu_otel_agent.plugins.kubernetes.pod_source_entry import pod_source

source = pod_source(AttributionConfig(kubelet=KubeletConfig(socket=sys.argv[1],
                                                            dra_host_root=sys.argv[2])))

async def ask():
    return await source.list(), await source.get("ml", "trainer-0")

listed, got = asyncio.run(ask())
source.close()
loaded = sorted(m for m in sys.modules if m.endswith("_pb2") or m.startswith("google._upb"))
print(json.dumps({"listed": repr(listed), "got": repr(got), "loaded": loaded}))
"""

GPU = Gpu("GPU-00000000-0000-4000-8000-00000000000b", 1, "00000000:19:00.0")
CLAIM_UID = "2d5e1f1c-6a59-4f0e-9d3c-1b0c6f0e7a11"
CDI = f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-1"


def test_a_pod_is_named_with_no_protobuf_loaded(tmp_path: Path) -> None:
    root = tmp_path / "host"
    write_driver(root, [GPU])
    write_claim(root, CLAIM_UID, [ClaimedDevice("gpu-1", 1)])
    served = PodAllocation("ml", "trainer-0", (
        ContainerAllocation("main", (ContainerDevices("nvidia.com/gpu", ("GPU-1", "GPU-2")),),
                            (ClaimAllocation("gpus", "ml", (ClaimDevice(
                                "gpu.nvidia.com", "node-a", "gpu-1", "s1", (CDI,)),)),)),
        ContainerAllocation("sidecar"),
    ))
    # What the agent makes of it: the claimed device tied to the GPU through the node's files.
    tied = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-1", "s1", (CDI,), (GPU.uuid,))
    expected = PodAllocation("ml", "trainer-0", (
        ContainerAllocation("main", served.containers[0].devices,
                            (ClaimAllocation("gpus", "ml", (tied,)),)),
        ContainerAllocation("sidecar"),
    ))
    with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.set_pods([served])
        done = subprocess.run([sys.executable, "-c", PROBE, str(kubelet.socket_path), str(root)],
                              capture_output=True, text=True, timeout=120, check=False)
        calls = dict(kubelet.calls)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["listed"] == repr((expected,))
    assert out["got"] == repr(expected)
    assert calls["List"] == 1 and calls["Get"] == 1  # both answers came from the kubelet
    assert out["loaded"] == []
