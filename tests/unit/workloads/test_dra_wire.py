"""DRA claims as kubelets of each pod-resources generation send them, over real gRPC.

Messages are encoded with the upstream protos of older kubelets (upstream_podresources/, blob
ids checked) and with the vendored current one, served on a unix socket, and read by the
agent's client, which ties each claimed device to a GPU through the CDI spec and the driver's
/proc files of a node laid out as NVIDIA's drivers leave it (tests/integration/dra_files.py).
"""

from __future__ import annotations

import hashlib
import logging
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from gpu_otel_agent.plugins.kubernetes import api
from gpu_otel_agent.plugins.kubernetes.dra_claims import ClaimMapper
from gpu_otel_agent.plugins.kubernetes.podresources import PodResourcesClient
from gpu_otel_agent.workloads.pods import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)
from tests.integration.dra_files import ClaimedDevice, Gpu, write_claim, write_driver
from tests.receivers.kubelet import FakeKubelet

UPSTREAM = Path(__file__).parent / "upstream_podresources"
BLOBS = {"v0.30.0": "9e6022ac32c38f36730558888c13d7ef922a6833",
         "v0.33.0": "93ab0185d58668933bdf5fd1e0a652efd637bb27"}
GPUS = [Gpu("GPU-00000000-0000-4000-8000-00000000000a", 0, "00000000:18:00.0"),
        Gpu("GPU-00000000-0000-4000-8000-00000000000b", 1, "00000000:19:00.0")]
CLAIM_UID = "2d5e1f1c-6a59-4f0e-9d3c-1b0c6f0e7a11"


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A host root: the driver's files for two GPUs and one claim holding GPU 1 and a MIG
    device (GPU 0, GPU instance 3, compute instance 0)."""
    root = tmp_path / "host"
    write_driver(root, GPUS)
    write_claim(root, CLAIM_UID, [ClaimedDevice("gpu-1", 1),
                                  ClaimedDevice("gpu-0-mig-1g10gb-19-3", 0, (3, 0))])
    return root


def _old_messages(tag: str, tmp_path: Path) -> Any:
    """The ListPodResourcesResponse class of an upstream proto, in a pool of its own."""
    data = (UPSTREAM / f"api-{tag}.proto").read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == BLOBS[tag]
    # gogo.proto's options only steer Go code generation, never the wire format.
    text = re.sub(r'import "github.com/gogo/[^"]+";\n|option \(gogoproto\.[^\n]+\n', "",
                  data.decode())
    text = re.sub(r"\s*\[\(gogoproto\.[^\]]+\]", "", text)
    source = tmp_path / tag / "api.proto"
    source.parent.mkdir()
    source.write_text(text, encoding="utf-8")
    out = tmp_path / f"{tag}.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{source.parent}",
                    f"--descriptor_set_out={out}", "api.proto"], check=True)
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(
        "v1.ListPodResourcesResponse"))


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[bytes], Path]]:
    """A kubelet answering ``List`` with the given encoded bytes; returns its socket."""
    servers: list[grpc.Server] = []

    def start(answer: bytes) -> Path:
        socket = tmp_path / f"kubelet-{len(servers)}.sock"
        handler = grpc.unary_unary_rpc_method_handler(
            lambda request, context: answer, request_deserializer=lambda b: b,
            response_serializer=lambda b: b)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            api.SERVICE, {"List": handler}),))
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        servers.append(server)
        return socket

    yield start
    for server in servers:
        server.stop(None)


def _cdi(device: str) -> str:
    return f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-{device}"


def _fill_old(response: Any, tag: str) -> None:
    container = response.pod_resources.add(name="trainer", namespace="ml").containers.add(
        name="main")
    dynamic = container.dynamic_resources.add(claim_name="gpus", claim_namespace="ml")
    if tag == "v0.30.0":
        dynamic.class_name = "gpu.nvidia.com"  # 1.27-1.30: a claim had one class
    for device in ("gpu-1", "gpu-0-mig-1g10gb-19-3"):
        resource = dynamic.claim_resources.add()
        resource.cdi_devices.add(name=_cdi(device))
        if tag != "v0.30.0":
            resource.driver_name, resource.pool_name = "gpu.nvidia.com", "node-a"
            resource.device_name = device


@pytest.mark.parametrize("tag", sorted(BLOBS))
def test_claims_of_older_kubelets_are_tied_to_their_gpus(
    tag: str, node: Path, tmp_path: Path, serve: Callable[[bytes], Path],
) -> None:
    response = _old_messages(tag, tmp_path)()
    _fill_old(response, tag)
    client = PodResourcesClient(serve(response.SerializeToString()), 5.0, ClaimMapper(node))
    try:
        (pod,) = client.list_blocking()
    finally:
        client.close()
    (claim,) = pod.containers[0].claims
    assert (claim.name, claim.namespace) == ("gpus", "ml")
    whole, mig = claim.devices
    assert whole.device_ids == (GPUS[1].uuid,)
    assert mig.device_ids == (f"MIG-{GPUS[0].uuid}/3/0",)
    assert whole.cdi_devices == (_cdi("gpu-1"),)
    named = ("gpu.nvidia.com", "node-a", "gpu-1") if tag != "v0.30.0" else ("", "", "")
    assert (whole.driver, whole.pool, whole.device) == named
    assert whole.share_id is None


def test_the_current_protocol_round_trips_share_id_through_the_test_kubelet(
    node: Path, tmp_path: Path,
) -> None:
    device = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-1", "a1b2", (_cdi("gpu-1"),))
    pod = PodAllocation("ml", "trainer", (ContainerAllocation("main", (), (
        ClaimAllocation("gpus", "ml", (device,)),)),))
    with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.set_pods([pod])
        client = PodResourcesClient(kubelet.socket_path, 5.0, ClaimMapper(node))
        try:
            (listed,) = client.list_blocking()
            got = client.get_blocking("ml", "trainer")
        finally:
            client.close()
    for answer in (listed, got):
        assert answer is not None
        (claim,) = answer.containers[0].claims
        assert claim.devices == (ClaimDevice("gpu.nvidia.com", "node-a", "gpu-1", "a1b2",
                                             (_cdi("gpu-1"),), (GPUS[1].uuid,)),)


def test_a_kubelet_without_the_field_degrades_with_one_log_line(
    node: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    device = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-1", None, (_cdi("gpu-1"),))
    pod = PodAllocation("ml", "trainer", (ContainerAllocation("main", (), (
        ClaimAllocation("gpus", "ml", (device,)),)),))
    caplog.set_level(logging.INFO, "gpu_otel_agent.plugins.kubernetes")
    with FakeKubelet(tmp_path / "kubelet.sock", without_claims=True) as kubelet:
        kubelet.set_pods([pod])
        client = PodResourcesClient(kubelet.socket_path, 5.0, ClaimMapper(node))
        try:
            answers = [client.list_blocking() for _ in range(3)]
        finally:
            client.close()
    assert all(a == (PodAllocation("ml", "trainer", (ContainerAllocation("main"),)),)
               for a in answers)  # today's behaviour: the pod, without claims
    lines = [r for r in caplog.records if "no DRA claims" in r.getMessage()]
    assert len(lines) == 1


def test_a_claim_without_a_cdi_spec_on_the_node_is_listed_untied(
    node: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    other = ClaimDevice("gpu.example.com", "node-a", "dev-0", None,
                        ("example.com/gpu=missing",))
    pod = PodAllocation("ml", "other", (ContainerAllocation("main", (), (
        ClaimAllocation("theirs", "ml", (other,)),)),))
    caplog.set_level(logging.INFO, "gpu_otel_agent.plugins.kubernetes")
    with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.set_pods([pod, pod])
        client = PodResourcesClient(kubelet.socket_path, 5.0, ClaimMapper(node))
        try:
            listed = client.list_blocking()
        finally:
            client.close()
    assert listed[0].containers[0].claims[0].devices == (other,)  # no device ids
    assert len([r for r in caplog.records if "gpu.example.com" in r.getMessage()]) == 1
