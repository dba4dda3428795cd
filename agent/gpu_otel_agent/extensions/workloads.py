"""Workload sources: who a GPU's devices are allocated to (the kubelet; later DRA, CDI).

Every installed factory is offered the attribution configuration; one that is configured
returns its :class:`~gpu_otel_agent.workloads.service.PodSource`, the others None.
"""

from __future__ import annotations

from typing import Protocol

from gpu_otel_agent.config.schema import AttributionConfig
from gpu_otel_agent.workloads.service import PodSource

WORKLOAD_SOURCE_GROUP = "gpu_otel_agent.workload_sources"


class PodSourceFactory(Protocol):
    def __call__(self, config: AttributionConfig, /) -> PodSource | None: ...
