"""The kubelet pod-resources v1 messages, built at import from their descriptor.

Mirrors ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`` (package ``v1``, service
``PodResourcesLister``) field for field, so the wire format is the kubelet's. Building the
descriptor in code needs neither protoc nor generated modules at install time; the classes are
untyped, so the rest of the plugin only touches them through
:mod:`gpu_otel_agent.plugins.kubernetes.convert`.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "v1"
SERVICE = "v1.PodResourcesLister"
LIST = f"/{SERVICE}/List"
GET = f"/{SERVICE}/Get"
ALLOCATABLE = f"/{SERVICE}/GetAllocatableResources"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _INT64, _UINT64, _MESSAGE = _F.TYPE_STRING, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_MESSAGE
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# message name -> ((field name, number, type, label, message type or ""), ...)
_MESSAGES: dict[str, tuple[tuple[str, int, int, int, str], ...]] = {
    "AllocatableResourcesRequest": (),
    "AllocatableResourcesResponse": (
        ("devices", 1, _MESSAGE, _MANY, "ContainerDevices"),
        ("cpu_ids", 2, _INT64, _MANY, ""),
        ("memory", 3, _MESSAGE, _MANY, "ContainerMemory"),
    ),
    "ListPodResourcesRequest": (),
    "ListPodResourcesResponse": (("pod_resources", 1, _MESSAGE, _MANY, "PodResources"),),
    "PodResources": (
        ("name", 1, _STRING, _ONE, ""),
        ("namespace", 2, _STRING, _ONE, ""),
        ("containers", 3, _MESSAGE, _MANY, "ContainerResources"),
    ),
    "ContainerResources": (
        ("name", 1, _STRING, _ONE, ""),
        ("devices", 2, _MESSAGE, _MANY, "ContainerDevices"),
        ("cpu_ids", 3, _INT64, _MANY, ""),
        ("memory", 4, _MESSAGE, _MANY, "ContainerMemory"),
        ("dynamic_resources", 5, _MESSAGE, _MANY, "DynamicResource"),
    ),
    "ContainerMemory": (
        ("memory_type", 1, _STRING, _ONE, ""),
        ("size", 2, _UINT64, _ONE, ""),
        ("topology", 3, _MESSAGE, _ONE, "TopologyInfo"),
    ),
    "ContainerDevices": (
        ("resource_name", 1, _STRING, _ONE, ""),
        ("device_ids", 2, _STRING, _MANY, ""),
        ("topology", 3, _MESSAGE, _ONE, "TopologyInfo"),
    ),
    "TopologyInfo": (("nodes", 1, _MESSAGE, _MANY, "NUMANode"),),
    "NUMANode": (("ID", 1, _INT64, _ONE, ""),),
    "DynamicResource": (
        ("class_name", 1, _STRING, _ONE, ""),
        ("claim_name", 2, _STRING, _ONE, ""),
        ("claim_namespace", 3, _STRING, _ONE, ""),
        ("claim_resources", 4, _MESSAGE, _MANY, "ClaimResource"),
    ),
    "ClaimResource": (("CDIDevices", 1, _MESSAGE, _MANY, "CDIDevice"),),
    "CDIDevice": (("name", 1, _STRING, _ONE, ""),),
    "GetPodResourcesRequest": (
        ("pod_name", 1, _STRING, _ONE, ""),
        ("pod_namespace", 2, _STRING, _ONE, ""),
    ),
    "GetPodResourcesResponse": (("pod_resources", 1, _MESSAGE, _ONE, "PodResources"),),
}
_METHODS = (
    ("GetAllocatableResources", "AllocatableResourcesRequest", "AllocatableResourcesResponse"),
    ("List", "ListPodResourcesRequest", "ListPodResourcesResponse"),
    ("Get", "GetPodResourcesRequest", "GetPodResourcesResponse"),
)


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="k8s.io/kubelet/pkg/apis/podresources/v1/api.proto", package=PACKAGE,
        syntax="proto3",
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".{PACKAGE}.{type_name}"
    service = proto.service.add(name="PodResourcesLister")
    for method, request, response in _METHODS:
        service.method.add(name=method, input_type=f".{PACKAGE}.{request}",
                           output_type=f".{PACKAGE}.{response}")
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def message(name: str) -> Any:
    """The generated class of message ``name`` (e.g. ``ListPodResourcesResponse``)."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


ListRequest = message("ListPodResourcesRequest")
ListResponse = message("ListPodResourcesResponse")
GetRequest = message("GetPodResourcesRequest")
GetResponse = message("GetPodResourcesResponse")
AllocatableRequest = message("AllocatableResourcesRequest")
AllocatableResponse = message("AllocatableResourcesResponse")
PodResources = message("PodResources")
