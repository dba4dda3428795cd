"""Attaching per library file: once however many processes map it, detached with its last
user, a refused function skipped, a library that cannot be traced said once."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.ebpf.libbpf import BpfError
from gpu_otel_agent.plugins.ebpf.libraries import LibraryFile, MappedLibrary
from gpu_otel_agent.plugins.ebpf.symbols import DRIVER_PROBES, RUNTIME_PROBES, LibraryKind
from gpu_otel_agent.plugins.ebpf.uprobes import ENOTSUPP, ProbeSet


class FakeLink:
    def __init__(self, log: list[str], name: str) -> None:
        self._log = log
        self.name = name

    def destroy(self) -> None:
        self._log.append(f"detach {self.name}")


class RecordingAttacher:
    """Attaches nothing: records what the probe set asks, failing where told to."""

    def __init__(self, errors: dict[str, int] | None = None) -> None:
        self.log: list[str] = []
        self.runtime: set[LibraryFile] = set()
        self.errors = errors or {}

    def attach_uprobe(self, program: str, library: MappedLibrary, function: str,
                      retprobe: bool) -> FakeLink:
        if function in self.errors:
            raise BpfError(self.errors[function], f"attach {program} to {function}")
        name = f"{library.file.inode}:{function}:{'ret' if retprobe else 'entry'}"
        self.log.append(f"attach {name}")
        return FakeLink(self.log, name)

    def mark_runtime(self, file: LibraryFile, traced: bool) -> None:
        (self.runtime.add if traced else self.runtime.discard)(file)


def _library(tmp_path: Path, inode: int, kind: LibraryKind) -> MappedLibrary:
    path = tmp_path / f"lib{inode}.so"
    path.touch()
    return MappedLibrary(LibraryFile("fe:01", inode), kind, path)


def test_shared_files_attach_once_and_detach_with_their_last_user(tmp_path: Path) -> None:
    attacher = RecordingAttacher()
    probes = ProbeSet(attacher)
    runtime = _library(tmp_path, 1, LibraryKind.RUNTIME)
    driver = _library(tmp_path, 2, LibraryKind.DRIVER)
    probes.sync({10: (runtime, driver), 11: (runtime, driver)})
    assert probes.libraries == 2
    assert len(attacher.log) == len(RUNTIME_PROBES) + len(DRIVER_PROBES)
    assert attacher.runtime == {runtime.file}  # driver calls from it are not counted again
    assert probes.traced_pids() == {10, 11}

    probes.sync({10: (runtime, driver)})
    assert probes.libraries == 2
    assert not [line for line in attacher.log if line.startswith("detach")]

    probes.sync({})
    assert probes.libraries == 0
    assert len([line for line in attacher.log if line.startswith("detach")]) == \
        len(RUNTIME_PROBES) + len(DRIVER_PROBES)
    assert attacher.runtime == set()


def test_absent_and_unprobeable_functions_are_skipped(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    attacher = RecordingAttacher({"cudaGraphLaunch_ptsz": errno.ENOENT,
                                  "cudaFree": ENOTSUPP})
    probes = ProbeSet(attacher)
    probes.sync({10: (_library(tmp_path, 1, LibraryKind.RUNTIME),)})
    assert probes.libraries == 1
    attached = {line.split(":")[1] for line in attacher.log}
    assert "cudaGraphLaunch_ptsz" not in attached and "cudaFree" not in attached
    assert "cudaMalloc" in attached
    assert "the kernel cannot probe cudaFree" in caplog.text


def test_a_library_that_cannot_be_traced_is_said_once_and_retried_when_wanted_anew(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    attacher = RecordingAttacher({"cuMemFree_v2": errno.EACCES})
    probes = ProbeSet(attacher)
    driver = _library(tmp_path, 2, LibraryKind.DRIVER)
    probes.sync({10: (driver,)})
    probes.sync({10: (driver,)})
    assert probes.libraries == 0
    assert caplog.text.count("cannot trace") == 1
    assert "CAP_SYS_PTRACE" in caplog.text
    # What was attached before the refusal was detached again: nothing is left half-traced.
    attached = [line.split(" ", 1)[1] for line in attacher.log if line.startswith("attach")]
    detached = [line.split(" ", 1)[1] for line in attacher.log if line.startswith("detach")]
    assert attached and sorted(attached) == sorted(detached)
    probes.sync({})  # no longer wanted: forgotten, so a new user tries again
    attacher.errors.clear()
    probes.sync({12: (driver,)})
    assert probes.libraries == 1


def test_a_file_is_reached_through_a_user_that_is_still_there(tmp_path: Path) -> None:
    attacher = RecordingAttacher()
    probes = ProbeSet(attacher)
    live = _library(tmp_path, 1, LibraryKind.RUNTIME)
    through_gone = MappedLibrary(live.file, live.kind, tmp_path / "gone" / "libcudart.so.12")
    probes.sync({10: (through_gone,), 11: (live,)})
    assert probes.libraries == 1
    assert probes.traced_pids() == {10, 11}
    probes.sync({10: (through_gone,)})  # only the vanished one left: nothing to attach to
    assert probes.libraries == 1  # already attached: kept while a user is listed
    probes.sync({})
    probes.sync({10: (through_gone,)})
    assert probes.libraries == 0
