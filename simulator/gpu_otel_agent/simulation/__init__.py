"""The simulated GPU node: real ``libnvidia-ml.so.1`` and ``libamd_smi.so`` serving scripted GPUs.

Its own distribution (gpu-otel-agent-simulator, ``simulator/`` in a clone), installed for
development, tests, demonstrations and benchmarks, never needed on a GPU node. It reaches the
agent only through entry points (``gpu_otel_agent.commands`` ``sim``,
``gpu_otel_agent.simulated_nodes`` ``nvidia``); the agent never imports it.

- ``node``: the node, vendor-neutral: the daemon serving both libraries, the scenario file,
  the control socket, the state directory, cgroups, a kubelet; ``node.run_simulate`` is
  ``gpu-agent run --simulate``.
- ``nvidia``, ``amd``: each simulated library (C source, its build, the ctypes binding of its
  control functions, model tables, faults).
- ``core``: what both libraries share (C core, compile cache, control binding).
- ``captures``: captures of real machines replayed as simulated GPUs.
- ``operations``: the one table of the node's operations (its control requests, ``gpu-agent
  sim`` commands and scenario timeline keys).
- ``sim_commands`` (arguments), ``sim_runner`` (runs them): ``gpu-agent sim ...``.
- ``scenarios``: scenarios shipped with it (``gpu-agent top --simulate h100-8gpu``).
"""
