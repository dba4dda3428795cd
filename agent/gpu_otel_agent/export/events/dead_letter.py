"""Health events the collector refused for good, kept beside the spool instead of re-offered.

OTLP says a request answered with a non-retryable code is dropped (the collector will refuse
it every time). Re-offering it blocked every later event behind it, across restarts (issue
30: 0 of the next 10 XIDs delivered). Dropping it silently loses a real fault. So the one
event the collector will not take is moved here, the queue goes on, and an operator can read
what was refused and why: one line per event, ``<crc32> {"code": ..., "at": ..., "event":
{...}}`` (the event as the spool writes it), in ``dead-letter.jsonl`` inside the spool's own
private directory (it holds pod names like the spool). Bounded: past ``max_bytes`` the file
becomes ``dead-letter.1.jsonl`` (the one before is deleted), so at most twice that is kept.
Events that could not be kept (no spool, a failed write) are only logged and counted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from gpu_otel_agent.gpu_health.events import HealthEvent

log = logging.getLogger(__name__)
NAME, OLD_NAME = "dead-letter.jsonl", "dead-letter.1.jsonl"
MAX_BYTES = 1024 * 1024
FILE_MODE = 0o600


@dataclass
class DeadLetterStats:
    quarantined: dict[str, int] = field(default_factory=dict)  # per refusal code
    unkept: int = 0  # quarantined but not written (no spool, a failed write)


class DeadLetters:
    def __init__(self, directory: Path | None, max_bytes: int = MAX_BYTES) -> None:
        self._directory = directory
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self.stats = DeadLetterStats()

    @property
    def path(self) -> Path | None:
        return None if self._directory is None else self._directory / NAME

    def quarantine(self, event: HealthEvent, code: str, detail: str = "") -> None:
        """Keep ``event`` aside (fsynced before it leaves the spool); log and count it."""
        with self._lock:
            self.stats.quarantined[code] = self.stats.quarantined.get(code, 0) + 1
            kept = self._write(event, code, detail)
            if not kept:
                self.stats.unkept += 1
        where = f"kept in {self.path}" if kept else "not kept (no usable spool)"
        log.error("health event %s (log.record.uid %s) refused by the collector for good "
                  "(%s%s): %s; later events go on (counted in gpu_agent.events.quarantined)",
                  event.name, event.uid, code, f": {detail}" if detail else "", where)

    def _write(self, event: HealthEvent, code: str, detail: str) -> bool:
        path = self.path
        if path is None:
            return False
        payload = json.dumps({"code": code, "detail": detail, "at": time.time(),
                              "event": json.loads(event.to_json())},
                             separators=(",", ":")).encode()
        line = b"%08x %s\n" % (zlib.crc32(payload), payload)
        try:
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_size + len(line) > self._max_bytes:
                    path.replace(path.with_name(OLD_NAME))
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                         FILE_MODE)
            try:
                os.write(fd, line)
                os.fsync(fd)  # before the segment holding the event is deleted
            finally:
                os.close(fd)
        except OSError as error:
            log.error("cannot write the dead-letter file %s: %s", path,
                      error.strerror or error)
            return False
        return True
