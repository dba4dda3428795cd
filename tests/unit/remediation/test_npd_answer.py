"""The NPD answer over hand-written /v1/health documents: exit codes as NPD reads them
(plugin.go: 0 OK, 1 NonOK, other Unknown), order, filtering and the 80-byte message limit."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_otel_agent.gpu_health.subsystems import SUBSYSTEMS
from gpu_otel_agent.remediation.npd import NON_OK, OK, UNKNOWN, answer


def gpu(index: int, **parts: tuple[str, list[str]]) -> dict[str, Any]:
    subsystems = {name: {"state": "ok", "reasons": []} for name in SUBSYSTEMS}
    for name, (state, reasons) in parts.items():
        subsystems[name] = {"state": state, "reasons": reasons}
    return {"uuid": f"GPU-{index}", "index": index, "subsystems": subsystems}


def doc(*devices: dict[str, Any], engine: bool = True) -> dict[str, Any]:
    return {"version": 1, "health_engine": engine, "devices": list(devices)}


def test_healthy_is_ok() -> None:
    result = answer(doc(gpu(0), gpu(1)))
    assert (result.code, result.message) == (OK, "2 GPU(s) healthy (all subsystems)")


def test_failed_comes_before_degraded_and_the_rest_is_counted() -> None:
    result = answer(doc(gpu(0, pcie=("degraded", ["PCIe link width x8 of x16 under load"])),
                        gpu(3, driver=("failed", ["lost: GPU is lost"]))))
    assert (result.code, result.message) == (NON_OK, "GPU 3 driver failed: lost: GPU is lost "
                                                     "(+1 more)")


def test_at_least_failed_ignores_degraded() -> None:
    document = doc(gpu(0, pcie=("degraded", ["x8"])))
    assert answer(document, at_least="failed").code == OK
    assert answer(document, at_least="degraded").code == NON_OK


def test_only_the_chosen_subsystems_are_judged() -> None:
    document = doc(gpu(0, nvlink=("degraded", ["link 3 down"])))
    assert answer(document, ("pcie",)).message == "1 GPU(s) healthy (pcie)"
    assert answer(document, ("nvlink",)).message == "GPU 0 nvlink degraded: link 3 down"


def test_a_long_message_fits_npds_limit_and_keeps_the_count() -> None:
    long = "CRC flit errors " + "very " * 40 + "many"
    result = answer(doc(gpu(0, nvlink=("degraded", [long])), gpu(1, nvlink=("degraded", ["x"]))))
    assert result.code == NON_OK and len(result.message.encode()) <= 80
    assert result.message.startswith("GPU 0 nvlink degraded: CRC flit errors very")
    assert result.message.endswith("... (+1 more)")
    assert len(answer(doc(gpu(0, pcie=("degraded", ["é" * 100]))), max_length=20)
               .message.encode()) <= 20


@pytest.mark.parametrize(("document", "why"), [
    ({"version": 2, "devices": []}, "unknown health document"),
    (doc(gpu(0), engine=False), "health engine is off"),
    (doc(), "sees no GPU"),
])
def test_what_cannot_be_judged_is_unknown(document: dict[str, Any], why: str) -> None:
    result = answer(document)
    assert result.code == UNKNOWN and why in result.message
