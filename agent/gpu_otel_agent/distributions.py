"""Entry points and versions read the way ``importlib.metadata`` finds them, without importing it.

Why: ``importlib.metadata`` brings email, zipfile, csv and importlib.resources with it, about
0.95 MiB resident in every ``gpu-agent run`` (issue 41), only to list a few entry-point groups
and the agent's own version. This module reads the same ``*.dist-info`` / ``*.egg-info``
directories on ``sys.path`` in the same order, with the same rules (Python 3.11's
``MetadataPathFinder``):

- each ``sys.path`` entry is listed (``''`` is the working directory); in it the metadata
  directories are grouped by normalized name in the order the listing first shows each name;
- a distribution is unique by the normalized name of its directory's stem: the first found wins
  (``importlib.metadata._unique``);
- ``entry_points.txt`` is read as ``Sectioned``/``Pair`` read it (stripped lines, ``#`` comments,
  ``[group]`` sections, ``name = value`` split at the first ``=``).

Anything this does not reproduce exactly makes it answer ``None`` and the caller asks
``importlib.metadata`` itself: another finder that declares ``find_distributions`` (a custom
installer's), a ``sys.path`` entry that is not a string, a zip or ``.egg`` entry, a stem whose
suffix only matches case-insensitively, a file that cannot be read or decoded, a line
``importlib.metadata`` would raise on, an entry-point value its pattern does not match, a
single-file ``.egg-info``, a metadata header this parser does not read plainly.
``tests/unit/extensions/test_distributions.py`` compares both over this environment and over
synthetic ``sys.path`` layouts.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module, machinery
from typing import Any

# importlib.metadata.EntryPoint.pattern, copied: a value it does not match is left to it.
_VALUE = re.compile(r'(?P<module>[\w.]+)\s*'
                    r'(:\s*(?P<attr>[\w.]+)\s*)?'
                    r'((?P<extras>\[.*\])\s*)?$')
_SUFFIXES = (".dist-info", ".egg-info")
# What PathDistribution.read_text treats as "no such file" (UnicodeDecodeError is not one).
_ABSENT = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


class Unusual(Exception):
    """A layout this module does not reproduce; importlib.metadata must answer."""


@dataclass(frozen=True)
class FoundEntry:
    """One entry point: ``importlib.metadata.EntryPoint``'s name, value and group, and where its
    distribution lies (``dist.locate_file("")``)."""

    name: str
    value: str
    group: str
    location: str

    def load(self) -> Any:
        """The module or attribute named, as ``EntryPoint.load`` imports it."""
        match = _VALUE.match(self.value)
        if match is None:  # only entries from importlib.metadata's own answer get here
            raise ValueError(f"{self.value!r} is not an entry point reference")
        module = import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, attrs, module)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _check_finders() -> None:
    declared = [finder for finder in sys.meta_path
                if getattr(finder, "find_distributions", None) is not None]
    if declared != [machinery.PathFinder]:
        raise Unusual("another finder declares find_distributions")


def _metadata_dirs(root: str) -> Iterator[tuple[str, str]]:
    """(normalized name, path) of each metadata directory in ``root``, in Lookup's order."""
    if os.path.basename(root).lower().endswith(".egg"):
        raise Unusual(f"{root}: an egg")
    try:
        children = os.listdir(root or ".")
    except (FileNotFoundError, NotADirectoryError):
        if os.path.exists(root or "."):
            raise Unusual(f"{root}: not a directory (a zip?)") from None
        return
    except OSError as error:
        raise Unusual(f"{root}: {error}") from error
    grouped: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if not low.endswith(_SUFFIXES):
            continue
        if not child.endswith(_SUFFIXES):
            raise Unusual(f"{child}: suffix differs in case")
        normalized = _normalize(low.rpartition(".")[0].partition("-")[0])
        grouped.setdefault(normalized, []).append(os.path.join(root, child))
    for normalized, paths in grouped.items():
        for path in paths:
            # _unique keys on the stem's own case, normalized: the same as the lower-cased key.
            yield normalized, path


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except _ABSENT:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise Unusual(f"{path}: {error}") from error


def _location(path: str) -> str:
    # PathDistribution.locate_file(""): the metadata directory's parent, as pathlib prints it.
    return os.path.dirname(path) or "."


def _entries(text: str, location: str) -> Iterator[FoundEntry]:
    section: str | None = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:
            raise Unusual(f"{location}: a line importlib.metadata raises on")
        name, value = line.split("=", 1)
        yield FoundEntry(name.strip(), value.strip(), section, location)


def _unique_dists() -> Iterator[str]:
    _check_finders()
    seen: set[str] = set()
    for root in sys.path:
        if not isinstance(root, str):
            raise Unusual("a sys.path entry that is not a string")
        for normalized, path in _metadata_dirs(root):
            if normalized not in seen:
                seen.add(normalized)
                yield path


def scan_entry_points(group: str) -> tuple[FoundEntry, ...] | None:
    """The entry points of ``group`` in ``importlib.metadata.entry_points(group=group)``'s
    order; None where only importlib.metadata can say."""
    try:
        found: list[FoundEntry] = []
        for path in _unique_dists():
            text = _read(os.path.join(path, "entry_points.txt"))
            # Every line of every file is parsed, as importlib.metadata parses them.
            entries = list(_entries(text or "", _location(path)))
            found.extend(entry for entry in entries if entry.group == group)
        if any(_VALUE.match(entry.value) is None for entry in found):
            raise Unusual(f"an entry of {group} importlib.metadata cannot load")
        return tuple(found)
    except Unusual:
        return None


def entry_points_of(group: str) -> tuple[FoundEntry, ...]:
    """``importlib.metadata.entry_points(group=group)``, read without importing it where the
    layout allows (see the module's docstring)."""
    scanned = scan_entry_points(group)
    if scanned is not None:
        return scanned
    from importlib.metadata import entry_points

    return tuple(FoundEntry(entry.name, entry.value, entry.group,
                            str(entry.dist.locate_file("")) if entry.dist is not None else "")
                 for entry in entry_points(group=group))


class NotInstalled(LookupError):
    """No distribution of that name is on sys.path."""


def _header(text: str, key: str) -> str | None:
    """The first ``key:`` header of an RFC 822 head, where it is plain (no folded lines)."""
    wanted = key.lower()
    for line in text.split("\n"):
        if line in ("", "\r"):
            break
        if line[:1] in (" ", "\t"):
            raise Unusual("a folded header")
        name, sep, value = line.partition(":")
        if not sep or name != name.strip():
            raise Unusual("a header line email reads its own way")
        if "\r" in line[:-1]:
            raise Unusual("a bare carriage return")
        if name.lower() == wanted:
            # compat32 keeps the value's trailing blanks; a value with any is left to it.
            plain = value.lstrip(" \t").rstrip("\r")
            if not plain or plain != plain.rstrip():
                raise Unusual("an empty header or trailing blanks")
            return plain
    return None


def scan_version(distribution: str) -> str | None:
    """The ``Version`` of the first distribution named so on sys.path; NotInstalled if none;
    None where only importlib.metadata can say."""
    wanted = _normalize(distribution)
    try:
        _check_finders()
        for root in sys.path:
            if not isinstance(root, str):
                raise Unusual("a sys.path entry that is not a string")
            for normalized, path in _metadata_dirs(root):
                if normalized != wanted:
                    continue
                if not os.path.isdir(path):
                    raise Unusual(f"{path}: a single-file egg-info")
                text = _read(os.path.join(path, "METADATA")) or _read(
                    os.path.join(path, "PKG-INFO"))
                if not text:
                    raise Unusual(f"{path}: no metadata file")
                version = _header(text, "Version")
                if version is None:
                    raise Unusual(f"{path}: no Version")
                return version
    except Unusual:
        return None
    raise NotInstalled(distribution)


def version_of(distribution: str) -> str:
    """``importlib.metadata.version(distribution)``; NotInstalled where it raises
    PackageNotFoundError."""
    scanned = scan_version(distribution)
    if scanned is not None:
        return scanned
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        raise NotInstalled(distribution) from None
