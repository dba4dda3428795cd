"""Finding the CUDA libraries a process maps, from /proc/PID/maps text."""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpu_otel_agent.plugins.ebpf.compile_bpf import SOURCE
from gpu_otel_agent.plugins.ebpf.libraries import LibraryFile, mapped_libraries, parse_maps
from gpu_otel_agent.plugins.ebpf.symbols import PROBES, PROGRAMS, LibraryKind, library_kind
from tests.cuda_standin.driver import CudaWorkload

ROOT = Path("/proc/77/root")
MAPS = """\
55d0c0000000-55d0c0001000 r--p 00000000 fe:01 100 /usr/bin/python3.11
7f0000000000-7f0000010000 r--p 00000000 fe:01 200 /usr/local/cuda/lib64/libcudart.so.12.4.127
7f0000010000-7f0000090000 r-xp 00010000 fe:01 200 /usr/local/cuda/lib64/libcudart.so.12.4.127
7f0000100000-7f0000200000 r-xp 00000000 00:2f 300 /opt/my envs/lib/libcuda.so.580.95.05
7f0000300000-7f0000400000 r-xp 00000000 fe:01 400 /usr/lib/libcudnn.so.9
7f0000500000-7f0000600000 r-xp 00000000 fe:01 500 /usr/lib/libcudart_static.a
7f0000700000-7f0000800000 r-xp 00000000 fe:01 600 /old/libcuda.so.1 (deleted)
7f0000900000-7f0000a00000 rw-p 00000000 00:00 0 [heap]
7f0000b00000-7f0000c00000 rw-p 00000000 00:00 0
"""


def test_each_cuda_library_once_with_its_inode_and_a_path_through_the_process_root() -> None:
    found = parse_maps(MAPS, ROOT)
    assert [(m.kind, m.file, m.path) for m in found] == [
        (LibraryKind.RUNTIME, LibraryFile("fe:01", 200),
         ROOT / "usr/local/cuda/lib64/libcudart.so.12.4.127"),
        (LibraryKind.DRIVER, LibraryFile("00:2f", 300),
         ROOT / "opt/my envs/lib/libcuda.so.580.95.05"),
    ]


def test_the_kernel_device_number_is_mkdev_of_the_maps_pair() -> None:
    assert LibraryFile("fe:01", 1).kernel_device == (0xFE << 20) | 1
    assert LibraryFile("103:2", 1).kernel_device == (0x103 << 20) | 2


def test_names_follow_the_loaders_convention() -> None:
    assert library_kind("libcudart.so") is LibraryKind.RUNTIME
    assert library_kind("libcudart.so.13") is LibraryKind.RUNTIME
    assert library_kind("libcuda.so.1") is LibraryKind.DRIVER
    for other in ("libcudart_static.a", "libcudnn.so.9", "libcuda.so.1.bak", "libcudart.so.x",
                  "libnvidia-ml.so.1"):
        assert library_kind(other) is None


def test_a_process_that_is_gone_maps_nothing(tmp_path: Path) -> None:
    assert mapped_libraries(999_999_999, tmp_path) == ()


def test_a_running_process_maps_the_stand_in_runtime_and_driver() -> None:
    with CudaWorkload() as workload:
        found = {m.kind: m for m in mapped_libraries(workload.pid)}
        assert set(found) == {LibraryKind.RUNTIME, LibraryKind.DRIVER}
        runtime = found[LibraryKind.RUNTIME]
        assert runtime.path == Path(f"/proc/{workload.pid}/root") / str(
            workload.build.libcudart).lstrip("/")
        assert runtime.file.inode == workload.build.libcudart.stat().st_ino
        # The kernel keeps the major number 20 bits up (MKDEV), not as stat() encodes it.
        device = workload.build.libcudart.stat().st_dev
        assert runtime.file.kernel_device == (os.major(device) << 20) | os.minor(device)


def test_every_program_a_probe_names_is_in_the_bpf_source() -> None:
    source = SOURCE.read_text(encoding="utf-8")
    defined = set(re.findall(r"^int (\w+)\(struct pt_regs \*ctx\)", source, re.MULTILINE))
    assert set(PROGRAMS) == defined
    for probes in PROBES.values():
        returns = {p.program for p in probes if p.retprobe}
        assert all(name.endswith("_ret") for name in returns)
        assert all(not p.program.endswith("_ret") for p in probes if not p.retprobe)
