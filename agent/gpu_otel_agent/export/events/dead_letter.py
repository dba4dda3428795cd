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

Written only into a spool the agent uses: a directory it refused (another user's, or open
to others) is never written (issue 39: dead letters went into another user's directory, as
root, through that user's symbolic link). The file is opened relative to the spool's checked
directory descriptor and never through a symbolic link.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from gpu_otel_agent.export.events.spool import Spool, open_private
from gpu_otel_agent.gpu_health.events import HealthEvent

log = logging.getLogger(__name__)
NAME, OLD_NAME = "dead-letter.jsonl", "dead-letter.1.jsonl"
MAX_BYTES = 1024 * 1024


@dataclass
class DeadLetterStats:
    quarantined: dict[str, int] = field(default_factory=dict)  # per refusal code
    unkept: int = 0  # quarantined but not written (no spool, a failed write)


class DeadLetters:
    def __init__(self, spool: Spool, max_bytes: int = MAX_BYTES) -> None:
        self._spool = spool
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self.stats = DeadLetterStats()

    @property
    def path(self) -> Path | None:
        directory = self._spool.path
        return None if directory is None else directory / NAME

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
        path, dir_fd = self.path, self._spool.dir_fd
        if path is None or dir_fd is None:
            return False  # no spool, or one refused: nothing is written there
        payload = json.dumps({"code": code, "detail": detail, "at": time.time(),
                              "event": json.loads(event.to_json())},
                             separators=(",", ":")).encode()
        line = b"%08x %s\n" % (zlib.crc32(payload), payload)
        try:
            fd = open_private(dir_fd, NAME, os.O_WRONLY | os.O_APPEND)
            if os.fstat(fd).st_size + len(line) > self._max_bytes:
                os.close(fd)
                os.replace(NAME, OLD_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                fd = open_private(dir_fd, NAME, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, line)
                os.fsync(fd)  # before the segment holding the event is deleted
            finally:
                os.close(fd)
        except OSError as error:
            hint = ("; it is a symbolic link, not followed: remove it"
                    if error.errno == errno.ELOOP else "")
            log.error("cannot write the dead-letter file %s: %s%s", path,
                      error.strerror or error, hint)
            return False
        return True
