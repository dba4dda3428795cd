"""Captures of real NVIDIA machines written from the node the agent sees (``gpu-agent capture``).

``fields`` is the one table of capture field -> scenario key -> NVML call -> exported metric;
``writer`` reads every field through NVML and writes ``nvidia-smi -q -x``. Reading a capture back
into simulated GPUs is the simulator's (``gpu_otel_agent.simulation.captures.nvidia_smi``).
"""
