"""The Prometheus pull endpoint: the same snapshot as OTLP, in two naming schemes."""
