"""Where a scenario's placeholder processes go: real cgroups, or none.

A process with ``spawn: {cgroup: PATH}`` is moved into the cgroup ``PATH`` so that attribution
sees a container and a pod, as it would for a kubelet's. Only a cgroup filesystem makes one:
on a cgroup-v1 host ``/sys/fs/cgroup`` itself is a tmpfs, where ``mkdir`` makes a plain
directory and writing ``cgroup.procs`` would create a look-alike file nothing reads (and that
``rmdir`` then cannot remove). So the path goes under a real hierarchy (cgroup v2 at the root
or ``unified``, else the v1 ``pids`` hierarchy every v1 host mounts), ``cgroup.procs`` is
opened without ``O_CREAT`` (only the kernel makes it), and where that cannot be done the
reason is returned for the node to say why its processes show no pod.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _mounts(mounts_file: Path = Path("/proc/self/mounts")) -> dict[Path, tuple[str, str]]:
    """Mount point -> (filesystem type, options) for every cgroup mount under ROOT."""
    found: dict[Path, tuple[str, str]] = {}
    with contextlib.suppress(OSError):
        for line in mounts_file.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2") \
                    and Path(parts[1]).is_relative_to(ROOT):
                found[Path(parts[1])] = (parts[2], parts[3])
    return found


def hierarchy() -> Path | None:
    """The cgroup hierarchy placeholder processes go in; None when no cgroup fs is mounted."""
    mounts = _mounts()
    for point in (ROOT, ROOT / "unified"):
        if mounts.get(point, ("", ""))[0] == "cgroup2":
            return point
    for point, (kind, options) in sorted(mounts.items()):
        if kind == "cgroup" and "pids" in options.split(","):
            return point
    return None


@dataclass
class Placement:
    """The cgroups made (removed in reverse at stop) and why any process was left out."""

    made: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def place(self, pid: int, relative: str) -> bool:
        base = hierarchy()
        if base is None:
            self.problems.append(f"no cgroup filesystem is mounted under {ROOT}")
            return False
        target = base / relative.strip("/")
        missing = [p for p in (target, *target.parents) if p.is_relative_to(base)
                   and p != base and not p.exists()]
        try:
            target.mkdir(parents=True, exist_ok=True)
            self.made.extend(reversed(missing))  # outermost first; removed in reverse
            # O_WRONLY without O_CREAT: in a real cgroup the kernel made cgroup.procs; if it
            # is not there, this is no cgroup, and nothing is written.
            fd = os.open(target / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, f"{pid}\n".encode())
            finally:
                os.close(fd)
        except OSError as error:
            self.problems.append(_reason(base, target, error))
            return False
        return True

    def remove(self) -> None:
        for path in reversed(self.made):
            with contextlib.suppress(OSError):
                path.rmdir()
        self.made.clear()


def _reason(base: Path, target: Path, error: OSError) -> str:
    if isinstance(error, PermissionError):
        return (f"not allowed to create cgroups under {base} (the node runs as uid "
                f"{os.getuid()}; root can)")
    if error.errno == 30:  # EROFS
        return f"{base} is mounted read-only (a container without cgroup write access)"
    return f"cannot place a process in {target}: {error.strerror or error}"
