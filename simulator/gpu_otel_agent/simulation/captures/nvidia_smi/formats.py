"""The forms of ``nvidia-smi`` output read as captures (registered in ``CAPTURE_FORMATS`` of
:mod:`gpu_otel_agent.simulation.captures.registry`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent.simulation.captures.nvidia_smi import convert, reader, table_reader, tree
from gpu_otel_agent.simulation.captures.nvidia_smi.model import SmiCapture
from gpu_otel_agent.simulation.captures.registry import CaptureError, CaptureFragment


@dataclass(frozen=True)
class SmiFormat:
    name: str
    form: str  # "xml" | "text" | "table"
    vendor: str = "nvidia"

    def sniff(self, head: str) -> bool:
        if self.form == "xml":
            return "<nvidia_smi_log" in head
        if self.form == "text":
            return "==============NVSMI LOG==============" in head
        return "| NVIDIA-SMI " in head and "Driver Version:" in head

    def parse(self, text: str, source: Path) -> SmiCapture:
        """The capture as printed (values as strings); CaptureError if malformed."""
        try:
            if self.form == "table":
                return table_reader.read(text, source)
            root = tree.parse_xml(text) if self.form == "xml" else tree.parse_text(text)
            return reader.read(root, self.form, source)
        except tree.TreeError as exc:
            raise CaptureError(f"{source}: {self.name}: {exc}") from exc

    def read(self, text: str, source: Path) -> CaptureFragment:
        capture = self.parse(text, source)
        try:
            return convert.convert(capture, self.name)
        except convert.ConvertError as exc:
            raise CaptureError(f"{source}: {self.name}: {exc}") from exc


NVIDIA_SMI_XML = SmiFormat("nvidia-smi-xml", "xml")  # nvidia-smi -q -x
NVIDIA_SMI_TEXT = SmiFormat("nvidia-smi-text", "text")  # nvidia-smi -q
NVIDIA_SMI_TABLE = SmiFormat("nvidia-smi-table", "table")  # nvidia-smi


def parse(path: Path) -> SmiCapture:
    """Any nvidia-smi form, as printed (for tests and tools that compare against a capture)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    for form in (NVIDIA_SMI_XML, NVIDIA_SMI_TEXT, NVIDIA_SMI_TABLE):
        if form.sniff(text[:4096]):
            return form.parse(text, path)
    raise CaptureError(f"{path}: not an nvidia-smi capture")
