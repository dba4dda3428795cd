"""Pytest plugin: tests of the test harness carry the ``harness`` marker; the rest test the agent.

The agent is tested against parts made for the tests: the simulated GPU node (its C libraries,
scenarios and control socket), the CUDA stand-in, the OTLP receivers and fake kubelet of
``tests/receivers``, the benchmark runner and the suite's own policies. Tests that check those
parts rather than the agent are kept (a wrong simulator teaches the agent the wrong thing) but
named as such, so a reader and a run can tell them apart:

- a whole folder of them is listed in :data:`HARNESS_FOLDERS` and marked here;
- anywhere else, a module says ``pytestmark = pytest.mark.harness`` (the integration tests
  of the simulated node, ``tests/integration/test_simulator_*.py``) or a single test is
  decorated ``@pytest.mark.harness`` where a module tests both.

``pytest -m "not harness"`` runs the agent's tests alone, ``pytest -m harness`` the harness's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Folders (below tests/) whose every test checks the harness, not the agent.
HARNESS_FOLDERS = ("unit/simulator", "unit/receivers", "unit/cuda_standin", "unit/bench",
                   "unit/suite")
MARKER = "harness"


def in_harness_folder(path: Path) -> bool:
    try:
        relative = path.resolve().relative_to(TESTS)
    except ValueError:
        return False
    return any(relative.is_relative_to(folder) for folder in HARNESS_FOLDERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if in_harness_folder(item.path):
            item.add_marker(MARKER)
