"""Making untrusted names safe to export as attribute values.

Process names, command lines and Kubernetes names come from users: they may hold newlines,
terminal escapes, invalid UTF-8 or kilobytes of text. Exported as-is they break log pipelines
and blow up label sizes, so every such value passes through :func:`sanitize`.
"""

from __future__ import annotations

MAX_NAME = 128
MAX_COMMAND_LINE = 1024
_ELLIPSIS = "…"


def sanitize(raw: str | bytes, limit: int = MAX_NAME) -> str:
    """Printable text of at most ``limit`` characters: invalid UTF-8 becomes U+FFFD, control
    characters become spaces (runs collapsed), and what is cut is marked with an ellipsis."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    out: list[str] = []
    space = False
    for char in text:
        if not char.isprintable():
            if not space and out:
                out.append(" ")
            space = True
            continue
        space = False
        out.append(char)
        if len(out) > limit:
            break
    cleaned = "".join(out).strip()
    if len(cleaned) > limit:
        cleaned = cleaned[: limit - 1] + _ELLIPSIS
    return cleaned
