"""CLI command groups: a plugin adds its own ``gpu-agent <name> ...`` sub-commands.

Every command builds the whole parser (``--help``, ``docs cli``), so a command group's module
is imported on every command: keep it to argument definitions and import the plugin's
machinery inside the handler.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Protocol

COMMAND_GROUP = "gpu_otel_agent.commands"

# What a command group sets as the ``handler`` default of its parsers: runs the parsed
# command and returns the exit code.
Handler = Callable[[argparse.Namespace], int]


class Commands(Protocol):
    """The object ``ArgumentParser.add_subparsers()`` returns, as far as a plugin uses it."""

    def add_parser(self, *args: Any, **kwargs: Any) -> argparse.ArgumentParser: ...


class CommandGroup(Protocol):
    def __call__(self, commands: Commands, /) -> object:
        """Adds the group's parser(s) to ``commands``, each with a ``handler`` default."""
