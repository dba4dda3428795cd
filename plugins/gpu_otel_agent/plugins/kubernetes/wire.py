"""The pod-resources v1 messages the agent sends and reads, written and read by hand.

The generated classes (``api_pb2``) load protobuf's runtime, 3.7 MiB resident, on every node
with a kubelet (issue 41). The agent sends two requests (``List``: no fields; ``Get``: two
strings) and reads only names, devices and DRA claims of the answers, so this module does that
on the protocol buffers wire format directly. Everything else of an answer (topology, CPU ids,
memory, fields of later kubelets) is skipped by its wire type, as protobuf skips unknown fields.

What guards it: ``tests/unit/workloads/test_podresources_wire.py`` builds random messages with
the generated classes of the vendored ``api.proto`` (unknown fields of every wire type
included) and compares what protobuf serializes with what this module reads, and parses the
requests written here with the generated classes; the field numbers and method paths below are
compared with ``api_pb2``'s descriptor there too.

Bytes that are not a valid message raise :class:`MalformedMessage` (never an ``IndexError``,
never a hang: each step moves forward, nested lengths are bounded by their parent). One
deliberate difference from protobuf: a known field with a wire type other than its own is an
error here, where protobuf keeps it as an unknown field and reads the field as empty (a pod
would lose its name without a word).
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE = "v1.PodResourcesLister"
LIST = f"/{SERVICE}/List"
GET = f"/{SERVICE}/Get"

_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5
_MAX_FIELD = (1 << 29) - 1
_DEPTH = 100  # protobuf's own default recursion limit; bounds nested groups here


class MalformedMessage(ValueError):
    """Bytes that are not a pod-resources message (truncated, a bad tag, a bad length...)."""


@dataclass(frozen=True, slots=True)
class ClaimResource:
    cdi_devices: tuple[str, ...] = ()  # each CDIDevice's name
    driver_name: str = ""
    pool_name: str = ""
    device_name: str = ""
    share_id: str | None = None  # ``optional``: None when absent, as ``HasField`` says


@dataclass(frozen=True, slots=True)
class DynamicResource:
    claim_name: str = ""
    claim_namespace: str = ""
    claim_resources: tuple[ClaimResource, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    resource_name: str = ""
    device_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerResources:
    name: str = ""
    devices: tuple[ContainerDevices, ...] = ()
    dynamic_resources: tuple[DynamicResource, ...] = ()


@dataclass(frozen=True, slots=True)
class PodResources:
    name: str = ""
    namespace: str = ""
    containers: tuple[ContainerResources, ...] = ()


# --- requests ---------------------------------------------------------------------------------

LIST_REQUEST = b""  # ListPodResourcesRequest has no fields


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(number: int, value: str) -> bytes:
    if not value:  # proto3: a field at its default is not written
        return b""
    data = value.encode()
    return _varint(number << 3 | _LEN) + _varint(len(data)) + data


def get_request(namespace: str, name: str) -> bytes:
    """GetPodResourcesRequest{pod_name = 1, pod_namespace = 2}."""
    return _string(1, name) + _string(2, namespace)


# --- reading ----------------------------------------------------------------------------------

def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise MalformedMessage(f"truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos
        shift += 7
        if shift >= 70:  # ten bytes is the most a 64-bit value takes
            raise MalformedMessage(f"varint longer than ten bytes ending at byte {pos}")


def _fields(data: bytes, pos: int, end: int) -> list[tuple[int, int, int]]:
    """(field number, start, end) of each field in ``data[pos:end]``, in order.

    A length-delimited field gives its bytes; a field of another wire type is checked and
    skipped (the agent reads no number fields) and given as ``(number, -wire type - 1, 0)``,
    so that a reader expecting bytes under that number refuses it (``_str``, ``_sub``)."""
    found: list[tuple[int, int, int]] = []
    while pos < end:
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _read_varint(data, pos, end)
            if key > 0xFFFF_FFFF:
                raise MalformedMessage(f"a tag wider than 32 bits before byte {pos}")
        number, kind = key >> 3, key & 7
        if number == 0:
            raise MalformedMessage(f"field number 0 before byte {pos}")
        if kind == _LEN:
            length = data[pos] if pos < end else 0x80
            if length < 0x80:
                pos += 1
            else:
                length, pos = _read_varint(data, pos, end)
            stop = pos + length
            if stop > end:
                raise MalformedMessage(f"field {number}: {length} bytes at byte {pos}, "
                                       f"only {end - pos} left")
            found.append((number, pos, stop))
            pos = stop
            continue
        found.append((number, -kind - 1, 0))  # a marker: the caller rejects it if known
        pos = _skip(data, pos, end, key, 0)
    return found


def _skip(data: bytes, pos: int, end: int, key: int, depth: int) -> int:
    """Past the value of a field that is not length-delimited (its tag ``key`` read)."""
    number, kind = key >> 3, key & 7
    if kind == _VARINT:
        return _read_varint(data, pos, end)[1]
    if kind in (_I64, _I32):
        pos += 8 if kind == _I64 else 4
        if pos > end:
            raise MalformedMessage(f"field {number}: truncated fixed-width value")
        return pos
    if kind == _SGROUP:
        return _skip_group(data, pos, end, number, depth + 1)
    if kind == _EGROUP:
        raise MalformedMessage(f"field {number}: an end of group without its start")
    raise MalformedMessage(f"field {number}: wire type {kind} does not exist")


def _skip_group(data: bytes, pos: int, end: int, number: int, depth: int) -> int:
    """Past the END_GROUP of group ``number`` (a proto2 encoding; only unknown fields here)."""
    if depth > _DEPTH:
        raise MalformedMessage(f"groups nested deeper than {_DEPTH}")
    while True:
        if pos >= end:
            raise MalformedMessage(f"group {number}: truncated, no end of group")
        key, pos = _read_varint(data, pos, end)
        inner, kind = key >> 3, key & 7
        if key > 0xFFFF_FFFF or inner == 0:
            raise MalformedMessage(f"a bad tag before byte {pos}")
        if kind == _EGROUP:
            if inner != number:
                raise MalformedMessage(f"group {number} ended as group {inner}")
            return pos
        if kind == _LEN:
            length, pos = _read_varint(data, pos, end)
            if pos + length > end:
                raise MalformedMessage(f"field {inner}: {length} bytes at byte {pos}, "
                                       f"only {end - pos} left")
            pos += length
        else:
            pos = _skip(data, pos, end, key, depth)


def _str(data: bytes, start: int, stop: int, number: int) -> str:
    if start < 0:
        raise MalformedMessage(f"field {number}: wire type {-start - 1}, a string expected")
    try:
        return data[start:stop].decode()
    except UnicodeDecodeError as error:  # protobuf refuses proto3 strings that are not UTF-8
        raise MalformedMessage(f"field {number}: a string that is not UTF-8") from error


def _sub(start: int, number: int) -> None:
    if start < 0:
        raise MalformedMessage(f"field {number}: wire type {-start - 1}, a message expected")


def _claim_resource(data: bytes, pos: int, end: int) -> ClaimResource:
    cdi: list[str] = []
    driver = pool = device = ""
    share: str | None = None
    for number, start, stop in _fields(data, pos, end):
        if number == 1:  # CDIDevice{name = 1}
            _sub(start, 1)
            name = ""
            for inner, s, e in _fields(data, start, stop):
                if inner == 1:
                    name = _str(data, s, e, 1)
            cdi.append(name)
        elif number == 2:
            driver = _str(data, start, stop, 2)
        elif number == 3:
            pool = _str(data, start, stop, 3)
        elif number == 4:
            device = _str(data, start, stop, 4)
        elif number == 5:
            share = _str(data, start, stop, 5)
    return ClaimResource(tuple(cdi), driver, pool, device, share)


def _dynamic_resource(data: bytes, pos: int, end: int) -> DynamicResource:
    claim = namespace = ""
    resources: list[ClaimResource] = []
    for number, start, stop in _fields(data, pos, end):
        if number == 2:
            claim = _str(data, start, stop, 2)
        elif number == 3:
            namespace = _str(data, start, stop, 3)
        elif number == 4:
            _sub(start, 4)
            resources.append(_claim_resource(data, start, stop))
    return DynamicResource(claim, namespace, tuple(resources))


def _devices(data: bytes, pos: int, end: int) -> ContainerDevices:
    resource = ""
    ids: list[str] = []
    for number, start, stop in _fields(data, pos, end):
        if number == 1:
            resource = _str(data, start, stop, 1)
        elif number == 2:
            ids.append(_str(data, start, stop, 2))
        elif number == 3:  # TopologyInfo: not read, but it must be a message
            _sub(start, 3)
    return ContainerDevices(resource, tuple(ids))


def _container(data: bytes, pos: int, end: int) -> ContainerResources:
    name = ""
    devices: list[ContainerDevices] = []
    dynamic: list[DynamicResource] = []
    for number, start, stop in _fields(data, pos, end):
        if number == 1:
            name = _str(data, start, stop, 1)
        elif number == 2:
            _sub(start, 2)
            devices.append(_devices(data, start, stop))
        elif number == 5:
            _sub(start, 5)
            dynamic.append(_dynamic_resource(data, start, stop))
        # 3 cpu_ids (int64, packed or not) and 4 memory are not read
    return ContainerResources(name, tuple(devices), tuple(dynamic))


def _pod(data: bytes, pos: int, end: int) -> PodResources:
    name = namespace = ""
    containers: list[ContainerResources] = []
    for number, start, stop in _fields(data, pos, end):
        if number == 1:
            name = _str(data, start, stop, 1)
        elif number == 2:
            namespace = _str(data, start, stop, 2)
        elif number == 3:
            _sub(start, 3)
            containers.append(_container(data, start, stop))
    return PodResources(name, namespace, tuple(containers))


def list_response(data: bytes) -> tuple[PodResources, ...]:
    """ListPodResourcesResponse{repeated PodResources pod_resources = 1}."""
    pods: list[PodResources] = []
    for number, start, stop in _fields(data, 0, len(data)):
        if number == 1:
            _sub(start, 1)
            pods.append(_pod(data, start, stop))
    return tuple(pods)


def get_response(data: bytes) -> PodResources:
    """GetPodResourcesResponse{PodResources pod_resources = 1}; an absent one reads as empty.

    A singular message field sent more than once is merged, as protobuf does: its pieces read
    as one message (later strings win, repeated fields add up)."""
    pieces: list[bytes] = []
    for number, start, stop in _fields(data, 0, len(data)):
        if number == 1:
            _sub(start, 1)
            pieces.append(data[start:stop])
    joined = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    return _pod(joined, 0, len(joined))
