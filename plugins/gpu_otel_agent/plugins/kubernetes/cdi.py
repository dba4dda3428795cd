"""Reading CDI spec files: which device nodes a fully qualified CDI device name injects.

The format is the Container Device Interface specification (tags.cncf.io/container-device-
interface, SPEC.md, spec versions up to 0.8.0 as of module v1.1.0): a JSON or YAML file in one
of the spec directories (``/etc/cdi`` static, ``/var/run/cdi`` dynamic), with ``cdiVersion``,
``kind`` (``vendor/class``) and ``devices``, each a ``name`` and ``containerEdits`` whose
``deviceNodes`` carry ``path`` and, optionally, ``hostPath``, ``type``, ``major``, ``minor``.
A fully qualified device name is ``<kind>=<name>`` (``k8s.gpu.nvidia.com/claim=<uid>-gpu-0``).

Only the device-level edits are read: the spec-level ones are what every device of the file
shares (``/dev/nvidiactl``, libraries), not which GPU it is. Files are parsed again only when
their size or modification time changes; a file that does not parse is logged once and
skipped, never fatal.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)
SPEC_DIRS = ("etc/cdi", "var/run/cdi")  # under the host root: static, then dynamic
_SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True)
class DeviceNode:
    path: str  # in the container
    host_path: str  # on the host (``path`` when the spec gives none)
    minor: int | None = None


class CdiSpecError(ValueError):
    """A spec file that is not a CDI spec."""


def _nodes(device: dict[str, Any]) -> tuple[DeviceNode, ...]:
    edits = device.get("containerEdits") or {}
    if not isinstance(edits, dict):
        raise CdiSpecError("containerEdits is not a mapping")
    found = []
    for node in edits.get("deviceNodes") or ():
        if not isinstance(node, dict) or not isinstance(node.get("path"), str):
            raise CdiSpecError(f"device node without a path: {node!r}")
        minor = node.get("minor")
        found.append(DeviceNode(node["path"], str(node.get("hostPath") or node["path"]),
                                minor if isinstance(minor, int) else None))
    return tuple(found)


def parse_spec(text: str, json_file: bool = False) -> dict[str, tuple[DeviceNode, ...]]:
    """Qualified device name -> its device nodes, for one spec file's contents."""
    try:
        spec = json.loads(text) if json_file else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise CdiSpecError(f"not JSON/YAML: {error}") from error
    if not isinstance(spec, dict) or not isinstance(spec.get("cdiVersion"), str):
        raise CdiSpecError("no cdiVersion")
    kind = spec.get("kind")
    if not isinstance(kind, str) or "/" not in kind:
        raise CdiSpecError(f"kind must be vendor/class, got {kind!r}")
    devices = spec.get("devices")
    if not isinstance(devices, list):
        raise CdiSpecError("no devices list")
    out = {}
    for device in devices:
        if not isinstance(device, dict) or not isinstance(device.get("name"), str):
            raise CdiSpecError(f"device without a name: {device!r}")
        out[f"{kind}={device['name']}"] = _nodes(device)
    return out


class CdiRegistry:
    """The CDI devices the node's spec directories define, re-read as files change."""

    def __init__(self, root: Path, dirs: Iterable[str] = SPEC_DIRS) -> None:
        self._dirs = tuple(root / d for d in dirs)
        self._files: dict[Path, tuple[tuple[int, int], dict[str, tuple[DeviceNode, ...]]]] = {}
        self._bad: set[tuple[Path, tuple[int, int]]] = set()

    def refresh(self) -> None:
        seen: set[Path] = set()
        for directory in self._dirs:
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                continue  # no such directory: no specs there
            for entry in entries:
                if not entry.name.endswith(_SUFFIXES) or not entry.is_file():
                    continue
                path = Path(entry.path)
                seen.add(path)
                self._load(path, entry.stat())
        for gone in [p for p in self._files if p not in seen]:
            del self._files[gone]  # a released claim's spec is deleted with it

    def _load(self, path: Path, stat: os.stat_result) -> None:
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._files.get(path)
        if (cached is not None and cached[0] == stamp) or (path, stamp) in self._bad:
            return
        try:
            devices = parse_spec(path.read_text(encoding="utf-8"), path.suffix == ".json")
        except (OSError, UnicodeDecodeError, CdiSpecError) as error:
            self._bad.add((path, stamp))
            self._files.pop(path, None)
            log.warning("CDI spec %s skipped: %s", path, error)
            return
        self._files[path] = (stamp, devices)

    def nodes(self, qualified_name: str) -> tuple[DeviceNode, ...] | None:
        """The device nodes of ``vendor/class=name``; None when no spec defines it."""
        for _, devices in self._files.values():
            found = devices.get(qualified_name)
            if found is not None:
                return found
        return None
