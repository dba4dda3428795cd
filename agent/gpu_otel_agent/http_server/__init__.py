"""The bounded HTTP/1.1 server the Prometheus endpoint (TCP) and the local endpoint (Unix
socket) both run: one implementation, one listener each."""
