"""The samplers by GPU UUID: how the health engine's requests reach the right one."""

from __future__ import annotations

from collections.abc import Iterable

from gpu_otel_agent.sampling.sampler import DeviceSampler


class SamplerDirectory:
    """:class:`~gpu_otel_agent.gpu_health.sampling_requests.SamplingRequests` for the agent.

    Built empty before the engine, filled once the samplers exist; a request for a GPU with
    no sampler (not sampled on this node) is dropped."""

    def __init__(self) -> None:
        self._by_uuid: dict[str, DeviceSampler] = {}

    def add(self, samplers: Iterable[DeviceSampler]) -> None:
        for sampler in samplers:
            self._by_uuid[sampler.snapshot.identity.uuid] = sampler

    def reprobe(self, uuid: str) -> None:
        sampler = self._by_uuid.get(uuid)
        if sampler is not None:
            sampler.reprobe_now()

    def rescan_partitions(self, uuid: str) -> None:
        sampler = self._by_uuid.get(uuid)
        if sampler is not None:
            sampler.rescan_partitions()
