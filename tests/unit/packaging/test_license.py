"""LICENSE is the Apache License 2.0 that pyproject.toml names, word for word: compared with the
text another Apache-2.0 distribution installed here ships (OpenTelemetry's SDK), not with a
copy typed from memory."""

from __future__ import annotations

import tomllib
from importlib.metadata import distribution
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _words(text: str) -> list[str]:
    return text.split()


def test_license_is_the_apache_2_text_pyproject_names() -> None:
    for project in (REPO / "pyproject.toml", REPO / "simulator" / "pyproject.toml"):
        assert tomllib.loads(project.read_text(encoding="utf-8"))["project"]["license"] == \
            "Apache-2.0", project
    ours = (REPO / "LICENSE").read_text(encoding="utf-8")
    sdk = distribution("opentelemetry-sdk")
    (reference,) = [f for f in sdk.files or () if f.name == "LICENSE"]
    theirs = reference.read_text(encoding="utf-8")
    assert _words(ours) == _words(theirs)
    assert _words(ours)[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    assert "END OF TERMS AND CONDITIONS" in ours
