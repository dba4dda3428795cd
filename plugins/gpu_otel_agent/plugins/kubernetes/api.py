"""The kubelet pod-resources v1 API: messages generated from Kubernetes' own ``api.proto``.

``api.proto`` next to this file is vendored unmodified from ``k8s.io/kubelet`` (tag and blob id
in its header); ``api_pb2.py`` / ``api_pb2.pyi`` are generated from it at development time by
``python -m gpu_otel_agent.plugins.kubernetes.regenerate`` and committed. The service's method
paths are read from the same descriptor, so message layout and RPC names have one source.

The agent itself does not import this module (it would load protobuf's runtime, 3.7 MiB
resident): its client writes and reads the messages by hand (:mod:`.wire`), checked against
these classes by the tests. They serve the simulated node's kubelet and the tests.
"""

from __future__ import annotations

from gpu_otel_agent.plugins.kubernetes import api_pb2

_SERVICE = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
SERVICE = _SERVICE.full_name  # "v1.PodResourcesLister"


def method_path(name: str) -> str:
    """The gRPC path of one method of the service, e.g. ``/v1.PodResourcesLister/List``."""
    return f"/{SERVICE}/{_SERVICE.methods_by_name[name].name}"


LIST = method_path("List")
GET = method_path("Get")
ALLOCATABLE = method_path("GetAllocatableResources")

ListRequest = api_pb2.ListPodResourcesRequest
ListResponse = api_pb2.ListPodResourcesResponse
GetRequest = api_pb2.GetPodResourcesRequest
GetResponse = api_pb2.GetPodResourcesResponse
AllocatableRequest = api_pb2.AllocatableResourcesRequest
AllocatableResponse = api_pb2.AllocatableResourcesResponse
PodResources = api_pb2.PodResources
