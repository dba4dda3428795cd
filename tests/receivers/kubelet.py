"""A test kubelet pod-resources v1 server: real gRPC over a unix socket.

It registers the real service and method names (``/v1.PodResourcesLister/List`` …) with the
real message encoding, so the agent's client cannot tell it from a kubelet. Tests change its
pods at any time and can stop it (socket removed) and start it again (a kubelet restart).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from gpu_otel_agent.plugins.kubernetes import api
from gpu_otel_agent.workloads.pods import PodAllocation


def _fill(message: Any, pod: PodAllocation) -> None:
    message.name = pod.name
    message.namespace = pod.namespace
    for container in pod.containers:
        c = message.containers.add(name=container.name)
        for devices in container.devices:
            c.devices.add(resource_name=devices.resource_name,
                          device_ids=list(devices.device_ids))


class FakeKubelet:
    def __init__(self, socket_path: Path, with_get: bool = True) -> None:
        self.socket_path = socket_path
        self._with_get = with_get
        self._lock = threading.Lock()
        self._pods: tuple[PodAllocation, ...] = ()
        self._server: grpc.Server | None = None
        self.calls: dict[str, int] = {"List": 0, "Get": 0, "GetAllocatableResources": 0}

    def set_pods(self, pods: Iterable[PodAllocation]) -> None:
        with self._lock:
            self._pods = tuple(pods)

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls["List"] += 1
        response = api.ListResponse()
        with self._lock:
            for pod in self._pods:
                _fill(response.pod_resources.add(), pod)
        return response

    def _get(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls["Get"] += 1
        with self._lock:
            found = [p for p in self._pods
                     if p.name == request.pod_name and p.namespace == request.pod_namespace]
        if not found:
            context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")
        response = api.GetResponse()
        _fill(response.pod_resources, found[0])
        return response

    def _allocatable(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls["GetAllocatableResources"] += 1
        return api.AllocatableResponse()

    def start(self) -> None:
        handlers = {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=api.ListRequest.FromString,
                response_serializer=api.ListResponse.SerializeToString),
            "GetAllocatableResources": grpc.unary_unary_rpc_method_handler(
                self._allocatable, request_deserializer=api.AllocatableRequest.FromString,
                response_serializer=api.AllocatableResponse.SerializeToString),
        }
        if self._with_get:
            handlers["Get"] = grpc.unary_unary_rpc_method_handler(
                self._get, request_deserializer=api.GetRequest.FromString,
                response_serializer=api.GetResponse.SerializeToString)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(api.SERVICE, handlers),))
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        server.add_insecure_port(f"unix://{self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Like a kubelet going away: the server stops and its socket is removed."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait()
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> FakeKubelet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
