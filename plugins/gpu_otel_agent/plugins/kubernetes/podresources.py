"""A client of the kubelet pod-resources v1 API over its unix socket.

Calls are blocking unary gRPC on a worker thread (``asyncio.to_thread``), each with a deadline,
so a wedged kubelet never stalls the loop. They go through the agent's own small gRPC client
(``gpu_otel_agent.grpc.unary_client``: the pure-Python ``h2`` over the unix socket, h2c with
the authority ``localhost`` as gRPC clients send it), not grpcio, whose C core and background
threads cost the running agent more memory and idle CPU than the rest of its export (issue 17).
The messages are written and read by hand (:mod:`.wire`), without protobuf's runtime (issue 41).
After a failure the connection is dropped and a fresh one is made on the next call, so names
come back as soon as a restarted kubelet answers. ``Get`` (Kubernetes 1.27+, behind the
``KubeletPodResourcesGet`` gate before 1.34) is used when present; an UNIMPLEMENTED answer
turns it off for the run.

Each container's ``dynamic_resources`` (DRA claims) are read too and tied to GPUs by
:class:`~gpu_otel_agent.plugins.kubernetes.dra_claims.ClaimMapper`. A kubelet that predates the
field (before 1.27, or its ``KubeletPodResourcesDynamicResources`` gate off before 1.34) sends
none, which reads as no claims: that is said once, and attribution stays as it was.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gpu_otel_agent.grpc.status import GrpcError, StatusCode
from gpu_otel_agent.grpc.unary_client import GrpcClient
from gpu_otel_agent.plugins.kubernetes import wire
from gpu_otel_agent.plugins.kubernetes.dra_claims import ClaimMapper
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation

log = logging.getLogger(__name__)
_Response = TypeVar("_Response")
MAX_MESSAGE = 16 * 1024 * 1024  # the kubelet's own limit for this API


class PodResourcesUnavailable(Exception):
    """The kubelet could not be asked (no socket, restarting, refused)."""


def _pod(message: wire.PodResources, claims: ClaimMapper | None) -> PodAllocation:
    return PodAllocation(
        namespace=message.namespace,
        name=message.name,
        containers=tuple(
            ContainerAllocation(
                name=container.name,
                devices=tuple(
                    ContainerDevices(d.resource_name, d.device_ids) for d in container.devices
                ),
                claims=tuple(claims.claim(c) for c in container.dynamic_resources)
                if claims is not None else (),
            )
            for container in message.containers
        ),
    )


class PodResourcesClient:
    def __init__(self, socket_path: Path, timeout: float = 5.0,
                 claims: ClaimMapper | None = None) -> None:
        self.socket_path = socket_path
        self._timeout = timeout
        self._client: GrpcClient | None = None
        self._get_supported = True
        self._claims = claims
        self._claims_seen: bool | None = None  # None: no answer yet

    def _require_socket(self) -> None:
        if not self.socket_path.exists():
            self.close()
            raise PodResourcesUnavailable(f"no kubelet socket at {self.socket_path}")

    def _call(self, method: str, request: bytes,
              response: Callable[[bytes], _Response]) -> _Response:
        self._require_socket()
        if self._client is None:
            self._client = GrpcClient.unix(str(self.socket_path), max_receive=MAX_MESSAGE)
        name = method.rsplit("/", 1)[-1]
        try:
            answer = self._client.unary(method, request, self._timeout)
        except GrpcError as error:
            if error.code in (StatusCode.UNIMPLEMENTED, StatusCode.NOT_FOUND):
                raise
            self.close()
            raise PodResourcesUnavailable(
                f"kubelet pod-resources {name}: {error.code.name}") from error
        try:
            return response(answer)
        except wire.MalformedMessage as error:
            self.close()
            raise PodResourcesUnavailable(
                f"kubelet pod-resources {name}: an answer that does not parse ({error})"
            ) from error

    def list_blocking(self) -> tuple[PodAllocation, ...]:
        # Written and read by hand (``wire``): the generated messages would load protobuf's
        # runtime, 3.7 MiB resident, on every node with a kubelet (issue 41).
        response = self._call(wire.LIST, wire.LIST_REQUEST, wire.list_response)
        if self._claims is None:
            return tuple(_pod(p, None) for p in response)
        self._claims.refresh()
        pods = tuple(_pod(p, self._claims) for p in response)
        self._report_claims(any(c.claims for p in pods for c in p.containers))
        return pods

    def _report_claims(self, seen: bool) -> None:
        """One line, once, while no answer has carried a DRA claim (not per call)."""
        if seen or self._claims_seen is not None:
            self._claims_seen = self._claims_seen or seen
            return
        self._claims_seen = False
        log.info("kubelet pod-resources lists no DRA claims (dynamic_resources): none on "
                 "this node yet, or a kubelet before 1.27 or without the "
                 "KubeletPodResourcesDynamicResources gate; claimed GPUs keep their cgroup "
                 "identity and their processes' HOSTNAME for names")

    def get_blocking(self, namespace: str, name: str) -> PodAllocation | None:
        """One pod, or None where the kubelet has no ``Get`` (or no such pod)."""
        if not self._get_supported:
            return None
        try:
            response = self._call(wire.GET, wire.get_request(namespace, name), wire.get_response)
        except GrpcError as error:
            if error.code is StatusCode.UNIMPLEMENTED:
                self._get_supported = False
                log.info("kubelet pod-resources has no Get; using List only")
            return None
        if self._claims is not None:
            self._claims.refresh()
        return _pod(response, self._claims)

    async def list(self) -> tuple[PodAllocation, ...]:
        return await asyncio.to_thread(self.list_blocking)

    async def get(self, namespace: str, name: str) -> PodAllocation | None:
        return await asyncio.to_thread(self.get_blocking, namespace, name)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
