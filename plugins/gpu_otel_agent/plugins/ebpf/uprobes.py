"""Uprobes attached per CUDA library file, while at least one GPU process maps it.

Attaching parses the library's symbol table (libbpf does it per function), which for a real
``libcuda`` takes milliseconds: :meth:`ProbeSet.sync` runs off the event loop, and each file
is attached once however many processes map it.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gpu_otel_agent.plugins.ebpf.libbpf import BpfError, Link
from gpu_otel_agent.plugins.ebpf.libraries import LibraryFile, MappedLibrary
from gpu_otel_agent.plugins.ebpf.symbols import PROBES, LibraryKind

log = logging.getLogger(__name__)
# The kernel cannot uprobe a function whose first instruction it cannot single-step (a `lock`
# prefix, say): that function goes untraced, the rest of the library does not.
ENOTSUPP = 524


class Attacher(Protocol):
    def attach_uprobe(self, program: str, library: MappedLibrary, function: str,
                      retprobe: bool) -> Link: ...

    def mark_runtime(self, file: LibraryFile, traced: bool) -> None: ...


@dataclass
class _Attached:
    library: MappedLibrary
    links: list[Link]
    users: set[int] = field(default_factory=set)


def destroy_now(links: Sequence[Link], done: Callable[[], None]) -> None:
    for link in links:
        link.destroy()
    done()


class ProbeSet:
    """``release`` detaches links that are no longer wanted (see
    :mod:`gpu_otel_agent.plugins.ebpf.reaper` for why the plugin does it in the background)."""

    def __init__(self, attacher: Attacher,
                 release: Callable[[Sequence[Link], Callable[[], None]], None] = destroy_now,
                 ) -> None:
        self._attacher = attacher
        self._release = release
        self._attached: dict[LibraryFile, _Attached] = {}
        self._failed: set[LibraryFile] = set()  # said once; retried when wanted anew

    @property
    def libraries(self) -> int:
        return len(self._attached)

    def traced_pids(self) -> frozenset[int]:
        return frozenset(pid for a in self._attached.values() for pid in a.users)

    def sync(self, wanted: Mapping[int, tuple[MappedLibrary, ...]]) -> None:
        """Make the attached set exactly the libraries ``wanted`` (pid -> what it maps)."""
        users: dict[LibraryFile, set[int]] = {}
        seen_as: dict[LibraryFile, list[MappedLibrary]] = {}
        for pid, libraries in wanted.items():
            for library in libraries:
                users.setdefault(library.file, set()).add(pid)
                seen_as.setdefault(library.file, []).append(library)
        for file in [f for f in self._attached if f not in users]:
            self._detach(file)
        self._failed &= users.keys()
        for file, pids in users.items():
            attached = self._attached.get(file)
            if attached is None and file not in self._failed:
                # Through any user's /proc/PID/root that still exists: one may have exited.
                reachable = next((m for m in seen_as[file] if m.path.exists()), None)
                if reachable is None:
                    log.debug("%s: every process mapping it is gone", seen_as[file][0].path)
                    continue
                attached = self._attach(reachable)
            if attached is not None:
                attached.users = pids

    def close(self) -> None:
        for file in list(self._attached):
            self._detach(file)

    def _attach(self, library: MappedLibrary) -> _Attached | None:
        links: list[Link] = []
        missing = 0
        refused: list[str] = []
        for probe in PROBES[library.kind]:
            try:
                links.append(self._attacher.attach_uprobe(
                    probe.program, library, probe.function, probe.retprobe))
            except BpfError as error:
                if error.errno == errno.ENOENT and library.path.exists():
                    missing += 1  # this CUDA version has no such function
                    continue
                if error.errno == ENOTSUPP:
                    refused.append(probe.function)
                    continue
                for link in links:
                    link.destroy()
                self._failed.add(library.file)
                hint = (" (another container's files are opened through /proc/PID/root, which "
                        "needs CAP_SYS_PTRACE)" if error.errno in (errno.EACCES, errno.EPERM)
                        else "")
                log.warning("cannot trace %s: %s%s", library.path, error.strerror, hint)
                return None
        if not links:
            self._failed.add(library.file)
            log.warning("cannot trace %s: none of the CUDA functions traced is in it",
                        library.path)
            return None
        attached = _Attached(library, links)
        self._attached[library.file] = attached
        if library.kind is LibraryKind.RUNTIME:
            self._attacher.mark_runtime(library.file, True)
        log.info("tracing %s (%s, %d probes; %d functions absent)", library.path,
                 library.kind.value, len(links), missing)
        if refused:
            log.warning("%s: the kernel cannot probe %s; those calls are not counted",
                        library.path, ", ".join(sorted(set(refused))))
        return attached

    def _detach(self, file: LibraryFile) -> None:
        attached = self._attached.pop(file)
        if attached.library.kind is LibraryKind.RUNTIME:
            self._attacher.mark_runtime(file, False)
        path = attached.library.path
        self._release(attached.links,
                      lambda: log.info("stopped tracing %s: no GPU process maps it", path))
