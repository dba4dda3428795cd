"""``gpu-agent top`` once its arguments are parsed: the source (attached or standalone), the
plain snapshot, the JSON or the live screen. Imported by ``top_command.run_top`` when top runs,
so the CLI's other commands and the agent do not load it (http.client, the sources, the
renderer).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

from gpu_otel_agent.extensions.simulation import require_simulated_node
from gpu_otel_agent.local.arguments import endpoint_path
from gpu_otel_agent.local.client import LocalClientError
from gpu_otel_agent.top.render import Options, plain, render
from gpu_otel_agent.top.source import (
    SIMULATE_HINT,
    NoAgent,
    Source,
    SourceError,
    attached,
    standalone,
)
from gpu_otel_agent.top.view import Filter, Model


@contextlib.contextmanager
def _source(args: argparse.Namespace) -> Iterator[Source]:
    if args.simulate is not None:
        require_simulated_node()  # the agent it starts would fail where top cannot show why
        with standalone(args.simulate) as source:
            yield source
        return
    path = endpoint_path(args)
    try:
        source = attached(path)
    except NoAgent as error:
        if args.socket is not None:  # a socket named on purpose: no quiet substitute
            raise
        with standalone(None, why=_why(str(error))) as source:
            yield source
        return
    yield source


def _why(error: str) -> str:
    """Short: the title has 80 columns for the clock, the node, the pid and this."""
    return "agent not readable" if "permission denied" in error else "no agent"


def _settled(source: Source, model: Model, interval: float) -> None:
    """A fresh standalone agent: wait for every device's readings, then one more refresh so
    the snapshot has its processes and a second point of history."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(d["readings"] for d in source.snapshot()["devices"]):
            break
        time.sleep(0.2)
    model.update(source.snapshot(), source.events(model.last_seq))
    time.sleep(interval)


def _exit_on(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def run(args: argparse.Namespace) -> int:
    try:
        options = Options(sort=args.sort, filter=Filter.parse(args.filter))
    except ValueError as error:
        print(f"gpu-agent top: {error}", file=sys.stderr)
        return 2
    if args.refresh <= 0:
        print("gpu-agent top: --refresh must be more than 0 seconds", file=sys.stderr)
        return 2
    # A closed terminal or a kill ends top through its finally blocks, so a standalone
    # agent of its own (in a session of its own) is stopped with it.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on)
    try:
        with _source(args) as source:
            for note in source.notes:  # on stderr: the screen and stdout stay the snapshot's
                print(f"gpu-agent top: note: {note}", file=sys.stderr)
            model = Model(source.label)
            live = not args.once and not args.json and sys.stdin.isatty() and sys.stdout.isatty()
            if not live and source.label.startswith("standalone"):
                # A fresh agent of our own: its first snapshot lacks processes and pod names.
                _settled(source, model, args.refresh)
            if args.json:
                document = {"source": source.label, "snapshot": source.snapshot(),
                            "events": source.events(0)}
                json.dump(document, sys.stdout, indent=1)
                sys.stdout.write("\n")
                return 0
            if not live:
                frame = model.update(source.snapshot(), source.events(model.last_seq))
                width = shutil.get_terminal_size().columns
                sys.stdout.write(plain(render(frame, options, width)))
                return 0
            from gpu_otel_agent.top import screen

            if source.notes:  # stderr is under the screen: the last line says it until a key
                options = replace(options, status=" / ".join(source.notes))
            return screen.run(source, model, options, args.refresh)
    except (SourceError, LocalClientError) as error:
        hint = f"\n{SIMULATE_HINT}" if args.simulate is None else ""
        print(f"gpu-agent top: {error}{hint}", file=sys.stderr)
        return 2
