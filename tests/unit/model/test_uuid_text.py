"""model/uuid_text writes what the standard library's ``uuid`` writes (the reference)."""

from __future__ import annotations

import random
import uuid

import pytest

from gpu_otel_agent.model.semconv import SERVICE_INSTANCE_NAMESPACE, service_instance_id
from gpu_otel_agent.model.uuid_text import uuid5_text, uuid_text


def test_bytes_as_text() -> None:
    rng = random.Random(41)
    for raw in (bytes(16), b"\xff" * 16, *(rng.randbytes(16) for _ in range(5_000))):
        assert uuid_text(raw) == str(uuid.UUID(bytes=raw))
    for wrong in (b"", bytes(15), bytes(17)):
        with pytest.raises(ValueError, match="16-char"):
            uuid.UUID(bytes=wrong)
        with pytest.raises(ValueError, match="16-char"):
            uuid_text(wrong)


def test_name_based_version_5() -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ-._/0123456789é漢 "
    namespaces = [SERVICE_INSTANCE_NAMESPACE, str(uuid.NAMESPACE_DNS),
                  *(str(uuid.UUID(bytes=rng.randbytes(16))) for _ in range(20))]
    for namespace in namespaces:
        for _ in range(250):
            name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            assert uuid5_text(namespace, name) == str(uuid.uuid5(uuid.UUID(namespace), name))


def test_service_instance_id_is_the_conventions_uuid5() -> None:
    expected = uuid.uuid5(uuid.UUID("4d63009a-8d0f-11ee-aad7-4c796ed8e320"),
                          "gpu-otel-agent/node-7")
    assert service_instance_id("node-7") == str(expected)
