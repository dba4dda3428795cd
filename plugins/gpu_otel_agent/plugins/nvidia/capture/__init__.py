"""Captures of real NVIDIA machines: ``nvidia-smi -q`` (XML and text) read into simulated GPUs
(``capture:`` in a scenario), and written from the node the agent sees (``gpu-agent capture``).

``fields`` is the one table of capture field -> scenario key -> NVML call -> exported metric;
``tree`` reads either form into one shape, ``reader`` into frozen dataclasses (``model``),
``convert`` into scenario entries, ``formats`` registers both forms as capture formats.
"""
