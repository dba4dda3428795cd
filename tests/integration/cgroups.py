"""Real cgroups and real processes in them, made by a test and removed after it.

Paths follow what kubelets create (cgroupfs and systemd naming, the three QoS levels) under
whichever hierarchies this machine mounts: cgroup v2 (the root itself or ``unified`` on a
hybrid host) and a v1 controller hierarchy (``pids``). Every test uses fresh pod UIDs, so
runs never collide; what a test created is removed in reverse order, even when it fails.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path("/sys/fs/cgroup")


def _mounts() -> dict[str, str]:
    """Mount point -> type (``cgroup2`` or the v1 options) under /sys/fs/cgroup."""
    found = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup2":
            found[point] = "cgroup2"
        elif kind == "cgroup":
            found[point] = options
    return found


def v2_root() -> Path | None:
    for point, kind in _mounts().items():
        if kind == "cgroup2" and point.startswith(str(ROOT)):
            return Path(point)
    return None


def v1_root(controller: str = "pids") -> Path | None:
    for point, options in _mounts().items():
        if options != "cgroup2" and controller in options.split(","):
            return Path(point)
    return None


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("creating cgroups needs root")


@dataclass(frozen=True)
class Pod:
    uid: str
    name: str
    namespace: str
    container_id: str
    cgroup: Path  # the container's cgroup directory


def new_uid() -> str:
    return str(uuid.uuid4())


def container_id() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex


def pod_path(base: Path, uid: str, cid: str, qos: str, driver: str) -> Path:
    """The container cgroup a kubelet with ``driver`` creates for a pod of class ``qos``."""
    if driver == "cgroupfs":
        level = base / "kubepods" if qos == "guaranteed" else base / "kubepods" / qos
        return level / f"pod{uid}" / cid
    under = uid.replace("-", "_")
    if qos == "guaranteed":
        pod = base / "kubepods.slice" / f"kubepods-pod{under}.slice"
    else:
        pod = (base / "kubepods.slice" / f"kubepods-{qos}.slice"
               / f"kubepods-{qos}-pod{under}.slice")
    return pod / f"cri-containerd-{cid}.scope"


class Cgroups:
    """Creates container cgroups and processes in them; ``close`` undoes all of it."""

    def __init__(self) -> None:
        self._created: list[Path] = []
        self._processes: list[subprocess.Popen[bytes]] = []

    def pod(self, base: Path, name: str, qos: str = "burstable", driver: str = "cgroupfs",
            namespace: str = "ml") -> Pod:
        uid, cid = new_uid(), container_id()
        path = pod_path(base, uid, cid, qos, driver)
        missing = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        self._created.extend(reversed(missing))
        return Pod(uid, name, namespace, cid, path)

    def path(self, path: Path) -> Path:
        """Any cgroup directory (a Slurm job step, a plain container), made for the test."""
        missing = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        self._created.extend(reversed(missing))
        return path

    def spawn(self, cgroup: Path, env: Mapping[str, str] | None = None,
              argv: Sequence[str] = ("sleep", "infinity")) -> int:
        """A process moved into ``cgroup``; returns once it is there and has started (a
        command that prints a line is waited for, so its own set-up is done)."""
        child = subprocess.Popen(list(argv), env={**os.environ, **(env or {})},
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        self._processes.append(child)
        (cgroup / "cgroup.procs").write_text(f"{child.pid}\n")
        if tuple(argv) != ("sleep", "infinity"):
            assert child.stdout is not None
            child.stdout.readline()
        return child.pid

    def spawn_plain(self) -> int:
        """A sleeping process left in our own cgroup (a machine without cgroups we can make)."""
        child = subprocess.Popen(["sleep", "infinity"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._processes.append(child)
        return child.pid

    def kill(self, pid: int) -> None:
        for child in self._processes:
            if child.pid == pid:
                child.kill()
                child.wait()

    def close(self) -> None:
        for child in self._processes:
            if child.poll() is None:
                child.kill()
                child.wait()
        # Deepest first; a QoS or top level still used by a concurrent test is not empty, so
        # its rmdir fails and it stays.
        for path in reversed(self._created):
            with contextlib.suppress(OSError):
                path.rmdir()


@contextlib.contextmanager
def cgroups() -> Iterator[Cgroups]:
    require_root()
    made = Cgroups()
    try:
        yield made
    finally:
        made.close()
