"""Reload when the configuration file changes, without waking up to look.

inotify on the file's directory sees every way the file changes: an edit in place (closed after
writing), a file renamed over it, and a Kubernetes ConfigMap update (the kubelet swaps the
directory's ``..data`` symlink by a rename). Events only prompt a look at the file's inode,
mtime and size, so other files in the directory cost a ``stat`` and nothing else. Polling every
``RELOAD_POLL_SECONDS`` remains where inotify cannot watch the directory (it woke the agent
every two seconds on every node before, for a file that rarely changes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from gpu_otel_agent.workloads.inotify import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    Inotify,
)

log = logging.getLogger(__name__)
RELOAD_POLL_SECONDS = 2.0
# IN_DELETE_SELF: the directory went away; the watch ends and polling takes over.
_CHANGES = (IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM
            | IN_DELETE_SELF)


def version(path: Path) -> tuple[int, int, int, int] | None:
    """What tells one state of the file from the next: its inode (a file renamed over it is
    another inode), modification time and size. The time alone missed a file renamed over it
    within the clock's coarse tick (a few milliseconds)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size


async def watch_config_file(path: Path, on_change: Callable[[], None]) -> None:
    """Call ``on_change`` (on the loop) each time ``path`` changes (``version``)."""
    changed = asyncio.Event()
    inotify = Inotify(lambda _dir, _name, _mask: changed.set(), changed.set)
    watching = (inotify.start(asyncio.get_running_loop())
                and inotify.watch(path.parent, _CHANGES))
    if not watching:
        log.info("configuration file %s: polled every %gs (its directory cannot be watched)",
                 path, RELOAD_POLL_SECONDS)
    last = version(path)
    try:
        while True:
            if watching and inotify.watched:
                await changed.wait()
                changed.clear()
            else:  # no inotify, or the directory itself went away
                await asyncio.sleep(RELOAD_POLL_SECONDS)
            current = version(path)
            if current != last:
                last = current
                try:
                    on_change()
                except Exception:  # a bug in the reload must not end the watch for good
                    log.exception("configuration file %s: reload failed; still watching", path)
    finally:
        inotify.stop()
