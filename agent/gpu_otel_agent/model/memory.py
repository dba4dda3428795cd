"""GPU memory readings, the same for every vendor: usage, limit and their ratio.

``hw.gpu.memory.utilization`` is, in the semantic conventions (model/hardware/gpu-metrics.yaml,
v1.44.0), "Fraction of GPU memory used": usage over limit, made here from the two figures of one
read so the three never disagree. How busy the memory controller was is another quantity
(``gpu.memory.controller.utilization``).
"""

from __future__ import annotations

from gpu_otel_agent.model.snapshot import Reading


def memory_readings(used: int | None, total: int | None) -> tuple[Reading, ...]:
    """``hw.gpu.memory.usage``/``.limit``/``.utilization`` for what is known (absent: None)."""
    out: list[Reading] = []
    if used is not None:
        out.append(Reading("hw.gpu.memory.usage", int(used)))
    if total is not None:
        out.append(Reading("hw.gpu.memory.limit", int(total)))
        if used is not None and total > 0:
            out.append(Reading("hw.gpu.memory.utilization", used / total))
    return tuple(out)
