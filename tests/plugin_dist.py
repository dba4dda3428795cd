"""A third party's distribution of gpu-otel-agent plugins, installed into a directory.

Written as pip would leave it: the modules next to a ``*.dist-info`` folder whose
``entry_points.txt`` declares them, so putting the directory on ``sys.path`` (or
``PYTHONPATH``) makes ``importlib.metadata`` find them exactly as it finds an installed wheel.
Nothing in the core is edited or patched. Besides a working command group, node plugin and
docs page it declares the page again under a name the core's own page has, three that cannot
load (a command group in a module that does not exist, a node plugin whose C library is
missing, a backend in a module that does not exist) and a node plugin that loads but raises
when started.
"""

from __future__ import annotations

from pathlib import Path

DIST = "third_party_gpu_plugin"
# Tells the working node plugin where to leave its traces (it runs in the agent's process).
MARKER_ENV = "THIRD_PARTY_PLUGIN_DIR"

BROKEN_COMMAND = "broken-command"
BROKEN_NODE_PLUGIN = "broken-native"
BROKEN_BACKEND = "broken-backend"
CRASHING_NODE_PLUGIN = "crashing"  # loads, but its factory raises
DOC_TOPIC = "hello-page"  # a page of ``gpu-agent docs``
TAKEN_DOC_TOPIC = "metrics"  # the same page under a name the core's own page has
DOC_PAGE = "# Hello\n\nA third party's page.\n"

_PLUGIN = '''
"""A third party's plugins: a `gpu-agent hello` command, a node plugin and a docs page."""

import asyncio
import os
from pathlib import Path

from gpu_otel_agent.extensions.doc_topics import DocTopic

PAGE = DocTopic("a third party's page", lambda: "# Hello\\n\\nA third party's page.\\n")


def add_hello(commands):
    parser = commands.add_parser("hello", help="a third party's command")
    parser.add_argument("--name", default="world")
    parser.set_defaults(handler=_hello)


def _hello(args):
    print(f"hello {args.name}")
    return 0


class _Traces:
    """Leaves a file per call, so a test can see that the agent ran and closed it."""

    def __init__(self, directory, processes):
        self._directory = directory
        self._processes = processes

    async def run(self):
        (self._directory / "ran").write_text(str(len(self._processes())))
        await asyncio.Event().wait()

    def readings(self):
        return ()

    def close(self):
        (self._directory / "closed").write_text("closed")


def open_traces(context):
    directory = os.environ.get("THIRD_PARTY_PLUGIN_DIR")
    if not directory:
        return None
    return _Traces(Path(directory), context.gpu_processes)


def open_crashing(context):
    raise RuntimeError("this plugin has a bug")
'''

_NATIVE = '''
"""Needs a C library this machine does not have: loading it raises OSError."""

import ctypes

_lib = ctypes.CDLL("libthird-party-gpu-plugin-missing.so.7")


def open_plugin(context):
    return None
'''

_ENTRY_POINTS = f"""\
[gpu_otel_agent.commands]
hello = {DIST}:add_hello
{BROKEN_COMMAND} = {DIST}_missing:add_commands

[gpu_otel_agent.node_plugins]
traces = {DIST}:open_traces
{CRASHING_NODE_PLUGIN} = {DIST}:open_crashing
{BROKEN_NODE_PLUGIN} = {DIST}_native:open_plugin

[gpu_otel_agent.backends]
{BROKEN_BACKEND} = {DIST}_missing:Backend

[gpu_otel_agent.doc_topics]
{DOC_TOPIC} = {DIST}:PAGE
{TAKEN_DOC_TOPIC} = {DIST}:PAGE
"""


def install(directory: Path) -> Path:
    """Writes the distribution into ``directory`` (a site directory of its own)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{DIST}.py").write_text(_PLUGIN, encoding="utf-8")
    (directory / f"{DIST}_native.py").write_text(_NATIVE, encoding="utf-8")
    info = directory / f"{DIST}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DIST.replace('_', '-')}\nVersion: 0.1\n",
        encoding="utf-8")
    (info / "entry_points.txt").write_text(_ENTRY_POINTS, encoding="utf-8")
    return directory
