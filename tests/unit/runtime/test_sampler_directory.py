"""The engine's sampling requests reach the sampler of the GPU they name, and only it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from gpu_otel_agent.gpu_health.sampling_requests import SamplingRequests
from gpu_otel_agent.runtime.sampler_directory import SamplerDirectory


@dataclass
class _Identity:
    uuid: str


@dataclass
class _Snapshot:
    identity: _Identity


@dataclass
class _Sampler:
    """The two calls of DeviceSampler the directory makes, recorded."""

    snapshot: _Snapshot
    calls: list[str] = field(default_factory=list)

    def reprobe_now(self) -> None:
        self.calls.append("reprobe_now")

    def rescan_partitions(self) -> None:
        self.calls.append("rescan_partitions")


def test_requests_reach_the_named_gpus_sampler_and_unknown_gpus_are_dropped() -> None:
    first, second = (_Sampler(_Snapshot(_Identity(uuid))) for uuid in ("GPU-a", "GPU-b"))
    directory = SamplerDirectory()
    requests: SamplingRequests = directory  # the engine's Protocol, as the agent passes it
    requests.reprobe("GPU-a")  # before the samplers exist: nobody to ask yet
    directory.add(cast(Any, [first, second]))
    requests.reprobe("GPU-b")
    requests.rescan_partitions("GPU-a")
    requests.reprobe("GPU-unknown")
    assert first.calls == ["rescan_partitions"]
    assert second.calls == ["reprobe_now"]
