"""Self-telemetry of what keeps data flowing: collector throttling, thread restarts and
readings the wire cannot carry."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from gpu_otel_agent.export.metrics.wire_range import dropped_readings
from gpu_otel_agent.export.otlp.throttle import gates
from gpu_otel_agent.model.snapshot import Attributes, Reading
from gpu_otel_agent.threads.supervised import restarts


def reliability_readings() -> tuple[Reading, ...]:
    readings: list[Reading] = []
    for endpoint, gate in sorted(gates().items()):
        server = (("server.address", endpoint),)
        for code, count in sorted(gate.stats.throttled.items()):
            readings.append(Reading("gpu_agent.exports.throttled", count,
                                    (("error.type", code), *server)))
        readings.append(Reading("gpu_agent.exports.held", gate.stats.held, server))
        readings.append(Reading("gpu_agent.exports.throttle.remaining", gate.remaining_s(),
                                server))
    readings.append(Reading("gpu_agent.readings.dropped", dropped_readings()))
    readings.extend(Reading("gpu_agent.thread.restarts", count, (("thread.name", name),))
                    for name, count in sorted(restarts().items()))
    return tuple(readings)


class ReliabilityValues:
    """``reliability_readings``' values in its order, as a self-telemetry ``ValuesSource``
    (no ``Reading`` each); its layout: each endpoint with its throttling codes, and the
    threads restarted."""

    __slots__ = ()

    def read(self, values: list[float | int]) -> Hashable:
        endpoints = []
        for endpoint, gate in sorted(gates().items()):
            throttled = sorted(gate.stats.throttled.items())
            codes: tuple[str, ...] = ()
            if throttled:  # rarely: no generator made for nothing
                codes, counts = zip(*throttled, strict=True)
                values.extend(counts)
            values.append(gate.stats.held)
            values.append(gate.remaining_s())
            endpoints.append((endpoint, codes))
        values.append(dropped_readings())
        named = sorted(restarts().items())
        if not named:
            return tuple(endpoints), ()
        names, counts = zip(*named, strict=True)
        values.extend(counts)
        return tuple(endpoints), names

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]:
        endpoints, names = token
        pairs: list[tuple[str, Attributes]] = []
        for endpoint, codes in endpoints:
            server: Attributes = (("server.address", endpoint),)
            pairs.extend(("gpu_agent.exports.throttled", (("error.type", code), *server))
                         for code in codes)
            pairs.append(("gpu_agent.exports.held", server))
            pairs.append(("gpu_agent.exports.throttle.remaining", server))
        pairs.append(("gpu_agent.readings.dropped", ()))
        pairs.extend(("gpu_agent.thread.restarts", (("thread.name", name),)) for name in names)
        return pairs
