"""What a configuration value may be: one small class per kind of value.

A kind checks a value from the YAML file (already typed by YAML), converts a value from an
environment variable (always text), names itself for docs/config.md and gives the JSON-schema
constraints the chart's values.schema.json repeats. The table (``table.py``) gives each key one
kind, so the rule for a key is written once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


class Invalid(ValueError):
    """The value is wrong; the message says what was expected. The loader adds key and origin."""


_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Kind:
    """Base: ``nullable`` kinds accept YAML ``null`` (Python None) as "not set"."""

    nullable: bool = False

    def check(self, value: Any) -> Any:
        if value is None and self.nullable:
            return None
        return self._check(value)

    def from_env(self, text: str) -> Any:
        """An environment variable's text as the value the file would hold."""
        return text

    def _check(self, value: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        """The type column of docs/config.md."""
        raise NotImplementedError

    def json_schema(self) -> dict[str, Any]:
        """The constraints a chart value mapped onto this key carries in values.schema.json."""
        return {}


def _number(value: Any) -> float:
    # YAML's true/false are ints to Python; a boolean where a number is expected is a mistake.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f"expected a number, got {value!r}")
    return float(value)


def _parse_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise Invalid(f"expected a number, got {text!r}") from None


@dataclass(frozen=True)
class Seconds(Kind):
    """A positive, finite duration in seconds."""

    def _check(self, value: Any) -> float:
        number = _number(value)
        if not number > 0 or math.isinf(number):
            raise Invalid(f"must be a positive number of seconds, got {value!r}")
        return number

    def from_env(self, text: str) -> float:
        return _parse_number(text)

    def describe(self) -> str:
        return "seconds > 0" + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "number", "exclusiveMinimum": 0}


@dataclass(frozen=True)
class Number(Kind):
    """A number within [low, high] (inclusive)."""

    low: float = 0.0
    high: float = math.inf
    unit: str = ""

    def _check(self, value: Any) -> float:
        number = _number(value)
        if not self.low <= number <= self.high:
            unit = f" ({self.unit})" if self.unit else ""
            raise Invalid(f"must be between {self.low:g} and {self.high:g}{unit}, got {value!r}")
        return number

    def from_env(self, text: str) -> float:
        return _parse_number(text)

    def describe(self) -> str:
        return f"number {self.low:g} to {self.high:g}" + (f" ({self.unit})" if self.unit else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "number", "minimum": self.low, "maximum": self.high}


@dataclass(frozen=True)
class Count(Kind):
    """A whole number >= minimum."""

    minimum: int = 0

    def _check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            expected = (f"a whole number >= {self.minimum}" if self.minimum == 0
                        else f"a whole number of at least {self.minimum}")
            raise Invalid(f"expected {expected}, got {value!r}")
        return value

    def from_env(self, text: str) -> Any:
        try:
            return int(text)
        except ValueError:
            return text  # _check names the bad text

    def describe(self) -> str:
        return f"whole number >= {self.minimum}"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum}


@dataclass(frozen=True)
class Flag(Kind):
    """true or false. From the environment also 1/0 and yes/no; the file must say a boolean."""

    def _check(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise Invalid(f"expected true or false, got {value!r}")
        return value

    def from_env(self, text: str) -> Any:
        return _BOOL_WORDS.get(text.strip().lower(), text)

    def describe(self) -> str:
        return "boolean" + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


@dataclass(frozen=True)
class Choice(Kind):
    """One of a few words; ``fold_case`` accepts INFO for info."""

    choices: tuple[str, ...] = ()
    fold_case: bool = False

    def _check(self, value: Any) -> str:
        word = value.lower() if self.fold_case and isinstance(value, str) else value
        if word not in self.choices:
            raise Invalid(f"must be one of {', '.join(self.choices)}, got {value!r}")
        return str(word)

    def describe(self) -> str:
        words = " \\| ".join(f"`{c}`" for c in self.choices)
        return words + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"enum": list(self.choices)}


@dataclass(frozen=True)
class Text(Kind):
    """A non-empty string."""

    def _check(self, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise Invalid(f"expected a non-empty string, got {value!r}")
        return value

    def describe(self) -> str:
        return "string" + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string"}


@dataclass(frozen=True)
class AbsolutePath(Kind):
    """A path starting with /: relative paths would depend on the agent's working directory."""

    def _check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.startswith("/"):
            alternative = " or null" if self.nullable else ""
            raise Invalid(f"expected an absolute path{alternative}, got {value!r}")
        return value

    def describe(self) -> str:
        return "absolute path" + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": "^/"}


@dataclass(frozen=True)
class Directory(Kind):
    """An absolute directory path; null turns the feature that writes there off. A relative
    path is refused, not resolved: against the working directory it would name another place
    for every way the agent is started (systemd, a shell, a container)."""

    def _check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.startswith("/"):
            raise Invalid(f"expected an absolute directory path, or null for no spool, got "
                          f"{value!r} (a relative path would depend on the directory the agent "
                          f"is started in)")
        return value

    def describe(self) -> str:
        return "absolute directory path" + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": "^/"}


OTLP_SCHEMES = ("http", "https")


def endpoint_problem(text: str) -> str | None:
    """What is wrong with an OTLP endpoint, or None. A URL takes http (plain) or https (TLS);
    without a scheme, ``host:port`` is what the SDK's gRPC exporter accepts too."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep:
        return None if text.strip() and " " not in text.strip() else \
            f"expected a URL such as http://collector:4317, got {text!r}"
    if scheme.lower() not in OTLP_SCHEMES:
        return (f"scheme {scheme!r} of {text!r} is not one OTLP is sent over: use http:// "
                f"(plain) or https:// (TLS)")
    if not rest.split("/", 1)[0]:
        return f"{text!r} names no host"
    return None


@dataclass(frozen=True)
class OtlpEndpoint(Kind):
    """A collector's URL (``http://`` or ``https://``), or ``host:port``."""

    def _check(self, value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid(f"expected a URL such as http://collector:4317, got {value!r}")
        problem = endpoint_problem(value)
        if problem is not None:
            raise Invalid(problem)
        return value

    def describe(self) -> str:
        return "URL" + (" or null" if self.nullable else "")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": "^(https?://.+|[^:/ ]+:[0-9]+)$"}


@dataclass(frozen=True)
class ListenAddress(Kind):
    """``host:port`` (``[::]:9400`` for IPv6); the port a number from 0 to 65535."""

    def _check(self, value: Any) -> str:
        text = value if isinstance(value, str) else ""
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535 or " " in host:
            raise Invalid(f"expected host:port such as 0.0.0.0:9400 or [::]:9400, got {value!r}")
        return text

    def describe(self) -> str:
        return "host:port"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string"}


@dataclass(frozen=True)
class StringMap(Kind):
    """A mapping of strings to strings (headers); its keys are data, not configuration keys."""

    def _check(self, value: Any) -> Mapping[str, str]:
        value = {} if value is None else value  # an empty YAML section is no headers
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise Invalid(f"expected a mapping of strings to strings, got {value!r}")
        return MappingProxyType(dict(value))

    def describe(self) -> str:
        return "map of string to string"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": {"type": "string"}}


@dataclass(frozen=True)
class SizeMap(Kind):
    """A mapping of names to positive whole numbers of bytes (per allocated unit)."""

    def _check(self, value: Any) -> Mapping[str, int]:
        value = {} if value is None else value
        if not isinstance(value, dict):
            raise Invalid(f"expected a mapping of resource name to bytes per unit, "
                          f"got {value!r}")
        for name, size in value.items():
            if not isinstance(name, str) or isinstance(size, bool) or \
                    not isinstance(size, int) or size <= 0:
                raise Invalid(f"{name!r}: expected a positive whole number of bytes per unit, "
                              f"got {size!r}")
        return MappingProxyType(dict(value))

    def describe(self) -> str:
        return "map of name to bytes"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}
