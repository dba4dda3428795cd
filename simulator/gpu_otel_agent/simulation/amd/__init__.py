"""Simulated AMD GPUs: a real ``libamd_smi.so`` served by the same node daemon as the NVIDIA ones.

The node daemon, scenario format and control socket live in
:mod:`gpu_otel_agent.simulation.node` (a scenario device with ``vendor: amd`` is
served here); this package holds the C library, its build and the ctypes binding of its
control functions.
"""
