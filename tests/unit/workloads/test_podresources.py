"""The pod-resources client against a server speaking the kubelet's v1 protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.plugins.kubernetes.podresources import (
    PodResourcesClient,
    PodResourcesUnavailable,
)
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.receivers.kubelet import FakeKubelet

POD = PodAllocation("ml", "trainer-0", (
    ContainerAllocation("main", (ContainerDevices("nvidia.com/gpu", ("GPU-1::2", "GPU-2")),)),
    ContainerAllocation("sidecar"),
))


def test_list_and_get_round_trip(tmp_path: Path) -> None:
    with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.set_pods([POD])
        client = PodResourcesClient(kubelet.socket_path, timeout=2)
        assert client.list_blocking() == (POD,)
        assert client.get_blocking("ml", "trainer-0") == POD
        client.close()


def test_kubelet_without_get_falls_back_to_list(tmp_path: Path) -> None:
    with FakeKubelet(tmp_path / "kubelet.sock", with_get=False) as kubelet:
        kubelet.set_pods([POD])
        client = PodResourcesClient(kubelet.socket_path, timeout=2)
        assert client.get_blocking("ml", "trainer-0") is None
        assert client.list_blocking() == (POD,)
        client.close()


def test_reconnects_after_the_kubelet_restarts(tmp_path: Path) -> None:
    kubelet = FakeKubelet(tmp_path / "kubelet.sock")
    kubelet.start()
    client = PodResourcesClient(kubelet.socket_path, timeout=2)
    kubelet.set_pods([POD])
    assert client.list_blocking() == (POD,)
    kubelet.stop()
    with pytest.raises(PodResourcesUnavailable, match="no kubelet socket"):
        client.list_blocking()
    kubelet = FakeKubelet(tmp_path / "kubelet.sock")
    kubelet.start()
    try:
        kubelet.set_pods([])
        assert client.list_blocking() == ()
    finally:
        kubelet.stop()
        client.close()


def test_a_list_of_megabytes_arrives_whole(tmp_path: Path) -> None:
    # Past every HTTP/2 window the client announces: the answer is acknowledged as it comes.
    pods = [PodAllocation("ml", f"trainer-{i}", (ContainerAllocation("main", (
        ContainerDevices("nvidia.com/gpu", tuple(f"GPU-{i}-{d:04d}" for d in range(40))),)),))
        for i in range(12_000)]
    with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.set_pods(pods)
        client = PodResourcesClient(kubelet.socket_path, timeout=30)
        try:
            assert client.list_blocking() == tuple(pods)
        finally:
            client.close()


def test_list_and_get_at_a_socket_path_longer_than_a_socket_address(tmp_path: Path) -> None:
    # 150 bytes: bound (the simulator's kubelet) and reached (the agent's gRPC client) through
    # the socket's directory (gpu_otel_agent.unix_socket); a plain bind fails past 107.
    name = "kubelet.sock"
    directory = tmp_path / ("d" * (150 - len(str(tmp_path)) - len(name) - 2))
    path = directory / name
    assert len(str(path)) == 150
    with FakeKubelet(path) as kubelet:
        assert path.is_socket()
        kubelet.set_pods([POD])
        client = PodResourcesClient(path, timeout=2)
        assert client.list_blocking() == (POD,)
        assert client.get_blocking("ml", "trainer-0") == POD
        client.close()
    assert not path.exists()
