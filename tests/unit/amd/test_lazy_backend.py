"""On a node without AMD GPUs the AMD backend costs its entry module and amdsmi's loader only:
discovery creates every installed backend, and the device, partition, topology, event and
process modules (0.3 MiB resident, issue 41) load once amdsmi has opened."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, os, sys
for name in [n for n in os.environ if n.startswith("GPU_SIM")]:
    del os.environ[name]  # no simulated node either: a node without AMD GPUs
from gpu_otel_agent.backends.discovery import installed_backends
from gpu_otel_agent.backends.protocol import BackendUnavailable
amd = next(b for b in installed_backends() if b.name == "amd")
try:
    amd.open()
    opened = True
except BackendUnavailable:
    opened = False
print(json.dumps({"opened": opened, "devices": len(amd.devices()),
                  "modules": sorted(m for m in sys.modules if ".plugins.amd" in m)}))
"""


def test_an_amd_backend_that_did_not_open_loads_only_its_entry_and_loader() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["opened"] is False and out["devices"] == 0
    assert out["modules"] == ["gpu_otel_agent.plugins.amd", "gpu_otel_agent.plugins.amd.backend",
                              "gpu_otel_agent.plugins.amd.smi"]
