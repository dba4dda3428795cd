"""Reference documentation generated from the code, so it cannot drift: one command,
``gpu-agent docs <topic> [--output docs/<page>.md]``, for every page (``topics``). The core's
pages are generated here, each from its one table (metrics, events, configuration, renames,
the command line); a plugin adds its own through the ``gpu_otel_agent.doc_topics`` entry-point
group (``extensions.doc_topics``), so the core never imports it. ``tests/unit/docs`` and the
plugins' tests check that the committed pages are fresh.
"""
