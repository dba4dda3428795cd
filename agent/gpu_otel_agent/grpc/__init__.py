"""The agent's own gRPC client for unary calls (``unary_client``), over its socket and TLS
(``connection``), with its message framing (``messages``) and status codes (``status``).

A general client, not the exporter's: OTLP/gRPC export (``export.grpc_transport`` adds retries
and throttling on top) and the kubelet's pod-resources API (the kubernetes plugin) both speak
through it, so it sits below both (``gpu_otel_agent.layers``).
"""
