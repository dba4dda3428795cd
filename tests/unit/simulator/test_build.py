from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.nvidia.build_nvml import (
    BuildError,
    build_library,
    find_nvml_header,
)


def test_header_found_through_package() -> None:
    header = find_nvml_header()
    assert header.name == "nvml.h" and "nvidia" in header.parts


def test_build_is_cached_and_has_soname() -> None:
    lib = build_library()
    assert lib.name == "libnvidia-ml.so.1"
    assert build_library() == lib
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=False)
    if out.returncode == 0:
        assert "libnvidia-ml.so.1" in out.stdout


def test_missing_symbols_variant() -> None:
    full = ctypes.CDLL(str(build_library()))
    variant_path = build_library(["nvmlGpmMetricsGet"])
    assert variant_path != build_library()
    variant = ctypes.CDLL(str(variant_path))
    assert hasattr(full, "nvmlGpmMetricsGet")
    assert not hasattr(variant, "nvmlGpmMetricsGet")
    assert hasattr(variant, "nvmlDeviceGetCount_v2")


def test_cache_dir_honours_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lib = build_library()
    assert lib.is_relative_to(tmp_path / "gpu-otel-agent" / "simnode")


def test_bad_symbol_name_rejected() -> None:
    with pytest.raises(BuildError):
        build_library(["not a symbol"])
