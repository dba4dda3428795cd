"""Finds the GPU backends (entry points) and opens them off the event loop."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from gpu_otel_agent.backends.protocol import Backend, BackendInfo, BackendUnavailable, Device
from gpu_otel_agent.extensions.loading import load_group

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "gpu_otel_agent.backends"


@dataclass(frozen=True)
class OpenBackend:
    backend: Backend
    info: BackendInfo
    devices: tuple[Device, ...]


def installed_backends() -> list[Backend]:
    backends: list[Backend] = []
    for entry in load_group(ENTRY_POINT_GROUP):
        try:
            backends.append(entry.value())
        except Exception as exc:  # a broken plugin must not take the others down
            log.error("backend %s could not be created: %s", entry.name, exc)
    return backends


def _open(backend: Backend) -> OpenBackend:
    info = backend.open()
    return OpenBackend(backend, info, tuple(backend.devices()))


async def open_backends(backends: list[Backend], timeout: float) -> list[OpenBackend]:
    opened: list[OpenBackend] = []
    for backend in backends:
        try:
            async with asyncio.timeout(timeout):
                result = await asyncio.to_thread(_open, backend)
        except BackendUnavailable as reason:
            log.info("backend %s skipped: %s", backend.name, reason)
            continue
        except TimeoutError:
            log.error("backend %s did not start within %.0fs; skipped", backend.name, timeout)
            continue
        log.info(
            "backend %s: driver %s, %d GPU(s)",
            backend.name, result.info.driver_version, len(result.devices),
        )
        opened.append(result)
    return opened
