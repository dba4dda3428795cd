"""Self-telemetry of what keeps data flowing: collector throttling, thread restarts and
readings the wire cannot carry."""

from __future__ import annotations

from gpu_otel_agent.export.metrics.wire_range import dropped_readings
from gpu_otel_agent.export.otlp.throttle import gates
from gpu_otel_agent.model.snapshot import Reading
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
