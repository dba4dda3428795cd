"""The ``dcgm-4.9`` scheme's alert rules and their promtool tests, generated from the shipped
ones (``gpu-agent docs dcgm-4.9-rules``): every dcgm-exporter <= 4.8 name replaced by its 4.9
name from the one table (model/dcgm_names.py), so the two rule sets never drift apart.

Only renames whose unit did not change are replaced: an expression on a field whose unit
changed (a threshold in MHz, MiB or percent) would silently compare against the wrong scale,
so it is refused and must get its ``dcgm-4.9`` arm written by hand.
"""

from __future__ import annotations

import re

from gpu_otel_agent.model.dcgm_names import RENAMES_49

RULES = "gpu-alerts.rules.yaml"
RULES_49 = "gpu-alerts-dcgm-4.9.rules.yaml"


def dcgm_49_rules(text: str, source: str = RULES) -> str:
    """``text`` (a rule file or a promtool test file) with 4.9's names, headed by where it
    was generated from; a ValueError names a field whose unit changed."""
    for row in RENAMES_49:
        pattern = re.compile(rf"\b{row.old}\b")
        if not pattern.search(text):
            continue
        if row.unit_changed:
            raise ValueError(
                f"{source} uses {row.old}, whose unit changes in dcgm-exporter 4.9 "
                f"({row.unit_before} -> {row.unit_after}): give it a dcgm-4.9 arm by hand")
        text = pattern.sub(row.new, text)
    use = (f"promtool tests of {RULES_49}." if source != RULES else
           f"load it instead of {RULES} (the chart does when prometheus.scheme is dcgm-4.9).")
    header = (f"# Generated from {source} by `gpu-agent docs dcgm-4.9-rules {source}`; do not "
              "edit.\n# For the agent's `dcgm-4.9` Prometheus scheme (dcgm-exporter 4.9 / DCGM "
              f"4.7 names, docs/migration.md):\n# {use}\n")
    return header + text.replace(RULES, RULES_49)
