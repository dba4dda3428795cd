"""The simulated libamd_smi.so lays its structs out as the installed amdsmi wrapper declares."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from gpu_otel_agent.simulation.amd.amdsmi_control import AmdNodeLib
from gpu_otel_agent.simulation.amd.build_amdsmi import (
    build_library,
    find_wrapper,
    implemented_functions,
    wrapper_symbols,
)

_WRAPPER_LAYOUT = textwrap.dedent("""
    import ctypes, json, sys
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    from amdsmi import amdsmi_wrapper as w
    out = {}
    for key in json.loads(sys.argv[2]):
        type_name, field = key.split(".")
        cls = getattr(w, type_name)
        out[key] = [ctypes.sizeof(cls), getattr(cls, field).offset]
    print(json.dumps(out))
""")


def test_struct_sizes_and_offsets_match_the_wrapper() -> None:
    library = build_library()
    compiled = AmdNodeLib(library).layouts()
    assert len(compiled) >= 15
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER_LAYOUT, str(library), json.dumps(sorted(compiled))],
        capture_output=True, text=True, check=True, timeout=60,
    )
    declared = {k: tuple(v) for k, v in json.loads(proc.stdout).items()}
    assert declared == compiled


def test_every_wrapper_symbol_is_exported() -> None:
    library = build_library()
    functions = AmdNodeLib(library).functions
    symbols = set(wrapper_symbols(find_wrapper()))
    assert len(symbols) > 150
    assert symbols <= set(functions)
    assert set(implemented_functions()) <= set(functions)
