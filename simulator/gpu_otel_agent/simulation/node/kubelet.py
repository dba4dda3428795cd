"""A kubelet pod-resources v1 server for the simulated node: real gRPC over a unix socket.

The simulated node starts one for a scenario whose processes name their pods, so the agent
shows pod names off Kubernetes; the tests start their own to change pods at will.

It registers the real service and method names (``/v1.PodResourcesLister/List`` …) with the
real message encoding: messages and names come from the code generated from Kubernetes' own
``api.proto`` (vendored in ``gpu_otel_agent/plugins/kubernetes``), so the agent's client cannot
tell it from a
kubelet, and a field the agent got wrong would not round-trip here either. Tests change its
pods at any time and can stop it (socket removed) and start it again (a kubelet restart).
``without_claims`` answers as a kubelet that predates ``dynamic_resources`` (before 1.27 or
the gate off): the field is never set.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path

import grpc

from gpu_otel_agent import unix_socket
from gpu_otel_agent.plugins.kubernetes import api_pb2
from gpu_otel_agent.workloads.pods import PodAllocation


def _fill(message: api_pb2.PodResources, pod: PodAllocation, without_claims: bool) -> None:
    message.name = pod.name
    message.namespace = pod.namespace
    for container in pod.containers:
        c = message.containers.add(name=container.name)
        for devices in container.devices:
            c.devices.add(resource_name=devices.resource_name,
                          device_ids=list(devices.device_ids))
        for claim in () if without_claims else container.claims:
            # What the kubelet knows of a claim; ``device_ids`` are the agent's own findings.
            dynamic = c.dynamic_resources.add(claim_name=claim.name,
                                              claim_namespace=claim.namespace)
            for device in claim.devices:
                resource = dynamic.claim_resources.add(
                    driver_name=device.driver, pool_name=device.pool,
                    device_name=device.device)
                if device.share_id is not None:
                    resource.share_id = device.share_id
                for name in device.cdi_devices:
                    resource.cdi_devices.add(name=name)


class PodResourcesServer:
    def __init__(self, socket_path: Path, with_get: bool = True,
                 without_claims: bool = False) -> None:
        self.socket_path = socket_path
        self._with_get = with_get
        self.without_claims = without_claims
        self._lock = threading.Lock()
        self._pods: tuple[PodAllocation, ...] = ()
        self._server: grpc.Server | None = None
        self.calls: dict[str, int] = {"List": 0, "Get": 0, "GetAllocatableResources": 0}

    def set_pods(self, pods: Iterable[PodAllocation]) -> None:
        with self._lock:
            self._pods = tuple(pods)

    def _list(self, request: api_pb2.ListPodResourcesRequest,
              context: grpc.ServicerContext) -> api_pb2.ListPodResourcesResponse:
        self.calls["List"] += 1
        response = api_pb2.ListPodResourcesResponse()
        with self._lock:
            for pod in self._pods:
                _fill(response.pod_resources.add(), pod, self.without_claims)
        return response

    def _get(self, request: api_pb2.GetPodResourcesRequest,
             context: grpc.ServicerContext) -> api_pb2.GetPodResourcesResponse:
        self.calls["Get"] += 1
        with self._lock:
            found = [p for p in self._pods
                     if p.name == request.pod_name and p.namespace == request.pod_namespace]
        if not found:
            context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")
        response = api_pb2.GetPodResourcesResponse()
        _fill(response.pod_resources, found[0], self.without_claims)
        return response

    def _allocatable(self, request: api_pb2.AllocatableResourcesRequest,
                     context: grpc.ServicerContext) -> api_pb2.AllocatableResourcesResponse:
        self.calls["GetAllocatableResources"] += 1
        return api_pb2.AllocatableResourcesResponse()

    def start(self) -> None:
        handlers = {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=api_pb2.ListPodResourcesRequest.FromString,
                response_serializer=api_pb2.ListPodResourcesResponse.SerializeToString),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                self._allocatable,
                request_deserializer=api_pb2.AllocatableResourcesRequest.FromString,
                response_serializer=api_pb2.AllocatableResourcesResponse.SerializeToString),
        }
        if self._with_get:
            handlers["Get"] = grpc.unary_unary_rpc_method_handler(
                self._get, request_deserializer=api_pb2.GetPodResourcesRequest.FromString,
                response_serializer=api_pb2.GetPodResourcesResponse.SerializeToString)
        service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
        assert set(handlers) <= set(service.methods_by_name)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service.full_name, handlers),))
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        # gRPC binds here; a path longer than a socket address holds is bound through its
        # directory (``unix_socket``), the socket file made at ``socket_path`` itself.
        with unix_socket.address(self.socket_path) as where:
            server.add_insecure_port(f"unix://{where}")
            server.start()
        self._server = server

    def stop(self) -> None:
        """Like a kubelet going away: the server stops and its socket is removed."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait()
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> PodResourcesServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
