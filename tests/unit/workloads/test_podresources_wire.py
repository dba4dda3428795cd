"""The hand-written pod-resources wire format (``kubernetes.wire``) against Kubernetes' own.

The reference is the code generated from the vendored ``api.proto`` (``api_pb2``, checked
against upstream in test_podresources_api.py): random answers built with it, unknown fields of
every wire type merged in, are serialized by protobuf and must read by hand to what protobuf
itself reads from the same bytes; requests written by hand must parse back to equal messages;
broken bytes must raise ``MalformedMessage`` (nothing else, and always end).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.message import DecodeError, Message

from gpu_otel_agent.plugins.kubernetes import api, api_pb2, wire

SEEDS = range(40)
ALPHABET = "abcXYZ09-._/:" + "äπ中🙂"


def _text(rng: random.Random, empty: float = 0.2) -> str:
    if rng.random() < empty:
        return ""
    return "".join(rng.choice(ALPHABET) for _ in range(rng.choice((1, 5, 12, 40, 200))))


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _unknown(rng: random.Random, depth: int = 0) -> bytes:
    """Fields of numbers no pod-resources message uses, of each wire type (groups nested)."""
    out = b""
    for _ in range(rng.randrange(4)):
        number = rng.choice((6, 7, 15, 16, 99, 2047, 2048, (1 << 29) - 1))
        kind = rng.choice((0, 1, 2, 3, 5) if depth < 3 else (0, 1, 2, 5))
        out += _varint(number << 3 | kind)
        if kind == 0:
            out += _varint(rng.choice((0, 1, 127, 128, 300, (1 << 63) - 1, (1 << 64) - 1)))
        elif kind == 1:
            out += struct.pack("<q", rng.randrange(-(1 << 63), 1 << 63))
        elif kind == 5:
            out += struct.pack("<i", rng.randrange(-(1 << 31), 1 << 31))
        elif kind == 2:
            blob = rng.randbytes(rng.choice((0, 1, 127, 128, 1000)))
            out += _varint(len(blob)) + blob
        else:
            out += _unknown(rng, depth + 1) + _varint(number << 3 | 4)
    return out


def _maybe_unknown(message: Any, rng: random.Random) -> None:
    if rng.random() < 0.3:
        message.MergeFromString(_unknown(rng))  # kept by protobuf, serialized again


def _topology(message: Any, rng: random.Random) -> None:
    if rng.random() < 0.5:
        for _ in range(rng.randrange(3)):
            message.topology.nodes.add(ID=rng.randrange(-5, 1 << 40))
        _maybe_unknown(message.topology, rng)


def _pod(message: Any, rng: random.Random, large: bool) -> None:
    message.name, message.namespace = _text(rng), _text(rng)
    for _ in range(rng.randrange(4)):
        container = message.containers.add(name=_text(rng))
        for _ in range(rng.randrange(4)):
            devices = container.devices.add(resource_name=_text(rng))
            count = rng.choice((0, 1, 3, 2000 if large else 8))
            devices.device_ids.extend(_text(rng, 0.05) for _ in range(count))
            _topology(devices, rng)
            _maybe_unknown(devices, rng)
        container.cpu_ids.extend(rng.randrange(-(1 << 63), 1 << 63)
                                 for _ in range(rng.choice((0, 1, 64))))
        for _ in range(rng.randrange(3)):
            memory = container.memory.add(memory_type=_text(rng), size=rng.randrange(1 << 64))
            _topology(memory, rng)
        for _ in range(rng.randrange(3)):
            dynamic = container.dynamic_resources.add(claim_name=_text(rng),
                                                      claim_namespace=_text(rng))
            for _ in range(rng.randrange(3)):
                resource = dynamic.claim_resources.add(
                    driver_name=_text(rng), pool_name=_text(rng), device_name=_text(rng))
                if rng.random() < 0.5:
                    resource.share_id = _text(rng)  # "" set is not the same as absent
                for _ in range(rng.randrange(3)):
                    cdi = resource.cdi_devices.add(name=_text(rng))
                    _maybe_unknown(cdi, rng)
                _maybe_unknown(resource, rng)
            _maybe_unknown(dynamic, rng)
        _maybe_unknown(container, rng)
    _maybe_unknown(message, rng)


def _list(rng: random.Random, large: bool = False) -> bytes:
    response = api.ListResponse()
    for _ in range(rng.choice((0, 1, 3, 20))):
        _pod(response.pod_resources.add(), rng, large)
    _maybe_unknown(response, rng)
    return response.SerializeToString()


# What the agent reads, taken from protobuf's own parse of the same bytes.

def _expected_pod(pod: Any) -> wire.PodResources:
    return wire.PodResources(pod.name, pod.namespace, tuple(
        wire.ContainerResources(
            c.name,
            tuple(wire.ContainerDevices(d.resource_name, tuple(d.device_ids)) for d in c.devices),
            tuple(wire.DynamicResource(r.claim_name, r.claim_namespace, tuple(
                wire.ClaimResource(tuple(x.name for x in cr.cdi_devices), cr.driver_name,
                                   cr.pool_name, cr.device_name,
                                   cr.share_id if cr.HasField("share_id") else None)
                for cr in r.claim_resources)) for r in c.dynamic_resources))
        for c in pod.containers))


def _expected_list(data: bytes) -> tuple[wire.PodResources, ...]:
    return tuple(_expected_pod(p) for p in api.ListResponse.FromString(data).pod_resources)


def _expected_get(data: bytes) -> wire.PodResources:
    return _expected_pod(api.GetResponse.FromString(data).pod_resources)


@pytest.mark.parametrize("seed", SEEDS)
def test_list_answers_read_as_protobuf_reads_them(seed: int) -> None:
    data = _list(random.Random(seed), large=seed % 10 == 0)
    assert wire.list_response(data) == _expected_list(data)


def test_the_random_answers_hold_what_the_test_means_them_to() -> None:
    """The generator reaches every field the agent reads, and unknown fields of each type."""
    rng = random.Random(7)
    datas = [_list(rng) for _ in range(30)]
    pods = [p for d in datas for p in wire.list_response(d)]
    resources = [r for p in pods for c in p.containers for d in c.dynamic_resources
                 for r in d.claim_resources]
    assert any(c.devices and c.devices[0].device_ids for p in pods for c in p.containers)
    assert {r.share_id is None for r in resources} == {True, False}
    assert any(r.share_id == "" for r in resources)
    assert any(r.cdi_devices for r in resources)
    unknown = [u for d in datas for u in _unknown_fields(api.ListResponse.FromString(d))]
    assert set(unknown) >= {0, 1, 2, 3, 5}


def _unknown_fields(message: Any) -> list[int]:
    """Wire types of the unknown fields kept anywhere in ``message`` (protobuf's view)."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    found = UnknownFieldSet(message)
    kinds = [found[i].wire_type for i in range(len(found))]
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        values = [value] if isinstance(value, Message) else value
        for item in values:
            kinds.extend(_unknown_fields(item))
    return kinds


@pytest.mark.parametrize("seed", SEEDS[:10])
def test_get_answers_read_as_protobuf_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    response = api.GetResponse()
    if seed % 3:  # otherwise absent: reads as an empty pod, as protobuf's default does
        _pod(response.pod_resources, rng, large=False)
    data = response.SerializeToString()
    assert wire.get_response(data) == _expected_get(data)
    # The same field twice merges (strings: the last; repeated fields: both), as in protobuf.
    other = api.GetResponse()
    _pod(other.pod_resources, rng, large=False)
    twice = data + other.SerializeToString()
    assert wire.get_response(twice) == _expected_get(twice)


@pytest.mark.parametrize(("namespace", "name"), [
    ("ml", "trainer-0"), ("", "p"), ("ns", ""), ("", ""), ("ä中", "🙂" * 100), ("n", "x" * 300)])
def test_get_requests_parse_as_the_generated_message(namespace: str, name: str) -> None:
    data = wire.get_request(namespace, name)
    expected = api.GetRequest(pod_name=name, pod_namespace=namespace)
    assert api.GetRequest.FromString(data) == expected
    assert data == expected.SerializeToString()


def test_list_request_and_method_paths_are_the_descriptors() -> None:
    assert api.ListRequest().SerializeToString() == wire.LIST_REQUEST
    assert api.ListRequest.FromString(wire.LIST_REQUEST) == api.ListRequest()
    assert (wire.SERVICE, wire.LIST, wire.GET) == (api.SERVICE, api.LIST, api.GET)


def _agrees_or_refuses(read: Callable[[bytes], object], expected: Callable[[bytes], object],
                       data: bytes, *, refuse_with_protobuf: bool) -> None:
    """Where protobuf reads ``data`` we read the same or refuse; where it refuses, we refuse
    (``refuse_with_protobuf``) or may read what we skip unchecked (mutations)."""
    try:
        want: object = expected(data)
    except DecodeError:
        want = DecodeError
    try:
        got: object = read(data)
    except wire.MalformedMessage:
        got = wire.MalformedMessage
    if want is DecodeError:
        if refuse_with_protobuf:
            assert got is wire.MalformedMessage
    elif got is not wire.MalformedMessage:
        assert got == want


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_every_truncation_is_refused_or_read_as_protobuf_reads_it(seed: int) -> None:
    data = _list(random.Random(seed))
    for cut in range(len(data)):
        _agrees_or_refuses(wire.list_response, _expected_list, data[:cut],
                           refuse_with_protobuf=True)
        _agrees_or_refuses(wire.get_response, _expected_get, data[:cut],
                           refuse_with_protobuf=True)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_random_damage_raises_our_error_only(seed: int) -> None:
    rng = random.Random(seed)
    data = _list(rng)
    if not data:
        data = api.ListResponse(pod_resources=[api_pb2.PodResources(name="p")]).SerializeToString()
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        _agrees_or_refuses(wire.list_response, _expected_list, bytes(damaged),
                           refuse_with_protobuf=False)


POD = api_pb2.PodResources(name="p").SerializeToString()


@pytest.mark.parametrize(("data", "why"), [
    (b"\x0a", "truncated varint"),  # a tag, no length
    (b"\x0a\x05abc", "5 bytes"),  # a length past the end
    (b"\x0a" + _varint(1 << 40) + POD, "bytes at byte"),  # an over-long length
    (b"\x08" + b"\xff" * 10 + b"\x01", "longer than ten bytes"),  # varint overflow
    (b"\x0e", "wire type 6"), (b"\x0f", "wire type 7"),
    (b"\x00", "field number 0"),
    (_varint(1 << 35 | 2) + b"\x00", "wider than 32 bits"),
    (b"\x0c", "end of group without its start"),
    (b"\x33\x08\x01", "no end of group"),  # group 6, never ended
    (b"\x33\x3c", "ended as group 7"),
    (b"\x33" * 101 + b"\x34" * 101, "nested deeper"),
    (b"\x09" + b"\x00" * 7, "truncated fixed-width"),
    (b"\x0a\x04\x0a\x02\xc3\x28", "not UTF-8"),  # a pod named by an invalid sequence
])
def test_malformed_answers_raise_our_error(data: bytes, why: str) -> None:
    with pytest.raises(wire.MalformedMessage, match=why):
        wire.list_response(data)
    with pytest.raises(wire.MalformedMessage):
        wire.get_response(data)


@pytest.mark.parametrize(("data", "field"), [
    (b"\x08\x01", "field 1: wire type 0"),  # pod_resources as a varint
    (b"\x0a\x02\x08\x01", "field 1: wire type 0"),  # a pod's name as a varint
    (b"\x0a\x07\x1a\x05\x15\x00\x00\x00\x00", "field 2: wire type 5"),  # devices: fixed32
])
def test_a_known_field_of_another_wire_type_is_refused(data: bytes, field: str) -> None:
    """Where protobuf would keep it as an unknown field and read the field empty."""
    with pytest.raises(wire.MalformedMessage, match=field):
        wire.list_response(data)
