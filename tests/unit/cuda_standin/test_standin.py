"""The stand-in CUDA runtime/driver and its workload program behave as the tracer's tests
need: versioned symbols, every runtime call reaching exactly its driver entry point,
fake but distinct allocations, bounded sync time, and the cgroup / mount-namespace modes.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cuda_standin.build import (
    LIBCUDA,
    LIBCUDART,
    SOURCES,
    StandinBuild,
    build_standin,
    header_check_flags,
)
from tests.cuda_standin.driver import CudaWorkload, SyncKind, WorkloadError, can_unshare_mount
from tests.integration import cgroups as cg

RUNTIME = (
    "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel", "cudaGraphLaunch", "cudaGraphLaunch_ptsz", "cudaMalloc",
    "cudaMallocManaged", "cudaMallocAsync", "cudaFree", "cudaFreeAsync",
    "cudaStreamSynchronize", "cudaStreamSynchronize_ptsz", "cudaDeviceSynchronize",
    "cudaEventSynchronize",
)
DRIVER = (
    "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
    "cuGraphLaunch", "cuGraphLaunch_ptsz", "cuMemAlloc_v2", "cuMemAllocManaged",
    "cuMemAllocAsync", "cuMemFree_v2", "cuMemFreeAsync", "cuStreamSynchronize",
    "cuStreamSynchronize_ptsz", "cuCtxSynchronize", "cuEventSynchronize",
)


@pytest.fixture(scope="module")
def build() -> StandinBuild:
    return build_standin()


@pytest.fixture
def workload(build: StandinBuild) -> Iterator[CudaWorkload]:
    with CudaWorkload(build) as w:
        yield w


def _mapped(pid: int) -> set[str]:
    """Paths of the stand-in libraries ``pid`` maps, as its own namespace names them."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines
            if len(line.split(maxsplit=5)) == 6 and ("/libcuda" in line)}


def _dynamic_symbols(lib: Path) -> list[str]:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", str(lib)],
                         capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize(("lib", "names", "version"), [
    (LIBCUDART, RUNTIME, LIBCUDART),
    (LIBCUDA, (*DRIVER, "standinSetSyncDelayNs", "standinDriverCalls"), LIBCUDA),
])
def test_symbols_are_exported_with_versions(
    build: StandinBuild, lib: str, names: tuple[str, ...], version: str,
) -> None:
    exported = set(_dynamic_symbols(build.directory / lib))
    assert {f"{name}@@{version}" for name in names} <= exported
    # Nothing else leaks out (helpers are local, like the real libraries' internals).
    assert all(s.startswith(("cu", "standin", version)) for s in exported), exported


def test_sonames_and_runpath(build: StandinBuild) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    for path, soname in ((build.libcudart, LIBCUDART), (build.libcuda, LIBCUDA)):
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                                 check=True).stdout
        assert f"Library soname: [{soname}]" in dynamic
    program = subprocess.run(["readelf", "-d", str(build.workload)], capture_output=True,
                             text=True, check=True).stdout
    assert f"Shared library: [{LIBCUDART}]" in program
    assert "Library runpath: [$ORIGIN]" in program


# Each runtime command, the driver entry point it must reach, and how many calls it makes.
_ROUTES = [
    ("launch 3 plain", "cuLaunchKernel", 3),
    ("launch 3 ptsz", "cuLaunchKernel_ptsz", 3),
    ("launch 2 ex", "cuLaunchKernelEx", 2),
    ("launch 2 coop", "cuLaunchCooperativeKernel", 2),
    ("graph 4 plain", "cuGraphLaunch", 4),
    ("graph 4 ptsz", "cuGraphLaunch_ptsz", 4),
    ("malloc 4096", "cuMemAlloc_v2", 1),
    ("managed 4096", "cuMemAllocManaged", 1),
    ("malloc_async 4096", "cuMemAllocAsync", 1),
    ("sync stream 2 0", "cuStreamSynchronize", 2),
    ("sync stream_ptsz 2 0", "cuStreamSynchronize_ptsz", 2),
    ("sync device 2 0", "cuCtxSynchronize", 2),
    ("sync event 2 0", "cuEventSynchronize", 2),
    ("launch_driver 5", "cuLaunchKernel", 5),  # the driver API called directly
]


@pytest.mark.parametrize(("command", "entry", "calls"), _ROUTES)
def test_each_runtime_call_reaches_its_driver_entry_once(
    workload: CudaWorkload, command: str, entry: str, calls: int,
) -> None:
    before_total, before_entry = workload.driver_calls(), workload.driver_calls(entry)
    workload.command(command)
    assert workload.driver_calls(entry) - before_entry == calls
    assert workload.driver_calls() - before_total == calls


@pytest.mark.parametrize(("alloc", "free", "entry"), [
    ("malloc", "free", "cuMemFree_v2"),
    ("malloc_async", "free_async", "cuMemFreeAsync"),
    ("malloc_driver", "free_driver", "cuMemFree_v2"),
])
def test_frees_reach_the_driver(workload: CudaWorkload, alloc: str, free: str,
                                entry: str) -> None:
    ident = int(workload.command(f"{alloc} 512")[0])
    before = workload.driver_calls(entry)
    assert workload.command(f"{free} {ident}") == ["512"]
    assert workload.driver_calls(entry) - before == 1


def test_allocations_are_distinct_and_freed_once(workload: CudaWorkload) -> None:
    sizes = [1, 255, 256, 257, 1 << 20, 3000]
    ids = [workload.malloc(sizes[0]), workload.malloc_driver(sizes[1]),
           workload.managed(sizes[2]), workload.malloc_async(sizes[3]),
           workload.malloc(sizes[4]), workload.malloc(sizes[5])]
    assert len(set(ids)) == len(ids)
    spans = sorted((workload.allocations[i].address, workload.allocations[i].size) for i in ids)
    for (start, size), (next_start, _) in itertools.pairwise(spans):
        assert start % 256 == 0
        assert start + size <= next_start  # no overlap
    assert [workload.free(ids[0]), workload.free_driver(ids[1])] == sizes[:2]
    with pytest.raises(WorkloadError, match="already freed"):
        workload.free(ids[0])
    with pytest.raises(WorkloadError, match="no allocation"):
        workload.free(999)


def test_failed_malloc_fails_and_allocates_nothing(workload: CudaWorkload) -> None:
    first = workload.malloc(64)
    assert workload.fail_malloc() != 0
    # The failure did not take an id (nor, per the workload's own check, write a pointer).
    assert workload.malloc(64) == first + 1


def test_failed_malloc_in_process(build: StandinBuild) -> None:
    """A NULL out pointer fails in the runtime; size 0 fails in the driver; neither writes."""
    rt = ctypes.CDLL(str(build.libcudart))
    drv = ctypes.CDLL(str(build.libcuda))  # the copy the runtime loads: same soname
    drv.standinDriverCallCount.restype = ctypes.c_ulonglong
    drv.standinDriverCallCount.argtypes = [ctypes.c_char_p]
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    before = drv.standinDriverCallCount(b"cuMemAlloc_v2")
    assert rt.cudaMalloc(None, 16) != 0
    assert drv.standinDriverCallCount(b"cuMemAlloc_v2") == before
    out = ctypes.c_void_p(0x5A5A)
    assert rt.cudaMalloc(ctypes.byref(out), 0) != 0
    assert out.value == 0x5A5A
    assert drv.standinDriverCallCount(b"cuMemAlloc_v2") == before + 1
    assert rt.cudaMalloc(ctypes.byref(out), 16) == 0
    assert out.value is not None and out.value >= 0x7F0000000000


@pytest.mark.parametrize("kind", ["stream", "stream_ptsz", "device", "event"])
def test_sync_delay_is_a_lower_bound(workload: CudaWorkload, kind: SyncKind) -> None:
    delay = 3_000_000
    assert workload.sync(kind, 2, delay) >= 2 * delay
    # The delay applies to that command only.
    assert workload.sync(kind, 1, 0) < delay


def test_spin_and_busy_report_their_calls(workload: CudaWorkload) -> None:
    before = workload.driver_calls("cuLaunchKernel")
    assert workload.spin(1000) > 0
    busy = workload.busy(20_000, 0.1)
    assert busy.elapsed_ns >= 100_000_000
    assert 0 < busy.calls <= 2_000
    assert workload.driver_calls("cuLaunchKernel") - before == 1000 + busy.calls


def test_bad_commands_are_refused_and_the_program_goes_on(workload: CudaWorkload) -> None:
    for bad in ("bogus", "launch", "launch -1", "launch 1 warp", "sync device x 0",
                "sync nope 1 0", "busy 0 1", "malloc 0", "x" * 600):
        with pytest.raises(WorkloadError, match="failed"):
            workload.command(bad)
    workload.launch(1)


def test_death_is_reported_with_stderr(build: StandinBuild) -> None:
    w = CudaWorkload(build)
    try:
        os.kill(w.pid, 9)
        with pytest.raises(WorkloadError, match=r"exited|gone"):
            w.launch(1)
    finally:
        assert w.close() == -9


def test_a_missing_driver_is_a_clear_error(build: StandinBuild, tmp_path: Path) -> None:
    lonely = build.copy_to(tmp_path / "copy")
    lonely.libcuda.unlink()
    with pytest.raises(WorkloadError, match=r"libcuda\.so\.1"):
        CudaWorkload(lonely)


def test_copy_and_ld_library_path_choose_the_mapped_files(
    build: StandinBuild, tmp_path: Path,
) -> None:
    with CudaWorkload(build, library_dir=tmp_path / "own") as w:
        assert _mapped(w.pid) == {str(tmp_path / "own" / LIBCUDART),
                                  str(tmp_path / "own" / LIBCUDA)}
    elsewhere = build.copy_to(tmp_path / "elsewhere")
    with CudaWorkload(build, env={"LD_LIBRARY_PATH": str(elsewhere.directory)}) as w:
        assert _mapped(w.pid) == {str(elsewhere.libcudart), str(elsewhere.libcuda)}


def test_two_processes_map_the_same_library_file(build: StandinBuild) -> None:
    with CudaWorkload(build) as a, CudaWorkload(build) as b:
        assert a.pid != b.pid
        assert _mapped(a.pid) == _mapped(b.pid) == {str(build.libcudart), str(build.libcuda)}


def test_mount_namespace_maps_a_path_only_that_namespace_has(build: StandinBuild) -> None:
    if (reason := can_unshare_mount()) is not None:
        pytest.skip(reason)
    with CudaWorkload(build, mount_namespace=True) as w:
        # unshare exec'd in place: the PID the program sees is the host's.
        assert w.command("pid") == [str(w.pid)]
        assert os.readlink(f"/proc/{w.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        mapped = _mapped(w.pid)
        assert {Path(p).name for p in mapped} == {LIBCUDART, LIBCUDA}
        for path in mapped:
            assert not Path(path).exists(), f"{path} is visible on the host"
            inside = Path(f"/proc/{w.pid}/root{path}")
            assert inside.is_file()
            # A separate copy of the file (a tmpfs), not the build it was copied from.
            assert inside.stat().st_dev != build.libcudart.stat().st_dev
        directory = w.library_dir
        w.launch(2)
    assert not directory.exists()  # the temporary mount point is removed after


def _cgroup_root() -> Path:
    root = cg.v2_root() or cg.v1_root()
    if root is None:
        pytest.skip("no cgroup hierarchy mounted under /sys/fs/cgroup")
    return root


@pytest.mark.parametrize("mount_namespace", [False, True])
def test_cgroup_is_joined_before_the_libraries_are_mapped(
    build: StandinBuild, mount_namespace: bool,
) -> None:
    if mount_namespace and (reason := can_unshare_mount()) is not None:
        pytest.skip(reason)
    root = _cgroup_root()
    with cg.cgroups() as made:
        group = made.path(root / f"cuda-standin-{cg.new_uid()}")
        relative = "/" + str(group.relative_to(root))
        with CudaWorkload(build, cgroup=group, mount_namespace=mount_namespace) as w:
            assert str(w.pid) in (group / "cgroup.procs").read_text().split()
            # Read by main() before any CUDA call: the loader had just mapped libcudart.
            assert any(line.endswith(":" + relative) for line in w.start_cgroups())
            assert _mapped(w.pid)


def test_a_cgroup_that_cannot_be_joined_is_a_clear_error(
    build: StandinBuild, tmp_path: Path,
) -> None:
    with pytest.raises(WorkloadError, match=r"cgroup\.procs"):
        CudaWorkload(build, cgroup=tmp_path / "no-such-cgroup")


def test_header_check_catches_a_wrong_signature(tmp_path: Path) -> None:
    flags = header_check_flags()
    if not flags:
        pytest.skip("the CUDA toolkit headers are not installed")
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc is not None
    wrong = tmp_path / "libcuda.c"
    source = (SOURCES / "libcuda.c").read_text()
    wrong.write_text(source.replace("cuCtxSynchronize(void)", "cuCtxSynchronize(int device)"))
    assert wrong.read_text() != source
    for path, ok in ((SOURCES / "libcuda.c", True), (wrong, False)):
        proc = subprocess.run([cc, "-fsyntax-only", *flags, str(path)], capture_output=True,
                              text=True, check=False)
        assert (proc.returncode == 0) == ok, proc.stderr
    assert "cuCtxSynchronize" in proc.stderr
