"""The `gpu-agent check` sample in docs/getting-started.md is what the command prints: the same
checks in the same order, and, for every check whose answer does not depend on the machine
(the simulated GPUs, the spool, the ports, the collector), the same status and words. Paths of
the simulated node's temporary directory and the collector's port are the parts that vary."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
# Answers that depend on the machine and the user (root, cgroups, the kernel), not the agent.
MACHINE = {"host pid namespace", "cgroup layout", "kubelet pod-resources", "kernel log",
           "process events"}
LINE = re.compile(r"^(PASS|WARN|FAIL)  (.{22}) (.*)$")


def _normal(text: str) -> str:
    text = re.sub(r"\S*/gpusim-\w+/", "TMP/gpusim-X/", text)
    return re.sub(r"localhost:\d+", "localhost:4317", text)


def _rows(text: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in text.splitlines():
        match = LINE.match(line)
        if match:
            status, name, detail = match.groups()
            rows.append((status, name.strip(), _normal(detail)))
    return rows


def _sample() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("### Is anything missing")
    (block,) = re.findall(r"^```text\n(.*?)^```", text[start:text.index("\n### ", start + 1)],
                          re.MULTILINE | re.DOTALL)
    return str(block)


def test_the_check_sample_is_what_check_prints(tmp_path: Path) -> None:
    with socket.socket() as s:  # a collector port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    env = {**{k: v for k, v in os.environ.items()
              if not k.startswith(("GPU_SIM_", "GPU_AGENT_", "OTEL_"))},
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{port}",
           "XDG_RUNTIME_DIR": str(xdg)}
    done = subprocess.run([sys.executable, "-m", "gpu_otel_agent.cli", "check", "--simulate",
                           "h100-8gpu"], env=env, capture_output=True, text=True, timeout=180,
                          check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # the collector is not there
    printed, shown = _rows(done.stdout), _rows(_sample())
    assert [name for _, name, _ in shown] == [name for _, name, _ in printed]
    for doc, real in zip(shown, printed, strict=True):
        if doc[1] not in MACHINE:
            assert doc == real
    # The summary line adds up the sample's own lines.
    summary = _sample().strip().splitlines()[-1]
    counts = {s: sum(row[0] == s.upper() for row in shown) for s in ("pass", "warn", "fail")}
    assert summary == (f"{counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail: "
                       f"{'FAILED' if counts['fail'] else 'ok'}")
