"""The project's OpenTelemetry Collector (otel-config/otelcol-builder.yaml) and Prometheus 3,
built from the Go module proxy by .ci/build-otelcol.sh and .ci/build-prometheus.sh (cached:
after the first build each call only hashes), and a collector process running the shipped
configurations with its endpoints from environment variables.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from tests.integration.harness import REPO

CONFIGS = REPO / "otel-config"
# What the collector logs when every component has started.
READY = "Everything is ready. Begin running and processing data."
# A console log line of the collector: time, level, caller, message, fields.
_LEVEL = re.compile(r"^\S+\t(debug|info|warn|error|dpanic|panic|fatal)\t", re.MULTILINE)


def go_missing() -> str | None:
    return None if shutil.which("go") else "go is not installed (the Go toolchain builds the " \
        "collector and Prometheus 3; .ci/run has it)"


@cache
def _built(script: str) -> Path:
    """The binary a .ci/build-*.sh script builds (or finds in its cache)."""
    done = subprocess.run(["bash", str(REPO / ".ci" / script)], capture_output=True, text=True,
                          timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def collector_binary() -> Path:
    return _built("build-otelcol.sh")


def prometheus3_binary() -> Path:
    return _built("build-prometheus.sh")


def complaints(log: str) -> list[str]:
    """Every line the collector logged above info (a warning at start is a finding)."""
    return [line for line in log.splitlines()
            if (m := _LEVEL.match(line + "\t")) and m.group(1) not in ("debug", "info")]


def validate(configs: Sequence[Path], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``otelcol validate`` on the configuration the files make together."""
    return subprocess.run(
        [str(collector_binary()), "validate", *(f"--config={c}" for c in configs)],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=120, check=False)


class Collector:
    """The built collector on ``configs`` (merged in order), its log kept in ``workdir``."""

    def __init__(self, workdir: Path, configs: Sequence[Path], env: Mapping[str, str],
                 name: str = "otelcol") -> None:
        self.log_path = workdir / f"{name}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [str(collector_binary()), *(f"--config={c}" for c in configs)],
            env={**os.environ, **env}, stdout=self._log, stderr=subprocess.STDOUT, cwd=workdir)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if READY in self.log():
                return
            if self.process.poll() is not None:
                raise AssertionError(f"the collector exited ({self.process.returncode}):\n"
                                     f"{self.log()[-4000:]}")
            time.sleep(0.2)
        raise AssertionError(f"the collector not ready in {timeout} s:\n{self.log()[-4000:]}")

    def close(self) -> int:
        """SIGTERM, then its exit code (killed after a generous wait)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._log.close()
        return code
