"""The bytes an object graph holds, for tests that a structure returns to its size."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterator


def deep_size(root: object) -> int:
    """``sys.getsizeof`` summed over everything reachable through containers, instance
    dictionaries and slots (each object once; classes, functions and modules not followed:
    they are not per-process state)."""
    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or (callable(obj) and not hasattr(
                obj, "__dict__")):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(_children(obj))
    return total


def _children(obj: object) -> Iterator[object]:
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, list | tuple | set | frozenset | deque):
        yield from obj
    elif isinstance(obj, str | bytes | int | float | bool) or obj is None:
        return
    else:
        if hasattr(obj, "__dict__"):
            yield vars(obj)
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(obj, name):
                    yield getattr(obj, name)
