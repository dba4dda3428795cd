"""ULIDs for ``log.record.uid``: 48 bits of Unix milliseconds, 80 random bits, 26 characters of
Crockford's base32 (https://github.com/ulid/spec).

Twenty lines, so written here rather than taken as a dependency: the agent only makes them
(never parses or orders them beyond their time prefix), and a backend only compares them.
Random bits come from ``os.urandom``: two agents, or a restarted one, never share an id.
"""

from __future__ import annotations

import hashlib
import os
import time

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
LENGTH = 26
_TIME_MAX = (1 << 48) - 1


def ulid(time_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A new ULID for ``time_ms`` (now when None); ``randomness`` is 10 bytes when given."""
    ms = time.time_ns() // 1_000_000 if time_ms is None else time_ms
    if not 0 <= ms <= _TIME_MAX:
        raise ValueError(f"ULID time {ms} ms is outside 0..2**48-1")
    rand = os.urandom(10) if randomness is None else randomness
    if len(rand) != 10:
        raise ValueError("ULID randomness is 80 bits (10 bytes)")
    value = (ms << 80) | int.from_bytes(rand, "big")
    return "".join(ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))


def stable_ulid(time_ms: int, content: bytes) -> str:
    """A ULID derived from ``content``: the same every time it is asked for (a record spooled
    by an agent that had no ids yet gets one id for all its re-sends)."""
    return ulid(max(0, min(time_ms, _TIME_MAX)), hashlib.sha256(content).digest()[:10])


def ulid_time_ms(value: str) -> int:
    """The millisecond timestamp of a ULID (its first 10 characters)."""
    if len(value) != LENGTH:
        raise ValueError(f"a ULID has {LENGTH} characters, got {value!r}")
    number = 0
    for char in value[:10].upper():
        index = ALPHABET.find(char)
        if index < 0:
            raise ValueError(f"{char!r} is not a Crockford base32 digit")
        number = number * 32 + index
    return number
