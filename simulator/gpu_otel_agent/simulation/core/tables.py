"""Names listed in the X-macro tables (``#define NAME(X) X(a) X(b) ...``) of a C source.

The C source is the one place that defines the readings and functions a simulated
library serves; Python reads them from its text so it needs neither a compiled library
nor the vendor's bindings.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path


@cache
def macro_names(source: Path, macro: str) -> tuple[str, ...]:
    """The ``X(name)`` entries of ``#define macro(X)`` in ``source``, in order."""
    text = source.read_text()
    m = re.search(rf"#define {macro}\(X\)(.*?)\n\n", text, re.S)
    if not m:  # pragma: no cover - the sources always define their tables
        raise RuntimeError(f"{macro} table not found in {source}")
    return tuple(re.findall(r"X\((\w+)\)", m.group(1)))
