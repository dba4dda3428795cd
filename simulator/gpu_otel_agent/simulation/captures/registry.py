"""Captures of real machines as simulated GPUs: the vendor-neutral door for capture formats.

A *capture* is what a vendor tool printed on a real machine (``nvidia-smi -q -x``, ``nvidia-smi
-q``, ``amd-smi metric --json`` ...). A :class:`CaptureFormat` recognises its tool's output
(:meth:`~CaptureFormat.sniff`) and turns it into a :class:`CaptureFragment`: scenario entries
(the same ``devices`` / ``processes`` mappings a scenario file holds), so a capture goes through
the scenario parser's validation like any hand-written scenario, and a scenario can add a
timeline and faults on top of it.

Formats are registered in :data:`CAPTURE_FORMATS` (``"module:attribute"`` of an object satisfying
:class:`CaptureFormat`; only the simulator reads captures, so a registry here is enough and the
core's entry-point groups stay the core's); :func:`read_capture` picks the one that claims the
file. The NVIDIA formats live in :mod:`.nvidia_smi`, AMD's (``amd-smi`` JSON) in :mod:`.amd_smi`.
Writing a capture of the node the agent sees is the agent's own (``gpu-agent capture``,
``gpu_otel_agent.plugins.capture``): a GPU node needs no simulator for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Protocol, runtime_checkable

# Every capture format, as "module:attribute"; detection tries them all (exactly one must claim a
# file), so the order does not matter.
CAPTURE_FORMATS: tuple[str, ...] = (
    "gpu_otel_agent.simulation.captures.nvidia_smi.formats:NVIDIA_SMI_XML",
    "gpu_otel_agent.simulation.captures.nvidia_smi.formats:NVIDIA_SMI_TEXT",
    "gpu_otel_agent.simulation.captures.nvidia_smi.formats:NVIDIA_SMI_TABLE",
    "gpu_otel_agent.simulation.captures.amd_smi:AMD_SMI_JSON",
)
SNIFF_BYTES = 4096  # what a format sees of a file to decide whether it is its own


class CaptureError(ValueError):
    """A capture cannot be read; the message names the file and what is wrong with it."""


@dataclass(frozen=True)
class NotServed:
    """A field the capture shows that the simulated node cannot serve as printed."""

    device: int | None  # position in the fragment's devices; None: node-wide
    field: str  # the capture's own name for it (XML path, ``-q`` label)
    value: str  # as printed
    reason: str


@dataclass(frozen=True)
class CaptureFragment:
    """One capture as scenario entries.

    ``devices`` are scenario ``devices`` entries in the capture's order; ``processes`` are
    scenario ``processes`` entries whose ``device`` is a position in *this* fragment's devices
    (the scenario loader shifts it when several captures and hand-written devices are combined).
    ``system`` holds node-wide scenario keys (``driver_version``, ``cuda_driver_version``).
    """

    source: Path
    format: str  # the CaptureFormat's name
    vendor: str  # "nvidia", "amd"
    system: Mapping[str, object] = field(default_factory=dict)
    devices: tuple[Mapping[str, object], ...] = ()
    processes: tuple[Mapping[str, object], ...] = ()
    not_served: tuple[NotServed, ...] = ()


def not_served_lines(fragment: CaptureFragment) -> list[str]:
    """One line per field of ``fragment`` not served as printed (``gpu-agent sim up`` prints
    them), the fields met but not placed first."""
    def line(n: NotServed) -> str:
        where = "node" if n.device is None else f"GPU {n.device}"
        return f"capture {fragment.source.name}: {where}: {n.field} = {n.value!r}: {n.reason}"

    unplaced = [n for n in fragment.not_served if n.reason.startswith("met but not placed")]
    rest = [n for n in fragment.not_served if n not in unplaced]
    return [line(n) for n in (*unplaced, *rest)]


@runtime_checkable
class CaptureFormat(Protocol):
    """One tool's output format (the object a :data:`CAPTURE_FORMATS` entry names)."""

    @property
    def name(self) -> str:
        """Short, stable name (``nvidia-smi-xml``), shown in errors and the docs."""

    @property
    def vendor(self) -> str:
        """``nvidia`` or ``amd``: the vendor of every device this format yields."""

    def sniff(self, head: str) -> bool:
        """True if ``head`` (the first :data:`SNIFF_BYTES` of a file, as text) is this format."""

    def read(self, text: str, source: Path) -> CaptureFragment:
        """The whole file as a fragment; raises :class:`CaptureError` on malformed input."""


def capture_formats() -> tuple[CaptureFormat, ...]:
    """Every registered format."""
    found: list[CaptureFormat] = []
    for entry in CAPTURE_FORMATS:
        module, _, attribute = entry.partition(":")
        value = getattr(import_module(module), attribute)
        if not isinstance(value, CaptureFormat):
            raise TypeError(f"{entry} is not a CaptureFormat: {value!r}")
        found.append(value)
    return tuple(found)


def detect(head: str, source: Path,
           formats: Sequence[CaptureFormat] | None = None) -> CaptureFormat:
    """The one format that claims ``head``; CaptureError if none (or several) does."""
    candidates = capture_formats() if formats is None else tuple(formats)
    claimed = [f for f in candidates if f.sniff(head)]
    if not claimed:
        names = ", ".join(f.name for f in candidates) or "none installed"
        raise CaptureError(f"{source}: not a capture format this simulator reads ({names})")
    if len(claimed) > 1:
        raise CaptureError(f"{source}: claimed by several capture formats: "
                           f"{', '.join(f.name for f in claimed)}")
    return claimed[0]


def read_capture(source: Path | str,
                 formats: Sequence[CaptureFormat] | None = None) -> CaptureFragment:
    """Read one capture file with the format that claims it."""
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read capture: {exc.strerror or exc}") from exc
    return detect(text[:SNIFF_BYTES], path, formats).read(text, path)
