"""The agent starts without opentelemetry.sdk.metrics: only the SDK exporters need it.

The OTLP fast path encodes with opentelemetry-proto; the SDK's metrics package (about 1 MiB of
modules, issue 41) is imported when the console's OTLP JSON or the SDK fallback is built. Checked
in a fresh interpreter, as the agent's ``run`` imports its modules.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import gpu_otel_agent.cli, gpu_otel_agent.runtime.agent
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
before = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk.metrics"))
from opentelemetry.sdk.resources import Resource
from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.metrics.exporters import build_snapshot_exporter
import dataclasses
config = dataclasses.replace(load(None), exporter="console", console_format="otlp-json")
exporter = build_snapshot_exporter(config, Resource.create({}))
after = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk.metrics"))
print(json.dumps({"before": before, "after": after, "kind": type(exporter).__name__}))
"""


def test_start_up_imports_no_sdk_metrics() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"] == []
    # ... and the console's OTLP JSON still gets it when built.
    assert out["kind"] == "SdkSnapshotExporter"
    assert "opentelemetry.sdk.metrics.export" in out["after"]
