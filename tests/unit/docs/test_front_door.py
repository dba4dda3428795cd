"""The README is the operator's front door: short, every link lands inside the repository,
every ``gpu-agent`` command it shows is one the CLI knows, its install and test commands are the
ones CI runs, and its headline cost table says what the latest benchmark run measured."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.cli import build_parser
from tests.bench import readme as bench_page

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> Iterator[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if not re.match(r"^[a-z]+:", target):  # http:, https:, mailto: are not ours to check
            yield target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    broken = []
    for target in _links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.is_relative_to(REPO) or not dest.exists():
            broken.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: {broken}"


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def _commands(text: str) -> Iterator[str]:
    """Each ``gpu-agent ...`` command line shown: in code blocks and in inline code."""
    blocks = [b for b in FENCE.findall(text)]
    spans = re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    for chunk in [line for b in blocks for line in b.splitlines()] + spans:
        # gpu-agent as the program: first word, a path's last part, after `--` or sudo
        # (`helm install gpu-agent ...` names a release, not the program).
        for match in re.finditer(r"(?:^\s*|/|-- |sudo |=\S* )gpu-agent((?: +[^\s`|;&#\\]+)*)",
                                 chunk):
            yield "gpu-agent" + match.group(1)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _unknown_parts(command: str, parser: argparse.ArgumentParser) -> list[str]:
    """Subcommands and flags of ``command`` that the parser (what --help prints) lacks."""
    words = [w for w in shlex.split(command.replace("[", " ").replace("]", " "))[1:]
             if w != "..."]
    unknown = []
    for word in words:
        children = _subparsers(parser)
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            if flag not in parser._option_string_actions:
                unknown.append(word)
        elif children:
            if word.startswith("<") or word.isupper():  # a placeholder: `gpu-agent <name>`
                break
            if word not in children:
                unknown.append(word)
                break
            parser = children[word]
    return unknown


@pytest.mark.parametrize("page", [README, *(p for p in DOCS if p.name != "cli.md")],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_shown_is_one_the_cli_knows(page: Path) -> None:
    parser = build_parser()
    commands = list(_commands(page.read_text(encoding="utf-8")))
    wrong = {c: u for c in commands if (u := _unknown_parts(c, parser))}
    assert not wrong, f"{page.relative_to(REPO)}: {wrong}"
    if page == README:
        assert len(commands) >= 10  # the extraction itself works


def _sh_blocks(text: str) -> list[str]:
    return [line.strip() for block in re.findall(r"^```sh\n(.*?)^```", text,
                                                 re.MULTILINE | re.DOTALL)
            for line in block.splitlines()]


def test_the_readme_install_and_test_commands_are_what_ci_runs() -> None:
    """.ci/run installs and tests as the README's test line says (CI adds only --quiet and the
    explicit --fail-on-unexpected-skip, which is pytest's default here), and the README shows
    `bash .ci/run` as a command to copy, not as prose."""
    lines = _sh_blocks(README.read_text(encoding="utf-8"))
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    develop = next(line for line in lines if "pip install -e '.[dev]'" in line)
    venv, install, test = (part.strip() for part in develop.split("&&"))
    assert install.endswith(" -e ./simulator")  # the simulated node, which the tests run on
    assert venv in ci
    assert install.replace("pip install", "pip install --quiet") in ci
    assert test == ".venv/bin/pytest"
    assert re.search(r"^pytest --fail-on-unexpected-skip$", ci, re.MULTILINE)
    assert "bash .ci/run" in lines


def test_the_benchmark_page_has_every_block_the_runner_writes() -> None:
    text = bench_page.BENCHMARKS_PAGE.read_text(encoding="utf-8")
    pairs = [(bench_page.START, bench_page.END), (bench_page.EBPF_START, bench_page.EBPF_END),
             (bench_page.CHAOS_START, bench_page.CHAOS_END),
             (bench_page.SIZING_START, bench_page.SIZING_END),
             (bench_page.SOAK_START, bench_page.SOAK_END)]
    for start, end in pairs:
        assert text.count(start) == 1 and text.count(end) == 1, start
        bench_page.replace_block(text, "x", start, end)  # in order, or MarkersMissing


def test_the_readme_headline_costs_are_the_benchmark_pages_figures() -> None:
    """A benchmark rerun that changes a headline figure fails here until the README follows."""
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## What it costs"):readme.index("## Documentation")]
    rows = re.findall(r"^\| (.+?) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", section,
                      re.MULTILINE)
    assert len(rows) == 2, section
    bench = bench_page.BENCHMARKS_PAGE.read_text(encoding="utf-8")
    agent_rows = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| (CPU s per minute|peak RSS \(MiB\)|NVML / amdsmi calls / GPU / fast cycle, all "
        r"groups) \|[^|]*\| ([\d.]+)", bench, re.MULTILINE)}
    assert rows[0][1:] == (agent_rows["CPU s per minute"], agent_rows["peak RSS (MiB)"],
                           agent_rows["NVML / amdsmi calls / GPU / fast cycle, all groups"])
    peer = re.search(r"^\| nvitop-exporter-8gpu-1s .*?\| agent-8gpu-1s \| ([\d.]+) s/min \|"
                     r" [\d.]+ \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \|", bench, re.MULTILINE)
    assert peer is not None
    assert rows[1][1:] == peer.groups()


def test_every_extra_and_folder_the_readme_installs_exists() -> None:
    """`pip install '.[x]'`: an extra pip does not know is only a warning; `pip install
    ./simulator`: the folder must be the simulated node's distribution, or --simulate fails."""
    import tomllib

    readme = README.read_text(encoding="utf-8")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    named = re.findall(r"pip install (?:-e )?'\.\[([a-z,]+)\]'", readme)
    assert {e for group in named for e in group.split(",")} <= set(extras)
    folders = set(re.findall(r"pip install .*?(?:-e )?(\./[\w/]+)", readme))
    assert folders == {"./simulator"}, folders
    project = tomllib.loads((REPO / "simulator" / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == "gpu-otel-agent-simulator"
    assert "sim" in project["project"]["entry-points"]["gpu_otel_agent.commands"]


def test_the_helm_quick_start_builds_pushes_and_installs_that_image() -> None:
    """Nothing publishes the chart's default image: the quick start builds it from the
    Dockerfile, pushes it, and installs the chart with it, tagged with the chart's appVersion
    and set through the chart's own values."""
    import yaml

    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("### Kubernetes (Helm)"):readme.index("### Container")]
    (block,) = re.findall(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    chart = REPO / "helm" / "gpu-otel-agent"
    app = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))["appVersion"]
    values = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
    assert {"repository", "tag"} <= set(values["image"]) and "imagePullSecrets" in values
    image = f"REGISTRY/gpu-otel-agent:{app}"
    lines = block.replace("\\\n", " ").splitlines()
    build = next(i for i, line in enumerate(lines) if line.startswith("docker build"))
    push = next(i for i, line in enumerate(lines) if line.startswith("docker push"))
    install = next(i for i, line in enumerate(lines) if line.startswith("helm install"))
    assert build < push < install
    assert lines[build] == f"docker build -t {image} ." and (REPO / "Dockerfile").exists()
    assert lines[push] == f"docker push {image}"
    repository, tag = image.rsplit(":", 1)
    assert f"--set image.repository={repository},image.tag={tag}" in lines[install]
