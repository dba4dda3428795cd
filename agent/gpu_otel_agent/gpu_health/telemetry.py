"""The health pipeline's self-telemetry, as one immutable reading of its counters.

The agent's self-metrics endpoint reads :meth:`HealthRuntime.telemetry` (see
``gpu_otel_agent.runtime.health_pipeline``); nothing here blocks or allocates per event.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HealthTelemetry:
    device_events: int  # raw events from NVML / kmsg
    events: int  # health events produced (after de-duplication and storm control)
    suppressed: int  # occurrences folded into storm summaries
    duplicates: int  # the same XID seen by a second source
    sent: int  # events the collector accepted
    send_failures: int  # batches it refused
    spooled: int  # events written to the on-disk spool
    resent: int  # spooled events later accepted
    dropped: int  # events lost: spool full or unavailable, or memory overflow
    spool_corrupt: int  # unreadable spool records skipped
    spool_errors: int  # spool failures: unusable directory, failed writes, corrupt records
    spool_writes: int  # write-ahead segments written (one fsync each: group commit)
    spool_write_seconds: float  # time spent writing them ahead
    spool_records: int  # events waiting in the spool now
    spool_bytes: int
