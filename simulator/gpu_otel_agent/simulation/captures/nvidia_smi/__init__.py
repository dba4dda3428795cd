"""``nvidia-smi`` captures read into simulated GPUs: ``-q -x`` (XML), ``-q`` (text) and the default
table.

``tree`` reads either ``-q`` form into one shape, ``reader`` (and ``table_reader``, for the table)
into frozen dataclasses (``model``), ``convert`` into scenario entries, ``formats`` registers the
three forms as capture formats; ``limits`` says what a replay cannot serve as printed. The field
table is the agent's
(``gpu_otel_agent.plugins.nvidia.capture.fields``), which ``gpu-agent capture`` writes by.
"""
