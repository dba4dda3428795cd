"""``DeviceSnapshot.with_sample`` builds its result with the constructor (not
``dataclasses.replace``, for speed): it must keep every other field as ``replace`` would."""

from __future__ import annotations

import copy
from dataclasses import fields, replace
from types import MappingProxyType

import pytest

from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
)


def test_with_sample_keeps_every_field_as_replace_would() -> None:
    identity = DeviceIdentity("GPU-1", 3, "nvidia", "H100", "0000:01:00.0")
    kept = GroupSample("slow", (Reading("hw.errors", 1.0),), 5)
    device = DeviceSnapshot(identity, HealthState.DEGRADED, 7, MappingProxyType({"slow": kept}),
                            "unresponsive", MappingProxyType({("hw.energy", ()): 11}))
    # Every field differs from its default, so one dropped would show.
    defaults = DeviceSnapshot(identity, HealthState.OK, 0)
    assert all(getattr(device, f.name) != getattr(defaults, f.name)
               for f in fields(DeviceSnapshot) if f.name != "identity")
    for sample in (GroupSample("fast", (Reading("hw.power", 2.0),), 9),
                   GroupSample("slow", (), 10)):
        expected = replace(device, samples=MappingProxyType({**device.samples,
                                                             sample.group: sample}))
        got = device.with_sample(sample)
        assert got == expected
        assert dict(got.samples) == dict(expected.samples)
        device = got


def test_with_sample_copies_a_view_or_a_plain_mapping_and_leaves_it_alone() -> None:
    """A read-only view's samples are copied through its dict's own copy, any other
    mapping as ``dict()`` copies it: the same samples, in order, the source untouched."""
    identity = DeviceIdentity("GPU-1", 3, "nvidia", "H100", "0000:01:00.0")
    held = {name: GroupSample(name, (Reading("hw.power", float(n)),), n)
            for n, name in enumerate(("fast", "gpm", "slow"))}
    for samples in (MappingProxyType(dict(held)), dict(held)):
        device = DeviceSnapshot(identity, HealthState.OK, 0, samples)
        for sample in (GroupSample("gpm", (), 20), GroupSample("processes", (), 21)):
            got = device.with_sample(sample)
            assert list(got.samples.items()) == list({**held, sample.group: sample}.items())
            assert type(got.samples) is MappingProxyType
            assert dict(device.samples) == held  # the source is not written


def test_with_sample_is_the_constructors_snapshot() -> None:
    """Made without the constructor: equal, shown and copied alike, its fields in the same
    order, still frozen."""
    identity = DeviceIdentity("GPU-1", 3, "nvidia", "H100", "0000:01:00.0")
    device = DeviceSnapshot(identity, HealthState.OK, 7)
    sample = GroupSample("fast", (Reading("hw.power", 2.0),), 9)
    got = device.with_sample(sample)
    made = DeviceSnapshot(identity, HealthState.OK, 7, MappingProxyType({"fast": sample}))
    assert got == made and repr(got) == repr(made)
    assert list(vars(got)) == [f.name for f in fields(DeviceSnapshot)] == list(vars(made))
    assert copy.copy(got) == made
    with pytest.raises(AttributeError):
        got.reason = "x"  # type: ignore[misc]


def test_a_group_sample_is_the_frozen_dataclass_it_was() -> None:
    """``GroupSample``'s own __init__ (one __dict__ update): built positionally or by name,
    equal, hashed, shown, replaced and copied as the generated one's, still frozen."""
    readings = (Reading("hw.power", 2.0),)
    sample = GroupSample("fast", readings, 9)
    assert sample == GroupSample(group="fast", readings=readings, time_ns=9)
    assert hash(sample) == hash(GroupSample("fast", readings, 9))
    assert repr(sample) == f"GroupSample(group='fast', readings={readings!r}, time_ns=9)"
    assert list(vars(sample)) == [f.name for f in fields(GroupSample)]
    assert replace(sample, time_ns=10) == GroupSample("fast", readings, 10)
    assert copy.deepcopy(sample) == sample != GroupSample("slow", readings, 9)
    with pytest.raises(AttributeError):
        sample.time_ns = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        GroupSample("fast", readings)  # type: ignore[call-arg]
