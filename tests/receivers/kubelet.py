"""The test kubelet: the simulated node's pod-resources server (real gRPC over a unix socket,
messages from Kubernetes' own ``api.proto``), under the name the tests use."""

from __future__ import annotations

from gpu_otel_agent.simulation.node.kubelet import PodResourcesServer as FakeKubelet

__all__ = ["FakeKubelet"]
