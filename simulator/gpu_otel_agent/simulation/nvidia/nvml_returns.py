"""The return codes ``nvml.h`` documents for each NVML function, and which of them chaos injects.

``python -m gpu_otel_agent.simulation.nvidia.nvml_returns`` parses the installed
``nvml.h`` (nvidia-nvml-dev) and rewrites ``nvml_returns.json`` beside this module; the
simulated node reads that committed file, and a test re-runs the extraction against the
installed header and compares.  Nothing here is typed by hand but the exclusion rules below.

Extraction rules (what "documented" means):

- a function is documented by the ``/** ... */`` comment directly above its
  ``nvmlReturn_t DECLDIR name(`` declaration (a ``DEPRECATED(x)`` prefix is allowed);
- its codes are the bullets of that comment's ``@return`` section, i.e. lines
  ``- \\ref NVML_...`` (or ``- NVML_...``) up to the next ``@`` tag; ``NVML_SUCCESS`` is dropped;
- a name nvml.h declares without a ``@return`` list (``nvmlDeviceGetTemperature`` in NVML 13
  only says "@deprecated") has no documented codes and gets no random errors;
- names the simulated library exports under an older version (``nvmlDeviceGetCount``,
  ``nvmlInit``) are answered by :func:`documented` through their documented sibling;
- a function whose ``@return`` says "Nonzero NVML_ERROR_? enum on error" (the GPM calls) lists
  no code but may return any: it is recorded under ``any_error``.

Injection rule (what chaos draws from): documented codes minus :data:`NOT_INJECTED`, i.e. only
codes a correct caller can receive from a healthy node at random. An ``any_error`` function
draws the codes every device getter the node serves documents (NVML 13: UNKNOWN), as a field's
nvmlReturn does (``faults.FaultControl``).  Caller errors, states the
node models with their own operation, capability answers and normal answers are excluded; the
targeted ``fail`` operation injects any code, these included.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("nvml_returns.json")

# Why each is never drawn at random (``sim fail`` still injects any code):
NOT_INJECTED: Mapping[str, str] = {
    "NVML_ERROR_UNINITIALIZED": "node state: driver reload (`sim driver-reload`)",
    "NVML_ERROR_INVALID_ARGUMENT": "caller error: a correct caller never receives it",
    "NVML_ERROR_INSUFFICIENT_SIZE": "normal answer of the size handshake, with a count to retry",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH": "caller error (struct version)",
    "NVML_ERROR_ALREADY_INITIALIZED": "deprecated, never returned",
    "NVML_ERROR_NOT_SUPPORTED": "capability answer, constant per device (scenario `unsupported`)",
    "NVML_ERROR_FUNCTION_NOT_FOUND": "capability answer (scenario `missing_symbols`)",
    "NVML_ERROR_DEPRECATED": "capability answer, constant per driver",
    "NVML_ERROR_NOT_FOUND": "normal answer (no samples, no such PID or instance)",
    "NVML_ERROR_GPU_IS_LOST": "node state: `sim lost`",
    "NVML_ERROR_RESET_REQUIRED": "node state: `sim reset-required`",
    "NVML_ERROR_DRIVER_NOT_LOADED": "node state: no driver at nvmlInit",
    "NVML_ERROR_LIBRARY_NOT_FOUND": "node state: no library",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "node state: library and kernel module differ",
}

# Functions whose listed code is their normal answer rather than a fault.
NORMAL_ANSWERS: Mapping[str, frozenset[str]] = {
    "nvmlEventSetWait_v2": frozenset({"NVML_ERROR_TIMEOUT"}),  # "no event within timeout"
    "nvmlEventSetWait": frozenset({"NVML_ERROR_TIMEOUT"}),
}

_COMMENT_DECL = re.compile(
    r"/\*\*(?P<doc>(?:(?!\*/).)*?)\*/\s*(?:DEPRECATED\([^)]*\)\s*)?"
    r"nvmlReturn_t\s+DECLDIR\s+(?P<name>nvml\w+)\s*\(",
    re.S,
)
_DECL = re.compile(r"nvmlReturn_t\s+DECLDIR\s+(?P<name>nvml\w+)\s*\(")
_BULLET = re.compile(r"^\s*\*?\s*-\s*(?:\\ref\s+)?(NVML_(?:SUCCESS|ERROR_\w+))\b")
_ENUM = re.compile(r"\b(NVML_(?:SUCCESS|ERROR_\w+))\s*=\s*(\d+)")
_ANY_ERROR = re.compile(r"^\s*\*?\s*-\s*Nonzero NVML_ERROR_\?", re.M)


def return_codes(header_text: str) -> dict[str, int]:
    """The ``nvmlReturn_t`` enumerators and their values."""
    start = header_text.index("typedef enum nvmlReturn_enum")
    end = header_text.index("} nvmlReturn_t;", start)
    return {m.group(1): int(m.group(2)) for m in _ENUM.finditer(header_text[start:end])}


def _return_section(doc: str) -> list[str]:
    lines = doc.splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        body = line.strip().lstrip("*").strip()
        if body.startswith("@return"):
            inside = True
            continue
        if inside and body.startswith("@"):
            break
        if inside:
            m = _BULLET.match(line)
            if m and m.group(1) not in out:
                out.append(m.group(1))
    return out


def extract(header_text: str) -> dict[str, list[str]]:
    """Function name -> documented codes (``NVML_SUCCESS`` dropped), for every declaration."""
    known = return_codes(header_text)
    out: dict[str, list[str]] = {m.group("name"): [] for m in _DECL.finditer(header_text)}
    for m in _COMMENT_DECL.finditer(header_text):
        # The non-greedy doc may span several comments; only the last one belongs here.
        doc = m.group("doc").rsplit("/**", 1)[-1]
        codes = [c for c in _return_section(doc) if c != "NVML_SUCCESS"]
        unknown = [c for c in codes if c not in known]
        if unknown:
            raise ValueError(f"{m.group('name')}: codes not in nvmlReturn_t: {unknown}")
        out[m.group("name")] = codes
    return dict(sorted(out.items()))


def any_error(header_text: str) -> list[str]:
    """Functions whose ``@return`` is "Nonzero NVML_ERROR_? enum on error": any code."""
    out = set()
    for m in _COMMENT_DECL.finditer(header_text):
        doc = m.group("doc").rsplit("/**", 1)[-1]
        if _ANY_ERROR.search(doc):
            out.add(m.group("name"))
    return sorted(out)


def render(header: Path) -> str:
    text = header.read_text(errors="replace")
    version = re.search(r"#define\s+NVML_API_VERSION_STR\s+\"([^\"]+)\"", text)
    data = {
        "source": f"nvml.h (NVML_API_VERSION_STR {version.group(1) if version else '?'})",
        "codes": return_codes(text),
        "functions": extract(text),
        "any_error": any_error(text),
    }
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


@cache
def _data() -> dict[str, object]:
    loaded = json.loads(DATA.read_text())
    if not isinstance(loaded, dict):  # pragma: no cover - the committed file is an object
        raise ValueError(f"{DATA}: not a JSON object")
    return loaded


def code_values() -> dict[str, int]:
    codes = _data()["codes"]
    assert isinstance(codes, dict)
    return {str(k): int(v) for k, v in codes.items()}


def code_names() -> dict[int, str]:
    return {v: k for k, v in code_values().items()}


def _functions() -> dict[str, list[str]]:
    fns = _data()["functions"]
    assert isinstance(fns, dict)
    return {str(k): [str(c) for c in v] for k, v in fns.items()}


def documented(function: str) -> list[str]:
    """The codes nvml.h documents for ``function`` (or for the sibling version it aliases)."""
    fns = _functions()
    if fns.get(function):
        return fns[function]
    base = re.sub(r"_v\d+$", "", function)
    for candidate in (base, *(f"{base}_v{n}" for n in range(9, 1, -1))):
        if fns.get(candidate):
            return fns[candidate]
    return []


def may_return_any(function: str) -> bool:
    """nvml.h says ``function`` returns "Nonzero NVML_ERROR_? enum on error" and lists none."""
    names = _data().get("any_error", [])
    assert isinstance(names, list)
    return function in names and not documented(function)


def injectable(function: str) -> list[str]:
    """The documented codes chaos may draw for ``function`` (none for a :func:`may_return_any`
    function: the node draws the codes common to its device getters there)."""
    normal = NORMAL_ANSWERS.get(function, frozenset())
    return [c for c in documented(function) if c not in NOT_INJECTED and c not in normal]


def main(argv: list[str] | None = None) -> int:
    from gpu_otel_agent.simulation.nvidia.build_nvml import find_nvml_header

    args = sys.argv[1:] if argv is None else argv
    header = Path(args[0]) if args else find_nvml_header()
    target = Path(__file__).resolve().with_name(DATA.name)  # the source tree, not a link farm
    target.write_text(render(header))
    print(f"wrote {target} from {header}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
