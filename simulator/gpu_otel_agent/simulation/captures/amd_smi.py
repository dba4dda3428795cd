"""``amd-smi static/metric --json`` captures replayed as simulated AMD GPUs.

The reading follows the agent's own table (:data:`gpu_otel_agent.plugins.amd.capture.FIELDS`),
the one ``gpu-agent capture --vendor amd`` writes by: what the capture printed is served as
printed, and what it printed as ``"N/A"`` as not available. :data:`AMD_SMI_JSON` is registered
in ``CAPTURE_FORMATS`` of :mod:`.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.plugins.amd.capture import (
    FIELDS,
    IDENTITY,
    AmdCaptureError,
    gpus,
    lookup,
    value_of,
)
from gpu_otel_agent.simulation.amd.models import UNNAMED_CAPTURED
from gpu_otel_agent.simulation.captures.registry import CaptureError, CaptureFragment

# A metric-only capture does not name the part: a generic AMD GPU serves it.
UNNAMED = UNNAMED_CAPTURED


def scenario_devices(text: str, source: Path | str = "<capture>") -> list[dict[str, object]]:
    """Scenario ``devices`` entries serving what the capture printed: its values, and not
    available (``null``) where it printed ``"N/A"``."""
    out: list[dict[str, object]] = []
    for gpu in gpus(text, source):
        device: dict[str, object] = {"vendor": "amd", "model": UNNAMED}
        for path, key in IDENTITY:
            raw = lookup(gpu, path)
            if isinstance(raw, str) and raw and raw != "N/A":
                device[key] = raw.removeprefix("0x") if key == "serial" else raw
        for field in FIELDS:
            raw = lookup(gpu, field.path)
            if raw is None:
                continue  # not in this capture
            got = value_of(raw)
            device[field.reading] = None if got is None else field.to_reading(*got)
        out.append(device)
    return out


@dataclass(frozen=True)
class AmdSmiJson:
    """The ``CaptureFormat`` of ``amd-smi static/metric --json``."""

    name: str = "amd-smi-json"
    vendor: str = "amd"

    def sniff(self, head: str) -> bool:
        start = head.lstrip()
        return (start.startswith("[") or start.startswith("{")) and '"gpu"' in head and (
            "nvidia" not in head.lower())

    def read(self, text: str, source: Path) -> CaptureFragment:
        try:
            devices = scenario_devices(text, source)
        except AmdCaptureError as error:
            raise CaptureError(str(error)) from error
        return CaptureFragment(source=source, format=self.name, vendor=self.vendor,
                               devices=tuple(devices))


AMD_SMI_JSON = AmdSmiJson()
