"""What one ELF shared library says about its links, read from the file itself: its SONAME and
DT_NEEDED names, the versioned symbols it defines (.gnu.version_d) and those it takes from each
other library (.gnu.version_r), as the dynamic loader reads them. Stdlib only, any byte order and
word size, so an aarch64 library is read on an x86_64 host (and from inside a wheel's zip, where
seeking back re-reads from the member's start: the reads go forward, sorted by offset).

A symbol's version is what ties it to one library: `cublasLtGroupedMatrixLayoutInit_internal`
needed at version `libcublasLt.so.13` of file `libcublasLt.so.13` must be defined there at that
version, or the loader stops with `undefined symbol: ..., version libcublasLt.so.13`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import BinaryIO

__all__ = ["MAGIC", "ElfError", "ElfLinks", "read_links"]

MAGIC = b"\x7fELF"
_DYNSYM, _DYNAMIC = 11, 6
_VERDEF, _VERNEED, _VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
_KINDS = frozenset({_DYNSYM, _DYNAMIC, _VERDEF, _VERNEED, _VERSYM})  # the link facts' sections
_DT_NEEDED, _DT_SONAME = 1, 14
_STB_WEAK = 2
_VER_FLG_BASE = 1
_MAX_TABLE = 1 << 28  # one section of a real library is far smaller; a bigger one is a bad file


class ElfError(ValueError):
    """The file is not an ELF shared library this reader can read (the message says why)."""


@dataclass(frozen=True)
class ElfLinks:
    """The link facts of one library: what it is, what it needs, what versioned names it has."""

    soname: str | None
    machine: int
    needed: tuple[str, ...]
    defines: dict[str, frozenset[str]] = field(default_factory=dict)  # version -> symbols
    # needed file -> version -> the undefined, non-weak symbols bound to that version there
    needs: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Section:
    kind: int
    offset: int
    size: int
    link: int
    entsize: int


class _Reader:
    """Forward reads of one file (a seek back costs a re-read in a zip member: avoided)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        stream.seek(0)
        head = stream.read(64)
        if head[:4] != MAGIC:
            raise ElfError("not an ELF file")
        if len(head) < 64:
            raise ElfError("the file ends inside its ELF header")
        if head[4] not in (1, 2) or head[5] not in (1, 2):
            raise ElfError("an ELF file of an unknown class or byte order")
        self.wide = head[4] == 2
        self.order = "<" if head[5] == 1 else ">"
        self.head = head

    def read(self, offset: int, size: int) -> bytes:
        if size > _MAX_TABLE or offset < 0:
            raise ElfError(f"a table of {size} bytes at {offset}: not a library's")
        self.stream.seek(offset)
        data = self.stream.read(size)
        if len(data) != size:
            raise ElfError("the file ends inside one of its tables")
        return data

    def unpack(self, fmt: str, data: bytes, at: int = 0) -> tuple[int, ...]:
        return struct.unpack_from(self.order + fmt, data, at)


def read_links(stream: BinaryIO) -> ElfLinks:
    """The link facts of the ELF library in `stream` (ElfError: not one, or unreadable)."""
    elf = _Reader(stream)
    try:
        machine, sections = _sections(elf)
        wanted = {n for n, s in enumerate(sections) if s.kind in _KINDS}
        strings = {sections[n].link for n in wanted if sections[n].kind != _VERSYM}
        present = {n for n in wanted | strings if n < len(sections)}
        tables = {
            n: elf.read(sections[n].offset, sections[n].size)
            for n in sorted(present, key=lambda n: sections[n].offset)
        }
        return _links(elf, machine, sections, tables)
    except struct.error as exc:  # a table shorter than its entries say: a damaged file
        raise ElfError(f"a damaged table ({exc})") from None


def _sections(elf: _Reader) -> tuple[int, list[_Section]]:
    """e_machine and the section headers (a library without them is refused, not guessed)."""
    if elf.wide:
        machine, shoff, entsize, count = (*elf.unpack("H", elf.head, 18), *_sh64(elf))
    else:
        machine, shoff, entsize, count = (*elf.unpack("H", elf.head, 18), *_sh32(elf))
    if shoff == 0 or count == 0:
        raise ElfError("no section headers")
    if entsize < (64 if elf.wide else 40):
        raise ElfError(f"section headers of {entsize} bytes")
    raw = elf.read(shoff, entsize * count)
    fmt = "IIQQQQIIQQ" if elf.wide else "IIIIIIIIII"
    out = []
    for n in range(count):
        _, kind, _, _, offset, size, link, _, _, ent = elf.unpack(fmt, raw, n * entsize)
        out.append(_Section(kind, offset, size, link, ent))
    return machine, out


def _sh64(elf: _Reader) -> tuple[int, int, int]:
    shoff = elf.unpack("Q", elf.head, 40)[0]
    entsize, count = elf.unpack("HH", elf.head, 58)
    return shoff, entsize, count


def _sh32(elf: _Reader) -> tuple[int, int, int]:
    shoff = elf.unpack("I", elf.head, 32)[0]
    entsize, count = elf.unpack("HH", elf.head, 46)
    return shoff, entsize, count


def _string(table: bytes, at: int) -> str:
    end = table.find(b"\0", at)
    return table[at : end if end >= 0 else len(table)].decode("utf-8", "replace")


def _links(
    elf: _Reader, machine: int, sections: list[_Section], tables: dict[int, bytes]
) -> ElfLinks:
    by_kind = {s.kind: (n, s) for n, s in enumerate(sections) if s.kind in _KINDS}
    soname, needed = _dynamic(elf, by_kind.get(_DYNAMIC), tables)
    names = _version_names(elf, by_kind, tables)
    defines, needs = _symbols(elf, by_kind, tables, names)
    return ElfLinks(soname, machine, tuple(needed), defines, needs)


def _dynamic(
    elf: _Reader, found: tuple[int, _Section] | None, tables: dict[int, bytes]
) -> tuple[str | None, list[str]]:
    if found is None:
        return None, []
    index, section = found
    data, strings = tables[index], tables.get(section.link, b"")
    fmt, size = ("qQ", 16) if elf.wide else ("iI", 8)
    soname, needed = None, []
    for at in range(0, len(data) - size + 1, size):
        tag, value = elf.unpack(fmt, data, at)
        if tag == 0:
            break
        if tag == _DT_NEEDED:
            needed.append(_string(strings, value))
        elif tag == _DT_SONAME:
            soname = _string(strings, value)
    return soname, needed


@dataclass(frozen=True)
class _Versions:
    """Version index -> (the version's name, the file it is needed from; None: defined here)."""

    names: dict[int, tuple[str, str | None]]


def _version_names(
    elf: _Reader, by_kind: dict[int, tuple[int, _Section]], tables: dict[int, bytes]
) -> _Versions:
    names: dict[int, tuple[str, str | None]] = {}
    if _VERDEF in by_kind:
        index, section = by_kind[_VERDEF]
        names.update(_verdefs(elf, tables[index], tables.get(section.link, b"")))
    if _VERNEED in by_kind:
        index, section = by_kind[_VERNEED]
        names.update(_verneeds(elf, tables[index], tables.get(section.link, b"")))
    return _Versions(names)


def _verdefs(elf: _Reader, data: bytes, strings: bytes) -> dict[int, tuple[str, str | None]]:
    """Each version this library defines (its base version, its own file name, left out)."""
    out: dict[int, tuple[str, str | None]] = {}
    at, seen = 0, 0
    while at + 20 <= len(data) and seen < 65536:
        _, flags, ndx, count, _, aux, nxt = elf.unpack("HHHHIII", data, at)
        if count and not flags & _VER_FLG_BASE and at + aux + 8 <= len(data):
            out[ndx] = (_string(strings, elf.unpack("I", data, at + aux)[0]), None)
        if nxt == 0:
            break
        at, seen = at + nxt, seen + 1
    return out


def _verneeds(elf: _Reader, data: bytes, strings: bytes) -> dict[int, tuple[str, str | None]]:
    """Each version this library needs, with the file it needs it from."""
    out: dict[int, tuple[str, str | None]] = {}
    at, seen = 0, 0
    while at + 16 <= len(data) and seen < 65536:
        _, count, file_at, aux, nxt = elf.unpack("HHIII", data, at)
        target = _string(strings, file_at)
        here = at + aux
        for _ in range(count):
            if here + 16 > len(data):
                break
            _, _, other, name_at, step = elf.unpack("IHHII", data, here)
            out[other & 0x7FFF] = (_string(strings, name_at), target)
            if step == 0:
                break
            here += step
        if nxt == 0:
            break
        at, seen = at + nxt, seen + 1
    return out


def _symbols(
    elf: _Reader,
    by_kind: dict[int, tuple[int, _Section]],
    tables: dict[int, bytes],
    versions: _Versions,
) -> tuple[dict[str, frozenset[str]], dict[str, dict[str, frozenset[str]]]]:
    """The versioned symbols defined here, and the versioned ones needed from other files."""
    if _DYNSYM not in by_kind or _VERSYM not in by_kind:
        return {}, {}
    index, section = by_kind[_DYNSYM]
    data, strings = tables[index], tables.get(section.link, b"")
    versym = tables[by_kind[_VERSYM][0]]
    size = 24 if elf.wide else 16
    defines: dict[str, set[str]] = {}
    needs: dict[str, dict[str, set[str]]] = {}
    for n in range(1, min(len(data) // size, len(versym) // 2)):
        name_at, info, shndx = _symbol(elf, data, n * size)
        version = versions.names.get(elf.unpack("H", versym, n * 2)[0] & 0x7FFF)
        if version is None:
            continue
        name, source = version
        symbol = _string(strings, name_at)
        if source is None and shndx != 0 and symbol != name:  # not the version's own marker
            defines.setdefault(name, set()).add(symbol)
        elif source is not None and shndx == 0 and info >> 4 != _STB_WEAK:
            needs.setdefault(source, {}).setdefault(name, set()).add(symbol)
    frozen_needs = {f: {v: frozenset(s) for v, s in vs.items()} for f, vs in needs.items()}
    return {v: frozenset(s) for v, s in defines.items()}, frozen_needs


def _symbol(elf: _Reader, data: bytes, at: int) -> tuple[int, int, int]:
    """(st_name, st_info, st_shndx) of the symbol at `at`."""
    if elf.wide:
        name_at, info, _, shndx = elf.unpack("IBBH", data, at)
    else:
        name_at, _, _, info, _, shndx = elf.unpack("IIIBBH", data, at)
    return name_at, info, shndx
