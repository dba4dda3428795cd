"""The shipped alert and recording rules: ``promtool check rules`` and ``promtool test rules``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "otel-config" / "alerts"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed (apt-get install prometheus; .ci/run does)")
    return subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=ALERTS,
                          timeout=60, check=False)


def test_rules_are_valid() -> None:
    result = _promtool("check", "rules", "gpu-alerts.rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 18 rules found" in result.stdout


def test_rule_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "gpu-alerts.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    """The unit tests can fail: the same file with one expectation changed does."""
    (tmp_path / "gpu-alerts.rules.yaml").write_text(
        (ALERTS / "gpu-alerts.rules.yaml").read_text(), encoding="utf-8")
    broken = (ALERTS / "gpu-alerts.test.yaml").read_text().replace(
        'gpu_xid_code: "79"', 'gpu_xid_code: "13"', 1)
    (tmp_path / "t.yaml").write_text(broken, encoding="utf-8")
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")
    result = subprocess.run(["promtool", "test", "rules", "t.yaml"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=60, check=False)
    assert result.returncode != 0
    assert 'gpu_xid_code="13"' in result.stdout + result.stderr
