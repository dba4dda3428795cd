"""The README's first two command lines, run verbatim in a fresh venv of a fresh copy of the
repository, as a newcomer pastes them: the one that installs the agent and the simulated node
and shows the simulated node, and the one that installs for development and runs the tests.

A fresh copy: the repository's files as git lists them, nothing built, no venv. The lines run
in that order in one copy (the second reuses the venv the first made, as in a newcomer's
clone). pip's cache makes the installs cheap on a machine that ran them before; the test
line's pytest runs one small module (``PYTEST_ADDOPTS`` names it), not this suite again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
FENCE = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
# What the nested pytest runs instead of the whole suite: small, and not this module.
NESTED_TESTS = "tests/unit/architecture/test_layers.py"


def _first_lines() -> tuple[str, str]:
    """The see-it line and the test line: the README's first two `sh` blocks, one line each,
    before its first section after the introduction ends."""
    text = README.read_text(encoding="utf-8")
    top = text[:text.index("## What it looks like")]
    blocks = [b.strip() for b in FENCE.findall(top)]
    assert len(blocks) == 2, blocks
    assert all("\n" not in b for b in blocks), blocks  # one line to copy, each
    return blocks[0], blocks[1]


def test_the_readme_opens_with_a_line_to_see_it_and_one_to_test_it() -> None:
    see, test = _first_lines()
    assert see.startswith("python3 -m venv .venv && ")
    assert "./simulator" in see and "gpu-agent top --simulate h100-8gpu" in see
    assert test.startswith("python3 -m venv .venv && ") and test.endswith(".venv/bin/pytest")


def _fresh_copy(target: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a file deleted in the work tree is not in the copy
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _newcomer_env(tmp_path: Path) -> dict[str, str]:
    """A shell without this test's venv: PATH without its bin, no VIRTUAL_ENV."""
    venv = os.environ.get("VIRTUAL_ENV")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and (venv is None or not p.startswith(venv))]
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS", "COLUMNS")
           and not k.startswith(("GPU_SIM_", "GPU_AGENT_", "PYTEST_"))}
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700, exist_ok=True)
    return {**env, "PATH": os.pathsep.join(path), "XDG_RUNTIME_DIR": str(xdg),
            "COLUMNS": "80"}


@pytest.mark.timeout(900)
def test_the_readme_lines_work_verbatim_in_a_fresh_venv(tmp_path: Path) -> None:
    see, test = _first_lines()
    clone = _fresh_copy(tmp_path / "clone")
    env = _newcomer_env(tmp_path)
    shown = subprocess.run(["bash", "-c", see], cwd=clone, env=env, capture_output=True,
                           text=True, timeout=600, check=False)
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    # Without a terminal `top` prints one snapshot: the simulated node's eight GPUs.
    rows = re.findall(r"^\s+\d H100 80GB HBM3 ", shown.stdout, re.MULTILINE)
    assert len(rows) == 8, shown.stdout
    assert re.search(r"standalone: simulated node h100-8gpu", shown.stdout), shown.stdout
    tested = subprocess.run(["bash", "-c", test], cwd=clone,
                            env={**env, "PYTEST_ADDOPTS": NESTED_TESTS}, capture_output=True,
                            text=True, timeout=600, check=False)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert re.search(r"\d+ passed", tested.stdout), tested.stdout[-2000:]
    assert (clone / ".venv" / "bin" / "pytest").exists()
