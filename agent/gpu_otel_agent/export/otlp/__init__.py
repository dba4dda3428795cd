"""The OTLP transport both signals share: one request, encoded by the caller, sent over gRPC or
HTTP with the specification's settings, retries and a collector's requested delays, its
failures logged once. The metrics and the health events import this wing, never each other."""
