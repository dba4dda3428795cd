"""Replaces the generated blocks between the benchmark markers of docs/benchmarks.md; nothing else.

Five blocks: the suite's tables (``bench``), the eBPF plugin's overhead (``bench-ebpf``), the
long NVML chaos run (``bench-chaos``) and the memory soak (``bench-soak``), so each can be
re-measured alone, and the fleet sizing computed from the suite's run (``sizing``, rewritten
with the suite's tables). The README shows one headline table taken from these figures
(tests/unit/docs/test_front_door.py checks it still matches them).
"""

from __future__ import annotations

from pathlib import Path

BENCHMARKS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
EBPF_START = "<!-- bench-ebpf:start -->"
EBPF_END = "<!-- bench-ebpf:end -->"
CHAOS_START = "<!-- bench-chaos:start -->"
CHAOS_END = "<!-- bench-chaos:end -->"
SIZING_START = "<!-- sizing:start -->"
SIZING_END = "<!-- sizing:end -->"
SOAK_START = "<!-- bench-soak:start -->"
SOAK_END = "<!-- bench-soak:end -->"
FAULTS_START = "<!-- bench-faults:start -->"
FAULTS_END = "<!-- bench-faults:end -->"
HOSTILE_START = "<!-- bench-hostile:start -->"
HOSTILE_END = "<!-- bench-hostile:end -->"


class MarkersMissing(ValueError):
    pass


def replace_block(text: str, block: str, start_mark: str = START, end_mark: str = END) -> str:
    start, end = text.find(start_mark), text.find(end_mark)
    if start < 0 or end < start:
        raise MarkersMissing(f"the page needs {start_mark} ... {end_mark} (in that order)")
    return f"{text[: start + len(start_mark)]}\n{block.strip()}\n{text[end:]}"


def update(page: Path, block: str, start_mark: str = START, end_mark: str = END) -> None:
    # Read and write in one go: other people edit the page too, so touch only our block.
    page.write_text(replace_block(page.read_text(encoding="utf-8"), block, start_mark,
                                  end_mark), encoding="utf-8")
