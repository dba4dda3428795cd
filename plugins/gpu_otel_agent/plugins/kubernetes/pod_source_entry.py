"""The kubelet's entry point (group ``gpu_otel_agent.workload_sources``, name ``kubelet``).

The pod-resources client (hand-written messages and the agent's own gRPC client, no grpcio) is
imported only when ``attribution.kubelet.socket`` is set.
"""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.config.schema import AttributionConfig
from gpu_otel_agent.extensions.workloads import PodSourceFactory
from gpu_otel_agent.workloads.service import PodSource


def pod_source(config: AttributionConfig) -> PodSource | None:
    if not config.kubelet.socket:
        return None
    from gpu_otel_agent.plugins.kubernetes.dra_claims import ClaimMapper
    from gpu_otel_agent.plugins.kubernetes.podresources import PodResourcesClient

    return PodResourcesClient(Path(config.kubelet.socket), config.kubelet.timeout,
                              ClaimMapper(Path(config.kubelet.dra_host_root)))


_FACTORY: PodSourceFactory = pod_source  # mypy checks it against the core's Protocol
