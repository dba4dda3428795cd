"""UUID text as the standard library's ``uuid`` writes it, without importing it.

Why: ``uuid`` brings ``platform`` (and looks for libuuid), about 0.23 MiB resident in every
``gpu-agent run`` (issue 41), for two strings: the agent's ``service.instance.id`` (a name-based
UUID, version 5) and a GPU fabric's cluster UUID (16 bytes as text).
``tests/unit/model/test_uuid_text.py`` compares both with ``uuid`` over random inputs.
"""

from __future__ import annotations

import hashlib


def uuid_text(raw: bytes) -> str:
    """``str(uuid.UUID(bytes=raw))``: 16 bytes as 8-4-4-4-12 lower-case hex."""
    if len(raw) != 16:
        raise ValueError("bytes is not a 16-char string")  # uuid.UUID's own words
    digits = raw.hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def uuid5_text(namespace: str, name: str) -> str:
    """``str(uuid.uuid5(uuid.UUID(namespace), name))``: SHA-1 of the namespace's 16 bytes and
    the name's UTF-8, cut to 16 bytes, version 5 and the RFC 4122 variant stamped in."""
    digest = bytearray(hashlib.sha1(bytes.fromhex(namespace.replace("-", ""))
                                    + name.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    return uuid_text(bytes(digest))
