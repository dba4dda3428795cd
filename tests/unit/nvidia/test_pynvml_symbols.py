"""The installed pynvml defines every name the NVIDIA plugin uses (the floor in pyproject.toml).

An older nvidia-ml-py that lacks one fails the plugin's import (or a call at run time), and the
agent then leaves the NVIDIA backend out entirely: on a GPU node, no GPU metrics at all.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pynvml

from tests.unit.nvidia import pynvml_symbols


def test_installed_pynvml_has_every_name_the_plugin_uses() -> None:
    missing = sorted(name for name in pynvml_symbols.required() if not hasattr(pynvml, name))
    assert missing == [], f"pynvml {Path(pynvml.__file__)} lacks {missing}"


def test_the_list_is_read_from_the_code() -> None:
    """The scan finds names used as attributes and as getattr strings, across modules (a
    regression guard on the scanner: an empty or partial list would pass the test above)."""
    names = pynvml_symbols.required()
    assert {"nvmlDeviceGetFieldValues", "nvmlEventSetWait_v2", "nvmlGpmMetricsGet",
            "nvmlDeviceGetMaxPcieLinkWidth", "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
            "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", "nvmlDeviceGetTemperatureV"} <= names
    assert len(names) > 100


def test_a_pynvml_without_a_name_is_caught(tmp_path: Path) -> None:
    """What the floor rests on: a pynvml.py that lacks a used name is reported lacking it."""
    source = Path(pynvml.__file__).read_text()
    stripped = source.replace("def nvmlDeviceGetTemperatureV(", "def _gone_(")
    (tmp_path / "pynvml.py").write_text(stripped)
    lacking = pynvml_symbols.required() - pynvml_symbols.defined(tmp_path / "pynvml.py")
    assert lacking == {"nvmlDeviceGetTemperatureV"}


def test_getattr_with_a_fallback_is_optional() -> None:
    tree = ast.parse('getattr(pynvml, "a", 0)\ngetattr(pynvml, "b")\npynvml.c\nother.d\n')
    assert pynvml_symbols._names_in(tree) == {"b", "c"}


# What each nvidia-ml-py release lacks of the names the plugin used when the floor was set
# (python -m tests.unit.nvidia.pynvml_symbols on the releases, fetched with `pip download
# --no-deps nvidia-ml-py==V`, 2026-11-25). The floor is the oldest release lacking nothing.
RELEASES: dict[str, tuple[str, ...]] = {
    "12.560.30": ("NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
                  "nvmlDeviceGetTemperatureV"),
    "12.570.86": ("NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",),
    "12.570.172": ("NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",),
    "12.575.51": ("NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",),
    "13.580.65": (),
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_declared_floor_is_the_oldest_release_with_every_name() -> None:
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    floor_of = re.compile(r"nvidia-ml-py>=([\d.]+)(?:,<[\d.]+)?")  # and its major's bound
    (floor,) = (m.group(1) for d in deps if (m := floor_of.fullmatch(d)))
    complete = [v for v, lacking in RELEASES.items() if not lacking]
    assert _version(floor) == min(_version(v) for v in complete)
    assert all(lacking for v, lacking in RELEASES.items() if _version(v) < _version(floor))
    # the record still names only names the plugin uses (a name dropped from the code would
    # make an older release good enough: record again then)
    still_used = pynvml_symbols.required()
    assert {n for lacking in RELEASES.values() for n in lacking} <= still_used


def test_field_ids_the_plugin_takes_from_pynvml_are_nvml_h_s() -> None:
    """pynvml's constants are typed by hand: up to 13.580.65 it numbered the clock-event reason
    counters 251-253, which nvml.h (12.8, 13.0.87+) gives power smoothing. Every NVML_FI_* the
    plugin takes from the installed pynvml must have the installed nvml.h's value."""
    from gpu_otel_agent.simulation.nvidia.build_nvml import find_nvml_header

    header = find_nvml_header().read_text(errors="replace")
    defines = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"^#define\s+(NVML_FI_\w+)\s+(\d+)\b", header, re.M)}
    used = sorted(n for n in pynvml_symbols.required() if n.startswith("NVML_FI_"))
    assert used, "the plugin reads fields"
    differ = {n: (getattr(pynvml, n), defines.get(n)) for n in used
              if getattr(pynvml, n) != defines.get(n)}
    assert differ == {}, "pynvml value, nvml.h value"
