"""ProcReader builds its /proc paths as plain strings (workloads/procfs.py says why): it must
read what the pathlib paths it replaced read, under any root, for any PID."""

from __future__ import annotations

import os
import random
from pathlib import Path

from gpu_otel_agent.workloads.cgroup import parse_proc_cgroup
from gpu_otel_agent.workloads.names import MAX_COMMAND_LINE, sanitize
from gpu_otel_agent.workloads.procfs import NAMESPACE_FILE, ProcReader

POD = "0:: /kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{cid}.scope\n"


def _reference_facts(root: Path, pid: int) -> tuple[object, ...]:
    """What the pathlib version read, field by field (its expressions, kept here)."""
    base = root / str(pid)
    cgroup = (base / "cgroup").read_text(encoding="utf-8", errors="replace")
    comm = sanitize((base / "comm").read_bytes().removesuffix(b"\n"))
    raw = (base / "cmdline").read_bytes()[: MAX_COMMAND_LINE * 4]
    env = dict(entry.partition(b"=")[::2] for entry in (base / "environ").read_bytes()
               .split(b"\0") if b"=" in entry)
    namespace = (base / NAMESPACE_FILE).read_bytes()[:253].decode().strip()
    return (parse_proc_cgroup(cgroup), comm,
            sanitize(raw.replace(b"\0", b" "), MAX_COMMAND_LINE),
            env[b"HOSTNAME"].decode(), ((("CUDA_MPS", env[b"CUDA_MPS"].decode()),)), namespace)


def _write_process(root: Path, pid: int, rng: random.Random) -> None:
    base = root / str(pid)
    (base / NAMESPACE_FILE).parent.mkdir(parents=True)
    uid = f"{rng.getrandbits(64):016x}"
    (base / "cgroup").write_text(POD.format(uid=uid, cid=f"{rng.getrandbits(128):032x}"))
    (base / "comm").write_bytes(f"train-{rng.randrange(1000)}\n".encode())
    (base / "cmdline").write_bytes(b"\0".join(f"a{i}".encode() for i in range(rng.randrange(6))))
    (base / "environ").write_bytes(
        f"A=1\0HOSTNAME=pod-{pid}\0CUDA_MPS={rng.randrange(100)}\0".encode())
    (base / NAMESPACE_FILE).write_text(f"ns-{rng.randrange(50)}\n")
    state = rng.choice("RSDZX")
    (base / "stat").write_bytes(f"{pid} (a) b) {state} 1 2 3".encode())


def test_string_paths_read_what_pathlib_paths_read(tmp_path: Path) -> None:
    rng = random.Random(41)
    for root in (tmp_path / "proc", tmp_path / "proc" / "", Path(str(tmp_path) + "/proc/")):
        root.mkdir(exist_ok=True)
        reader = ProcReader(root, frozenset({"CUDA_MPS"}))
        for _ in range(40):
            pid = rng.randrange(1, 4_194_304)
            if not (root / str(pid)).exists():
                _write_process(root, pid, rng)
            facts = reader.facts(pid, command_line=True)
            assert facts.exists
            assert (facts.cgroup, facts.executable, facts.command_line, facts.hostname,
                    facts.environ, facts.namespace) == _reference_facts(root, pid)
            state = (root / str(pid) / "stat").read_bytes().split(b") ")[-1][:1]
            assert reader.exists(pid) is (state not in (b"Z", b"X"))
            assert reader.cgroup(pid) == facts.cgroup
            assert reader.executable(pid) == facts.executable
        missing = max(int(p.name) for p in root.iterdir()) + 1
        assert not reader.exists(missing)
        assert not reader.facts(missing).exists
        assert reader.cgroup(missing) is None and reader.executable(missing) == ""


def test_live_proc_and_a_root_of_slash() -> None:
    pid = os.getpid()
    live = ProcReader()
    assert live.exists(pid)
    assert live.executable(pid) == sanitize(Path(f"/proc/{pid}/comm").read_bytes().strip())
    assert live.cgroup(pid) == parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    # The file system root: "/" + "self/..." is /self, not //self or a relative path.
    assert not ProcReader(Path("/")).exists(pid)
    assert ProcReader(Path("/proc/")).facts(pid).executable == live.executable(pid)
