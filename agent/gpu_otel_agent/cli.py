"""``gpu-agent``: run the agent, show its configuration, generate its reference docs.

Plugins add command groups of their own (``gpu-agent sim ...``) and the simulated node behind
``run --simulate``, both through entry points (:mod:`gpu_otel_agent.extensions`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpu_otel_agent.check.check_command import add_check
from gpu_otel_agent.config.kinds import Choice, Invalid, Seconds
from gpu_otel_agent.config.load import (
    ConfigError,
    Overrides,
    exporter_overrides,
    load,
    to_tree,
)
from gpu_otel_agent.config.table import FLAGS, Key, flag_dest
from gpu_otel_agent.docs.topics import add_docs
from gpu_otel_agent.export.metrics.exporters import ExporterConfigError
from gpu_otel_agent.extensions.commands import COMMAND_GROUP, Commands
from gpu_otel_agent.extensions.loading import load_group
from gpu_otel_agent.extensions.simulation import (
    NOT_INSTALLED,
    SIMULATION_COMMANDS,
    SimulatedNodeError,
    simulated_node,
)
from gpu_otel_agent.logs import setup_logging
from gpu_otel_agent.remediation.npd_command import add_npd
from gpu_otel_agent.top.top_command import add_top
from gpu_otel_agent.version import VERSION

log = logging.getLogger(__name__)


def _flag_type(row: Key) -> Callable[[str], object]:
    """argparse ``type`` of a table row's flag: the row's kind parses and checks the text, so
    a flag accepts exactly what the key's environment variable accepts."""

    def parse(text: str) -> object:
        try:
            return row.kind.check(row.kind.from_env(text))
        except Invalid as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    """``--config`` and one flag per table row that has one (``gpu_otel_agent/config/table.py``)."""
    parser.add_argument("--config", type=Path, metavar="FILE", help="YAML configuration file")
    for flag, row in FLAGS.items():
        choices = row.kind.choices if isinstance(row.kind, Choice) else None
        metavar = "SECONDS" if isinstance(row.kind, Seconds) else None
        envs = [e.name + (" in ms" if e.scale == 0.001 else "")
                for e in (row.env, row.generic_env) if e is not None]
        env = f"; env {', '.join(envs)}" if envs else ""
        parser.add_argument(flag, dest=flag_dest(flag), type=_flag_type(row), choices=choices,
                            metavar=metavar, help=f"{row.description.removesuffix('.')} "
                            f"(key `{row.key}`{env}; default: {row.default})")


def _overrides(args: argparse.Namespace) -> Overrides:
    return Overrides(**{flag_dest(flag): getattr(args, flag_dest(flag)) for flag in FLAGS})


class TerminalHelp(argparse.HelpFormatter):
    """``--help`` in a terminal: help texts are written for docs/cli.md too, so the Markdown
    backticks go, each flag's text starts in lower case without a closing full stop (the
    configuration table's sentences and the commands' phrases read alike), and a flag with a
    default says it."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(text.replace("`", ""))

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").replace("`", "")
        if text[:1].isupper() and not text[1:2].isupper():  # "Seconds", not "NVML"
            text = text[0].lower() + text[1:]
        text = text.removesuffix(".")
        has_default = action.default not in (None, False, "", argparse.SUPPRESS, [])
        if action.option_strings and action.nargs != 0 and has_default \
                and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _terminal_help(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = TerminalHelp
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _terminal_help(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-agent", description="GPU telemetry node agent (OpenTelemetry)."
    )
    parser.add_argument("--version", action="version", version=f"gpu-agent {VERSION}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="sample the GPUs and export")
    _add_config_flags(run)
    run.add_argument("--simulate", type=Path, metavar="SCENARIO",
                     help="bring up the simulated GPU node from SCENARIO and monitor it")

    add_top(commands)
    add_check(commands)
    add_npd(commands)

    config = commands.add_parser("config", help="configuration")
    config_commands = config.add_subparsers(dest="config_command", required=True)
    show = config_commands.add_parser(
        "show", help="print the effective configuration (file, environment and flags; the "
        "OTEL_EXPORTER_OTLP_* variables over the otlp section, as the agent reads them)")
    _add_config_flags(show)
    validate = config_commands.add_parser(
        "validate", help="check a configuration file (and the environment) as the agent would "
        "read it; exit status 0 when valid, 1 when not")
    validate.add_argument("file", type=Path, metavar="FILE", help="YAML configuration file")

    add_docs(commands, parser)

    # After the core's own commands: their order is the order of `--help` and docs/cli.md.
    plugin_commands: Commands = commands  # what a command group may use of it
    for group in load_group(COMMAND_GROUP):
        try:
            group.value(plugin_commands)
        except Exception as error:  # e.g. a name already taken; the other commands still work
            log.error("command group %s could not be added, left out: %s: %s",
                      group.name, type(error).__name__, error)
    _terminal_help(parser)
    return parser


def _run_loop(coroutine: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    result: int = uvloop.run(coroutine)
    return result


def _cmd_run(args: argparse.Namespace) -> int:
    from gpu_otel_agent.runtime.agent import Agent
    from gpu_otel_agent.runtime.malloc_arenas import limit_malloc_arenas

    limit_malloc_arenas()  # before any thread starts (runtime/malloc_arenas.py says why)
    overrides = _overrides(args)
    config = load(args.config, overrides)
    setup_logging(config.log_level)
    with simulated_node(args.simulate) as paths:
        if args.simulate is not None:  # the node's attach environment counts (its kubelet)
            config = paths.apply(load(args.config, overrides))
            log.info("simulated run: event spool %s, local socket %s (gpu-agent top --socket "
                     "%s); nothing is written where a real agent keeps its state",
                     config.health.spool_path, config.local_endpoint.socket,
                     config.local_endpoint.socket)
        agent = Agent(config, args.config, overrides, adjust=paths.apply)
        return _run_loop(agent.run())


def _cmd_validate(path: Path) -> int:
    """``gpu-agent config validate FILE`` (as ``otelcol validate``): every key, its value and
    the exporter settings the environment adds, without starting anything."""
    from gpu_otel_agent.export.otlp.target import resolve_target

    try:
        config = load(path)
        for signal in ("METRICS", "LOGS"):
            resolve_target(config, os.environ, signal)
    except (ConfigError, ExporterConfigError) as error:
        print(f"gpu-agent: {path} is not valid: {error}", file=sys.stderr)
        return 1
    print(f"{path}: valid")
    return 0


def _missing_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The simulator's command asked for where it is not installed (None: no such case)."""
    name = next((a for a in argv if not a.startswith("-")), None)
    if name not in SIMULATION_COMMANDS:
        return None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return None
    return name


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    missing = _missing_command(parser, sys.argv[1:] if argv is None else argv)
    if missing is not None:
        print(f"gpu-agent {missing}: the simulated GPU node is {NOT_INSTALLED}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            # The parser (every command's arguments and help, 0.3 MiB) is not needed again by
            # an agent that runs for months: freed here, its memory serves the run's own data.
            del parser
            return _cmd_run(args)
        if args.command == "config":
            if args.config_command == "validate":
                return _cmd_validate(args.file)
            config = load(args.config, _overrides(args))
            for key, (variable, _) in exporter_overrides(os.environ).items():
                print(f"# {key}: from {variable}")
            yaml.safe_dump(to_tree(config, os.environ), sys.stdout, sort_keys=False)
            return 0
        handler = getattr(args, "handler", None)
        if handler is not None:
            result: int = handler(args)
            return result
    except (ConfigError, ExporterConfigError) as error:
        print(f"gpu-agent: configuration error: {error}", file=sys.stderr)
        return 2
    except SimulatedNodeError as error:
        print(f"gpu-agent: simulated node: {error}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
