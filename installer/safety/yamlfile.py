"""The one YAML reader for every file the tool is handed: bounded, strict, and located.

Every profile, site config and lockfile is untrusted. Reading one costs at most a bounded amount
of time and memory, and whatever is wrong with it is an InputError naming the file (and the line):
- size: a file larger than its kind allows is refused before it is parsed;
- bytes: a binary file (a NUL byte) or text that is not UTF-8 is refused, naming the offset;
- nesting: deeper than `MAX_DEPTH` is refused (libyaml's own composer recurses in C, and a few
  hundred thousand `[` crash the interpreter);
- aliases: the document's size with every alias expanded is counted, from the sizes of the
  anchored nodes, without expanding anything: an alias bomb is refused in milliseconds;
- duplicate keys are errors naming both lines (YAML's "last one wins" hides typos).
The document is composed here from libyaml's event stream (fast, flat), then built into Python
objects by PyYAML's safe constructor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from installer.errors import InputError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "Key",
    "Located",
    "load_yaml",
    "parse_yaml",
    "read_untrusted",
]

Key = tuple[str | int, ...]
MAX_BYTES = 4 * 1024 * 1024  # the largest GPU lockfile is under 50 KB
MAX_DEPTH = 64  # profiles nest about 8 deep
MAX_NODES = 250_000  # scalars, lists and mappings, with every alias expanded
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Located:
    """A YAML document and, for each path of keys, the file and line it came from."""

    data: Any
    lines: dict[Key, tuple[Path, int]]


def read_untrusted(path: Path, *, what: str, max_bytes: int = MAX_BYTES) -> str:
    """`path`'s text, or an InputError: unreadable, too large, binary, or not UTF-8."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    return decode_untrusted(raw, name=str(path), what=what, max_bytes=max_bytes)


def decode_untrusted(raw: bytes, *, name: str, what: str, max_bytes: int = MAX_BYTES) -> str:
    """`raw` as text, refusing what no hand-written YAML file holds."""
    if len(raw) > max_bytes:
        raise InputError(
            f"{name}: not a {what}: larger than {max_bytes // 1024} KiB",
            hint=f"point at the {what} itself, not at another file",
        )
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InputError(f"{name}: not a {what}: a binary file (a NUL byte at offset {nul})",
                         hint=f"a {what} is a UTF-8 YAML text file")  # fmt: skip
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{name}:{line}: not a {what}: not UTF-8 text (byte {exc.start})",
            hint="save the file as UTF-8",
        ) from None


def load_yaml(path: Path, *, what: str, max_bytes: int = MAX_BYTES) -> Located:
    """Read and parse `path` (a `what`, for messages) within every bound above."""
    return parse_yaml(read_untrusted(path, what=what, max_bytes=max_bytes), path, what=what)


def parse_yaml(text: str, path: Path, *, what: str) -> Located:
    """Parse `text` that came from `path` (a URL's text is given a Path of the URL)."""
    loader = _LOADER(text)
    try:
        node = _Composer(loader, path).document()
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: invalid YAML in {what}: {problem}",
                         hint="fix the syntax") from None  # fmt: skip
    except RecursionError:  # a recursive merge key (`<<: *self`) slips past the composer
        raise InputError(f"{path}: {what} refers to itself through an alias") from None
    finally:
        loader.dispose()
    lines: dict[Key, tuple[Path, int]] = {}
    if node is not None:
        _walk(node, (), path, lines)
    return Located(data=data, lines=lines)


class _Composer:
    """Nodes from libyaml's events, as PyYAML's composer builds them, within the bounds."""

    def __init__(self, loader: Any, path: Path) -> None:
        self.loader, self.path = loader, path
        self.anchors: dict[str, yaml.Node] = {}
        self.sizes: dict[int, int] = {}  # id(node) -> size with aliases expanded
        self.total = 0

    def document(self) -> yaml.Node | None:
        self._next()  # StreamStart
        if self.loader.check_event(yaml.StreamEndEvent):
            return None
        self._next()  # DocumentStart
        node = self._node(0)
        self._next()  # DocumentEnd
        if not self.loader.check_event(yaml.StreamEndEvent):
            event = self.loader.peek_event()
            raise InputError(f"{self.path}:{event.start_mark.line + 1}: more than one YAML "
                             "document in the file", hint="remove the `---` line")  # fmt: skip
        return node

    def _next(self) -> Any:
        return self.loader.get_event()

    def _node(self, depth: int) -> yaml.Node:
        event = self._next()
        if isinstance(event, AliasEvent):
            return self._alias(event)
        if depth > MAX_DEPTH:
            self._refuse(event, f"nested deeper than {MAX_DEPTH} levels")
        if event.anchor is not None and event.anchor in self.anchors:
            self._refuse(event, f"the anchor &{event.anchor} is defined twice")
        node = self._build(event, depth)
        self.sizes[id(node)] = self._count(node, event)
        return node

    def _build(self, event: Any, depth: int) -> yaml.Node:
        resolve = self.loader.resolve
        start: Any = event.start_mark  # libyaml's marks stand in for PyYAML's
        end: Any = event.end_mark
        if isinstance(event, ScalarEvent):
            tag = event.tag if event.tag not in (None, "!") else None
            tag = tag or resolve(yaml.ScalarNode, event.value, event.implicit)
            node: yaml.Node = yaml.ScalarNode(tag, event.value, start, end,
                                              style=event.style)  # fmt: skip
            self._anchor(event, node)
        elif isinstance(event, SequenceStartEvent):
            tag = event.tag if event.tag not in (None, "!") else None
            tag = tag or resolve(yaml.SequenceNode, None, event.implicit)
            node = yaml.SequenceNode(tag, [], start, None, flow_style=event.flow_style)
            self._anchor(event, node)
            while not self.loader.check_event(SequenceEndEvent):
                node.value.append(self._node(depth + 1))
            node.end_mark = self._next().end_mark
        elif isinstance(event, MappingStartEvent):
            tag = event.tag if event.tag not in (None, "!") else None
            tag = tag or resolve(yaml.MappingNode, None, event.implicit)
            node = yaml.MappingNode(tag, [], start, None, flow_style=event.flow_style)
            self._anchor(event, node)
            self._pairs(node, depth)
            node.end_mark = self._next().end_mark
        else:  # pragma: no cover - libyaml's grammar allows nothing else here
            self._refuse(event, "unexpected YAML event")
        return node

    def _pairs(self, node: yaml.MappingNode, depth: int) -> None:
        seen: dict[str, int] = {}
        while not self.loader.check_event(MappingEndEvent):
            key, value = self._node(depth + 1), self._node(depth + 1)
            if key.tag != _MERGE:
                self._unique(key, seen)
            node.value.append((key, value))

    def _unique(self, key: yaml.Node, seen: dict[str, int]) -> None:
        if not isinstance(key, yaml.ScalarNode):
            raise InputError(f"{self.path}:{key.start_mark.line + 1}: a key must be a plain "
                             "value, not a list or mapping")  # fmt: skip
        line = key.start_mark.line + 1
        if key.value in seen:
            raise InputError(
                f"{self.path}:{line}: duplicate key {key.value!r} "
                f"(first at line {seen[key.value]})",
                hint="keep one of them: YAML would silently use the last",
            )
        seen[key.value] = line

    def _anchor(self, event: Any, node: yaml.Node) -> None:
        if event.anchor is not None:
            self.anchors[event.anchor] = node

    def _alias(self, event: AliasEvent) -> yaml.Node:
        node = self.anchors.get(str(event.anchor))
        if node is None:
            self._refuse(event, f"the alias *{event.anchor} names no anchor before it")
        size = self.sizes.get(id(node))
        if size is None:  # its anchor is still open: the alias is inside what it names
            self._refuse(event, f"the alias *{event.anchor} refers to itself")
        self._grow(size, event)
        return node

    def _count(self, node: yaml.Node, event: Any) -> int:
        if isinstance(node, yaml.ScalarNode):
            size = 1
        elif isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self.sizes[id(c)] for c in node.value)
        else:
            size = 1 + sum(self.sizes[id(k)] + self.sizes[id(v)] for k, v in node.value)
        self._grow(1, event)
        return size

    def _grow(self, size: int, event: Any) -> None:
        self.total += size
        if self.total > MAX_NODES:
            self._refuse(event, f"more than {MAX_NODES} values once its aliases are expanded "
                         "(an alias bomb?)")  # fmt: skip

    def _refuse(self, event: Any, problem: str) -> NoReturn:
        raise InputError(f"{self.path}:{event.start_mark.line + 1}: {problem}",
                         hint="aliases (*name) may repeat a value, not multiply it")  # fmt: skip


def _walk(node: yaml.Node, key: Key, path: Path, lines: dict[Key, tuple[Path, int]]) -> None:
    for child, where in _located(node, key):
        lines[child] = (path, where)


def _located(node: yaml.Node, key: Key) -> Iterator[tuple[Key, int]]:
    """Every key path under `node` with its line (iterative: depth is bounded, width is not)."""
    stack: list[tuple[yaml.Node, Key, int]] = [(node, key, node.start_mark.line + 1)]
    while stack:
        here, at, line = stack.pop()
        yield at, line  # a mapping's value is located at its key's line
        if isinstance(here, yaml.MappingNode):
            for knode, vnode in reversed(here.value):
                stack.append((vnode, (*at, str(knode.value)), knode.start_mark.line + 1))
        elif isinstance(here, yaml.SequenceNode):
            for index in reversed(range(len(here.value))):
                item = here.value[index]
                stack.append((item, (*at, index), item.start_mark.line + 1))
