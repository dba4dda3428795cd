"""Pytest fixtures for the test receivers (registered via ``pytest_plugins``).

Each fixture is function-scoped so no test sees another's data or reject
state; all three start in well under a second. When a test using
``rotel_receiver`` fails, rotel's own log is attached to the failure report.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.receivers.rotel import RotelReceiver, RotelUnavailableError, rotel_binary

_ROTEL_KEY = pytest.StashKey[RotelReceiver]()


@pytest.fixture
def otlp_grpc_receiver() -> Iterator[OtlpGrpcReceiver]:
    """A started OTLP/gRPC receiver; ``.endpoint`` for the exporter, ``.store`` to assert."""
    with OtlpGrpcReceiver() as receiver:
        yield receiver


@pytest.fixture
def otlp_http_receiver() -> Iterator[OtlpHttpReceiver]:
    """A started OTLP/HTTP receiver; ``.endpoint`` base URL, ``.url(signal)`` full URL."""
    with OtlpHttpReceiver() as receiver:
        yield receiver


@pytest.fixture
def rotel_receiver(request: pytest.FixtureRequest) -> Iterator[RotelReceiver]:
    """rotel-agent in front of an OTLP/gRPC receiver; skips if rotel is not installed."""
    try:
        rotel_binary()
    except RotelUnavailableError as error:
        pytest.skip(str(error))
    with RotelReceiver() as receiver:
        request.node.stash[_ROTEL_KEY] = receiver
        yield receiver


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach rotel's log to failed reports (it is deleted at teardown)."""
    report = yield
    receiver = item.stash.get(_ROTEL_KEY, None)
    if receiver is not None and report.failed:
        report.sections.append(("rotel-agent log", receiver.log_text() or "<empty>"))
    return report
