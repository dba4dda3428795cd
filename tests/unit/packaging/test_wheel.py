"""The built wheel adds exactly one top-level import package, and it is complete.

Built from this checkout with the project's own build backend (no isolation: setuptools comes
with the dev extra), then opened as the zip it is, so what is checked is what ``pip install``
would put into site-packages.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# The folders of the repository whose trees end with import paths: a file's path below one of
# them is its path in the wheel (and in site-packages).
SOURCE_ROOTS = (REPO / "agent", REPO / "plugins")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(out), str(REPO)],
        check=True, capture_output=True, timeout=300,
    )
    (built,) = out.glob("gpu_otel_agent-*.whl")
    return built


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_adds_one_top_level_package_named_after_the_project(wheel: Path) -> None:
    tops = {name.split("/")[0] for name in _names(wheel) if ".dist-info/" not in name}
    assert tops == {"gpu_otel_agent"}


def test_every_source_package_and_its_data_is_in_the_wheel(wheel: Path) -> None:
    names = set(_names(wheel))
    for folder in SOURCE_ROOTS:
        for module in folder.rglob("*.py"):
            relative = module.relative_to(folder).as_posix()
            assert relative.startswith("gpu_otel_agent/"), f"{module}: not under the package"
            assert relative in names, f"{module} is missing from the wheel (as {relative})"
    for data in ("gpu_otel_agent/py.typed",
                 "gpu_otel_agent/plugins/nvidia/simulator/libnvml_sim.c",
                 "gpu_otel_agent/plugins/amd/simulator/libamd_smi_sim.c",
                 "gpu_otel_agent/plugins/simulator_core/simcore.h",
                 "gpu_otel_agent/plugins/ebpf/bpf/cuda_activity.bpf.c",
                 # `--simulate h100-8gpu` and top's hint work wherever the wheel is installed
                 "gpu_otel_agent/plugins/nvidia/simulator/scenarios/h100-8gpu.yaml"):
        assert data in names, data


def test_the_installed_wheel_imports_its_entry_points_from_itself(
    wheel: Path, tmp_path: Path
) -> None:
    """Unpacked on its own (not the checkout, not the editable install), every entry point loads."""
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
        (meta,) = {n.split("/")[0] for n in archive.namelist() if ".dist-info/" in n}
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read_string(archive.read(f"{meta}/entry_points.txt").decode())
    targets = [value.strip() for section in parser.sections() for value in parser[section].values()]
    assert "gpu_otel_agent.cli:main" in targets
    script = (
        "import importlib, sys\n"
        "for spec in sys.argv[1:]:\n"
        "    module, _, attr = spec.partition(':')\n"
        "    loaded = importlib.import_module(module)\n"
        "    assert loaded.__file__.startswith(sys.path[0]), loaded.__file__\n"
        "    getattr(loaded, attr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(target)!r})\n{script}",
         *targets],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
