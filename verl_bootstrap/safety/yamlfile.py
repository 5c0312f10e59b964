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
libyaml's event stream is scanned first (flat and fast: no node is built), checking depth and
counting sizes; only a document within the bounds is composed by libyaml and built into Python
objects by PyYAML's safe constructor. Duplicate keys are found on the composed nodes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    ScalarEvent,
)

from verl_bootstrap.errors import InputError

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
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        _check_regular(path, os.fstat(fd).st_mode, what)
        try:
            raw = fh.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    return decode_untrusted(raw, name=str(path), what=what, max_bytes=max_bytes)


def _check_regular(path: Path, mode: int, what: str) -> None:
    """A file, or /dev/null (an empty file); a folder, FIFO, socket or device is refused."""
    if stat.S_ISREG(mode) or str(path) == os.devnull:
        return
    kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, socket or device)"
    raise InputError(f"{path}: not a {what}: {kind}", hint=f"point at the {what} file itself")


def decode_untrusted(raw: bytes, *, name: str, what: str, max_bytes: int = MAX_BYTES) -> str:
    """`raw` as text, refusing what no hand-written YAML file holds."""
    if len(raw) > max_bytes:
        raise InputError(
            f"{name}: not a {what}: larger than {max_bytes // 1024} KiB",
            hint=f"point at the {what} itself, not at another file",
        )
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InputError(
            f"{name}: not a {what}: a binary file (a NUL byte at offset {nul})",
            hint=f"a {what} is a UTF-8 YAML text file",
        )
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
    try:
        _Scan(path).run(text)
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_keys(node, path)  # before construction merges `<<` keys into mappings
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(
            f"{where}: invalid YAML in {what}: {problem}", hint="fix the syntax"
        ) from None
    except ValueError as exc:  # a value PyYAML parses but Python refuses: a 5,001-digit int
        raise InputError(
            f"{path}: invalid YAML in {what}: a value that cannot be read "
            f"({str(exc).split(';')[0]})",
            hint="fix the value (a number of at most a few digits)",
        ) from None
    except RecursionError:  # a recursive merge key (`<<: *self`) slips past the scan
        raise InputError(f"{path}: {what} refers to itself through an alias") from None
    lines: dict[Key, tuple[Path, int]] = {}
    if node is not None:
        _walk(node, (), path, lines)
    return Located(data=data, lines=lines)


class _Scan:
    """One pass over libyaml's events: depth, anchors, and the size with aliases expanded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sizes: dict[str, int] = {}  # closed anchors -> their expanded size
        self.open: set[str] = set()  # anchors whose collection is still being read
        self.stack: list[list[Any]] = [[0, None]]  # per open collection: [size, anchor]
        self.total = 0

    def run(self, text: str) -> None:
        loader = _LOADER(text)
        try:
            documents = 0
            while loader.check_event():
                event = loader.get_event()
                if isinstance(event, DocumentStartEvent):
                    documents += 1
                    if documents > 1:
                        mark: Any = event.start_mark
                        raise InputError(
                            f"{self.path}:{mark.line + 1}: more than one YAML document in the file",
                            hint="remove the `---` line",
                        )
                else:
                    self._event(event)
        finally:
            loader.dispose()

    def _event(self, event: Any) -> None:
        if isinstance(event, ScalarEvent):
            self._anchor(event)
            self._add(1, event)
            if event.anchor is not None:
                self.sizes[event.anchor] = 1
        elif isinstance(event, AliasEvent):
            self._add(self._alias(event), event)
        elif isinstance(event, CollectionStartEvent):
            if len(self.stack) > MAX_DEPTH:
                self._refuse(event, f"nested deeper than {MAX_DEPTH} levels")
            self._anchor(event)
            if event.anchor is not None:
                self.open.add(event.anchor)
            self.stack.append([1, event.anchor])
        elif isinstance(event, CollectionEndEvent):
            size, anchor = self.stack.pop()
            if anchor is not None:
                self.sizes[anchor] = size
                self.open.discard(anchor)
            self._add(size, event)

    def _anchor(self, event: Any) -> None:
        if event.anchor is not None and (event.anchor in self.sizes or event.anchor in self.open):
            self._refuse(event, f"the anchor &{event.anchor} is defined twice")

    def _alias(self, event: Any) -> int:
        if event.anchor in self.open:  # its collection is still open: the alias is inside it
            self._refuse(event, f"the alias *{event.anchor} refers to itself")
        if event.anchor not in self.sizes:
            self._refuse(event, f"the alias *{event.anchor} names no anchor before it")
        return self.sizes[event.anchor]

    def _add(self, size: int, event: Any) -> None:
        self.stack[-1][0] += size
        self.total += size
        if self.total > MAX_NODES:
            self._refuse(
                event,
                f"more than {MAX_NODES} values once its aliases are expanded (an alias bomb?)",
            )

    def _refuse(self, event: Any, problem: str) -> NoReturn:
        raise InputError(
            f"{self.path}:{event.start_mark.line + 1}: {problem}",
            hint="aliases (*name) may repeat a value, not multiply it",
        )


def _walk(node: yaml.Node, key: Key, path: Path, lines: dict[Key, tuple[Path, int]]) -> None:
    for child, where in _located(node, key):
        lines[child] = (path, where)


def _check_keys(root: yaml.Node, path: Path) -> None:
    """Each mapping's keys are unique: every node once, aliases not followed again."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _unique_keys(node, path)
            stack.extend(v for _, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _unique_keys(node: yaml.MappingNode, path: Path) -> None:
    """Every key of a mapping once (YAML would silently keep the last); merge keys aside."""
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if key.tag == _MERGE:
            continue
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode):
            raise InputError(f"{path}:{line}: a key must be a plain value, not a list or mapping")
        if key.value in seen:
            raise InputError(
                f"{path}:{line}: duplicate key {key.value!r} (first at line {seen[key.value]})",
                hint="keep one of them: YAML would silently use the last",
            )
        seen[key.value] = line


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
