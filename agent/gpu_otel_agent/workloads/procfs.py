"""Reading one process's facts from /proc, only for processes that hold a GPU.

Nothing here walks /proc: each function reads one file of one PID, so the cost follows the
number of GPU processes, never the number of processes on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpu_otel_agent.workloads.cgroup import CgroupIdentity, parse_proc_cgroup
from gpu_otel_agent.workloads.names import MAX_COMMAND_LINE, sanitize

ENVIRON_LIMIT = 256 * 1024  # bytes read from /proc/PID/environ at most
# Inside a pod's filesystem (seen through /proc/PID/root): the pod's namespace, written by the
# kubelet with the service-account token unless the pod opts out.
NAMESPACE_FILE = "root/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(frozen=True, slots=True)
class ProcessFacts:
    """What /proc said about a process when it was first seen on a GPU."""

    pid: int
    exists: bool
    executable: str = ""
    cgroup: CgroupIdentity = field(default_factory=CgroupIdentity)
    command_line: str = ""
    hostname: str = ""  # HOSTNAME, raw (compared, never exported): the pod name in a pod
    environ: tuple[tuple[str, str], ...] = ()  # only the variables asked for
    namespace: str = ""  # the pod's namespace from its service-account mount, raw


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _text(path: str) -> str:
    """As ``Path.read_text(encoding="utf-8", errors="replace")`` reads it."""
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


class ProcReader:
    """Paths are plain strings joined with "/", not ``pathlib`` ones: ``Path`` interns every
    part of a path (``sys.intern``), so building ``/proc/PID/...`` for thousands of PIDs at
    every reconcile filled the interpreter's table of interned strings with PIDs that come
    and go, and that table grows (to 3x its live strings) but never shrinks: at 8 x 2,048
    processes it doubled to 0.94 MiB. A string join is also cheaper than a ``Path``."""

    def __init__(self, proc_root: Path = Path("/proc"),
                 environ_keys: frozenset[str] = frozenset()) -> None:
        # "/proc" -> "/proc/" + PID; the file system root "/" -> "/" + PID
        self._prefix = str(proc_root).rstrip("/") + "/"
        self._environ_keys = environ_keys | {"HOSTNAME"}

    def _base(self, pid: int) -> str:
        return f"{self._prefix}{pid}/"

    def exists(self, pid: int) -> bool:
        """The process is alive (a zombie has exited: its parent just has not reaped it)."""
        try:
            stat = _read(self._base(pid) + "stat")
        except OSError:
            return False
        state = stat[stat.rfind(b")") + 2:][:1]  # the name may hold spaces and parentheses
        return state not in (b"Z", b"X")

    def executable(self, pid: int) -> str:
        try:
            raw = _read(self._base(pid) + "comm")
        except OSError:
            return ""
        return sanitize(raw.removesuffix(b"\n"))

    def cgroup(self, pid: int) -> CgroupIdentity | None:
        """The process's cgroup alone (all a move between cgroups changes); None if gone."""
        try:
            text = _text(self._base(pid) + "cgroup")
        except OSError:
            return None
        return parse_proc_cgroup(text)

    def facts(self, pid: int, command_line: bool = False) -> ProcessFacts:
        base = self._base(pid)
        try:
            cgroup_text = _text(base + "cgroup")
        except OSError:
            return ProcessFacts(pid, exists=False)
        cmdline = ""
        if command_line:
            try:
                raw = _read(base + "cmdline")[: MAX_COMMAND_LINE * 4]
                cmdline = sanitize(raw.replace(b"\0", b" "), MAX_COMMAND_LINE)
            except OSError:
                pass
        env = self._environ(base)
        namespace = _first_line(base + NAMESPACE_FILE) if env.get("HOSTNAME") else ""
        return ProcessFacts(
            pid, exists=True, executable=self.executable(pid),
            cgroup=parse_proc_cgroup(cgroup_text), command_line=cmdline,
            hostname=env.get("HOSTNAME", ""),
            environ=tuple(sorted((k, v) for k, v in env.items() if k != "HOSTNAME")),
            namespace=namespace,
        )

    def _environ(self, base: str) -> dict[str, str]:
        try:
            with open(base + "environ", "rb") as file:
                raw = file.read(ENVIRON_LIMIT)
        except OSError:
            return {}
        found: dict[str, str] = {}
        for entry in raw.split(b"\0"):
            key, sep, value = entry.partition(b"=")
            name = key.decode("ascii", errors="replace")
            if sep and name in self._environ_keys:
                found[name] = value.decode("utf-8", errors="replace")
        return found


def _first_line(path: str, limit: int = 253) -> str:
    try:
        raw = _read(path)[:limit]
    except OSError:
        return ""
    return raw.decode("utf-8", errors="replace").strip()
