"""NVLink per link, as a scenario writes it, onto the simulated library's per-link readings.

A scenario's ``nvlink:`` list has one entry per link (``{state: up, crc_flit_errors: 0,
replay_errors: 0, recovery_errors: 0}``); ``sim set`` takes ``nvlink.3.state=down`` and
``nvlink.3.crc_flit_errors=120``. Both become the readings ``nvlink_state_3``,
``nvlink_crc_flit_errors_3``, ... that ``libnvml_sim.c`` serves through
``nvmlDeviceGetNvLinkState``, ``nvmlDeviceGetNvLinkErrorCounter`` and the NVLink field ids.
Links the scenario does not list keep the default: up, no errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_LINKS = 18  # SIM_NVLINKS in libnvml_sim.c (H100 / B200 have 18)
FIELDS = ("state", "crc_flit_errors", "replay_errors", "recovery_errors")
STATES = {"up": 1.0, "down": 0.0}
_SET_KEY = re.compile(r"^nvlink\.(\d+)\.(\w+)$")


class LinkError(ValueError):
    """A link entry or key is malformed; the message says what is wrong."""


def reading(link: int, field: str) -> str:
    return f"nvlink_{field}_{link}"


def value(field: str, raw: object) -> float:
    """``up``/``down`` for a state (also 1/0), a non-negative count for a counter."""
    if field == "state":
        if isinstance(raw, str) and raw in STATES:
            return STATES[raw]
        if raw in (0, 1) and not isinstance(raw, bool):
            return float(raw)
        raise LinkError(f"state must be 'up' or 'down', got {raw!r}")
    if field not in FIELDS:
        raise LinkError(f"unknown link field {field!r} (one of {', '.join(FIELDS)})")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
        raise LinkError(f"{field} must be a count >= 0, got {raw!r}")
    return float(raw)


def _link(index: object) -> int:
    if not isinstance(index, int) or not 0 <= index < MAX_LINKS:
        raise LinkError(f"link {index!r} out of range 0..{MAX_LINKS - 1}")
    return index


def scenario_readings(entries: object) -> dict[str, float]:
    """The readings of a scenario's ``nvlink:`` list (position = link index)."""
    if not isinstance(entries, list):
        raise LinkError("expected a list with one entry per link")
    if len(entries) > MAX_LINKS:
        raise LinkError(f"at most {MAX_LINKS} links")
    out: dict[str, float] = {}
    for link, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise LinkError(f"link {link}: expected a mapping like {{state: up}}")
        for field, raw in entry.items():
            try:
                out[reading(link, str(field))] = value(str(field), raw)
            except LinkError as error:
                raise LinkError(f"link {link}: {error}") from error
    return out


def set_key(key: str, raw: object) -> tuple[str, float] | None:
    """``nvlink.N.field`` -> (reading, value); None when ``key`` is no link key."""
    match = _SET_KEY.match(key)
    if match is None:
        return None
    link = _link(int(match.group(1)))
    return reading(link, match.group(2)), value(match.group(2), raw)
