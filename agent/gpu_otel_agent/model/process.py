"""What a GPU backend reports about the processes on one GPU, vendor-neutral.

A backend fills these in on the device's worker thread; the workload resolver turns them into
``gpu.process.*`` and ``gpu.container.*`` readings on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

# The metric group of the per-process readings (a backend serves it, attribution publishes it).
PROCESS_GROUP = "processes"

# hw.gpu.task values of telemetry.md: the engine a utilization figure is about.
TASK_GENERAL = "general"
TASK_ENCODER = "encoder"
TASK_DECODER = "decoder"


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """One process's use of one GPU; a figure the backend could not read is None."""

    pid: int
    memory_bytes: int | None = None
    # task -> fraction 0..1 of the engine's time this process used (absent: no sample yet)
    utilization: tuple[tuple[str, float], ...] = ()
    # fraction 0..1 of the GPU's compute units running this process's waves (AMD: KFD's
    # cu_occupancy over the device's CU count); None where the vendor does not report it
    compute_unit_occupancy: float | None = None
