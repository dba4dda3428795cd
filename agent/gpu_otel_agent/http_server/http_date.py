"""The ``Date`` header's value, as ``email.utils.formatdate(usegmt=True)`` writes it.

Why not email.utils itself: it brings email's charset, header and address-parsing modules, about
0.8 MiB resident in every ``gpu-agent run`` (issue 41), for one line of formatting.
``tests/unit/http_server/test_http_date.py`` compares both over many times, second boundaries
included.
"""

from __future__ import annotations

import datetime
import time

# RFC 5322's English names, as email.utils._format_timetuple_and_zone has them.
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timeval: float | None = None) -> str:
    """``timeval`` (now if None) as an IMF-fixdate, e.g. ``Sun, 06 Nov 1994 08:49:37 GMT``."""
    if timeval is None:
        timeval = time.time()
    # Through datetime, as formatdate goes: it rounds to the microsecond where gmtime truncates.
    parts = datetime.datetime.fromtimestamp(timeval, datetime.UTC).timetuple()
    return (f"{_DAYS[parts.tm_wday]}, {parts.tm_mday:02d} {_MONTHS[parts.tm_mon - 1]} "
            f"{parts.tm_year:04d} {parts.tm_hour:02d}:{parts.tm_min:02d}:{parts.tm_sec:02d} GMT")
