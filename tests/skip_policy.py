"""Pytest plugin: a skip not on the allowed list (tests/allowed_skips.toml) fails the run.

Skips exist so the suite runs on a machine without root, Prometheus or a BPF toolchain. The
price is that a test can stop running for a reason nobody meant -- a fixture that no longer
starts, a binary that was renamed -- and the run still goes green. So every skip must match an
entry of the list (node id pattern, reason pattern, the part that is missing); any other one is
reported at the end and turns the exit status into "tests failed".

On by default, so the README's plain ``.venv/bin/pytest`` and ``bash .ci/run`` (which passes
``--fail-on-unexpected-skip`` explicitly) agree. ``--allow-unexpected-skips`` turns the failure
into a warning for a local partial run; ``--allowed-skips FILE`` reads another list.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

DEFAULT_LIST = Path(__file__).resolve().parent / "allowed_skips.toml"


@dataclass(frozen=True)
class AllowedSkip:
    test: str  # fnmatch pattern of the node id
    reason: re.Pattern[str]  # searched in the skip reason
    missing: str  # the part whose absence explains the skip

    def matches(self, nodeid: str, reason: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.test) and self.reason.search(reason) is not None


@dataclass(frozen=True)
class Skip:
    nodeid: str
    reason: str


def load_allowed(path: Path) -> tuple[AllowedSkip, ...]:
    """The list, or a UsageError that names the file and the entry at fault."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise pytest.UsageError(f"allowed skips list {path}: {error}") from error
    entries = data.get("allowed", [])
    if not isinstance(entries, list) or set(data) - {"allowed"}:
        raise pytest.UsageError(f"allowed skips list {path}: expected only [[allowed]] tables")
    allowed = []
    for number, entry in enumerate(entries, 1):
        fields = {"test", "reason", "missing"}
        if (not isinstance(entry, dict) or set(entry) != fields
                or not all(isinstance(entry[f], str) and entry[f] for f in fields)):
            raise pytest.UsageError(
                f"allowed skips list {path}: entry {number} must have exactly the non-empty "
                f"strings test, reason and missing; got {entry!r}")
        try:
            pattern = re.compile(entry["reason"])
        except re.error as error:
            raise pytest.UsageError(
                f"allowed skips list {path}: entry {number}: bad reason pattern: {error}"
            ) from error
        allowed.append(AllowedSkip(entry["test"], pattern, entry["missing"]))
    return tuple(allowed)


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipPolicy:
    """Registered as a plugin object for the session: records skips, then rules on them."""

    def __init__(self, allowed: tuple[AllowedSkip, ...], enforce: bool, source: Path) -> None:
        self.allowed = allowed
        self.enforce = enforce
        self.source = source
        self.unexpected: list[Skip] = []

    def record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        # An xfail is reported as skipped too; it is a different contract, not a missing part.
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        skip = Skip(report.nodeid, _reason(report))
        if not any(a.matches(skip.nodeid, skip.reason) for a in self.allowed):
            self.unexpected.append(skip)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.record(report)  # a module-level skip

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.unexpected and self.enforce and exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.unexpected:
            return
        verdict = "they fail the run" if self.enforce else "--allow-unexpected-skips"
        terminalreporter.section(f"unexpected skips ({verdict})", red=self.enforce)
        for skip in self.unexpected:
            terminalreporter.line(f"{skip.nodeid}: {skip.reason}")
        terminalreporter.line(
            f"A skip is expected only when it matches an entry of {self.source} (a part this "
            "machine lacks); make the test run, or add the entry if a machine without that "
            "part is meant to skip it.")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("skip policy")
    group.addoption("--fail-on-unexpected-skip", action="store_true", default=False,
                    help="fail the run when a test skips for a reason not in the allowed list "
                         "(the default; .ci/run passes it explicitly)")
    group.addoption("--allow-unexpected-skips", action="store_true", default=False,
                    help="only warn about skips not in the allowed list")
    group.addoption("--allowed-skips", metavar="FILE", default=str(DEFAULT_LIST),
                    help="the allowed skips list (default: tests/allowed_skips.toml)")


def pytest_configure(config: pytest.Config) -> None:
    strict = config.getoption("--fail-on-unexpected-skip")
    lenient = config.getoption("--allow-unexpected-skips")
    if strict and lenient:
        raise pytest.UsageError(
            "--fail-on-unexpected-skip and --allow-unexpected-skips contradict each other")
    source = Path(config.getoption("--allowed-skips"))
    config.pluginmanager.register(SkipPolicy(load_allowed(source), not lenient, source),
                                  "skip-policy")
