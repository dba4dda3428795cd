"""ULIDs as the spec (https://github.com/ulid/spec) defines them."""

from __future__ import annotations

import pytest

from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.gpu_health.ulid import ALPHABET, stable_ulid, ulid, ulid_time_ms


def test_the_specs_example_decodes_to_its_stated_time() -> None:
    # The reference implementation's seed-time example (github.com/ulid/javascript README,
    # also in github.com/ulid/spec): ulid(1469918176385) -> 01ARYZ6S41TSV4RRFFQ69G5FAV.
    assert ulid_time_ms("01ARYZ6S41TSV4RRFFQ69G5FAV") == 1469918176385
    assert ulid(1469918176385).startswith("01ARYZ6S41")


def test_bounds_and_alphabet() -> None:
    assert ulid(0, bytes(10)) == "0" * 26
    assert ulid(2**48 - 1, b"\xff" * 10) == "7" + "Z" * 25  # the spec's largest ULID
    with pytest.raises(ValueError):
        ulid(2**48)
    made = {ulid() for _ in range(1000)}
    assert len(made) == 1000
    assert all(len(u) == 26 and set(u) <= set(ALPHABET) for u in made)


def test_lexicographic_order_follows_time() -> None:
    ids = [ulid(ms) for ms in (3, 1, 2)]
    assert [ulid_time_ms(u) for u in sorted(ids)] == [1, 2, 3]
    assert ulid(1, b"\xff" * 10) < ulid(2, bytes(10))


def test_stable_ids_are_stable_and_content_bound() -> None:
    assert stable_ulid(5, b"a") == stable_ulid(5, b"a") != stable_ulid(5, b"b")


def test_an_event_keeps_its_id_through_json_and_sends_it() -> None:
    event = HealthEvent("gpu.xid", 1_700_000_000_000_000_000, Severity.ERROR, "XID 79", ())
    assert HealthEvent.from_json(event.to_json()).uid == event.uid
    (record,) = event.records()
    assert ("log.record.uid", event.uid) in record and ("gpu.event.id", event.uid) in record
