"""The two forms of ``nvidia-smi -q`` as capture formats (entry points of
``gpu_otel_agent.capture_formats``, see :mod:`gpu_otel_agent.plugins.simulator_core.captures`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.plugins.nvidia.capture import convert, reader, tree
from gpu_otel_agent.plugins.simulator_core.captures import CaptureError, CaptureFragment


@dataclass(frozen=True)
class SmiFormat:
    name: str
    form: str  # "xml" | "text"
    vendor: str = "nvidia"

    def sniff(self, head: str) -> bool:
        if self.form == "xml":
            return "<nvidia_smi_log" in head
        return "==============NVSMI LOG==============" in head

    def read(self, text: str, source: Path) -> CaptureFragment:
        try:
            root = tree.parse_xml(text) if self.form == "xml" else tree.parse_text(text)
            capture = reader.read(root, self.form, source)
            return convert.convert(capture, self.name)
        except (tree.TreeError, convert.ConvertError) as exc:
            raise CaptureError(f"{source}: {self.name}: {exc}") from exc


NVIDIA_SMI_XML = SmiFormat("nvidia-smi-xml", "xml")  # nvidia-smi -q -x
NVIDIA_SMI_TEXT = SmiFormat("nvidia-smi-text", "text")  # nvidia-smi -q
