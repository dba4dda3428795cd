"""What can be checked of the Dockerfile without a Docker engine."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
            for line in lines if line and not line.startswith("#")]


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_multi_stage_with_a_slim_runtime_that_builds_nothing() -> None:
    stages = _stages()
    assert len(stages) >= 2
    final = stages[-1]
    assert "slim" in final[0][1]
    runs = " ".join(arg for op, arg in final if op == "RUN")
    assert "pip install" not in runs and "gcc" not in runs  # built in the first stage
    assert any(op == "COPY" and arg.startswith("--from=build") for op, arg in final)
    assert "--no-install-recommends" in runs and "rm -rf /var/lib/apt/lists/*" in runs


def test_libbpf_present_and_non_root_by_default() -> None:
    final = _stages()[-1]
    runs = " ".join(arg for op, arg in final if op == "RUN")
    assert re.search(r"\blibbpf1\b", runs)
    (user,) = [arg for op, arg in final if op == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    assert ("ENTRYPOINT", '["gpu-agent"]') in final


def test_the_build_stage_compiles_the_bpf_object_into_the_package() -> None:
    build, final = _stages()[0], _stages()[-1]
    runs = [arg for op, arg in build if op == "RUN"]
    installs = " ".join(runs)
    for package in ("clang", "llvm", "bpftool", "libbpf-dev"):
        assert re.search(rf"apt-get install [^&]*\b{re.escape(package)}\b", installs), package
    (step,) = [run for run in runs if "plugins/gpu_otel_agent/plugins/ebpf/compile_bpf.py" in run]
    # Built before the install (the object is package data), then checked in the package.
    build = step.index("python plugins/gpu_otel_agent/plugins/ebpf/compile_bpf.py")
    assert build < step.index("pip install .") < step.index("OBJECT.is_file()")
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["gpu_otel_agent.plugins.ebpf.bpf"]
    assert "*.bpf.o" in package_data
    final_runs = " ".join(arg for op, arg in final if op == "RUN")
    for tool in ("clang", "llvm", "bpftool", "libbpf-dev"):
        assert not re.search(rf"\b{re.escape(tool)}\b", final_runs), tool  # runtime: libbpf1


def test_copied_sources_exist_and_python_matches_the_package() -> None:
    for op, arg in _instructions():
        if op == "COPY" and not arg.startswith("--from"):
            for source in arg.split()[:-1]:
                assert (REPO / source).exists(), source
    version = re.search(r"ARG PYTHON_VERSION=(\d+\.\d+)",
                        (REPO / "Dockerfile").read_text()).group(1)  # type: ignore[union-attr]
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={version}"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignored)
