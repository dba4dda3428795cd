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


class ProcReader:
    def __init__(self, proc_root: Path = Path("/proc"),
                 environ_keys: frozenset[str] = frozenset()) -> None:
        self._root = proc_root
        self._environ_keys = environ_keys | {"HOSTNAME"}

    def exists(self, pid: int) -> bool:
        """The process is alive (a zombie has exited: its parent just has not reaped it)."""
        try:
            stat = (self._root / str(pid) / "stat").read_bytes()
        except OSError:
            return False
        state = stat[stat.rfind(b")") + 2:][:1]  # the name may hold spaces and parentheses
        return state not in (b"Z", b"X")

    def executable(self, pid: int) -> str:
        try:
            raw = (self._root / str(pid) / "comm").read_bytes()
        except OSError:
            return ""
        return sanitize(raw.removesuffix(b"\n"))

    def cgroup(self, pid: int) -> CgroupIdentity | None:
        """The process's cgroup alone (all a move between cgroups changes); None if gone."""
        try:
            text = (self._root / str(pid) / "cgroup").read_text(encoding="utf-8",
                                                                errors="replace")
        except OSError:
            return None
        return parse_proc_cgroup(text)

    def facts(self, pid: int, command_line: bool = False) -> ProcessFacts:
        base = self._root / str(pid)
        try:
            cgroup_text = (base / "cgroup").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ProcessFacts(pid, exists=False)
        cmdline = ""
        if command_line:
            try:
                raw = (base / "cmdline").read_bytes()[: MAX_COMMAND_LINE * 4]
                cmdline = sanitize(raw.replace(b"\0", b" "), MAX_COMMAND_LINE)
            except OSError:
                pass
        env = self._environ(base)
        namespace = _first_line(base / NAMESPACE_FILE) if env.get("HOSTNAME") else ""
        return ProcessFacts(
            pid, exists=True, executable=self.executable(pid),
            cgroup=parse_proc_cgroup(cgroup_text), command_line=cmdline,
            hostname=env.get("HOSTNAME", ""),
            environ=tuple(sorted((k, v) for k, v in env.items() if k != "HOSTNAME")),
            namespace=namespace,
        )

    def _environ(self, base: Path) -> dict[str, str]:
        try:
            with (base / "environ").open("rb") as file:
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


def _first_line(path: Path, limit: int = 253) -> str:
    try:
        raw = path.read_bytes()[:limit]
    except OSError:
        return ""
    return raw.decode("utf-8", errors="replace").strip()
