"""XID 999: NVML's code for an XID it could not identify (nvml.h nvmlEventData_t: "eventData is
set as 999 for unknown Xid error"), while the kernel log names the same fault with its code."""

from __future__ import annotations

from gpu_otel_agent.gpu_health.dedup import CrossSourceDedup
from gpu_otel_agent.gpu_health.xid import CATALOG, UNKNOWN_XID, lookup
from gpu_otel_agent.model.snapshot import HealthState


def test_999_is_in_the_catalog() -> None:
    info = lookup(UNKNOWN_XID)
    assert UNKNOWN_XID in CATALOG and info.name == "UNKNOWN_XID"
    assert "kernel log" in info.meaning and info.state is HealthState.OK


def test_999_after_the_kernel_log_line_is_the_same_fault() -> None:
    dedup = CrossSourceDedup(2.0, wildcard=UNKNOWN_XID)
    assert not dedup.is_duplicate("GPU-a", 79, "kmsg", 10.0)
    assert dedup.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.5)
    # used up: a second 999 is a second fault
    assert not dedup.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.6)


def test_the_kernel_log_line_after_999_is_reported_and_uses_it_up() -> None:
    """It names the fault (a 79 must not hide behind a 999); the pair is not matched twice."""
    dedup = CrossSourceDedup(2.0, wildcard=UNKNOWN_XID)
    assert not dedup.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.0)
    assert not dedup.is_duplicate("GPU-a", 79, "kmsg", 10.2)
    # the 999 was used up by the 79: another kernel-log XID has nothing left to match ...
    assert not dedup.is_duplicate("GPU-a", 43, "kmsg", 10.4)
    # ... but a later 999 matches the unmatched kernel-log line (the 43)
    assert dedup.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.5)


def test_other_gpus_windows_and_sources_stay_apart() -> None:
    dedup = CrossSourceDedup(2.0, wildcard=UNKNOWN_XID)
    assert not dedup.is_duplicate("GPU-b", 79, "kmsg", 10.0)
    assert not dedup.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.1)  # another GPU
    assert not dedup.is_duplicate("GPU-a", 48, "nvml", 10.2)
    assert not dedup.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.3)  # same source: real
    assert not dedup.is_duplicate("GPU-b", UNKNOWN_XID, "nvml", 13.0)  # past the window
    plain = CrossSourceDedup(2.0)  # without a wildcard, 999 is a code like any other
    plain.is_duplicate("GPU-a", 79, "kmsg", 10.0)
    assert not plain.is_duplicate("GPU-a", UNKNOWN_XID, "nvml", 10.1)
