"""One check's outcome: pass, warn or fail, what was found and what to do about it."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"  # the agent runs, with less than it could (no pod names, no kernel XIDs)
    FAIL = "fail"  # the configuration asks for something this machine will not give


@dataclass(frozen=True)
class Result:
    name: str
    status: Status
    detail: str  # what was found, in words
    fix: str = ""  # what to do, when it is not a pass
    seconds: float = 0.0

    def line(self) -> str:
        fix = f" -> {self.fix}" if self.fix and self.status is not Status.PASS else ""
        return f"{self.status.value.upper():<4}  {self.name:<22} {self.detail}{fix}"

    def document(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status.value, "detail": self.detail,
                "fix": self.fix, "seconds": round(self.seconds, 3)}


def passed(name: str, detail: str) -> Result:
    return Result(name, Status.PASS, detail)


def warned(name: str, detail: str, fix: str) -> Result:
    return Result(name, Status.WARN, detail, fix)


def failed(name: str, detail: str, fix: str) -> Result:
    return Result(name, Status.FAIL, detail, fix)
