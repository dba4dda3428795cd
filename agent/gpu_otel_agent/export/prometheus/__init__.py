"""The Prometheus pull endpoint: the same snapshot as OTLP, in two naming schemes.

Imported lazily by the agent (``server`` pulls in http.server and ssl, ~1.7 MiB resident):
the endpoint is off unless configured.
"""


class EndpointError(Exception):
    """The endpoint cannot start: the address is taken or the web config is wrong."""
