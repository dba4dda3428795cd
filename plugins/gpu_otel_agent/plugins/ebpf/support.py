"""Why the eBPF plugin cannot run here, in one sentence, checked before anything is loaded."""

from __future__ import annotations

import errno
from pathlib import Path

from gpu_otel_agent.plugins.ebpf.libbpf import BpfError, load_library

KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
UPROBE_PMU = Path("/sys/bus/event_source/devices/uprobe")
# Loading and the tracepoints need CAP_BPF and CAP_PERFMON; creating a uprobe needs
# CAP_SYS_ADMIN since Linux 6.17 and the stable kernels that took the same fix (a uprobe
# patches other processes' code); CAP_SYS_PTRACE opens other containers' libraries through
# /proc/PID/root.
CAPABILITIES = "CAP_BPF and CAP_PERFMON, CAP_SYS_ADMIN (for uprobes) and CAP_SYS_PTRACE"


def missing_support(object_path: Path, btf: Path = KERNEL_BTF,
                    uprobe_pmu: Path = UPROBE_PMU) -> str | None:
    """What is missing before loading, or None."""
    if not object_path.is_file():
        return (f"the BPF object {object_path} is not built"
                " (run `python -m gpu_otel_agent.plugins.ebpf.compile_bpf`"
                "; it needs clang, bpftool and libbpf-dev)")
    if not btf.exists():
        return f"the kernel has no BTF ({btf}; CONFIG_DEBUG_INFO_BTF)"
    if not uprobe_pmu.exists():
        return f"the kernel has no uprobes ({uprobe_pmu}; CONFIG_UPROBE_EVENTS)"
    try:
        load_library()
    except OSError as error:
        return f"the system libbpf cannot be loaded (libbpf.so.1, Debian libbpf1): {error}"
    return None


def load_failure(error: BpfError | OSError) -> str:
    """The reason for a failure to load the programs, attach the tracepoints or create a
    trial uprobe."""
    if error.errno in (errno.EPERM, errno.EACCES):
        return f"the plugin needs {CAPABILITIES}: {error.strerror}"
    return f"the kernel refused the BPF programs: {error.strerror}"
