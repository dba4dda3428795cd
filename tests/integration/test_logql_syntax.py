"""The dashboards' LogQL, parsed by Grafana's own LogQL grammar (@grafana/lezer-logql, the
parser of Grafana's Loki query editor; installed from npm by .ci/install-logql-grammar.sh).
A syntax check only: Loki is AGPL and not run here, so what these queries return is not
checked (docs/exporting.md lists them)."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.integration.harness import REPO

DASHBOARDS = REPO / "otel-config" / "dashboards"
# Grafana's values for the variables the LogQL uses.
VARIABLES = {"$event": "gpu.xid|gpu.lost", "$__range": "1h", "$__interval": "1m"}


def _logql() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text(encoding="utf-8"))["panels"]:
            for target in panel.get("targets", []):
                if target["datasource"]["type"] == "loki":
                    out.append((path.name, panel["title"], target["expr"]))
    return out


@cache
def _checker() -> Path:
    done = subprocess.run(["bash", str(REPO / ".ci" / "install-logql-grammar.sh")],
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"install-logql-grammar.sh failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1]) / "check.mjs"


def _errors(expressions: list[str]) -> list[list[dict[str, object]]]:
    done = subprocess.run(["node", str(_checker())], input="".join(
        json.dumps(e) + "\n" for e in expressions), capture_output=True, text=True,
        timeout=120, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def _substituted(expr: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(name, value)
    return expr


@pytest.fixture(scope="module", autouse=True)
def _node() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed (they run Grafana's LogQL grammar)")


def test_every_logql_panel_parses() -> None:
    queries = _logql()
    assert len(queries) >= 3
    errors = _errors([_substituted(q) for _, _, q in queries])
    assert len(errors) == len(queries)
    assert {(b, t): e for (b, t, _), e in zip(queries, errors, strict=True) if e} == {}


def test_the_grammar_rejects_what_loki_would() -> None:
    """The checker can fail: a parenthesis short, a stream selector without braces, a range
    without a unit."""
    bad = ['sum by (event_name (count_over_time({service_name="a"} [1m]))',
           'count_over_time(service_name="a" [1m])',
           'count_over_time({service_name="a"} [1])']
    assert all(_errors(bad)), _errors(bad)
