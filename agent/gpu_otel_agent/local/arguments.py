"""How a command finds the running agent's local endpoint: the same two flags for every
client command (``top``, ``npd``), so a socket moved by configuration is found alike."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_otel_agent.config.load import Overrides, load


def add_endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", type=Path, metavar="PATH",
                        help="the agent's local endpoint (default: local_endpoint.socket of "
                        "--config and the environment, GPU_AGENT_LOCAL_SOCKET; else "
                        "/run/gpu-otel-agent/agent.sock)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="the agent's YAML configuration (for its socket path)")


def endpoint_path(args: argparse.Namespace) -> Path:
    """``--socket``, else the socket the agent's configuration (and environment) names."""
    if args.socket is not None:
        return Path(args.socket)
    return Path(load(args.config, Overrides()).local_endpoint.socket)
