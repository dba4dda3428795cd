"""Replaces the generated block between the README's benchmark markers; nothing else."""

from __future__ import annotations

from pathlib import Path

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


class MarkersMissing(ValueError):
    pass


def replace_block(text: str, block: str) -> str:
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise MarkersMissing(f"README needs {START} ... {END} (in that order)")
    return f"{text[: start + len(START)]}\n{block.strip()}\n{text[end:]}"


def update(readme: Path, block: str) -> None:
    # Read and write in one go: other people edit the README too, so touch only our block.
    readme.write_text(replace_block(readme.read_text(encoding="utf-8"), block), encoding="utf-8")
