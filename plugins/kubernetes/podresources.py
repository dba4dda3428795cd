"""A client of the kubelet pod-resources v1 API over its unix socket.

Calls are blocking gRPC on a worker thread (``asyncio.to_thread``), each with a deadline, so a
wedged kubelet never stalls the loop. After a failure the channel is dropped and a fresh one is
made on the next call: gRPC's own reconnect backoff would otherwise keep names away for up to
two minutes after a kubelet restart. ``Get`` (Kubernetes 1.27+, behind the
``KubeletPodResourcesGet`` gate before 1.34) is used when present; an UNIMPLEMENTED answer
turns it off for the run.

Each container's ``dynamic_resources`` (DRA claims) are read too and tied to GPUs by
:class:`~gpu_otel_agent.plugins.kubernetes.claims.ClaimMapper`. A kubelet that predates the
field (before 1.27, or its ``KubeletPodResourcesDynamicResources`` gate off before 1.34) sends
none, which reads as no claims: that is said once, and attribution stays as it was.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from gpu_otel_agent.plugins.kubernetes import api
from gpu_otel_agent.plugins.kubernetes.claims import ClaimMapper
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation

log = logging.getLogger(__name__)
_Response = TypeVar("_Response", bound=Message)
MAX_MESSAGE = 16 * 1024 * 1024  # the kubelet's own limit for this API


class PodResourcesUnavailable(Exception):
    """The kubelet could not be asked (no socket, restarting, refused)."""


def _serialize(message: Message) -> bytes:
    # Not ``Message.SerializeToString``: the C-backed classes override it, the base raises.
    return message.SerializeToString()


def _pod(message: api.PodResources, claims: ClaimMapper | None) -> PodAllocation:
    return PodAllocation(
        namespace=str(message.namespace),
        name=str(message.name),
        containers=tuple(
            ContainerAllocation(
                name=str(container.name),
                devices=tuple(
                    ContainerDevices(str(d.resource_name), tuple(str(i) for i in d.device_ids))
                    for d in container.devices
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
        self._channel: grpc.Channel | None = None
        self._get_supported = True
        self._claims = claims
        self._claims_seen: bool | None = None  # None: no answer yet

    def _stub(self, method: str, response: type[Message]) -> Any:
        if self._channel is None:
            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path}",
                options=[("grpc.max_receive_message_length", MAX_MESSAGE)],
            )
        return self._channel.unary_unary(
            method, request_serializer=_serialize,
            response_deserializer=response.FromString,
        )

    def _call(self, method: str, request: Message, response: type[_Response]) -> _Response:
        if not self.socket_path.exists():
            self.close()
            raise PodResourcesUnavailable(f"no kubelet socket at {self.socket_path}")
        try:
            answer: _Response = self._stub(method, response)(
                request, timeout=self._timeout, wait_for_ready=False)
            return answer
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND):
                raise
            self.close()
            raise PodResourcesUnavailable(
                f"kubelet pod-resources {method.rsplit('/', 1)[-1]}: "
                f"{code.name if code else error}") from error

    def list_blocking(self) -> tuple[PodAllocation, ...]:
        response = self._call(api.LIST, api.ListRequest(), api.ListResponse)
        if self._claims is None:
            return tuple(_pod(p, None) for p in response.pod_resources)
        self._claims.refresh()
        pods = tuple(_pod(p, self._claims) for p in response.pod_resources)
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
        request = api.GetRequest(pod_name=name, pod_namespace=namespace)
        try:
            response = self._call(api.GET, request, api.GetResponse)
        except grpc.RpcError as error:
            if isinstance(error, grpc.Call) and error.code() is grpc.StatusCode.UNIMPLEMENTED:
                self._get_supported = False
                log.info("kubelet pod-resources has no Get; using List only")
            return None
        if self._claims is not None:
            self._claims.refresh()
        return _pod(response.pod_resources, self._claims)

    async def list(self) -> tuple[PodAllocation, ...]:
        return await asyncio.to_thread(self.list_blocking)

    async def get(self, namespace: str, name: str) -> PodAllocation | None:
        return await asyncio.to_thread(self.get_blocking, namespace, name)

    def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
