"""What a newcomer reads in a terminal (issue 31): ``--version``; every command's ``--help``
without Markdown backticks, in one style, with each configuration flag's key, environment
variables and default; ``--interval`` meaning one thing; the simulator's fault commands saying
how long a fault lasts."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from gpu_otel_agent.cli import build_parser, main
from gpu_otel_agent.config.table import FLAGS
from gpu_otel_agent.version import VERSION


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def _sub(*names: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = action.choices[name]
    return parser


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"gpu-agent {VERSION}\n"


def test_no_backticks_and_one_style_in_any_help() -> None:
    for parser in _parsers(build_parser()):
        text = parser.format_help()
        assert "`" not in text, parser.prog
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.help or action.help is argparse.SUPPRESS:
                continue
            shown = formatter._get_help_string(action)  # type: ignore[attr-defined]
            assert not shown.endswith("."), (parser.prog, shown)
            assert not re.search(r"\bdefault (?!:)", shown.replace("the default", "")), (
                parser.prog, shown)  # "default: X", one way
            assert not re.match(r"[A-Z][a-z]", shown), (parser.prog, shown)


@pytest.mark.parametrize("command", [("run",), ("config", "show")])
def test_every_configuration_flag_names_its_key_environment_and_default(
        command: tuple[str, ...]) -> None:
    text = re.sub(r"\s+", " ", _sub(*command).format_help())
    for flag, row in FLAGS.items():
        start = text.index(f"{flag} ", text.index("options:"))
        shown = text[start:start + 600]
        assert f"key {row.key}" in shown, flag
        for env in (row.env, row.generic_env):
            if env is not None:
                assert env.name in shown, (flag, env.name)
        assert f"default: {row.default}" in shown, flag


def test_interval_means_the_sampling_interval_wherever_it_is_a_flag() -> None:
    for parser in _parsers(build_parser()):
        if "--interval" in parser._option_string_actions:
            assert parser._option_string_actions["--interval"].dest == "interval"
            assert "fast-group" in parser._option_string_actions["--interval"].help
    assert "--refresh" in _sub("top")._option_string_actions


def test_sim_fault_commands_say_how_long_they_last() -> None:
    hang = re.sub(r"\s+", " ", _sub("sim").format_help() + _sub("sim", "hang").format_help())
    assert "until sim hang --ms 0" in hang
    assert "0 ends the hang" in hang
    recover = re.sub(r"\s+", " ", _sub("sim").format_help())
    assert "up to lost_reprobe_interval" in recover
