"""The simulator's pages of ``gpu-agent docs`` (entry-point group ``gpu_otel_agent.doc_topics``).

Both pages need the simulator's tables: the capture formats it replays, and the return codes
``nvml.h`` documents per call as extracted for the simulated NVML (the agent's error policy is
listed against them). Loaded on every command to list the topics, so each page's module is
imported only when its page is asked for.
"""

from __future__ import annotations

from gpu_otel_agent.extensions.doc_topics import DocTopic


def _error_policy() -> str:
    from gpu_otel_agent.simulation.nvidia.error_policy_doc import render

    return render()


def _captures() -> str:
    from gpu_otel_agent.simulation.captures.docs import render

    return render()


ERROR_POLICY = DocTopic("the NVML error policy per return code and per NVML call "
                        "(docs/nvml-error-policy.md)", _error_policy)
CAPTURES = DocTopic("the capture formats, fields and limits (docs/captures.md)", _captures)
