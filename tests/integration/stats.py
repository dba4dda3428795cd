"""Reads call counts out of the simulated node's ``stats`` answer."""

from __future__ import annotations

from collections.abc import Mapping


def per_device(stats: Mapping[str, object]) -> dict[str, dict[str, int]]:
    """device index (as a string) -> NVML function -> calls on that device."""
    table = stats["per_device"]
    assert isinstance(table, Mapping)
    result: dict[str, dict[str, int]] = {}
    for function, devices in table.items():
        assert isinstance(devices, Mapping)
        for device, count in devices.items():
            result.setdefault(str(device), {})[str(function)] = int(count)
    return result


def device_calls(stats: Mapping[str, object], function: str, device: int) -> int:
    return per_device(stats).get(str(device), {}).get(function, 0)
