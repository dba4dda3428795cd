"""How plugins reach the core: one entry-point group per kind, one small Protocol per group.

The core never imports a concrete plugin (``tests/unit/architecture/test_plugin_boundary.py`` checks
it). A plugin, in this distribution or any other, declares itself in its own
``[project.entry-points."<group>"]`` table and is found with
:func:`gpu_otel_agent.distributions.entry_points_of` (what ``importlib.metadata.entry_points``
finds, read without importing it):

=================================  ===========================================================
group                              the entry point's object
=================================  ===========================================================
``gpu_otel_agent.backends``        a :class:`~gpu_otel_agent.backends.protocol.Backend` class
``gpu_otel_agent.node_plugins``    a :class:`~.node_plugin.NodePluginFactory`
``gpu_otel_agent.workload_sources``  a :class:`~.workloads.PodSourceFactory`
``gpu_otel_agent.commands``        a :class:`~.commands.CommandGroup`
``gpu_otel_agent.simulated_nodes`` a :class:`~.simulation.SimulatedNodeFactory`
``gpu_otel_agent.doc_topics``      a :class:`~.doc_topics.DocTopic` (``gpu-agent docs <name>``)
=================================  ===========================================================

A plugin that cannot be loaded (an ImportError, a missing C library) is logged once with its
name and left out; the agent goes on with the others (:mod:`.loading`).
"""
