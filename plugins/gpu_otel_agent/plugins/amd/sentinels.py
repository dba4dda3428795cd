"""AMD's in-band "not available" values, recognised per field width and per library version.

amdsmi answers SUCCESS and marks each field it could not fill with all ones of the field's
width, and the width it used has changed between releases:

- The firmware metrics table (``amdsmi_gpu_metrics_t``, built from the kernel's
  ``gpu_metrics_vX_Y`` in ``kgd_pp_interface.h``) starts all ones and amdsmi copies in only
  the fields the ASIC's table version has: 0xFFFF for uint16, 0xFFFFFFFF for uint32, UINT64
  max for uint64 fields (``amdsmi.h`` 26.5, "@note ... UINT64_MAX for uint64_t fields").
- ``amdsmi_get_power_info``: older libraries pre-fill 0xFFFF (amdsmi ``amd_smi.cc`` at
  0ceca28, ``info->current_socket_power = 0xFFFF``); newer headers say "Unsupported struct
  members are set to UINT32_MAX" (``amdsmi.h`` 26.5, ``amdsmi_power_info_t``), and the
  64-bit ``socket_power`` has been seen at UINT64 max. The Python wrapper turns only 0xFFFF
  into ``"N/A"`` (``amdsmi_interface.amdsmi_get_power_info``), so the wider ones reach us as
  numbers.
- ``amdsmi_get_link_metrics`` copies ``xgmi_read_data_acc``/``xgmi_write_data_acc`` straight
  from the table and always says ``num_links = AMDSMI_MAX_NUM_XGMI_LINKS`` (``amd_smi.cc`` at
  0ceca28), so a part whose table has no XGMI fields answers SUCCESS with 8 x UINT64 max.

So every value passes through here before it becomes a reading.
"""

from __future__ import annotations

from typing import Any

NA8 = 0xFF
NA16 = 0xFFFF
NA32 = 0xFFFF_FFFF
NA64 = 0xFFFF_FFFF_FFFF_FFFF

# A field of width N can carry any narrower all-ones value as "not available", because the
# library version in use may have filled it with the narrower one (0xFFFF in a uint64).
_BY_WIDTH: dict[int, frozenset[int]] = {
    8: frozenset({NA8}),
    16: frozenset({NA16}),
    32: frozenset({NA16, NA32}),
    64: frozenset({NA16, NA32, NA64}),
}


def value(raw: Any, width: int) -> int | float | None:
    """``raw`` as a number, or None for ``"N/A"``, a non-number or a sentinel of ``width``."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    if isinstance(raw, int) and raw in _BY_WIDTH[width]:
        return None
    return raw


def watts(raw: Any, width: int) -> int | float | None:
    """A socket power reading. 0 W is not a reading: MI200's firmware reports the package's
    power on one GCD and 0 on its sibling (the v1.3 table has only ``average_socket_power``,
    filled on the die that owns the socket), and a powered GPU never draws 0 W."""
    watts_ = value(raw, width)
    return None if watts_ is None or watts_ <= 0 else watts_
