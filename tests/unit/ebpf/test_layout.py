"""The ctypes mirrors of bpf/cuda_activity.h match what a C compiler makes of the header."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.ebpf.compile_bpf import SOURCE_DIR
from gpu_otel_agent.plugins.ebpf.layout import (
    CudaStats,
    CudaStatsStruct,
    EventKind,
    LibraryFileStruct,
    LifecycleEvent,
    LifecycleEventStruct,
    SettingsStruct,
)
from gpu_otel_agent.simulation.core.compiler import BuildError, find_compiler

MIRRORS: dict[str, type[ctypes.Structure]] = {
    "cuda_stats": CudaStatsStruct,
    "lifecycle_event": LifecycleEventStruct,
    "library_file": LibraryFileStruct,
    "settings": SettingsStruct,
}


def _c_layout(tmp_path: Path) -> dict[str, list[int]]:
    """Each struct's size and its fields' offsets, printed by a program built from the header."""
    try:
        compiler = find_compiler()
    except BuildError as error:
        pytest.skip(str(error))
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <linux/types.h>",
             '#include "cuda_activity.h"', "int main(void) {"]
    for name, mirror in MIRRORS.items():
        parts = [f"sizeof(struct {name})"] + [f"offsetof(struct {name}, {field[0]})"
                                              for field in mirror._fields_]
        fmt = " ".join(["%zu"] * len(parts))
        lines.append(f'printf("{name} {fmt}\\n", {", ".join(parts)});')
    lines += ["return 0; }"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines), encoding="utf-8")
    program = tmp_path / "layout"
    subprocess.run([compiler, "-I", str(SOURCE_DIR), "-o", str(program), str(source)],
                   check=True)
    out = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    return {line.split()[0]: [int(n) for n in line.split()[1:]] for line in out.splitlines()}


def test_the_mirrors_match_the_c_header(tmp_path: Path) -> None:
    layout = _c_layout(tmp_path)
    for name, mirror in MIRRORS.items():
        offsets = [getattr(mirror, field[0]).offset for field in mirror._fields_]
        assert layout[name] == [ctypes.sizeof(mirror), *offsets], name


def test_an_exit_record_decodes_with_its_final_counters() -> None:
    raw = LifecycleEventStruct(kind=EventKind.EXIT, tgid=4242, has_stats=1)
    raw.stats.kernel_launches = 7
    raw.stats.allocated = -5  # a free of memory allocated before tracing began: never < 0
    event = LifecycleEvent.decode(bytes(raw))
    assert event == LifecycleEvent(EventKind.EXIT, 4242, CudaStats(kernel_launches=7))


def test_short_or_unknown_records_are_ignored() -> None:
    assert LifecycleEvent.decode(b"\x02\x00\x00\x00") is None
    assert LifecycleEvent.decode(bytes(LifecycleEventStruct(kind=9, tgid=1))) is None
    exec_event = LifecycleEvent.decode(bytes(LifecycleEventStruct(kind=EventKind.EXEC, tgid=3)))
    assert exec_event == LifecycleEvent(EventKind.EXEC, 3, None)
