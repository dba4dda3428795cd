"""Real OTLP receivers (gRPC and HTTP) the transport tests send to, one per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver


@pytest.fixture
def grpc_receiver() -> Iterator[OtlpGrpcReceiver]:
    with OtlpGrpcReceiver() as receiver:
        yield receiver


@pytest.fixture
def http_receiver() -> Iterator[OtlpHttpReceiver]:
    with OtlpHttpReceiver() as receiver:
        yield receiver
