"""Table cells of the generated docs: a name without a description is an error, not an empty
cell."""

from __future__ import annotations


def described(name: str, description: str) -> str:
    """``description``, or a ValueError: a docs row without one is a defect, not a blank cell."""
    if not description.strip():
        raise ValueError(f"{name} has no description: give it one where it is defined")
    return description
