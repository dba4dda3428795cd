"""Loads the entry points of one group; a plugin that fails to load is reported once, by name.

Loading imports the plugin's module, so each group is loaded only where it is used: the CLI's
command groups on every command, the rest only by ``run`` (and the simulated node only for
``run --simulate``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.distributions import FoundEntry, entry_points_of

log = logging.getLogger(__name__)

_reported: set[tuple[str, str, str, str]] = set()
_reported_lock = threading.Lock()


@dataclass(frozen=True)
class LoadedEntry:
    name: str
    value: Any  # checked against its group's Protocol by the caller that knows the group


def _report_once(entry: FoundEntry, group: str, error: BaseException) -> None:
    # The same broken plugin may be looked up more than once in a process; one line per plugin
    # is enough to say what is missing. Another installed copy of it is another plugin.
    key = (group, entry.name, entry.value, entry.location)
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    log.error("plugin %s (%s = %s) could not be loaded, left out: %s: %s",
              entry.name, group, entry.value, type(error).__name__, error)


def load_group(group: str, *, callable_only: bool = True) -> list[LoadedEntry]:
    """Every entry point of ``group`` that loads, sorted by name (a stable order for output).

    Two distributions declaring the same name: the first found wins, the other is reported.
    """
    loaded: list[LoadedEntry] = []
    seen: set[str] = set()
    for entry in sorted(entry_points_of(group), key=lambda e: e.name):
        if entry.name in seen:
            _report_once(entry, group, ValueError(f"a plugin named {entry.name!r} is already "
                                                  f"loaded from this group"))
            continue
        try:
            value = entry.load()
        except Exception as error:  # a broken plugin must not take the others down
            _report_once(entry, group, error)
            continue
        if callable_only and not callable(value):
            _report_once(entry, group, TypeError(f"{entry.value} is not callable"))
            continue
        seen.add(entry.name)
        loaded.append(LoadedEntry(entry.name, value))
    return loaded
