"""PCI bus ids as the different writers spell them, reduced to one comparable key.

NVML writes ``00000000:3B:00.0`` (8-digit domain, upper case), amdsmi and device plugins
``0000:3b:00.0``, the kernel log ``0000:3b:00`` and some tools leave the domain out
(``3b:00.0``). The function is dropped: a GPU is function 0 and the kernel log omits it.
"""

from __future__ import annotations

PciKey = tuple[int, int, int]  # domain, bus, device


def pci_key(bus_id: str) -> PciKey | None:
    """``00000000:3B:00.0`` (NVML) or ``0000:3b:00`` (kernel log) -> (domain, bus, device)."""
    parts = bus_id.strip().split(":")
    try:
        if len(parts) == 3:
            return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
        if len(parts) == 2:
            return 0, int(parts[0], 16), int(parts[1].split(".")[0], 16)
    except ValueError:
        return None
    return None
