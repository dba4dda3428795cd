"""What the health engine asks of the samplers when an event says their view is out of date.

The engine decides health and never reads a device itself; but two vendor events mean that a
sampler should look again at once rather than at its next cycle: a reset ended (the GPU is
back, so probe it now) and the partitions changed (enumerate them again). The engine sends
these requests through this Protocol, handed to it when it is built; the samplers come into
being after the engine (they report to it), so the runtime's implementation looks them up by
UUID when a request arrives.
"""

from __future__ import annotations

from typing import Protocol


class SamplingRequests(Protocol):
    def reprobe(self, uuid: str) -> None:
        """Probe the GPU ``uuid`` at once (a reset ended: it may answer again)."""

    def rescan_partitions(self, uuid: str) -> None:
        """Enumerate the partitions of GPU ``uuid`` again (the vendor said they changed)."""


class NoSampling:
    """No samplers to ask (an engine tested or run on its own)."""

    def reprobe(self, uuid: str) -> None:
        pass

    def rescan_partitions(self, uuid: str) -> None:
        pass
