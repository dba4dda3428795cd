"""The shared build helper: cache keys cover the core headers, and they ship as package data."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.core import compiler as core_build

_ROOT = Path(__file__).resolve().parents[3]


def test_digest_covers_every_core_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    core = tmp_path / "core"
    shutil.copytree(core_build.CORE_DIR, core)
    monkeypatch.setattr(core_build, "CORE_DIR", core)
    source = tmp_path / "lib.c"
    source.write_text("int x;\n")
    before = core_build.digest(source, ("-O2",))
    headers = sorted(core.glob("*.h"))
    assert [h.name for h in headers] == ["simcore.h", "simcore_state.h"]
    for header in headers:
        header.write_text(header.read_text() + "/* changed */\n")
        after = core_build.digest(source, ("-O2",))
        assert after != before, header.name
        before = after


def test_core_headers_are_package_data() -> None:
    config = tomllib.loads((_ROOT / "simulator" / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["gpu_otel_agent.simulation.core"]
    shipped = {p.name for g in globs for p in core_build.CORE_DIR.glob(g)}
    assert {"simcore.h", "simcore_state.h"} <= shipped
