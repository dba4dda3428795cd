"""The running workload resolver: its event sources, reconciliation and kubelet refresh.

Sources, all on the event loop: process exec/exit (the netlink proc connector, or the eBPF
plugin's tracepoints: :mod:`gpu_otel_agent.workloads.lifecycle`), inotify on the kubepods
cgroup directories (pods and containers appearing and vanishing) and on the kubelet socket's
directory (a kubelet restart), a reconciliation every ``reconcile_interval`` that re-checks only
the PIDs we hold, and the kubelet's pod-resources ``List`` on start, on a new pod, on a new
socket and every ``refresh_interval``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpu_otel_agent.workloads.cgroup import parse_path
from gpu_otel_agent.workloads.inotify import IN_CREATE, IN_DELETE, IN_ISDIR, IN_MOVED_TO, Inotify
from gpu_otel_agent.workloads.lifecycle import (
    ProcessCallbacks,
    ProcessEventsFactory,
    netlink_events,
)
from gpu_otel_agent.workloads.pods import PodAllocation
from gpu_otel_agent.workloads.resolver import WorkloadResolver

log = logging.getLogger(__name__)
KUBEPODS = ("kubepods", "kubepods.slice")
# Where a hierarchy may be mounted under the cgroup root (v2 itself, hybrid, v1 controllers).
HIERARCHIES = ("", "unified", "systemd", "pids", "memory", "cpu,cpuacct", "cpu")
WATCH_DEPTH = 3  # kubepods / qos / pod / (container dirs are seen as events of the pod dir)
RETRY_SECONDS = 2.0


class PodSource(Protocol):
    socket_path: Path

    async def list(self) -> tuple[PodAllocation, ...]:
        """Every pod with its allocations. Raises on any failure to ask."""

    async def get(self, namespace: str, name: str) -> PodAllocation | None:
        """One pod; None when the kubelet has no ``Get`` or no such pod. Raises on failure."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class ServiceSettings:
    cgroup_root: Path = Path("/sys/fs/cgroup")
    reconcile_interval: float = 60.0
    refresh_interval: float = 30.0


class WorkloadService:
    def __init__(self, resolver: WorkloadResolver, settings: ServiceSettings,
                 pods: PodSource | None = None,
                 process_events: ProcessEventsFactory = netlink_events) -> None:
        self.resolver = resolver
        self._settings = settings
        self._pods = pods
        self._refresh_now = asyncio.Event()
        self._reconcile_now = asyncio.Event()
        self._process_events = process_events(ProcessCallbacks(
            resolver.on_exec, resolver.on_exit, self._reconcile_now.set, resolver.on_fork))
        # The source drops other processes' events (in the kernel, where it can).
        resolver.on_watched(self._process_events.watch)
        self._inotify = Inotify(self._on_fs_event, self._reconcile_now.set)
        self._depth: dict[Path, int] = {}
        self._kubelet_ok: bool | None = None
        resolver.on_unlisted(self._refresh_now.set)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._process_events.start(loop)
        if self._inotify.start(loop):
            self._watch_cgroups()
            if self._pods is not None:
                self._inotify.watch(self._pods.socket_path.parent)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._reconcile_loop(), name="workloads:reconcile")
                if self._pods is not None:
                    tasks.create_task(self._refresh_loop(self._pods), name="workloads:kubelet")
        finally:
            self._process_events.stop()
            self._inotify.stop()
            if self._pods is not None:
                self._pods.close()

    # -- cgroups -------------------------------------------------------------------------

    def _watch_cgroups(self) -> None:
        root = self._settings.cgroup_root
        for hierarchy in HIERARCHIES:
            base = root / hierarchy if hierarchy else root
            if not base.is_dir():
                continue
            self._watch(base, -1)  # the root: only to see kubepods appear
            for name in KUBEPODS:
                if (base / name).is_dir():
                    self._watch_tree(base / name, 0)

    def _watch(self, path: Path, depth: int) -> None:
        if self._inotify.watch(path):
            self._depth[path] = depth

    def _watch_tree(self, path: Path, depth: int) -> None:
        self._watch(path, depth)
        if depth >= WATCH_DEPTH - 1:
            return
        try:
            children = [e for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for child in children:
            if depth == 0 or parse_path(child.name).pod_uid or "kubepods" in child.name or \
                    child.name in ("burstable", "besteffort"):
                self._watch_tree(Path(child.path), depth + 1)

    def _on_fs_event(self, directory: Path, name: str, mask: int) -> None:
        if self._pods is not None and directory == self._pods.socket_path.parent:
            if name == self._pods.socket_path.name and mask & (IN_CREATE | IN_MOVED_TO):
                log.info("kubelet socket %s appeared; asking for pods",
                         self._pods.socket_path)
                self._refresh_now.set()
            return
        depth = self._depth.get(directory)
        if depth is None or not mask & IN_ISDIR:
            return
        child = directory / name
        uid = parse_path(name).pod_uid
        if mask & (IN_CREATE | IN_MOVED_TO):
            if depth == -1:
                if name in KUBEPODS:
                    self._watch_tree(child, 0)
                return
            if depth < WATCH_DEPTH - 1 and (uid or depth == 0):
                self._watch_tree(child, depth + 1)
            if uid:
                self._refresh_now.set()  # a new pod: fetch its name before its first export
            self.resolver.on_cgroup_change()
        elif mask & IN_DELETE:
            self._depth.pop(child, None)
            if uid:
                self.resolver.on_pod_gone(uid)

    # -- loops ---------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._settings.reconcile_interval):
                    await self._reconcile_now.wait()
            except TimeoutError:
                pass
            self._reconcile_now.clear()
            self.resolver.reconcile()

    async def _refresh_loop(self, pods: PodSource) -> None:
        while True:
            self._refresh_now.clear()
            try:
                if self._kubelet_ok and await self._get_wanted(pods):
                    await self._wait(self._settings.refresh_interval)
                    continue
                listed = await pods.list()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # any failure: names wait, cgroup identities stay
                if self._kubelet_ok is not False:
                    log.warning("kubelet pod-resources unavailable (%s); pods are reported "
                                "by cgroup identity only until it answers", error)
                self._kubelet_ok = False
                wait = self._retry_after(pods)
            else:
                if self._kubelet_ok is not True:
                    log.info("kubelet pod-resources: %d pods", len(listed))
                self._kubelet_ok = True
                self.resolver.set_pods(listed)
                wait = self._settings.refresh_interval
            await self._wait(wait)

    def _retry_after(self, pods: PodSource) -> float:
        """A socket that refused: the kubelet is restarting, try again soon. No socket: its
        directory's inotify watch says when it appears (a kubelet start); without a watch (no
        directory yet, a node without a kubelet), look again at the refresh interval."""
        if pods.socket_path.exists():
            return RETRY_SECONDS
        self._inotify.watch(pods.socket_path.parent)  # the directory may exist by now
        return self._settings.refresh_interval

    async def _get_wanted(self, pods: PodSource) -> bool:
        """Fetch just the pods we miss by name (``Get``); False when a ``List`` is needed."""
        wanted = sorted(self.resolver.wanted)
        if not wanted:
            return False
        for namespace, name in wanted:
            pod = await pods.get(namespace, name)
            if pod is None:
                return False
            self.resolver.add_pod(pod)
        return True

    async def _wait(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._refresh_now.wait()
        except TimeoutError:
            pass
