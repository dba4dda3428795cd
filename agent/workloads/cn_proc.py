"""pyroute2's proc connector messages, loaded without the rest of pyroute2.

Kept apart so the import trick below is all this module does.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import types


def _light_pyroute2() -> None:
    """Let ``pyroute2.netlink.connector`` load without ``pyroute2/__init__``.

    The package's ``__init__`` imports every pyroute2 API (IPRoute, NDB, conntrack, …): 130 ms
    and about 10 MiB of RSS for the two message classes we need. Registering the bare package
    first makes Python import only the submodules asked for. Nothing else in the agent imports
    pyroute2, and a process that already did keeps its full package.
    """
    if "pyroute2" in sys.modules:
        return
    spec = importlib.util.find_spec("pyroute2")
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the import below fails with the usual message
    package = types.ModuleType("pyroute2")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["pyroute2"] = package


_light_pyroute2()

from pyroute2.netlink import NETLINK_CONNECTOR, NLMSG_DONE, nlmsg  # noqa: E402
from pyroute2.netlink.connector.cn_proc import (  # noqa: E402
    CN_IDX_PROC,
    CN_VAL_PROC,
    PROC_CN_MCAST_IGNORE,
    PROC_CN_MCAST_LISTEN,
    PROC_EVENT_EXEC,
    PROC_EVENT_EXIT,
    PROC_EVENT_FORK,
    ProcEventMarshal,
    proc_event_control,
    proc_event_exec,
    proc_event_exit,
    proc_event_fork,
)


class proc_event_filter(proc_event_control):  # type: ignore[misc]  # noqa: N801
    """The control message with the event mask Linux 6.6+ accepts (``struct proc_input``)."""

    fields = (*proc_event_control.fields, ("event_type", "I"))


def field_offset(message: type[nlmsg], name: str) -> int:
    """Byte offset of ``name`` in a whole netlink message of type ``message``.

    Read from pyroute2's own field tables, so the fast decoder below and pyroute2 agree on the
    layout by construction.
    """
    header = struct.calcsize("=" + "".join(fmt for _, fmt in nlmsg.header))
    formats: list[str] = []
    for field, fmt in message.fields:
        if field == name:
            return header + struct.calcsize("=" + "".join(formats))
        formats.append(fmt)
    raise KeyError(name)

__all__ = [
    "CN_IDX_PROC", "CN_VAL_PROC", "NETLINK_CONNECTOR", "NLMSG_DONE", "PROC_CN_MCAST_IGNORE",
    "PROC_CN_MCAST_LISTEN", "PROC_EVENT_EXEC", "PROC_EVENT_EXIT", "PROC_EVENT_FORK",
    "ProcEventMarshal", "field_offset", "proc_event_control", "proc_event_exec",
    "proc_event_exit", "proc_event_filter", "proc_event_fork",
]
