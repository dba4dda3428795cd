"""The harness marker names the tests of the harness (tests/harness_marker.py): a test of the
simulated node named ``test_simulator_*`` carries it, and the marked folders are real folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness_marker import HARNESS_FOLDERS, TESTS, in_harness_folder


def test_the_marked_folders_exist() -> None:
    for folder in HARNESS_FOLDERS:
        assert list((TESTS / folder).glob("test_*.py")), folder


def test_every_simulator_module_marks_its_harness_tests() -> None:
    unmarked = [path.name for path in sorted((TESTS / "integration").glob("test_simulator_*.py"))
                if "pytest.mark.harness" not in path.read_text(encoding="utf-8")]
    assert unmarked == []


def test_a_folder_marks_what_is_below_it_and_nothing_else() -> None:
    assert in_harness_folder(TESTS / "unit" / "simulator" / "test_scenario.py")
    assert not in_harness_folder(TESTS / "unit" / "sampling" / "test_sampler.py")
    assert not in_harness_folder(TESTS / "unit" / "simulatorish" / "test_x.py")
    assert not in_harness_folder(Path("/elsewhere/unit/simulator/test_x.py"))


def test_this_module_is_marked(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("harness") is not None
