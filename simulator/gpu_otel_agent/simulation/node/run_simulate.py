"""The simulated node behind ``gpu-agent run --simulate`` (group
``gpu_otel_agent.simulated_nodes``, name ``nvidia``; it serves the scenario's AMD GPUs too)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from gpu_otel_agent.extensions.simulation import SimulatedNodeError, SimulatedNodeFactory
from gpu_otel_agent.simulation.node import (
    BuildError,
    ScenarioError,
    SimulatedNode,
    attach_in_process,
)
from gpu_otel_agent.simulation.node.control_client import default_socket_path
from gpu_otel_agent.simulation.node.statedir import SocketState, probe

log = logging.getLogger(__name__)


@contextlib.contextmanager
def simulated_node(scenario: Path) -> Iterator[SimulatedNode]:
    """Starts the node daemon and attaches this process's NVML (and amdsmi) to it."""
    try:
        node = SimulatedNode.start(scenario)
    except (ScenarioError, BuildError) as error:
        raise SimulatedNodeError(str(error)) from error
    with node, _well_known(node.socket_path):
        attach_in_process(node)
        log.info("simulated node up: control socket %s", node.socket_path)
        if node.pods_missing is not None:
            log.warning("simulated node: %s", node.pods_missing)
        with _kubelet_env(node.env.get(KUBELET_ENV)):
            yield node


KUBELET_ENV = "GPU_AGENT_KUBELET_SOCKET"


@contextlib.contextmanager
def _kubelet_env(socket: str | None) -> Iterator[None]:
    """The node's kubelet (its scenario names pods) for this process's configuration, which
    ``run --simulate`` loads again once the node is up."""
    if socket is None:
        yield
        return
    before = os.environ.get(KUBELET_ENV)
    os.environ[KUBELET_ENV] = socket
    log.info("simulated node: pod names from its kubelet at %s", socket)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(KUBELET_ENV, None)
        else:
            os.environ[KUBELET_ENV] = before


@contextlib.contextmanager
def _well_known(socket_path: Path) -> Iterator[None]:
    """Make ``gpu-agent sim ...`` from a second shell reach this node without
    ``GPU_SIM_SOCKET``: a link at the path it looks at by default, unless a node is serving
    there already. Removed at exit if it is still ours."""
    link = default_socket_path()
    made = False
    try:
        link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Left by a node that is gone (a link to nothing, or a socket nobody listens on, as
        # a `sim up` killed with its terminal leaves): taken over; a live one never is.
        if probe(link) is SocketState.STALE or (link.is_symlink() and not link.exists()):
            link.unlink()
        os.symlink(socket_path, link)  # atomic: fails if anything is there
        made = True
    except OSError as error:
        # A warning: `gpu-agent sim ...` without GPU_SIM_SOCKET now reaches another node (or
        # none), and top repeats it where a person sees it.
        log.warning("control socket not linked at %s (%s, another simulated node's?): reach "
                    "this node with GPU_SIM_SOCKET=%s gpu-agent sim ...", link,
                    error.strerror, socket_path)
    try:
        yield
    finally:
        if made and link.is_symlink() and os.readlink(link) == str(socket_path):
            link.unlink()


_FACTORY: SimulatedNodeFactory = simulated_node  # mypy checks it against the core's Protocol
