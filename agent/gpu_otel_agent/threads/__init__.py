"""The agent's own threads, below everything that starts one: named threads (``named``),
threads restarted after a bug (``supervised``), one daemon thread per device (``device_worker``)
whose jobs due together run in turn (``relay``) on one thread, the relay's courier
(``courier``), and the CPU each stage and thread spends (``costs``).

They live here, not in ``runtime``, because sampling, health, the exporters, the local endpoint
and the plugins all start threads, and ``runtime`` (which assembles those) sits above them all
(``gpu_otel_agent.layers``).
"""
