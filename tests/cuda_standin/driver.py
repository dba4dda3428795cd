"""Drive the stand-in CUDA workload program from a test: typed calls, one reply each.

``CudaWorkload`` starts ``workload`` (see workload.c for the line protocol), optionally
already inside a cgroup and/or in its own mount namespace with a private copy of the
libraries, waits for ``ready`` and then sends commands; each method returns once the
program has made the calls, so a test can assert what a tracer saw right after.

Every wrapper ``exec``s the next program in place (``sh -c '... exec'``, ``unshare``
without ``--fork``), so the PID ``Popen`` reports is the workload's own PID on the
host; ``start`` checks it against the PID the program prints.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Literal

from tests.cuda_standin.build import LIBCUDA, LIBCUDART, WORKLOAD, StandinBuild, build_standin

log = logging.getLogger(__name__)

SyncKind = Literal["stream", "stream_ptsz", "device", "event"]
LaunchVariant = Literal["plain", "ptsz", "ex", "coop"]

# Moves the shell itself into the cgroup, then becomes the command: the process is in
# the cgroup before the loader maps anything of the workload.
_ENTER_CGROUP = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
# Runs in the new mount namespace: a private tmpfs over the (host-visible, empty)
# directory, the build copied in, then the workload from there. The library path the
# process maps therefore exists only in this namespace, like a container's own copy.
_OWN_COPY = (
    'mount -t tmpfs -o mode=0755 cuda-standin "$1" && '
    f'cp "$2/{LIBCUDART}" "$2/{LIBCUDA}" "$2/{WORKLOAD}" "$1/" && '
    f'exec "$1/{WORKLOAD}"'
)


class WorkloadError(RuntimeError):
    """The workload program refused a command, or died."""


@dataclass(frozen=True)
class Allocation:
    id: int
    address: int
    size: int


@dataclass(frozen=True)
class BusyResult:
    calls: int
    elapsed_ns: int


def can_unshare_mount() -> str | None:
    """None when this machine lets us make a mount namespace, else why not."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        return f"unshare --mount is not permitted here: {proc.stderr.strip()}"
    return None


class CudaWorkload:
    """A running workload program; use as a context manager (``close`` on exit).

    ``env`` is added to this process's environment (e.g. ``LD_LIBRARY_PATH``).
    ``library_dir``: run a copy of the build from this directory instead of the cache;
    with ``mount_namespace`` it is the (empty) host directory a private tmpfs is
    mounted over inside the namespace (a temporary one when not given).
    ``cgroup``: a cgroup directory; the process joins it before it starts.
    """

    def __init__(
        self,
        build: StandinBuild | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cgroup: Path | None = None,
        mount_namespace: bool = False,
        library_dir: Path | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.build = build or build_standin()
        self.timeout = timeout
        self.allocations: dict[int, Allocation] = {}
        self._made_dir: Path | None = None
        if mount_namespace:
            if library_dir is None:
                library_dir = self._made_dir = Path(tempfile.mkdtemp(prefix="cuda-standin-ns-"))
            library_dir.mkdir(parents=True, exist_ok=True)
            # Where the program runs from: inside the namespace only.
            self.library_dir = library_dir
            argv = ["unshare", "--mount", "--propagation", "private", "--",
                    "sh", "-c", _OWN_COPY, "sh", str(library_dir), str(self.build.directory)]
        else:
            ran = self.build.copy_to(library_dir) if library_dir is not None else self.build
            self.library_dir = ran.directory
            argv = [str(ran.workload)]
        if cgroup is not None:
            argv = ["sh", "-c", _ENTER_CGROUP, "sh", str(cgroup), *argv]
        self._stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._proc = subprocess.Popen(
            argv, env={**os.environ, **(env or {})}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        )
        assert self._proc.stdout is not None and self._proc.stderr is not None
        # Readers on threads so a reply can be waited for with a timeout and a chatty
        # stderr never fills its pipe.
        threading.Thread(target=self._read_replies, args=(self._proc.stdout,),
                         daemon=True).start()
        self._stderr_reader = threading.Thread(
            target=self._read_stderr, args=(self._proc.stderr,), daemon=True)
        self._stderr_reader.start()
        try:
            ready = self._reply("(start)", self.timeout)
            if ready[:1] != ["ready"] or len(ready) != 2:
                raise WorkloadError(f"expected 'ready <pid>', got {' '.join(ready)!r}")
            if int(ready[1]) != self._proc.pid:
                raise WorkloadError(
                    f"workload PID {ready[1]} is not the started PID {self._proc.pid}: "
                    "a wrapper forked instead of exec'ing")
        except BaseException:
            self._kill()
            raise

    def _read_replies(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # end of output: the program is gone

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line.rstrip("\n"))

    # ---- plumbing -------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The workload's PID as the host sees it."""
        return self._proc.pid

    def stderr(self) -> str:
        """What the program wrote to stderr so far (all of it once it has exited)."""
        if self._proc.poll() is not None:
            # Its last words may still be in the pipe: stdout's end can be seen first.
            self._stderr_reader.join(timeout=2)
        return "\n".join(self._stderr)

    def _reply(self, command: str, timeout: float) -> list[str]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise WorkloadError(
                f"no reply to {command!r} within {timeout:.1f} s; stderr: {self.stderr()!r}"
            ) from None
        if line is None:
            code = self._proc.wait(timeout=5)
            raise WorkloadError(
                f"workload exited ({code}) before replying to {command!r}; "
                f"stderr: {self.stderr()!r}")
        return line.split(" ")

    def command(self, line: str, timeout: float | None = None) -> list[str]:
        """Send one command; the fields after ``ok``. Raises on ``error`` or death."""
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            code = self._proc.wait(timeout=5)
            raise WorkloadError(
                f"workload is gone ({code}), cannot send {line!r}; stderr: {self.stderr()!r}"
            ) from exc
        reply = self._reply(line, self.timeout if timeout is None else timeout)
        if reply[0] == "ok":
            return reply[1:]
        if reply[0] == "error":
            raise WorkloadError(f"{line!r} failed: {' '.join(reply[1:])}")
        raise WorkloadError(f"unexpected reply to {line!r}: {' '.join(reply)!r}")

    def _count(self, line: str, n: int) -> None:
        done = self.command(line)
        if done != [str(n)]:
            raise WorkloadError(f"{line!r} made {done} calls, not {n}")

    # ---- CUDA calls ------------------------------------------------------------------

    def launch(self, n: int, variant: LaunchVariant = "plain") -> None:
        """``n`` runtime launches (cudaLaunchKernel, or its _ptsz / ExC / cooperative twin)."""
        self._count(f"launch {n} {variant}", n)

    def launch_driver(self, n: int) -> None:
        """``n`` cuLaunchKernel calls made directly, without the runtime."""
        self._count(f"launch_driver {n}", n)

    def graph(self, n: int, variant: Literal["plain", "ptsz"] = "plain") -> None:
        self._count(f"graph {n} {variant}", n)

    def _alloc(self, kind: str, size: int) -> int:
        ident, address = self.command(f"{kind} {size}")
        alloc = Allocation(int(ident), int(address, 16), size)
        self.allocations[alloc.id] = alloc
        return alloc.id

    def malloc(self, size: int) -> int:
        """cudaMalloc; the allocation's id (``allocations[id]`` has its address)."""
        return self._alloc("malloc", size)

    def malloc_driver(self, size: int) -> int:
        """cuMemAlloc_v2 called directly."""
        return self._alloc("malloc_driver", size)

    def managed(self, size: int) -> int:
        return self._alloc("managed", size)

    def malloc_async(self, size: int) -> int:
        return self._alloc("malloc_async", size)

    def _free(self, kind: str, ident: int) -> int:
        (size,) = self.command(f"{kind} {ident}")
        return int(size)

    def free(self, ident: int) -> int:
        """cudaFree of an allocation by id; the bytes it had."""
        return self._free("free", ident)

    def free_driver(self, ident: int) -> int:
        return self._free("free_driver", ident)

    def free_async(self, ident: int) -> int:
        return self._free("free_async", ident)

    def fail_malloc(self) -> int:
        """A cudaMalloc of 0 bytes, which fails; its error code."""
        (code,) = self.command("fail_malloc")
        return int(code)

    def sync(self, kind: SyncKind, n: int = 1, delay_ns: int = 0) -> int:
        """``n`` syncs of ``kind``, each held ``delay_ns`` in the driver; elapsed ns."""
        (elapsed,) = self.command(f"sync {kind} {n} {delay_ns}",
                                  timeout=self.timeout + n * delay_ns / 1e9)
        return int(elapsed)

    def spin(self, n: int) -> int:
        """``n`` cudaLaunchKernel back to back; elapsed ns."""
        (elapsed,) = self.command(f"spin {n}", timeout=self.timeout + n / 1e6)
        return int(elapsed)

    def busy(self, rate: float, seconds: float) -> BusyResult:
        """cudaLaunchKernel at about ``rate`` per second for ``seconds``."""
        calls, elapsed = self.command(f"busy {rate} {seconds}", timeout=self.timeout + seconds)
        return BusyResult(int(calls), int(elapsed))

    def driver_calls(self, entry: str | None = None) -> int:
        """Driver entry calls made so far by this process (all, or one entry point)."""
        (count,) = self.command("driver_calls" if entry is None else f"driver_calls {entry}")
        return int(count)

    def start_cgroups(self) -> list[str]:
        """The program's /proc/self/cgroup lines as read first thing in ``main``."""
        return " ".join(self.command("start_cgroup")).split("|")

    # ---- lifetime ------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> int:
        """Ask the program to exit (kill it if it does not); its exit status."""
        try:
            if self._proc.poll() is None:
                with contextlib.suppress(WorkloadError):
                    self.command("exit", timeout=timeout)
                try:
                    self._proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.warning("workload %d did not exit; killing it", self.pid)
                    self._kill()
            return self._proc.wait()
        finally:
            self._cleanup()

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        for stream in (self._proc.stdin,):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        # The tmpfs went with the namespace; the host directory is empty again.
        if self._made_dir is not None:
            with contextlib.suppress(OSError):
                self._made_dir.rmdir()
            self._made_dir = None

    def __enter__(self) -> CudaWorkload:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
