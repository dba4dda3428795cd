"""Hostile names become safe attribute values."""

from __future__ import annotations

from gpu_otel_agent.workloads.names import MAX_NAME, sanitize


def test_newlines_and_escapes_become_single_spaces() -> None:
    assert sanitize("evil\nname\r\n\x1b[31mred") == "evil name [31mred"


def test_long_names_are_cut_and_marked() -> None:
    cleaned = sanitize("x" * 10_000)
    assert len(cleaned) == MAX_NAME and cleaned.endswith("…")


def test_invalid_utf8_is_replaced_not_dropped() -> None:
    assert sanitize(b"ab\xff\xfecd") == "ab\ufffd\ufffdcd"


def test_ordinary_names_are_unchanged() -> None:
    assert sanitize("python3") == "python3"
    assert sanitize("trainer-7f9c-0") == "trainer-7f9c-0"
