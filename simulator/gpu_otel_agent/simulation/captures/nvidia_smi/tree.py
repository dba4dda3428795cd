"""Both forms of ``nvidia-smi -q`` as one shape: a tree of named nodes with printed values.

The XML form names a node by its tag, the text form by its label; ``fields.py`` gives each field's
path in both. The text form nests by indentation (4 spaces a level) with ``label : value``
lines, and sections as bare labels.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field


class TreeError(ValueError):
    """The text is not the form it claimed to be."""


@dataclass
class Node:
    name: str
    value: str | None = None  # None for a section
    children: list[Node] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)

    def child(self, name: str) -> Node | None:
        return next((c for c in self.children if c.name == name), None)

    def all(self, name: str) -> list[Node]:
        return [c for c in self.children if c.name == name]

    def path(self, path: str) -> Node | None:
        node: Node | None = self
        for part in path.split("/"):
            if node is None:
                return None
            node = node.child(part)
        return node

    def descendants(self) -> Iterator[Node]:
        for c in self.children:
            yield c
            yield from c.descendants()

    def find(self, name: str) -> Node | None:
        """The first descendant named ``name`` (the text form nests some labels deeper)."""
        return next((n for n in self.descendants() if n.name == name), None)


def lookup(node: Node, path: str, header: str | None = None) -> str | None:
    """The printed value at ``path`` (``a+b`` sums), or None if the capture does not print it.

    ``@id`` is the GPU's own id (the XML ``id`` attribute, the text ``GPU <bus id>`` header).
    A sum is "N/A" if any part is, and missing if any part is missing.
    """
    if path == "@id":
        return node.attrs.get("id") or header
    if "+" in path:
        parts = [lookup(node, p) for p in path.split("+")]
        if any(p is None for p in parts):
            return None
        total = 0
        for p in parts:
            assert p is not None
            number = re.match(r"^\s*(\d+)\s*$", p)
            if number is None:
                return p  # N/A (or something not a count): the sum is that
            total += int(number.group(1))
        return str(total)
    current = node
    for part in path.split("/"):
        nxt = current.child(part)
        if nxt is None:
            # A section printed as one value (<remapped_rows>N/A</remapped_rows>, "Retired
            # Pages : N/A") stands for every field in it.
            if current is not node and not current.children and current.value:
                return current.value
            return None
        current = nxt
    return current.value


def parse_xml(text: str) -> Node:
    """``nvidia-smi -q -x`` (its DOCTYPE names a DTD file that is not fetched)."""
    body = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise TreeError(f"not well-formed XML: {exc}") from exc
    return _from_element(root)


def _from_element(element: ET.Element) -> Node:
    """A leaf keeps its text (a section printed as one value, ``<remapped_rows>N/A</...>``,
    is a leaf too); a section keeps its children."""
    children = [_from_element(c) for c in element]
    if children:
        return Node(element.tag, None, children, dict(element.attrib))
    return Node(element.tag, (element.text or "").strip(), [], dict(element.attrib))


_LINE = re.compile(r"^(?P<indent> *)(?P<label>[^:]*?\S)\s+:(?: (?P<value>.*))?$")


def parse_text(text: str) -> Node:
    """``nvidia-smi -q``: a root whose children are the header lines and one node per GPU."""
    root = Node("nvidia_smi_log")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in text.splitlines():
        line = raw.rstrip().replace("\t", "    ")
        if not line.strip() or line.strip().startswith("==="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        match = _LINE.match(line)
        if match is not None:
            node = Node(match.group("label").strip(), (match.group("value") or "").strip())
        else:
            node = Node(line.strip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not stack:
            raise TreeError(f"unexpected indentation: {raw!r}")
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root
