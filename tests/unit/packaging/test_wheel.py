"""The two wheels: the agent's adds exactly one top-level import package, complete and without
the simulated node; the simulator's (gpu-otel-agent-simulator) adds only
``gpu_otel_agent/simulation/``. Installed alone, the agent's says what to install for
``--simulate`` and ``gpu-agent sim``, and still writes captures.

Built from this checkout with the project's own build backend (no isolation: setuptools comes
with the dev extra), then opened as the zips they are, so what is checked is what ``pip install``
would put into site-packages.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SIMULATOR = REPO / "simulator"
# The folders of the repository whose trees end with import paths: a file's path below one of
# them is its path in its distribution's wheel (and in site-packages).
SOURCE_ROOTS = (REPO / "agent", REPO / "plugins")
SIMULATION = "gpu_otel_agent/simulation/"
INSTALL_HINT = "pip install ./simulator"


# What a distribution's build reads (its pyproject.toml names the rest), and what a working
# tree may hold beside it that a build must not see: setuptools builds in the tree and reuses
# its `build/` folder, where a module moved away since the last build would still be found.
AGENT_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "agent", "plugins")
NOT_SOURCES = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")


def _build(sources: Path, out: Path, pattern: str) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(out), str(sources)],
        check=True, capture_output=True, timeout=300,
    )
    (built,) = out.glob(pattern)
    return built


def _copy(source: Path, names: tuple[str, ...], target: Path) -> Path:
    """``names`` of ``source`` copied to ``target``: a clean tree to build from."""
    for name in names:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, ignore=NOT_SOURCES)
        else:
            shutil.copy2(source / name, target / name)
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sources = _copy(REPO, AGENT_SOURCES, tmp_path_factory.mktemp("agent-sources"))
    return _build(sources, tmp_path_factory.mktemp("wheel"), "gpu_otel_agent-*.whl")


@pytest.fixture(scope="module")
def simulator_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sources = tmp_path_factory.mktemp("simulator-sources") / "simulator"
    shutil.copytree(SIMULATOR, sources, ignore=NOT_SOURCES)
    return _build(sources, tmp_path_factory.mktemp("simulator-wheel"),
                  "gpu_otel_agent_simulator-*.whl")


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _unpack(wheels: list[Path], target: Path) -> list[str]:
    """The wheels' files into ``target`` (as pip would into site-packages); their entry points."""
    targets = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
            (meta,) = {n.split("/")[0] for n in archive.namelist() if ".dist-info/" in n}
            parser = configparser.ConfigParser(delimiters=("=",))
            parser.optionxform = str  # type: ignore[assignment,method-assign]
            parser.read_string(archive.read(f"{meta}/entry_points.txt").decode())
        targets += [value.strip() for section in parser.sections()
                    for value in parser[section].values()]
    return targets


def _dependencies(tmp_path: Path) -> Path:
    """This environment's site-packages without this repository's two distributions (their
    editable import hooks and metadata): what ``pip install`` of a wheel would have beside it."""
    deps = tmp_path / "deps"
    deps.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if entry.name.startswith(("gpu_otel_agent", "__editable__")) or entry.suffix == ".pth":
            continue
        (deps / entry.name).symlink_to(entry)
    return deps


def _gpu_agent(site: Path, deps: Path, *argv: str, cwd: Path,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``gpu-agent ARGV`` with only ``site`` and ``deps`` to import from (``-S``: no
    site-packages of this environment, so no editable install of this checkout)."""
    script = ("import sys\n"
              f"sys.path[:0] = [{str(site)!r}, {str(deps)!r}]\n"
              "from gpu_otel_agent.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-S", "-c", script, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


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
                 "gpu_otel_agent/plugins/ebpf/bpf/cuda_activity.bpf.c"):
        assert data in names, data


def test_the_wheel_carries_the_license(wheel: Path) -> None:
    """pyproject.toml says Apache-2.0; the wheel carries its text (PEP 639 license files)."""
    (license_file,) = [n for n in _names(wheel) if n.endswith(".dist-info/licenses/LICENSE")]
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(license_file) == (REPO / "LICENSE").read_bytes()


def test_the_agents_wheel_holds_no_simulation(wheel: Path) -> None:
    """What a GPU node installs: no simulated library, no node daemon, no scenario."""
    simulated = [n for n in _names(wheel)
                 if n.startswith(SIMULATION) or n.endswith(("_sim.c", ".yaml"))]
    assert simulated == []


def test_the_simulators_wheel_holds_only_the_simulation_and_its_data(
    simulator_wheel: Path,
) -> None:
    names = set(_names(simulator_wheel))
    outside = [n for n in names if not n.startswith(SIMULATION) and ".dist-info/" not in n]
    assert outside == []
    tree = SIMULATOR / "gpu_otel_agent" / "simulation"
    for module in tree.rglob("*.py"):
        relative = module.relative_to(SIMULATOR).as_posix()
        assert relative in names, f"{module} is missing from the wheel (as {relative})"
    # The C sources the node compiles on first use, and `--simulate h100-8gpu` by name.
    for data in ("nvidia/libnvml_sim.c", "nvidia/nvml_sim_mig.c", "nvidia/nvml_chaos.h",
                 "nvidia/nvml_returns.json", "amd/libamd_smi_sim.c", "core/simcore.h",
                 "core/simcore_state.h", "scenarios/h100-8gpu.yaml"):
        assert SIMULATION + data in names, data


@pytest.mark.parametrize("distributions", ["agent", "agent+simulator"])
def test_the_installed_wheels_import_their_entry_points_from_themselves(
    distributions: str, wheel: Path, simulator_wheel: Path, tmp_path: Path
) -> None:
    """Unpacked on their own (not the checkout, not the editable install), every entry point
    loads, from the unpacked files."""
    target = tmp_path / "site"
    wheels = [wheel, simulator_wheel] if distributions == "agent+simulator" else [wheel]
    targets = _unpack(wheels, target)
    assert "gpu_otel_agent.cli:main" in targets
    if distributions == "agent+simulator":
        assert "gpu_otel_agent.simulation.node.run_simulate:simulated_node" in targets
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


@pytest.mark.parametrize("argv", [
    ("run", "--simulate", "h100-8gpu", "--exporter", "none"),
    ("top", "--simulate", "h100-8gpu", "--once"),
    ("check", "--simulate", "h100-8gpu"),
    ("sim", "up", "h100-8gpu.yaml"),
    ("sim", "stats"),
])
def test_without_the_simulator_simulation_commands_say_what_to_install(
    argv: tuple[str, ...], wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    _unpack([wheel], site)
    done = _gpu_agent(site, _dependencies(tmp_path), *argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # one line, no traceback, no argparse usage
    assert "gpu-otel-agent-simulator" in lines[0] and INSTALL_HINT in lines[0]


def test_with_the_simulator_wheel_the_same_commands_reach_the_simulated_node(
    wheel: Path, simulator_wheel: Path, tmp_path: Path
) -> None:
    """The same two wheels side by side: the simulator's node answers (here: its scenario
    error), so the test above fails for want of the simulator, not for a broken CLI."""
    site = tmp_path / "site"
    _unpack([wheel, simulator_wheel], site)
    missing = tmp_path / "missing.yaml"
    done = _gpu_agent(site, _dependencies(tmp_path), "run", "--simulate", str(missing),
                      cwd=tmp_path)
    assert done.returncode == 2
    assert f"gpu-agent: simulated node: {missing}" in done.stderr
    assert "gpu-otel-agent-simulator" not in done.stderr


def test_gpu_agent_capture_works_without_the_simulator(wheel: Path, tmp_path: Path) -> None:
    """A GPU node's install writes captures: the agent's wheel alone reads a node (the simulated
    node of this checkout, attached through its environment, as a real driver would be)."""
    from gpu_otel_agent.simulation.node import SimulatedNode

    site = tmp_path / "site"
    _unpack([wheel], site)
    scenario = REPO / "examples" / "scenarios" / "h100-8gpu.yaml"
    out = tmp_path / "node.xml"
    with SimulatedNode.start(scenario) as node:
        done = _gpu_agent(site, _dependencies(tmp_path), "capture", "--out", str(out),
                          cwd=tmp_path, env={**os.environ, **node.env})
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert text.count("<gpu id=") == 8
    assert "NVIDIA H100" in text
