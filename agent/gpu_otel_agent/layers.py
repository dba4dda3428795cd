"""The core's layers, bottom first: a module imports only its own package and the packages of
layers below its own, never one beside it or above it.

Why: a maintainer who opens one package should need to know only what lies below it, and a
change to a package can break only what lies above it. Packages in one layer are siblings that
know nothing of each other (sampling and GPU health both read devices; ``runtime`` wires them
together). The plugins (``gpu_otel_agent.plugins``) sit beside the layers up to
``PLUGIN_CEILING``: a plugin imports the core's model, configuration, shared helpers and the
doors it plugs into, never the core's machinery above them, and the core never imports a
plugin (they come in through entry points).

``tests/unit/architecture/test_layers.py`` reads every module's imports and checks them against this
table, and that no packages import each other in a circle. A name here is a package or a
top-level module of ``gpu_otel_agent``.
"""

from __future__ import annotations

from typing import Final

LAYERS: Final[tuple[tuple[str, ...], ...]] = (
    # Entry points and versions read from sys.path as importlib.metadata finds them.
    ("distributions",),
    # Leaves: the version string, logging set-up, this table, and Unix sockets at any path.
    ("version", "logs", "layers", "unix_socket"),
    # What a reading, a device, a process and a workload are; the metric catalog.
    ("model",),
    # Shared helpers that know no GPU: the configuration table and its live holder, the
    # agent's threads (named, supervised, one per device) and their CPU accounting.
    ("config", "threads"),
    # Wire protocols the agent speaks itself, on those threads: the gRPC client (OTLP export
    # and the kubelet's pod-resources API both speak through it) and the bounded HTTP server
    # the Prometheus endpoint and the local endpoint share.
    ("grpc", "http_server"),
    # Who a process belongs to: PID -> cgroup -> container -> pod.
    ("workloads",),
    # The doors plugins come through: one entry-point group and one Protocol per kind.
    ("extensions",),
    # The GPU backends' Protocol and their discovery.
    ("backends",),
    # Reading the devices; deciding their health. Siblings: ``runtime`` joins them.
    ("sampling", "gpu_health"),
    # Where the snapshot and the events leave: OTLP push, Prometheus, the local endpoint.
    ("export", "local"),
    # Assembly: builds every part from the configuration, runs and stops them.
    ("runtime",),
    # The reference docs generated from the catalogs and tables (``gpu-agent docs <topic>``).
    ("docs",),
    # Commands beside ``run``.
    ("check", "top", "remediation"),
    # The command line, and ``python -m gpu_otel_agent``.
    ("cli",),
    ("__main__",),
)

# The highest layer a plugin may import from.
PLUGIN_CEILING: Final = "backends"

# The wings of ``export``, bottom first, checked as the layers are: the shared OTLP transport
# (gRPC, HTTP, retries, a collector's throttling, the target, the failure log, the scope and
# value encoding both signals use); the two signals beside each other (the metrics: series,
# encoder, pusher; the health events: spool, pusher, senders); Prometheus, which renders the
# metrics' series.
EXPORT_WINGS: Final[tuple[tuple[str, ...], ...]] = (
    ("otlp",),
    ("metrics", "events"),
    ("prometheus",),
)


def wing_of(name: str) -> int:
    """The floor (0 = bottom) of a wing of ``gpu_otel_agent.export``."""
    for index, names in enumerate(EXPORT_WINGS):
        if name in names:
            return index
    raise KeyError(f"{name!r} is in no wing of gpu_otel_agent.layers.EXPORT_WINGS")


def layer_of(name: str) -> int:
    """The layer (0 = bottom) of a package or top-level module of ``gpu_otel_agent``."""
    for index, names in enumerate(LAYERS):
        if name in names:
            return index
    raise KeyError(f"{name!r} is in no layer of gpu_otel_agent.layers.LAYERS")
