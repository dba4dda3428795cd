"""Replaces the generated blocks between the README's benchmark markers; nothing else.

Five blocks: the suite's tables (``bench``), the eBPF plugin's overhead (``bench-ebpf``, in
the README's eBPF section), the long NVML chaos run (``bench-chaos``) and the memory soak
(``bench-soak``), so each can be re-measured alone, and the fleet sizing computed from the
suite's run (``sizing``, in the README's sizing section, rewritten with the suite's tables).
"""

from __future__ import annotations

from pathlib import Path

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


class MarkersMissing(ValueError):
    pass


def replace_block(text: str, block: str, start_mark: str = START, end_mark: str = END) -> str:
    start, end = text.find(start_mark), text.find(end_mark)
    if start < 0 or end < start:
        raise MarkersMissing(f"README needs {start_mark} ... {end_mark} (in that order)")
    return f"{text[: start + len(start_mark)]}\n{block.strip()}\n{text[end:]}"


def update(readme: Path, block: str, start_mark: str = START, end_mark: str = END) -> None:
    # Read and write in one go: other people edit the README too, so touch only our block.
    readme.write_text(replace_block(readme.read_text(encoding="utf-8"), block, start_mark,
                                    end_mark), encoding="utf-8")
