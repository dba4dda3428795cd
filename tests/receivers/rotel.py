"""Run the real ``rotel-agent`` (a Rust OTLP collector) as an independent receiver.

Chain: agent --OTLP/gRPC--> rotel --OTLP/gRPC export--> our ``OtlpGrpcReceiver``.
Passing through a third-party collector catches encodings our own receivers
would accept but a real collector would not, while the downstream store still
lets tests read exactly what came out the other side.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from tests.receivers.netutil import free_port, wait_for_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

_LOG_TAIL_CHARS = 4000


class RotelUnavailableError(RuntimeError):
    """The rotel package or its bundled binary is not installed."""


def rotel_binary() -> Path:
    """Locate ``rotel-agent`` inside the installed ``rotel`` package (no PATH lookup)."""
    spec = importlib.util.find_spec("rotel")
    if spec is None or spec.origin is None:
        raise RotelUnavailableError("python package 'rotel' is not installed")
    binary = Path(spec.origin).parent / "rotel-agent"
    if not os.access(binary, os.X_OK):
        raise RotelUnavailableError(f"rotel-agent binary missing or not executable: {binary}")
    return binary


class RotelReceiver:
    """A rotel-agent process forwarding everything it receives to a downstream receiver.

    ``endpoint`` is rotel's OTLP/gRPC listener (give it to the agent);
    ``http_endpoint`` its OTLP/HTTP one; ``store`` is what reached downstream.
    """

    def __init__(
        self,
        downstream: OtlpGrpcReceiver | None = None,
        *,
        batch_timeout: str = "10ms",
        retry_initial_backoff: str = "100ms",
        retry_max_backoff: str = "500ms",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 10.0,
    ) -> None:
        self.downstream = downstream if downstream is not None else OtlpGrpcReceiver(Store("rotel"))
        self.batch_timeout = batch_timeout
        self.retry_initial_backoff = retry_initial_backoff
        self.retry_max_backoff = retry_max_backoff
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        self.grpc_port = 0
        self.http_port = 0
        self._workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.store.add_context(self._log_context)

    @property
    def store(self) -> Store:
        return self.downstream.store

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def log_path(self) -> Path | None:
        return None if self._workdir is None else self._workdir / "rotel.log"

    def argv(self) -> list[str]:
        """The exact command line; exposed so failures can show how rotel was run."""
        assert self._workdir is not None
        return [
            str(rotel_binary()),
            "start",
            "--otlp-grpc-endpoint", f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint", f"127.0.0.1:{self.http_port}",
            "--exporter", "otlp",
            "--otlp-exporter-endpoint", self.downstream.endpoint,
            "--otlp-exporter-protocol", "grpc",
            "--batch-timeout", self.batch_timeout,
            "--otlp-exporter-retry-initial-backoff", self.retry_initial_backoff,
            "--otlp-exporter-retry-max-backoff", self.retry_max_backoff,
            "--pid-file", str(self._workdir / "rotel.pid"),
            "--log-file", str(self._workdir / "rotel-daemon.log"),
            *self.extra_args,
        ]  # fmt: skip

    def log_text(self) -> str:
        """Everything rotel wrote to stdout/stderr so far."""
        path = self.log_path
        if path is None or not path.exists():
            return ""
        return path.read_text(errors="replace")

    def start(self) -> RotelReceiver:
        """Start downstream, then rotel; retry on a port race, raise with rotel's log on failure."""
        if self._process is not None:
            return self
        self.downstream.start()
        self._workdir = Path(tempfile.mkdtemp(prefix="rotel-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ROTEL_", "OTEL_"))}
        env["NO_COLOR"] = "1"  # plain text in the captured log
        for _attempt in range(3):
            self.grpc_port, self.http_port = free_port(), free_port()
            log_path = self._workdir / "rotel.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    self.argv(), stdout=log, stderr=subprocess.STDOUT, env=env
                )
            self._process = process
            if wait_for_port(
                "127.0.0.1", self.grpc_port, self.startup_timeout, self._alive
            ) and wait_for_port("127.0.0.1", self.http_port, self.startup_timeout, self._alive):
                return self
            self._terminate()
            if "in use" not in self.log_text():  # only a port race is worth retrying
                break
        message = f"rotel-agent did not start: {' '.join(self.argv())}\n{self.log_text()}"
        self.stop()
        raise RuntimeError(message)

    def stop(self) -> None:
        """SIGTERM rotel (it flushes on shutdown), then stop downstream and remove temp files."""
        self._terminate()
        self.downstream.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def _alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _log_context(self) -> str:
        text = self.log_text()
        tail = text[-_LOG_TAIL_CHARS:]
        return f"--- rotel-agent log (last {len(tail)} of {len(text)} chars) ---\n{tail}"

    def __enter__(self) -> RotelReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
