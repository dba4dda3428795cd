"""gpu_otel_agent.distributions finds what importlib.metadata finds (it is the reference).

Compared over this environment (every entry-point group any installed distribution declares,
and the versions of every installed distribution) and over synthetic ``sys.path`` layouts:
duplicates across and within directories, spellings of one normalized name, egg-info
directories and files, comments and odd spacing, the working directory as ``''``, and random
layouts. The layouts it does not reproduce (zip, ``.egg``, broken lines, undecodable files,
suffixes in another case, folded headers) must make it step aside (None), and the public
functions then answer as importlib.metadata does.
"""

from __future__ import annotations

import importlib
import random
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from gpu_otel_agent import distributions
from gpu_otel_agent.distributions import (
    FoundEntry,
    NotInstalled,
    entry_points_of,
    scan_entry_points,
    scan_version,
    version_of,
)

GROUP = "test.group"


def _reference(group: str) -> list[tuple[str, str, str, str]]:
    return [(e.name, e.value, e.group, str(e.dist.locate_file("")) if e.dist else "")
            for e in metadata.entry_points(group=group)]


def _plain(found: tuple[FoundEntry, ...] | None) -> list[tuple[str, str, str, str]] | None:
    return None if found is None else [(e.name, e.value, e.group, e.location) for e in found]


def test_this_environment_every_group() -> None:
    groups = {entry.group for dist in metadata.distributions() for entry in dist.entry_points}
    assert "gpu_otel_agent.backends" in groups
    for group in sorted(groups):
        assert _plain(scan_entry_points(group)) == _reference(group), group


def test_this_environment_loads_alike() -> None:
    scanned = scan_entry_points("gpu_otel_agent.commands")
    assert scanned
    reference = {entry.name: entry.load() for entry in metadata.entry_points(
        group="gpu_otel_agent.commands")}
    assert {entry.name: entry.load() for entry in scanned} == reference


def test_this_environment_versions() -> None:
    names = {dist.metadata["Name"] for dist in metadata.distributions()}
    assert "gpu-otel-agent" in names
    for name in sorted(names):
        assert version_of(name) == metadata.version(name), name
    with pytest.raises(NotInstalled):
        version_of("surely-not-installed-here")
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("surely-not-installed-here")


def _dist(root: Path, stem: str, entry_points: str | None, *, version: str = "1.0",
          metadata_file: str = "METADATA") -> Path:
    path = root / stem
    path.mkdir(parents=True)
    name = stem.rsplit(".", 1)[0].split("-", maxsplit=1)[0]
    (path / metadata_file).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                      f"Summary: x\n\nbody: not a header\n", encoding="utf-8")
    if entry_points is not None:
        (path / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return path


def _on_path(monkeypatch: pytest.MonkeyPatch, *roots: str | Path) -> None:
    monkeypatch.setattr(sys, "path", [str(root) for root in roots])
    importlib.invalidate_caches()


def _same(group: str = GROUP) -> None:
    scanned = scan_entry_points(group)
    assert scanned is not None
    assert _plain(scanned) == _reference(group)
    assert _plain(entry_points_of(group)) == _reference(group)


def test_first_distribution_on_the_path_wins(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "Foo.Bar-2.0.dist-info", f"[{GROUP}]\none = a.mod:thing\n", version="2.0")
    _dist(b, "foo_bar-1.0.dist-info", f"[{GROUP}]\none = b.mod:thing\ntwo = b.mod\n")
    _dist(b, "other-1.0.dist-info", f"[{GROUP}]\none = c.mod:x.y [extra]\n")
    _dist(b, "legacy.egg-info", f"[{GROUP}]\nthree=legacy.mod:z\n",
          metadata_file="PKG-INFO")
    (b / "single-1.0.egg-info").write_text("Name: single\nVersion: 3\n", encoding="utf-8")
    _on_path(monkeypatch, a, b, tmp_path / "absent")
    _same()
    assert next(e.value for e in scan_entry_points(GROUP) or ()) == "a.mod:thing"
    assert scan_version("foo-bar") == metadata.version("foo-bar") == "2.0"
    assert scan_version("legacy") == metadata.version("legacy") == "1.0"
    assert scan_version("single") is None  # a single-file egg-info is left to importlib
    assert version_of("single") == metadata.version("single")


def test_same_name_twice_in_one_directory(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for stem in ("dup-1.0.dist-info", "zeta-1.0.dist-info", "DUP-2.0.dist-info",
                 "dup.egg-info"):
        _dist(tmp_path, stem, f"[{GROUP}]\nn = {stem.split('-')[0].split('.')[0]}.m\n")
    _on_path(monkeypatch, tmp_path)
    _same()


def test_sections_comments_and_spacing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (f"before = any.section\n\n# comment\n[other]\nx = y\n[{GROUP}]\n"
            f"  spaced   =   pkg.mod : attr.sub   \n#x = y\n\n  a=b\nkey = w.x [extra, other]\n"
            f"[{GROUP}]\nagain = again.mod\n")
    _dist(tmp_path, "one-1.dist-info", text)
    _dist(tmp_path, "two-1.dist-info", None)  # no entry_points.txt at all
    _on_path(monkeypatch, tmp_path)
    _same()
    _same("other")


def test_the_working_directory_as_empty_entry(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _dist(tmp_path, "cwd_dist.egg-info", f"[{GROUP}]\nhere = here.mod\n",
          metadata_file="PKG-INFO", version="0.0.1")
    monkeypatch.chdir(tmp_path)
    _on_path(monkeypatch, "")
    _same()
    assert scan_version("cwd-dist") == metadata.version("cwd-dist")


@pytest.mark.parametrize("layout", ["zip", "egg", "broken line", "undecodable", "upper suffix",
                                    "bad value", "folded version"])
def test_unusual_layouts_go_to_importlib(layout: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _dist(root, "plain-1.dist-info", f"[{GROUP}]\nplain = plain.mod\n")
    extra: Path = root
    if layout == "zip":
        extra = tmp_path / "dists.zip"
        with zipfile.ZipFile(extra, "w") as archive:
            archive.writestr("zipped-1.dist-info/entry_points.txt", f"[{GROUP}]\nz = z.mod\n")
            archive.writestr("zipped-1.dist-info/METADATA", "Name: zipped\nVersion: 1\n")
    elif layout == "egg":
        extra = tmp_path / "thing-1.0.egg"
        _dist(extra, "EGG-INFO", None)
        (extra / "egg-info").mkdir()
    elif layout == "broken line":
        _dist(root, "broken-1.dist-info", "[elsewhere]\nno equals sign\n")
    elif layout == "undecodable":
        _dist(root, "latin-1.dist-info", None)
        (root / "latin-1.dist-info" / "entry_points.txt").write_bytes(b"[g]\nn = \xff\n")
    elif layout == "upper suffix":
        _dist(root, "Upper-1.DIST-INFO", f"[{GROUP}]\nu = u.mod\n")
    elif layout == "bad value":
        _dist(root, "bad-1.dist-info", f"[{GROUP}]\nbad = not a/module\n")
    elif layout == "folded version":
        _dist(root, "folded-1.dist-info", None)
        (root / "folded-1.dist-info" / "METADATA").write_text(
            "Name: folded\nVersion:\n 1.0\n", encoding="utf-8")
    _on_path(monkeypatch, root, extra)
    if layout == "folded version":
        assert scan_version("folded") is None
        assert version_of("folded") == metadata.version("folded")
        return
    assert scan_entry_points(GROUP) is None
    try:
        expected = _reference(GROUP)
    except Exception as error:  # importlib.metadata raises; so must the agent's answer
        with pytest.raises(type(error)):
            entry_points_of(GROUP)
        return
    assert _plain(entry_points_of(GROUP)) == expected


def test_another_finder_goes_to_importlib(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    class Finder:
        @staticmethod
        def find_distributions(context: object = None) -> list[metadata.Distribution]:
            return []

    _dist(tmp_path, "plain-1.dist-info", f"[{GROUP}]\nplain = plain.mod\n")
    _on_path(monkeypatch, tmp_path)
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    assert scan_entry_points(GROUP) is None
    assert scan_version("plain") is None
    assert _plain(entry_points_of(GROUP)) == _reference(GROUP)


def test_random_layouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(41)
    spellings = ["alpha", "Alpha", "ALPHA", "al_pha", "al-pha", "al.pha", "beta", "Beta_x",
                 "beta-x", "gamma"]
    groups = [GROUP, "other.group"]
    for case in range(120):
        roots = [tmp_path / f"{case}-{index}" for index in range(rng.randint(1, 3))]
        for root in roots:
            root.mkdir()
            for _ in range(rng.randint(0, 4)):
                stem = rng.choice(spellings)
                suffix = rng.choice([".dist-info", ".egg-info"])
                full = f"{stem}-{rng.randint(0, 99)}{suffix}" if rng.random() < 0.7 else (
                    f"{stem}{suffix}")
                if (root / full).exists():
                    continue
                lines = [f"[{rng.choice(groups)}]"]
                lines += [f"{rng.choice('abcd')} = m{rng.randint(0, 9)}.mod:attr"
                          for _ in range(rng.randint(0, 3))]
                if rng.random() < 0.3:
                    lines.insert(0, "# a comment")
                _dist(root, full, "\n".join(lines) + "\n" if rng.random() < 0.9 else None,
                      version=f"{rng.randint(0, 9)}.{rng.randint(0, 9)}")
        _on_path(monkeypatch, *roots, tmp_path / "nowhere")
        for group in groups:
            _same(group)
        for name in ("alpha", "beta-x", "gamma"):
            try:
                expected = metadata.version(name)
            except metadata.PackageNotFoundError:
                with pytest.raises(NotInstalled):
                    scan_version(name)
                continue
            assert scan_version(name) == expected


def test_importlib_metadata_stays_unimported_here() -> None:
    # The module must not import it at module level (the fresh-interpreter test checks `run`).
    source = Path(distributions.__file__).read_text(encoding="utf-8")
    assert "\nfrom importlib.metadata" not in source and "\nimport importlib.metadata" not in source
