"""Benchmark suite: the agent and its peers on a simulated NVML node (``python -m tests.bench``)."""
