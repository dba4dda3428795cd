"""Captures of real machines replayed as simulated GPUs (``capture:`` in a scenario,
``gpu-agent sim up --capture FILE``).

``registry`` is the vendor-neutral door (formats, fragments, detection); ``nvidia_smi`` reads the
three forms of ``nvidia-smi`` output, ``amd_smi`` the JSON of ``amd-smi``; ``docs`` generates
``docs/captures.md``. The field tables the readers follow live with the agent's writers
(``gpu_otel_agent.plugins.nvidia.capture.fields``, ``gpu_otel_agent.plugins.amd.capture.FIELDS``):
one table both ways.
"""
