"""The one reason the plugin gives when it cannot run, before it loads anything."""

from __future__ import annotations

import errno
from pathlib import Path

from gpu_otel_agent.plugins.ebpf.libbpf import BpfError
from gpu_otel_agent.plugins.ebpf.support import load_failure, missing_support


def test_an_unbuilt_object_says_how_to_build_it(tmp_path: Path) -> None:
    reason = missing_support(tmp_path / "cuda_activity.bpf.o")
    assert reason is not None
    assert "not built" in reason and "python -m gpu_otel_agent.plugins.ebpf.compile_bpf" in reason


def test_a_kernel_without_btf_or_uprobes_is_named(tmp_path: Path) -> None:
    built = tmp_path / "cuda_activity.bpf.o"
    built.write_bytes(b"\x7fELF")
    present = tmp_path / "present"
    present.touch()
    no_btf = missing_support(built, btf=tmp_path / "vmlinux", uprobe_pmu=present)
    assert no_btf is not None and "no BTF" in no_btf and "CONFIG_DEBUG_INFO_BTF" in no_btf
    no_uprobes = missing_support(built, btf=present, uprobe_pmu=tmp_path / "uprobe")
    assert no_uprobes is not None and "CONFIG_UPROBE_EVENTS" in no_uprobes


def test_a_refusal_for_lack_of_privilege_names_the_capabilities() -> None:
    denied = load_failure(BpfError(errno.EPERM, "load cuda_activity.bpf.o: Operation not "
                                                "permitted"))
    assert "CAP_BPF and CAP_PERFMON, CAP_SYS_ADMIN (for uprobes) and CAP_SYS_PTRACE" in denied
    other = load_failure(BpfError(errno.EINVAL, "load cuda_activity.bpf.o: Invalid argument"))
    assert "refused" in other and "Invalid argument" in other
