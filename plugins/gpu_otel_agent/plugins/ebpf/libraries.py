"""Which CUDA library files a process maps, read from ``/proc/PID/maps``.

A library is identified by the device and inode the kernel shows in ``maps`` (uprobes are
per inode), so a container's own copy of ``libcudart`` is a library of its own while two
processes mapping the same file share one. The path to attach through is the one the process
sees, reached via ``/proc/PID/root``: a file in another mount namespace has no path on the host.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.plugins.ebpf.symbols import LibraryKind, library_kind


@dataclass(frozen=True)
class LibraryFile:
    device: str  # "major:minor" of the file system, as /proc/PID/maps writes it (in hex)
    inode: int

    @property
    def kernel_device(self) -> int:
        """The kernel's dev_t of the file system (MKDEV: the major shifted by 20 bits)."""
        major, _, minor = self.device.partition(":")
        return (int(major, 16) << 20) | int(minor, 16)


@dataclass(frozen=True)
class MappedLibrary:
    file: LibraryFile
    kind: LibraryKind
    path: Path  # through /proc/PID/root, openable from the agent's mount namespace


def mapped_files(text: str) -> Iterator[tuple[LibraryFile, str]]:
    """Each file-backed mapping of a ``maps`` text: the file and its path as the process sees
    it. A file replaced on disk (an upgrade) is left out: its inode has no path any more."""
    for line in text.splitlines():
        # address perms offset dev inode pathname; the path may hold spaces
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/") or \
                fields[5].endswith(" (deleted)") or not fields[4].isdigit():
            continue
        if inode := int(fields[4]):
            yield LibraryFile(fields[3], inode), fields[5]


def parse_maps(text: str, root: Path) -> tuple[MappedLibrary, ...]:
    """The CUDA libraries in a ``maps`` text, once each; ``root`` is ``/proc/PID/root``."""
    found: dict[LibraryFile, MappedLibrary] = {}
    for file, pathname in mapped_files(text):
        kind = library_kind(pathname.rsplit("/", 1)[-1])
        if kind is not None and file not in found:
            found[file] = MappedLibrary(file, kind, root / pathname.lstrip("/"))
    return tuple(found.values())


def mapped_libraries(pid: int, proc_root: Path = Path("/proc")) -> tuple[MappedLibrary, ...]:
    """The CUDA libraries ``pid`` maps now; empty when it is gone or cannot be read."""
    base = proc_root / str(pid)
    try:
        text = (base / "maps").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return ()
    return parse_maps(text, base / "root")
