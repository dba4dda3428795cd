"""Event severities, as OTLP log severity numbers (logs data model: INFO 9, WARN 13, ...)."""

from __future__ import annotations

import enum


class Severity(enum.Enum):
    INFO = 9
    WARN = 13
    ERROR = 17
    FATAL = 21

    @property
    def number(self) -> int:
        return self.value

    @property
    def text(self) -> str:
        return self.name
