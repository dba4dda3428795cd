"""YAML without aliases: what the agent's configuration and the simulator's scenarios are read
with.

``yaml.safe_load`` builds no objects, but it does expand aliases: nine levels of nine
references to the level before ("billion laughs") are a 382-byte file that PyYAML turned into
hundreds of millions of nodes (issue 39: 56 s and 918 MiB for one scenario). Neither file
format needs them, so an alias is refused where the composer meets it, before anything is
expanded, with the line it is on (anchors alone are harmless and left alone).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import Node


class NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (``*name``)."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(None, None, "YAML aliases (*name) are not accepted here",
                                event.start_mark)
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` without aliases; raises ``yaml.YAMLError`` (``ComposerError`` for
    an alias, with its mark)."""
    return yaml.load(text, Loader=NoAliasLoader)  # a SafeLoader subclass
