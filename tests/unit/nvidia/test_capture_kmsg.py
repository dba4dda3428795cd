"""Kernel-log XID lines of real machines (examples/captures/nvidia/*.dmesg.txt, *.syslog.txt)
through the agent's kernel-log reader: every ``NVRM: Xid`` line a real driver printed becomes one
XID event of the GPU at that bus, with the code and text as printed. What the reader misses is
listed with its reason (a line not listed that it misses fails, and so does a listed one it
now catches)."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.model.pci import pci_key
from gpu_otel_agent.plugins.nvidia.kmsg import parse_line

CORPUS = Path(__file__).resolve().parents[3] / "examples" / "captures" / "nvidia"
LOGS = sorted([*CORPUS.glob("*.dmesg.txt"), *CORPUS.glob("*.syslog.txt")])
_PRINTED = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:]+)\): (\d+)(?:, (.*))?$", re.M)
_GPU_AT = re.compile(r"NVRM: GPU at PCI:([0-9a-fA-F:]+): (GPU-[0-9a-f-]+)")

# Lines of the corpus that report an XID the reader does not see, and why.
MISSED: dict[tuple[str, str], str] = {
    ("xid-79-fallen-off-bus.dmesg.txt", "fallen off the bus"):
        "open kernel module 570.158.01 prints 'The NVIDIA GPU 0000:b3:00.0 ... has fallen off "
        "the bus' over three lines without an 'NVRM: Xid' line (NVIDIA/NVSentinel#155, "
        "leptonai/gpud#1209 parse it as XID 79); the agent's reader matches 'NVRM: Xid' only, "
        "so such a GPU is reported lost by NVML (GPU_IS_LOST), not as XID 79",
}


def _gpus(text: str) -> dict[tuple[int, int, int], str]:
    """The GPUs a log names ("GPU at PCI:0000:9b:00: GPU-..."), else one per XID bus."""
    gpus: dict[tuple[int, int, int], str] = {}
    for bus, uuid in _GPU_AT.findall(text):
        key = pci_key(f"{bus}.0")
        assert key is not None
        gpus[key] = uuid
    for bus, _code, _detail in _PRINTED.findall(text):
        key = pci_key(f"{bus}.0")
        assert key is not None
        gpus.setdefault(key, f"GPU-at-{bus}")
    return gpus


def test_the_corpus_has_real_xid_lines() -> None:
    codes = {int(code) for log in LOGS for _b, code, _d in _PRINTED.findall(log.read_text())}
    assert {13, 31, 43, 48, 94, 109, 119} <= codes


def test_every_printed_xid_line_becomes_one_event_as_printed() -> None:
    failures = []
    for log in LOGS:
        text = log.read_text(encoding="utf-8")
        gpus = _gpus(text)
        for line in text.splitlines():
            printed = _PRINTED.search(line)
            event = parse_line(line, gpus)
            if printed is None:
                assert event is None, line
                continue
            bus, code, detail = printed.groups()
            key = pci_key(f"{bus}.0")
            assert key is not None
            if event is None:
                failures.append(f"{log.name}: not read: {line}")
                continue
            if (event.uuid, event.code) != (gpus[key], int(code)):
                failures.append(f"{log.name}: {line} -> {event.uuid} XID {event.code}")
            if event.detail != (detail or "")[:200]:
                failures.append(f"{log.name}: detail {event.detail!r} != {detail!r}")
    assert not failures, "\n".join(failures)


def test_missed_xids_are_the_listed_ones() -> None:
    for (name, marker), _reason in MISSED.items():
        text = (CORPUS / name).read_text(encoding="utf-8")
        assert marker in text
        gpus = _gpus(text) or {(0, 0xB3, 0): "GPU-b3"}
        assert all(parse_line(line, gpus) is None for line in text.splitlines()), (
            f"{name} is read now: remove it from MISSED")
