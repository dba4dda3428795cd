"""Snapshot -> OTLP ``ExportMetricsServiceRequest``, directly and with attributes cached.

The SDK path (snapshot -> MetricsData -> ``encode_metrics``) rebuilds every attribute of every
point on every export; for 8 GPUs at 1 s that was the larger half of the agent's CPU (see the
benchmark report). A node's attribute sets barely change between exports, so their encoded
``KeyValue`` lists are built once and copied in. The result equals what the SDK would send
(``tests/unit/export/metrics/test_otlp_proto.py`` checks it).

Data points are written in protobuf wire format (cached attribute bytes, then the times and
the value packed with ``struct``) and parsed into their metric in one C call: setting fields
and copying ``KeyValue`` messages point by point through the Python API cost about 4 µs a
point, most of an export's encoding (797 points for 8 GPUs with processes and
self-telemetry).

The request around the points is written the same way (``encode_request``): metric headers,
scope and resource are cached bytes, and the transports send the bytes as they are. Building a
message and letting gRPC serialise it meant parsing every point once (``MergeFromString``) and
writing it out again: a third of the export thread's CPU in the 8-GPU profile.

Most runs have a shape (``series.ShapedRun``): the same series, counter starts and value
types as the last sample of their group, only new times and values. A metric whose runs all
have one is written from a template of its whole bytes (``_MetricTemplate``), every length
prefix included, with the times and values packed in by one ``struct`` call: both are 8-byte
fixed fields (fixed64; double or sfixed64), so no size depends on them, and a change of shape
(a series more or less, a counter restart, an int that became a float) is a new
``RunShape``, hence a new template. Metrics with a run of no shape, or with series that ended,
are written run by run as before.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, compress, count
from typing import TYPE_CHECKING, Any

from gpu_otel_agent.export.metrics.series import (
    Points,
    Run,
    RunShape,
    SampleRuns,
    SeriesLayout,
    ShapedRun,
    run_shapes,
    series_slots,
)
from gpu_otel_agent.export.metrics.series_ends import SeriesEnds
from gpu_otel_agent.export.otlp import wire_values
from gpu_otel_agent.export.otlp.scope import SCOPE
from gpu_otel_agent.model.metrics import DOUBLE_UNITS, Instrument, spec_for
from gpu_otel_agent.model.resource import ResourceView
from gpu_otel_agent.model.snapshot import Attributes, AttributeValue, NodeSnapshot
from gpu_otel_agent.threads.costs import SERIES, Stage

if TYPE_CHECKING:  # generated classes only for ``encode`` and the contract (see wire_values)
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

# Bounds the cache when series come and go (processes, pods): cleared, not grown, past this.
MAX_CACHED_ATTRIBUTE_SETS = 20_000
# AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE and DataPointFlags.
# DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK: enum values, checked by the contract test.
CUMULATIVE = 2
NO_RECORDED_VALUE_MASK = 1

# NumberDataPoint fields (opentelemetry/proto/metrics/v1/metrics.proto), as wire-format tags:
# start_time_unix_nano = 2 and time_unix_nano = 3 (fixed64), as_double = 4 (double),
# as_int = 6 (sfixed64), attributes = 7 (KeyValue), flags = 8 (uint32). Gauge/Sum
# data_points = 1 (message).
_DATA_POINTS_TAG = b"\x0a"
_ATTRIBUTE_TAG = b"\x3a"
_START_TIME_TAG, _TIME_TAG, _AS_DOUBLE_TAG, _AS_INT_TAG = 0x11, 0x19, 0x21, 0x31
_FLAGS_TAG = 0x40
# flags = FLAG_NO_RECORDED_VALUE (DataPointFlags, 1): the end of a series (export/series_ends).
_NO_RECORDED_VALUE = bytes((_FLAGS_TAG, NO_RECORDED_VALUE_MASK))
_GAUGE_END = struct.Struct("<BQ")  # 0x19 time; no value
_SUM_END = struct.Struct("<BQBQ")  # 0x11 start, 0x19 time; no value
# Gauges carry no start time, as the SDK sends them; sums do.
_GAUGE_DOUBLE = struct.Struct("<BQBd")  # 0x19 time, 0x21 as_double
_GAUGE_INT = struct.Struct("<BQBq")  # 0x19 time, 0x31 as_int
_SUM_DOUBLE = struct.Struct("<BQBQBd")  # 0x11 start, 0x19 time, 0x21 as_double
_SUM_INT = struct.Struct("<BQBQBq")  # 0x11 start, 0x19 time, 0x31 as_int


# The contract between this encoder and opentelemetry-proto: every tag written by hand above,
# with the field it must be. The generated classes are imported only here: loading them (and
# protobuf's upb runtime) cost the running agent 3.7 MiB for a check that field numbers, which
# a published .proto never changes, are still the same; the check runs in
# tests/unit/export/metrics/test_otlp_contract.py against the installed opentelemetry-proto.
def wire_contract() -> tuple[tuple[Any, str, int], ...]:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    return (
        (metrics_pb2.Gauge, "data_points", _DATA_POINTS_TAG[0]),
        (metrics_pb2.Sum, "data_points", _DATA_POINTS_TAG[0]),
        (metrics_pb2.NumberDataPoint, "start_time_unix_nano", _START_TIME_TAG),
        (metrics_pb2.NumberDataPoint, "time_unix_nano", _TIME_TAG),
        (metrics_pb2.NumberDataPoint, "as_double", _AS_DOUBLE_TAG),
        (metrics_pb2.NumberDataPoint, "as_int", _AS_INT_TAG),
        (metrics_pb2.NumberDataPoint, "attributes", _ATTRIBUTE_TAG[0]),
        (metrics_pb2.NumberDataPoint, "flags", _FLAGS_TAG),
        (ExportMetricsServiceRequest, "resource_metrics", 0x0A),
        (metrics_pb2.ResourceMetrics, "resource", 0x0A),
        (metrics_pb2.ResourceMetrics, "scope_metrics", 0x12),
        (metrics_pb2.ResourceMetrics, "schema_url", 0x1A),
        (metrics_pb2.ScopeMetrics, "scope", 0x0A),
        (metrics_pb2.ScopeMetrics, "metrics", 0x12),
        (metrics_pb2.ScopeMetrics, "schema_url", 0x1A),
        (metrics_pb2.Metric, "name", 0x0A),
        (metrics_pb2.Metric, "description", 0x12),
        (metrics_pb2.Metric, "unit", 0x1A),
        (metrics_pb2.Metric, "gauge", 0x2A),
        (metrics_pb2.Metric, "sum", 0x3A),
        (metrics_pb2.Sum, "aggregation_temporality", 0x10),
        (metrics_pb2.Sum, "is_monotonic", 0x18),
    )


def wire_contract_problem() -> str | None:
    """None when the installed opentelemetry-proto has the fields written by hand here."""
    from google.protobuf.descriptor import FieldDescriptor
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    fd = FieldDescriptor
    wire_types = {fd.TYPE_FIXED64: 1, fd.TYPE_SFIXED64: 1, fd.TYPE_DOUBLE: 1,
                  fd.TYPE_MESSAGE: 2, fd.TYPE_STRING: 2, fd.TYPE_ENUM: 0, fd.TYPE_BOOL: 0,
                  fd.TYPE_UINT32: 0}
    for message, name, tag in wire_contract():
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            return f"{message.DESCRIPTOR.full_name} has no field {name}"
        expected = (field.number, wire_types.get(field.type))
        if (tag >> 3, tag & 7) != expected:
            return (f"{message.DESCRIPTOR.full_name}.{name} is field {field.number} "
                    f"(wire type {expected[1]}), the encoder writes tag {tag:#04x}")
    cumulative = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    if cumulative != CUMULATIVE:
        return f"AGGREGATION_TEMPORALITY_CUMULATIVE is {cumulative}, the encoder writes 2"
    mask = metrics_pb2.DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
    if mask != NO_RECORDED_VALUE_MASK:
        return f"DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK is {mask}, the encoder writes 1"
    return None


def _length_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + wire_values.varint(len(payload)) + payload


def _string(tag: bytes, text: str) -> bytes:
    """A string field; proto3 leaves an empty one out, and so does this."""
    return _length_delimited(tag, text.encode()) if text else b""


_START = struct.Struct("<BQ")  # 0x11 start: fixed while a run's shape holds


# A point's pieces in a template: the last point's attributes (the very bytes ``_head``
# keeps, not copies), what comes before its time (its tag and length, a sum's start, the
# time's tag), its time, its value's tag, its value; after the last point, its attributes.
# The attributes are one piece (``_PLAIN``), or two where points share their device's pairs
# (``_SPLIT``: that piece, then their own); one piece where nothing is shared (a run of one
# series: most of the fast group) saves a struct code and an argument per point. The times
# and values are written over at each fill (an encoder is used by one export thread at a
# time).
_PLAIN, _SPLIT = 5, 6  # pieces per point
_OPEN = struct.calcsize("<QBd")  # the bytes a point's time, value tag and value take
_TIMES = operator.attrgetter("times")
_VALUES = operator.attrgetter("values")
# A point as ``_layout`` finds it: its opening, shared and own attribute bytes, value tag.
_Point = tuple[bytes, bytes, bytes, int]


def _pieces(points: list[_Point]) -> tuple[list[Any], int]:
    """The points' pieces (times and values 0) and their stride: ``_SPLIT`` if any point has
    a shared piece, else ``_PLAIN`` (its own piece is then its whole encoding)."""
    if any(point[1] for point in points):
        split: list[Any] = [b"", b""]
        for opening, common, own, tag in points:
            split += (opening, 0, tag, 0, common, own)
        return split, _SPLIT
    plain: list[Any] = [b""]
    for opening, _, own, tag in points:
        plain += (opening, 0, tag, 0, own)
    return plain, _PLAIN


def _packer(pieces: list[Any], value_codes: list[str], stride: int) -> struct.Struct:
    codes = ["<"]
    if stride == _SPLIT:
        for i, code in enumerate(value_codes):
            at = i * _SPLIT
            codes.append(f"{len(pieces[at])}s{len(pieces[at + 1])}s{len(pieces[at + 2])}sQB{code}")
        codes.append(f"{len(pieces[-2])}s{len(pieces[-1])}s")
    else:
        for i, code in enumerate(value_codes):
            at = i * _PLAIN
            codes.append(f"{len(pieces[at])}s{len(pieces[at + 1])}sQB{code}")
        codes.append(f"{len(pieces[-1])}s")
    return struct.Struct("".join(codes))


def _shared_length(sets: list[Attributes]) -> int:
    """How many pairs the attribute sets of one run (one device's series of a metric) share
    at their start: the device's, which series.py puts first, the same pair objects in each
    (``DeviceIdentity.attributes``). Compared by identity, in C (one ``map`` per set: a
    pair-by-pair loop in Python cost 5 % of the 8 x 64 export stage): an equal pair that is
    another object ends the shared part, so ("k", True) is never taken for ("k", 1), nor
    -0.0 for 0.0, which encode differently. Only pairs of strings and ints count (as in
    ``_pairs``). 0 for a run of one series (nothing to share)."""
    if len(sets) < 2:
        return 0
    first = sets[0]
    length = min(map(len, sets))
    for at in range(length):
        kind = type(first[at][1])
        if kind is not str and kind is not int:
            length = at
            break
    head = first[:length]
    for other in sets:
        if length and not all(map(operator.is_, other, head)):
            length = next(at for at, pair in enumerate(head) if other[at] is not pair)
            head = head[:length]
    return length


@dataclass(frozen=True, slots=True)
class _Template:
    """A run's bytes with its points' times and values left open (``ProtoEncoder._layout``).

    A point's size does not depend on its time or value (both are 8-byte fixed fields:
    fixed64, double, sfixed64), so neither does any length prefix: the template holds
    while the run's shape (series, counter starts, value types) does, and ``series.py``
    hands a new ``RunShape`` when it changes. ``fill`` is one struct call per run instead
    of a ``SeriesPoint``, a pack and an attribute look-up per point."""

    shape: RunShape
    packer: struct.Struct
    pieces: list[Any]
    stride: int  # pieces per point: _PLAIN or _SPLIT (a point's time and value its last 3)

    def fill(self, run: ShapedRun) -> bytes:
        pieces, stride = self.pieces, self.stride
        pieces[stride - 3::stride] = run.times
        pieces[stride - 1::stride] = run.values
        return self.packer.pack(*pieces)


@dataclass(frozen=True, slots=True)
class _MetricTemplate:
    """A whole metric's bytes (its tag and length, name, description and unit, data tag and
    length, every run's points, a sum's trailer) with the times and values left open, for
    runs of these shapes in this order: the steady state of every metric, whose runs are
    each device's new sample of an unchanged shape. One struct call per metric."""

    shapes: list[RunShape]
    packer: struct.Struct
    pieces: list[Any]
    stride: int  # as _Template's

    def fill_into(self, request: bytearray, offset: int, runs: Sequence[Run]) -> None:
        """Writes the metric's ``packer.size`` bytes at ``offset`` of ``request``."""
        pieces, stride = self.pieces, self.stride
        pieces[stride - 3::stride] = chain.from_iterable(map(_TIMES, runs))
        pieces[stride - 1::stride] = chain.from_iterable(map(_VALUES, runs))
        self.packer.pack_into(request, offset, *pieces)

    def fill_picked(self, request: bytearray, offset: int, times: Sequence[int],
                    values: Sequence[float | int]) -> None:
        """``fill_into`` with the runs' times and values, in order, already picked."""
        pieces, stride = self.pieces, self.stride
        pieces[stride - 3::stride] = times
        pieces[stride - 1::stride] = values
        self.packer.pack_into(request, offset, *pieces)


def _items(indices: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """The items at ``indices``, as a sequence, in one C call (``itemgetter`` of one index
    returns the item itself)."""
    if len(indices) == 1:
        return operator.itemgetter(slice(indices[0], indices[0] + 1))
    return operator.itemgetter(*indices)


_WHOLE = operator.itemgetter(slice(None))
_JOINED_POINTS = 1024


@dataclass(frozen=True, slots=True)
class _Direct:
    """What ``ProtoEncoder._refill`` writes when the same samples as last time are new
    (``changed``, by their place; the fast group's and the health readings' every export,
    the processes' with them every fifth): the layout's metrics those samples have runs of.

    ``fills``: the metrics of a template whose every run is of a sample with a shape
    (``SampleRuns.shape``): filled from the samples' values and times in reading order,
    joined (``sources`` picks those samples), each metric's picked by one ``itemgetter`` of
    its places in them; no run is built. ``others``: the rest (a run of a self-telemetry or
    node sample, or a metric written from chunks), each with the samples it has runs from."""

    sources: Callable[[Sequence[SampleRuns]], Sequence[SampleRuns]] | None
    # Per source, what of its values and times is taken: all of a new sample's, the
    # metrics' of an unchanged one (the same shape, so the same places, new or not).
    parts: tuple[Callable[[Sequence[Any]], Sequence[Any]], ...]
    fills: tuple[tuple[_MetricTemplate, int, Callable[[Sequence[Any]], Sequence[Any]]], ...]
    # Metrics of more than ``_JOINED_POINTS`` points: the samples with a run of each, and
    # their pickers of its values (and times).
    large: tuple[tuple[_MetricTemplate, int, Callable[[Sequence[SampleRuns]],
                                                       Sequence[SampleRuns]],
                       tuple[Callable[[Sequence[Any]], Sequence[Any]], ...]], ...]
    others: tuple[tuple[int, tuple[int, ...]], ...]


# Plain tuples, not NamedTuples: one or two per metric per export, and a NamedTuple's
# constructor is a Python call (about 3 % of the 8 x 64 telemetry stage's instructions).
# A metric of the last export: its runs, the bytes written for it (None for a metric of a
# template, ``ProtoEncoder._shaped``: filled again when the request moves), their size and
# where they are in the request buffer.
_Placed = tuple[Sequence[Run], tuple[bytes, ...] | None, int, int]
# A metric of this export, before the request's size is known: its name, runs, bytes or
# the template they are packed from, size, where they were in the last export's buffer if
# its runs are the same (else -1), and whether the next export may find them there (not
# with end points, written once).
_Planned = tuple[str, list[Run], tuple[bytes, ...] | None, _MetricTemplate | None, int, int,
                 bool]
_JOINED_BELOW = 65536  # chunks of a metric smaller than this are joined, then copied


def _write(request: bytearray, offset: int, chunks: tuple[bytes, ...], size: int) -> None:
    """Copies ``chunks`` (``size`` bytes) into ``request`` at ``offset`` (same-size slice
    assignments: no resize). A small metric's are joined first (one copy in C for a few
    hundred bytes, not a pass through Python per chunk); a large one's (end points at a
    reload, thousands of chunks) are copied one by one: no request-sized join."""
    if size < _JOINED_BELOW:
        request[offset:offset + size] = b"".join(chunks)
        return
    for chunk in chunks:
        end = offset + len(chunk)
        request[offset:end] = chunk
        offset = end


@dataclass(frozen=True)
class _MetricFrame:
    """A metric's bytes around its data points, built once per metric name."""

    head: bytes  # name, description, unit
    data_tag: bytes  # Metric.gauge or Metric.sum
    trailer: bytes  # after the points: a sum's temporality and monotonicity
    double: bool  # every point as_double, whatever type the reading has (DOUBLE_UNITS)


def _metric_frame(name: str) -> _MetricFrame:
    spec = spec_for(name)
    head = (_string(b"\x0a", name) + _string(b"\x12", spec.description)
            + _string(b"\x1a", spec.unit))
    double = spec.unit in DOUBLE_UNITS
    if spec.instrument is Instrument.GAUGE:
        return _MetricFrame(head, b"\x2a", b"", double)
    trailer = b"\x10" + wire_values.varint(CUMULATIVE)
    if spec.instrument is Instrument.COUNTER:
        trailer += b"\x18\x01"  # is_monotonic: true (false is left out)
    return _MetricFrame(head, b"\x3a", trailer, double)


class ProtoEncoder:
    def __init__(self, resource: ResourceView) -> None:
        self._schema_url = resource.schema_url
        # attributes -> their encoding, as the pairs shared with the other series of their
        # run (the device's: ``_shared``) and their own. Keyed by the attributes alone: a
        # series' end point (another point size) shares its encoding instead of adding a
        # second one (at 8 x 2,048, ending every process series at once added 5 MiB).
        self._heads: dict[Attributes, tuple[bytes, bytes]] = {}
        # A device's pairs (the attributes its series share, first in each: series.py), by
        # value: encoded once, not in each process's encoding (about 280 of a process
        # point's 380 bytes, the same for a device's 256 processes).
        self._shared: dict[Attributes, bytes] = {}
        # A data point's tag and length, by its length, and a template point's bytes before
        # its time, by value: shared, not one per series (a few hundred distinct among
        # 9,637 series at 8 x 2,048, where one each held 1.3 MiB).
        self._prefixes: dict[int, bytes] = {}
        self._openings: dict[bytes, bytes] = {}
        self._frames: dict[str, _MetricFrame] = {}
        # The last export's runs and their bytes, by id (series.series_runs keeps a run of an
        # unchanged sample as the same list): the slow, gpm and processes groups' points are
        # written once per sample, not once per export.
        self._encoded: dict[int, tuple[Run, bytes]] = {}
        # The last export's run shapes and their templates, by id (series.series_runs keeps
        # a RunShape while a sample's readings are the same set): the fast group's points
        # are a new sample each export, written by patching values and times into them.
        self._templates: dict[int, _Template] = {}
        # The last export's metrics whose runs all had a shape, and their templates.
        self._shaped: dict[str, _MetricTemplate] = {}
        # Encoded attribute pairs, for one export (``_head``): emptied after it.
        self._pairs: dict[tuple[str, AttributeValue], bytes] = {}
        self._ends = SeriesEnds()
        # The last export's metrics: their runs, and where their bytes are in ``_request``.
        self._metrics: dict[str, _Placed] = {}
        # The last request, written over in place while its size holds (``encode_request``).
        self._request: bytearray | None = None
        # The layout of the last export when it ended no series, and its metrics in order
        # with their template (None: written from chunks), size and offset: an export of
        # the same layout only fills the metrics whose runs are new (``_refill``).
        self._last_layout: SeriesLayout | None = None
        self._plan: list[tuple[_MetricTemplate | None, int, int]] = []
        self._slots: list[SampleRuns] = []  # the samples' runs of the last export
        # What ``_refill`` writes for each set of new samples (by their places), under
        # ``_last_layout``: emptied with it.
        self._direct: dict[tuple[int, ...], _Direct] = {}
        # ScopeMetrics' field 1, scope: it comes first
        self._scope = _length_delimited(b"\x0a", wire_values.scope(SCOPE.name,
                                                                   SCOPE.version or ""))
        self._scope_schema = _string(b"\x1a", SCOPE.schema_url or "")
        self._resource_field = _length_delimited(
            b"\x0a", wire_values.resource(resource.attributes.items()))  # type: ignore[arg-type]
        self._resource_schema = _string(b"\x1a", self._schema_url or "")

    def _head(self, attributes: Attributes, fixed_size: int,
              shared: int = 0) -> tuple[bytes, bytes, bytes]:
        """A data point's tag and length, and its encoded attributes in two pieces (the
        first ``shared`` pairs, shared with the other series of its run, and the rest),
        built once per attribute set (the attributes, field 7, go after the times and
        value, as ``SerializeToString`` orders them). An attribute set already encoded keeps
        the split it was encoded with: the two pieces' bytes are the same either way."""
        encoded = self._heads.get(attributes)
        if encoded is None:
            encoded = self._encode_attributes(attributes, shared)
        size = len(encoded[0]) + len(encoded[1]) + fixed_size
        prefix = self._prefixes.get(size)
        if prefix is None:
            prefix = self._prefix(size)
        return prefix, encoded[0], encoded[1]

    def _prefix(self, size: int) -> bytes:
        """A data point's tag and length (``size``), kept by size."""
        if len(self._prefixes) >= MAX_CACHED_ATTRIBUTE_SETS:
            self._prefixes.clear()
        prefix = self._prefixes[size] = _DATA_POINTS_TAG + wire_values.varint(size)
        return prefix

    def _encode_attributes(self, attributes: Attributes, shared: int) -> tuple[bytes, bytes]:
        heads = self._heads
        if len(heads) >= MAX_CACHED_ATTRIBUTE_SETS:
            heads.clear()
        if not shared:
            encoded = heads[attributes] = (b"", self._encode_pairs(attributes))
            return encoded
        common = attributes[:shared]
        device = self._shared.get(common)
        if device is None:
            if len(self._shared) >= MAX_CACHED_ATTRIBUTE_SETS:
                self._shared.clear()
            device = self._shared[common] = self._encode_pairs(common)
        encoded = heads[attributes] = (device, self._encode_pairs(attributes[shared:]))
        return encoded

    def _encode_pairs(self, attributes: Attributes) -> bytes:
        # A pair (a device's hw.id, a process's pid) is in many sets: encoded once per
        # export. Strings and ints only: equal floats (0.0, -0.0) and bools (True, 1)
        # can encode differently.
        pairs = self._pairs
        fields = []
        for pair in attributes:
            kind = type(pair[1])
            field = pairs.get(pair) if kind is str or kind is int else None
            if field is None:
                field = _length_delimited(_ATTRIBUTE_TAG,
                                          wire_values.key_value(pair[0], pair[1]))
                if kind is str or kind is int:
                    pairs[pair] = field
            fields.append(field)
        return b"".join(fields)

    def encode(self, snapshot: NodeSnapshot) -> ExportMetricsServiceRequest:
        """The request as a message (tests, and callers that want to look inside)."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        return ExportMetricsServiceRequest.FromString(self.encode_bytes(snapshot))

    def encode_bytes(self, snapshot: NodeSnapshot) -> bytes:
        """The serialised ``ExportMetricsServiceRequest`` as bytes of its own (a copy of
        ``encode_request``'s buffer, which the next export writes over)."""
        return bytes(self.encode_request(snapshot))

    def encode_request(self, snapshot: NodeSnapshot) -> bytearray:
        """The serialised ``ExportMetricsServiceRequest``, fields in field-number order as
        ``SerializeToString`` writes them (the unit tests compare the two), in the encoder's
        own buffer: valid until the next call, which writes over it (the export thread sends
        it before it encodes again).

        The request is one buffer of the size its pieces add up to, each written once into
        it: a metric of a template packed in place (``pack_into``), others' bytes copied in.
        The buffer is kept and written in place while the request's size holds, so a metric
        whose runs are the last export's, at the same offset, is not written at all (the
        slow, gpm and processes groups' between their samples). Joining kept per-metric
        bytes held the request twice at the peak (3.5 MB each at 8 x 2,048)."""
        frames = self._frames
        encoded = self._encoded
        kept: dict[int, tuple[Run, bytes]] = {}  # this export's runs: nothing older is held
        templates = self._templates
        kept_templates: dict[int, _Template] = {}
        with Stage(SERIES):
            slots, layout = series_slots(snapshot)
            last = self._request if layout is self._last_layout else None
            if last is None:
                # The last layout's samples let go of now, not after this export (at a reload
                # at 8 x 2,048 their runs are MiBs that ``metrics`` below lets go of as it goes).
                self._last_layout, self._plan, self._slots = None, [], []
                self._direct = {}
                grouped = layout.grouped(slots)
                ended = self._ends.ended(grouped)
            else:
                # The last export's layout, which ended none: none ends now (``_refill``).
                self._ends.unchanged()
        if last is not None:
            self._refill(last, slots, layout)
            return last
        # Emptied first: an export that raises midway leaves nothing that says a metric's
        # bytes are in the buffer (the next one writes them all).
        metrics, self._metrics = self._metrics, {}
        shaped = self._shaped
        kept_shaped: dict[str, _MetricTemplate] = {}
        planned: list[_Planned] = []
        whole: _MetricTemplate | None
        scope_size = len(self._scope)
        # Metrics whose every series ended come after the others, with only their ends.
        names = [*grouped, *(name for name in ended if name not in grouped)]
        for name in names:
            runs = grouped.get(name, [])
            # A metric whose runs are all the ones of the last export (the slow, gpm and
            # processes groups' between their samples) is the same bytes, prefixes included;
            # not one with series that ended since (their end points are written once).
            held = metrics.pop(name, None)
            if held is not None and name not in ended and len(held[0]) == len(runs) \
                    and all(map(operator.is_, held[0], runs)):
                held_chunks, held_size = held[1], held[2]
                if held_chunks is None:  # written from its template: every run has a shape
                    whole = kept_shaped[name] = shaped[name]
                else:
                    whole = None
                    for run in runs:
                        if isinstance(run, ShapedRun):
                            kept_templates[id(run.shape)] = templates[id(run.shape)]
                        else:
                            kept[id(run)] = encoded[id(run)]
                planned.append((name, runs, held_chunks, whole, held_size, held[3], True))
                scope_size += held_size
                continue
            frame = frames.get(name)
            if frame is None:
                frame = frames[name] = _metric_frame(name)
            shapes = run_shapes(runs) if runs and name not in ended else None
            if shapes is not None:
                # Every run of a known shape: the metric's bytes are its template's with this
                # export's times and values (RunShape compares by identity).
                whole = shaped.get(name)
                if whole is None or whole.shapes != shapes:
                    whole = self._metric_template(frame, shapes)
                kept_shaped[name] = whole
                planned.append((name, runs, None, whole, whole.packer.size, -1, True))
                scope_size += whole.packer.size
                continue
            chunks: list[bytes] = []
            for run in runs:
                if isinstance(run, ShapedRun):
                    shape = run.shape
                    template = templates.get(id(shape))
                    if template is None or template.shape is not shape:
                        template = self._template(shape, not frame.trailer, frame.double)
                    kept_templates[id(shape)] = template
                    chunks.append(template.fill(run))
                    continue
                # A run of an unchanged sample is the same list as at the last export, and
                # so are its bytes (the identity check guards against a reused id).
                cached = encoded.get(id(run))
                if cached is None or cached[0] is not run:
                    cached = (run, self._points(run, not frame.trailer, frame.double))
                kept[id(run)] = cached
                chunks.append(cached[1])
            if name in ended:
                chunks += self._ends_of(ended[name], snapshot.taken_ns, not frame.trailer)
            chunks.append(frame.trailer)
            data_size = sum(map(len, chunks))
            data_prefix = frame.data_tag + wire_values.varint(data_size)
            metric_size = len(frame.head) + len(data_prefix) + data_size
            metric_prefix = b"\x12" + wire_values.varint(metric_size)
            size = len(metric_prefix) + metric_size
            # Bytes with end points are never written again: not kept.
            planned.append((name, runs, (metric_prefix, frame.head, data_prefix, *chunks),
                            None, size, -1, name not in ended))
            scope_size += size
        scope_size += len(self._scope_schema)
        scope_length = wire_values.varint(scope_size)  # ResourceMetrics.scope_metrics'
        resource_size = (len(self._resource_field) + 1 + len(scope_length) + scope_size
                         + len(self._resource_schema))
        # The request's resource_metrics: its tag and length, then the resource and the
        # scope_metrics' tag and length.
        head = (b"\x0a", wire_values.varint(resource_size), self._resource_field, b"\x12",
                scope_length, self._scope)
        total = 1 + len(head[1]) + resource_size
        request = self._request
        reused = request is not None and len(request) == total
        if request is None or not reused:
            # The old buffer freed before the new one is made (never resized: the sender's
            # views of it may still be alive).
            self._request = request = None
            request = self._request = bytearray(total)
        opening = b"".join(head)
        request[:len(opening)] = opening
        offset = len(opening)
        kept_metrics = self._metrics
        plan = []
        for name, runs, written, whole, size, was_at, keep in planned:
            if not (reused and was_at == offset):  # else: its bytes are there already
                if whole is not None:
                    whole.fill_into(request, offset, runs)
                elif written is not None:
                    _write(request, offset, written, size)
            if keep:
                kept_metrics[name] = (runs, written, size, offset)
                plan.append((whole, size, offset))
            offset += size
        request[offset:] = self._scope_schema + self._resource_schema
        self._encoded = kept
        self._templates = kept_templates
        self._shaped = kept_shaped
        if self._pairs:
            self._pairs = {}
        # With end points this request's sizes are not the next one's. Without, its metrics
        # are the layout's, in its order.
        if not ended and len(plan) == len(layout.pickers):
            self._last_layout, self._plan, self._slots = layout, plan, slots
        return request

    def _refill(self, request: bytearray, slots: list[SampleRuns],
                layout: SeriesLayout) -> None:
        """The last request made this export's by writing the metrics of the samples whose
        runs are new (a sample that is the same has the same ``SampleRuns``).

        Called with the last export's layout (``series.SeriesLayout``), which ended no series:
        every metric has runs of the same shapes, or the same lists, as then, so the same
        template or chunks, size and offset (``_plan``, in the layout's order), and none ends.
        This skips the per-metric planning and shape comparisons, and every metric of
        unchanged samples (slow, gpm, processes between theirs): a steady export's encoding
        is its new samples' fills. What to write for a set of new samples is worked out once
        per layout (``_Direct``); a metric of device samples' values is filled straight
        from them, with no ``ShapedRun`` made."""
        changed = tuple(compress(count(), map(operator.is_not, slots, self._slots)))
        direct = self._direct.get(changed)
        if direct is None:
            direct = self._direct[changed] = self._direct_plan(changed, slots, layout)
        if direct.sources is not None:
            chosen = direct.sources(slots)
            # The same samples (by place) in the same shapes as when the plan was made, so
            # each one's values and times are as long as then: every metric's places hold.
            parts = direct.parts
            times = list(chain.from_iterable(map(operator.call, parts, map(_TIMES, chosen))))
            values = list(chain.from_iterable(map(operator.call, parts,
                                                  map(_VALUES, chosen))))
            for template, at, pick in direct.fills:
                template.fill_picked(request, at, pick(times), pick(values))
        for template, place, samples_of, picks in direct.large:
            samples = samples_of(slots)
            template.fill_picked(
                request, place, list(chain.from_iterable(map(operator.call, picks,
                                                             map(_TIMES, samples)))),
                list(chain.from_iterable(map(operator.call, picks, map(_VALUES, samples)))))
        metrics = self._metrics
        templates = self._templates
        plan = self._plan
        pickers = layout.pickers
        for at, sources in direct.others:
            name = pickers[at][0]
            whole, size, offset = plan[at]
            runs = [slots[source].run(name) for source in sources]
            if whole is not None:
                whole.fill_into(request, offset, runs)
                metrics[name] = (runs, None, size, offset)
                continue
            # A metric written from chunks: its prefixes and frame, a chunk per run, its
            # trailer. A list is the same list (its chunk as it was); a ShapedRun is new,
            # of the same shape: its template's fill.
            written = metrics[name][1]
            assert written is not None  # a metric without a template keeps its chunks
            chunks = (*written[:3],
                      *(templates[id(run.shape)].fill(run) if isinstance(run, ShapedRun)
                        else chunk for run, chunk in zip(runs, written[3:-1], strict=True)),
                      written[-1])
            _write(request, offset, chunks, size)
            metrics[name] = (runs, chunks, size, offset)
        self._slots = slots

    def _direct_plan(self, changed: tuple[int, ...], slots: list[SampleRuns],
                     layout: SeriesLayout) -> _Direct:
        """What ``_refill`` writes for the samples at ``changed`` (``_Direct``)."""
        new: set[int] = set()
        metrics_of = layout.metrics_of
        for at in changed:
            new.update(metrics_of[at])
        sources_of: dict[int, list[int]] = {}  # metric -> the samples with a run of it
        for at, indices in enumerate(metrics_of):
            for metric in indices:
                if metric in new:
                    sources_of.setdefault(metric, []).append(at)
        direct: list[tuple[_MetricTemplate, int, str, list[int]]] = []
        others: list[tuple[int, tuple[int, ...]]] = []
        for metric, sources in sources_of.items():
            whole, _, offset = self._plan[metric]
            if whole is not None and all(slots[at].shape is not None for at in sources):
                direct.append((whole, offset, layout.pickers[metric][0], sources))
            else:
                others.append((metric, tuple(sources)))
        # A metric of many points (a processes metric at 8 x 2,048: 16,000) is filled from
        # its samples' own pickers of it (``SampleRuns.picker``, the shapes'), one call per
        # sample: its places in the joined values would be an int object per point, held
        # with the plan (1.8 MiB at 8 x 2,048).
        # Each source's places of each metric, found in one pass per source (a processes
        # sample at 16 x 256 has 768 readings).
        where: dict[int, dict[str, list[int]]] = {}
        for *_, sources in direct:
            for at in sources:
                if at not in where:
                    where[at] = slots[at].places()
        sizes = [sum(len(where[at][name]) for at in sources) for _, _, name, sources in direct]
        large = tuple((whole, offset, _items(sources),
                       tuple(slots[at].picker(name) for at in sources))
                      for (whole, offset, name, sources), size in zip(direct, sizes, strict=True)
                      if size > _JOINED_POINTS)
        direct = [fill for fill, size in zip(direct, sizes, strict=True)
                  if size <= _JOINED_POINTS]
        if not direct:
            return _Direct(None, (), (), large, tuple(others))
        # Each sample's values (and times) that these metrics take, joined: a new sample's
        # whole list where most of it is taken (one copy in C), else only those taken (an
        # unchanged slow sample's 121 readings at 8 x 64 give hw.temperature one; a
        # processes sample whose large metrics go apart gives its one overflow reading).
        taken: dict[int, list[int]] = {}
        for _, _, name, sources in direct:
            for at in sources:
                taken.setdefault(at, []).extend(where[at][name])
        chosen = sorted(taken)
        parts = []
        place: dict[tuple[int, int], int] = {}  # (sample, index in its values) -> joined
        joined = 0
        for at in chosen:
            size = len(slots[at].values)
            whole_list = at in changed and len(taken[at]) * 2 > size
            picked = range(size) if whole_list else sorted(taken[at])
            parts.append(_WHOLE if whole_list else _items(picked))
            for index in picked:
                place[at, index] = joined
                joined += 1
        fills = []
        for whole, offset, name, sources in direct:
            places = [place[at, index] for at in sources for index in where[at][name]]
            fills.append((whole, offset, _items(places)))
            # Filled without runs from now on: the general path finds no runs of the last
            # export to compare and writes the metric anew (as it would: its runs are new).
            self._metrics.pop(name, None)
        return _Direct(_items(chosen), tuple(parts), tuple(fills), large, tuple(others))

    def _ends_of(self, series: list[tuple[Attributes, int]], time_ns: int,
                 gauge: bool) -> list[bytes]:
        """A point flagged "no recorded value" for each series that ended, at ``time_ns``:
        its times and attributes, no value, then the flags (field 8, after the attributes,
        as ``SerializeToString`` orders them). In pieces, copied into the request as they
        are: a reload that ends every process series at 8 x 2,048 ends 8,200 series, and
        their points joined were one more request-sized copy."""
        chunks: list[bytes] = []
        # A gauge's end has no start: one time for all of them, one bytes object (8,200
        # ends at a reload at 8 x 2,048).
        gauge_end = _GAUGE_END.pack(_TIME_TAG, time_ns)
        for attributes, start in series:
            if gauge:
                packed = gauge_end
            else:
                packed = _SUM_END.pack(_START_TIME_TAG, start, _TIME_TAG, max(time_ns, start))
            prefix, shared, own = self._head(attributes,
                                             len(packed) + len(_NO_RECORDED_VALUE))
            chunks += (prefix, packed, shared, own, _NO_RECORDED_VALUE)
        return chunks

    def _layout(self, shape: RunShape, gauge: bool,
                double: bool) -> tuple[list[_Point], list[str]]:
        """The points of a run of ``shape`` as ``_points`` writes them (``_Point``: what
        comes before the time, the attributes' two pieces, the value's tag), and each
        value's struct code."""
        points: list[_Point] = []
        value_codes = []
        openings = self._openings
        if len(openings) >= MAX_CACHED_ATTRIBUTE_SETS:
            openings.clear()
        shared = _shared_length(list(shape.attributes))
        for attributes, start, is_int in zip(shape.attributes, shape.starts, shape.ints,
                                             strict=True):
            as_int = is_int and not double
            if gauge:
                fixed, size = b"", _GAUGE_INT.size
            else:
                fixed, size = _START.pack(_START_TIME_TAG, start), _SUM_INT.size
            prefix, common, own = self._head(attributes, size, shared)
            opening = prefix + fixed + bytes((_TIME_TAG,))
            opening = openings.setdefault(opening, opening)
            points.append((opening, common, own, _AS_INT_TAG if as_int else _AS_DOUBLE_TAG))
            value_codes.append("q" if as_int else "d")
        return points, value_codes

    def _template(self, shape: RunShape, gauge: bool, double: bool) -> _Template:
        points, value_codes = self._layout(shape, gauge, double)
        pieces, stride = _pieces(points)
        return _Template(shape, _packer(pieces, value_codes, stride), pieces, stride)

    def _metric_template(self, frame: _MetricFrame, shapes: list[RunShape]) -> _MetricTemplate:
        gauge = not frame.trailer
        points: list[_Point] = []
        value_codes: list[str] = []
        for shape in shapes:
            run_points, run_codes = self._layout(shape, gauge, frame.double)
            points += run_points
            value_codes += run_codes
        pieces, stride = _pieces(points)
        pieces[-1] += frame.trailer
        data_size = sum(len(p) for p in pieces if type(p) is bytes) + _OPEN * len(value_codes)
        data_prefix = frame.data_tag + wire_values.varint(data_size)
        metric_size = len(frame.head) + len(data_prefix) + data_size
        pieces[0] = b"\x12" + wire_values.varint(metric_size) + frame.head + data_prefix
        return _MetricTemplate(shapes, _packer(pieces, value_codes, stride), pieces, stride)

    def _points(self, run: Points, gauge: bool, double: bool) -> bytes:
        """One run's data points, each its tag and length, the times and value, and its
        attributes (field 7 last, as ``SerializeToString`` orders them)."""
        heads = self._heads
        prefixes = self._prefixes
        shared = -1  # found at the run's first attribute set not encoded yet
        start_tag, time_tag, double_tag, int_tag = (
            _START_TIME_TAG, _TIME_TAG, _AS_DOUBLE_TAG, _AS_INT_TAG)
        chunks: list[bytes] = []
        for point in run:
            value = float(point.value) if double else point.value
            if gauge:
                if isinstance(value, int):
                    packed = _GAUGE_INT.pack(time_tag, point.time_ns, int_tag, value)
                else:
                    packed = _GAUGE_DOUBLE.pack(time_tag, point.time_ns, double_tag, value)
            elif isinstance(value, int):
                packed = _SUM_INT.pack(start_tag, point.start_time_ns, time_tag,
                                       point.time_ns, int_tag, value)
            else:
                packed = _SUM_DOUBLE.pack(start_tag, point.start_time_ns, time_tag,
                                          point.time_ns, double_tag, value)
            encoded = heads.get(point.attributes)
            if encoded is None:
                if shared < 0:
                    shared = _shared_length([p.attributes for p in run])
                encoded = self._encode_attributes(point.attributes, shared)
            size = len(encoded[0]) + len(encoded[1]) + len(packed)
            prefix = prefixes.get(size)
            if prefix is None:
                prefix = self._prefix(size)
            chunks += (prefix, packed, *encoded)
        return b"".join(chunks)
