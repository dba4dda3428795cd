"""The simulated GPU node: a real ``libnvidia-ml.so.1`` (and ``libamd_smi.so`` when the scenario
has AMD GPUs) serving scripted GPUs, one daemon for both vendors' libraries.

``SimulatedNode.start(scenario)`` runs the node daemon in a child process; any NVML
client attaches with :attr:`SimulatedNode.env` (another process) or
:func:`attach_in_process` (this process, before pynvml's ``nvmlInit``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from gpu_otel_agent.simulation.node.control_client import SimCommandError, send
from gpu_otel_agent.simulation.node.scenario import Scenario, ScenarioError, load_scenario
from gpu_otel_agent.simulation.nvidia.build_nvml import BuildError, build_library

__all__ = [
    "BuildError",
    "Scenario",
    "ScenarioError",
    "SimCommandError",
    "SimulatedNode",
    "attach_in_process",
    "load_scenario",
]

class SimulatedNode:
    """A running simulated node (daemon in a child process)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        info: Mapping[str, object],
        state_dir: Path,
        owns_dir: bool,
    ) -> None:
        self._proc = proc
        self._state_dir = state_dir
        self._owns_dir = owns_dir
        self.library_path = Path(str(info["library"]))
        self.state_path = Path(str(info["state"]))
        self.socket_path = Path(str(info["socket"]))
        missing = info.get("pods_missing")
        self.pods_missing: str | None = str(missing) if missing else None
        # Present when the scenario has AMD GPUs (served by the simulated libamd_smi.so).
        amd_lib, amd_state = info.get("amd_library"), info.get("amd_state")
        self.amd_library_path = Path(str(amd_lib)) if amd_lib else None
        self.amd_state_path = Path(str(amd_state)) if amd_state else None
        env = info.get("env")
        self.env: Mapping[str, str] = dict(env) if isinstance(env, dict) else {}

    @classmethod
    def start(
        cls, scenario: Path, state_dir: Path | None = None, ready_timeout: float = 30
    ) -> SimulatedNode:
        """Validate ``scenario``, start the daemon and wait until it serves."""
        sc = load_scenario(scenario)  # fails fast with the ScenarioError message
        build_library(sc.missing_symbols)  # build errors surface here, not in the child
        owns = state_dir is None
        sdir = Path(tempfile.mkdtemp(prefix="gpusim-")) if state_dir is None else state_dir
        sdir.mkdir(parents=True, exist_ok=True)
        log = (sdir / "node.log").open("ab")
        env = dict(os.environ)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpu_otel_agent.simulation.node.daemon",
                str(sc.path),
                "--dir",
                str(sdir),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        log.close()
        assert proc.stdout is not None
        info: dict[str, object] | None = None
        deadline = time.monotonic() + ready_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while info is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    break
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf and info is None:
                    line, buf = buf.split(b"\n", 1)
                    with contextlib.suppress(ValueError):
                        msg = json.loads(line)
                        if isinstance(msg, dict) and "ready" in msg:
                            if not msg["ready"]:
                                proc.wait(5)
                                raise ScenarioError(str(msg.get("error")))
                            info = msg
        if info is None:
            proc.kill()
            proc.wait(5)
            tail = (sdir / "node.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(
                f"simulated node did not become ready within {ready_timeout}s:\n{tail}"
            )
        proc.stdout.close()
        return cls(proc, info, sdir, owns)

    @property
    def state_dir(self) -> Path:
        """The node's directory: its state file, sockets, log (and a simulated run's agent
        files); removed at stop when the node made it."""
        return self._state_dir

    @property
    def pid(self) -> int:
        return self._proc.pid

    def command(self, request: Mapping[str, object]) -> dict[str, object]:
        """Send one control request; raises SimCommandError on ``{"ok": false}``."""
        reply = send(self.socket_path, request)
        if not reply.get("ok"):
            raise SimCommandError(str(reply.get("error", "unknown error")))
        return reply

    def stats(self) -> dict[str, object]:
        return self.command({"op": "stats"})

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        if self._owns_dir:
            shutil.rmtree(self._state_dir, ignore_errors=True)

    def __enter__(self) -> SimulatedNode:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


_attached: tuple[Path, Path] | None = None


def attach_in_process(node_or_paths: SimulatedNode | Mapping[str, str] | tuple[Path, Path]) -> None:
    """Make this process's pynvml talk to the node.

    Sets ``GPU_SIM_NODE`` and pre-loads the library with RTLD_GLOBAL, so pynvml's later
    ``CDLL("libnvidia-ml.so.1")`` resolves to it by SONAME (LD_LIBRARY_PATH is only read at
    process start).  Call before pynvml's ``nvmlInit``.  A process attaches to one node.
    """
    global _attached  # noqa: PLW0603
    if isinstance(node_or_paths, SimulatedNode):
        lib, state = node_or_paths.library_path, node_or_paths.state_path
    elif isinstance(node_or_paths, tuple):
        lib, state = Path(node_or_paths[0]), Path(node_or_paths[1])
    else:
        state = Path(node_or_paths["GPU_SIM_NODE"])
        libdir = node_or_paths["LD_LIBRARY_PATH"].split(os.pathsep)[0]
        lib = Path(libdir) / "libnvidia-ml.so.1"
    lib, state = lib.resolve(), state.resolve()
    if _attached is not None:
        if _attached == (lib, state):
            return
        raise RuntimeError(f"this process is already attached to the simulated node {_attached[1]}")
    os.environ["GPU_SIM_NODE"] = str(state)
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    _attached = (lib, state)
    _attach_amd(node_or_paths)


def _attach_amd(node_or_paths: SimulatedNode | Mapping[str, str] | tuple[Path, Path]) -> None:
    """The AMD half of a mixed node: amdsmi's wrapper then finds libamd_smi.so by name."""
    if isinstance(node_or_paths, SimulatedNode):
        lib, state = node_or_paths.amd_library_path, node_or_paths.amd_state_path
    elif isinstance(node_or_paths, tuple) or "GPU_SIM_AMD_NODE" not in node_or_paths:
        return
    else:
        state = Path(node_or_paths["GPU_SIM_AMD_NODE"])
        dirs = node_or_paths.get("LD_LIBRARY_PATH", "").split(os.pathsep)
        lib = next((Path(d) / "libamd_smi.so" for d in dirs
                    if d and (Path(d) / "libamd_smi.so").exists()), None)
    if lib is None or state is None:
        return
    os.environ["GPU_SIM_AMD_NODE"] = str(state.resolve())
    ctypes.CDLL(str(lib.resolve()), mode=ctypes.RTLD_GLOBAL)
