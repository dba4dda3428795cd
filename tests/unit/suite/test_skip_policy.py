"""The skip policy (tests/skip_policy.py) run on small throwaway suites with pytester."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.skip_policy import DEFAULT_LIST, load_allowed

pytest_plugins = ["pytester"]

SUITE = """
import pytest

def test_runs():
    pass

def test_needs_prometheus():
    pytest.skip("prometheus not installed")

def test_gave_up():
    pytest.skip("fixture could not start")

@pytest.mark.xfail(reason="known bug")
def test_known_bug():
    assert False
"""

ALLOW_PROMETHEUS = """
[[allowed]]
test = "test_suite.py::test_needs_prometheus"
reason = "^prometheus not installed$"
missing = "Prometheus"
"""


def _run(pytester: pytest.Pytester, allowed: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_suite=SUITE)
    listing = pytester.path / "allowed.toml"
    listing.write_text(allowed, encoding="utf-8")
    return pytester.runpytest("-p", "tests.skip_policy", "--allowed-skips", str(listing),
                              "-p", "no:cacheprovider", *args)


def test_a_skip_not_on_the_list_fails_the_session(pytester: pytest.Pytester) -> None:
    result = _run(pytester, ALLOW_PROMETHEUS)
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*unexpected skips*",
                                 "test_suite.py::test_gave_up: fixture could not start"])
    # The allowed skip is not named among the unexpected ones, nor is the xfail.
    section = result.stdout.str().split("unexpected skips", 1)[1]
    assert "test_needs_prometheus" not in section and "test_known_bug" not in section


def test_skips_all_on_the_list_pass_the_session(pytester: pytest.Pytester) -> None:
    allowed = ALLOW_PROMETHEUS + """
[[allowed]]
test = "test_suite.py::*"
reason = "could not start"
missing = "a part the fixture needs"
"""
    result = _run(pytester, allowed, "--fail-on-unexpected-skip")
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "unexpected skips" not in result.stdout.str()


def test_both_node_id_and_reason_must_match(pytester: pytest.Pytester) -> None:
    # The right test for another reason, and the right reason in another test: both fail.
    allowed = """
[[allowed]]
test = "test_suite.py::test_gave_up"
reason = "prometheus"
missing = "Prometheus"

[[allowed]]
test = "other_file.py::*"
reason = "could not start"
missing = "something"
"""
    result = _run(pytester, allowed)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_suite.py::test_needs_prometheus: *",
                                 "test_suite.py::test_gave_up: *"])


def test_the_check_is_on_by_default_and_can_be_made_a_warning(pytester: pytest.Pytester) -> None:
    result = _run(pytester, ALLOW_PROMETHEUS, "--allow-unexpected-skips")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*unexpected skips (--allow-unexpected-skips)*",
                                 "test_suite.py::test_gave_up: fixture could not start"])


def test_a_failing_run_keeps_its_own_exit_status(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken="def test_broken():\n    assert False\n")
    result = _run(pytester, ALLOW_PROMETHEUS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1, skipped=2, xfailed=1)


def test_a_module_level_skip_is_judged_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_module="import pytest\npytest.skip('no GPU here', "
                                    "allow_module_level=True)\n")
    result = _run(pytester, ALLOW_PROMETHEUS + """
[[allowed]]
test = "test_suite.py::*"
reason = "could not start"
missing = "a part"
""")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_module.py: no GPU here"])


@pytest.mark.parametrize("text, complaint", [
    ("[[allowed]]\ntest = 'x'\nreason = 'y'\n", "exactly the non-empty strings"),
    ("[[allowed]]\ntest = 'x'\nreason = '('\nmissing = 'z'\n", "bad reason pattern"),
    ("[[allowed]\n", "allowed.toml"),
    ("[other]\n", "only [[allowed]] tables"),
])
def test_a_bad_list_is_a_clear_error(tmp_path: Path, text: str, complaint: str) -> None:
    listing = tmp_path / "allowed.toml"
    listing.write_text(text, encoding="utf-8")
    with pytest.raises(pytest.UsageError, match=complaint.replace("[", r"\[")):
        load_allowed(listing)


def test_the_project_list_loads_and_names_a_part_for_every_entry() -> None:
    allowed = load_allowed(DEFAULT_LIST)
    assert allowed
    assert all(entry.missing.strip() for entry in allowed)
