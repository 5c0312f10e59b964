"""Whether every native library of one env (or one lock's wheels) links: each versioned symbol a
library takes from another library of the same set is defined there, at that version. Pure over
the libraries' link facts (`verify/elf`), so an env's files (`verify`) and a lock's wheels read
on any host (`lock --check`) are judged alike.

A library needed from the host is not the set's to provide (the NVIDIA driver's own, which a GPU
host carries; glibc, libstdc++ and the rest of the system), and a CUDA stub (`lib/stubs/`) only
stands in for the driver at build time. A CUDA library NVIDIA's wheels ship (`verify/cudalibs`)
is the set's: one that a library needs by a name nothing of the set has (a CUDA 12 core's
`libcublasLt.so.12` beside CUDA 13's `libcublasLt.so.13`) does not load.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_bootstrap.verify.cudalibs import CUDA_LIBRARIES, cuda_family
from verl_bootstrap.verify.elf import MAGIC, ElfError, ElfLinks, read_links

__all__ = [
    "HOST_LIBRARIES",
    "Gap",
    "Library",
    "LinkGap",
    "MissingLibrary",
    "env_libraries",
    "is_library",
    "link_gaps",
]

# the libraries a host provides, never an env's wheels: the driver's (libcuda, libnvidia-ml and
# the rest of libnvidia-*), glibc's, the C++ and GCC runtimes, and the dynamic loader
HOST_LIBRARIES = re.compile(
    r"^(libcuda|libnvidia-[\w-]+|libnvcuvid|libc|libm|libdl|libpthread|librt|libutil|libresolv"
    r"|libstdc\+\+|libgcc_s|libatomic|ld-linux[\w.-]*|ld64)\.so(\.\d+)*$"
)
UNOWNED = "no distribution's"  # the owner of an env's library that no RECORD lists
_LIBRARY_NAME = re.compile(r"[^/]\.so(\.\d+)*$")
_SHOWN = 3  # missing symbols named per gap; the count says how many more


@dataclass(frozen=True)
class Library:
    """One shared library of the set: where it is (a path, or `wheel!member`), which
    distribution holds it, and its link facts."""

    where: str
    owner: str  # "nvidia-cublas 13.1.0.3"
    links: ElfLinks

    @property
    def file(self) -> str:
        """Its file name (a wheel's repaired copy is needed by it: `libcudart.faf08d9a.so.13`)."""
        return self.where.rsplit("/", 1)[-1]

    @property
    def name(self) -> str:
        """The name other libraries need it by: its SONAME, else its file name."""
        return self.links.soname or self.file


@dataclass(frozen=True)
class LinkGap:
    """A library that needs versioned symbols another library of the set does not define."""

    library: Library
    provider: Library
    version: str
    missing: tuple[str, ...]

    def line(self) -> str:
        """One line naming the library, what it needs, and who lacks it."""
        shown = ", ".join(self.missing[:_SHOWN])
        more = len(self.missing) - _SHOWN
        shown += f" and {more} more" if more > 0 else ""
        return (
            f"{self.library.where} ({self.library.owner}) needs {shown} at version "
            f"{self.version} of {self.provider.name}, which {self.provider.owner} does not "
            "define: loading it fails with `undefined symbol`"
        )


def is_library(filename: str) -> bool:
    """A file name a shared library has (`libx.so`, `libx.so.13`, `mod.cpython-312-....so`)."""
    return bool(_LIBRARY_NAME.search(filename))


@dataclass(frozen=True)
class MissingLibrary:
    """A library that needs CUDA libraries by names no library of the set has."""

    library: Library
    needed: tuple[str, ...]  # ("libcublasLt.so.12",)
    has: tuple[tuple[str, tuple[str, ...]], ...]  # each one's family -> the set's names of it
    among: str  # "the env", "the lock"

    def line(self) -> str:
        """One line naming the library, what it needs, and what the set has instead."""
        needed = _listed(self.needed)
        return (
            f"{self.library.where} ({self.library.owner}) needs {needed}, which nothing in "
            f"{self.among} provides (it has {self._instead()}): loading it fails with "
            f"`{self.needed[0]}: cannot open shared object file`"
        )

    def _instead(self) -> str:
        names = tuple(n for _, found in self.has for n in found)
        said = [_listed(names)] if names else []
        lacking: dict[str, list[str]] = {}
        for family, found in self.has:
            if not found:
                lacking.setdefault(CUDA_LIBRARIES[family], []).append(family)
        for wheels, families in lacking.items():
            them = "them" if len(families) > 1 else "it"
            said.append(f"no {_listed(tuple(families))}: the {wheels} wheels ship {them}")
        return "; ".join(said)


def _listed(names: tuple[str, ...]) -> str:
    return " and ".join(", ".join(names).rsplit(", ", 1))


Gap = LinkGap | MissingLibrary


def link_gaps(libraries: Iterable[Library], among: str = "the set") -> list[Gap]:
    """Each versioned need of one library of the set that its provider in the set lacks, and
    each CUDA library one needs that the set (`among`, as the line says it) does not have."""
    libraries = [lib for lib in libraries if "/stubs/" not in f"/{lib.where}"]
    providers: dict[str, list[Library]] = {}
    for lib in libraries:
        for name in dict.fromkeys((lib.name, lib.file)):
            providers.setdefault(name, []).append(lib)
    met = _met(libraries, providers)
    gaps: list[Gap] = [g for lib in libraries for g in _symbol_gaps(lib, providers)]
    gaps += [m for lib in libraries if (m := _missing(lib, providers, met, among))]
    return sorted(gaps, key=_order)


def _order(gap: Gap) -> tuple[str, str, str]:
    if isinstance(gap, MissingLibrary):
        return (gap.library.where, "", "")
    return (gap.library.where, gap.provider.name, gap.version)


def _symbol_gaps(lib: Library, providers: Mapping[str, list[Library]]) -> Iterator[LinkGap]:
    for needed, versions in sorted(lib.links.needs.items()):
        found = providers.get(needed)
        if not found or HOST_LIBRARIES.match(needed):
            continue
        for version, symbols in sorted(versions.items()):
            # several copies of one SONAME: the need is met when any one defines it all
            missing = min((_lacks(p, version, symbols) for p in found), key=len)
            if missing:
                provider = next(p for p in found if _lacks(p, version, symbols) == missing)
                yield LinkGap(lib, provider, version, missing)


def _met(libraries: list[Library], providers: Mapping[str, list[Library]]) -> dict[str, set[str]]:
    """Each distribution -> the CUDA libraries one of its libraries finds in the set. A wheel
    that ships one build per CUDA major (torch-memory-saver's `_cu12` and `_cu13` modules) loads
    the one that matches at run time, by path: the others never load, and are not its gaps."""
    met: dict[str, set[str]] = {}
    for lib in libraries:
        for needed in lib.links.needed:
            family = cuda_family(needed)
            if family is not None and needed in providers and lib.owner != UNOWNED:
                met.setdefault(lib.owner, set()).add(family)
    return met


def _missing(
    lib: Library, providers: Mapping[str, list[Library]], met: Mapping[str, set[str]], among: str
) -> MissingLibrary | None:
    """The CUDA libraries `lib` needs that the set does not have (each with its family), unless
    another build of its own distribution finds that library in the set."""
    absent: dict[str, str] = {}
    for needed in lib.links.needed:
        family = cuda_family(needed)
        if family is not None and needed not in providers and family not in met.get(lib.owner, ()):
            absent[needed] = family
    if not absent:
        return None
    has = {f: _named(providers, f) for f in dict.fromkeys(absent.values())}
    return MissingLibrary(lib, tuple(absent), tuple(has.items()), among)


def _named(providers: Mapping[str, list[Library]], family: str) -> tuple[str, ...]:
    """The names the set has of one CUDA library (each copy by its SONAME)."""
    libs = (lib for found in providers.values() for lib in found)
    return tuple(sorted({lib.name for lib in libs if cuda_family(lib.name) == family}))


def _lacks(provider: Library, version: str, symbols: frozenset[str]) -> tuple[str, ...]:
    defined = provider.links.defines.get(version, frozenset())
    return tuple(sorted(symbols - defined))


def env_libraries(site_packages: Iterable[Path]) -> list[Library]:
    """Every ELF shared library under the env's site-packages (regular files; a link to one is
    the same library), with the distribution whose RECORD lists it."""
    found = []
    for root in site_packages:
        owners = _owners(root)
        for path in _library_files(root):
            links = _read(path)
            if links is not None:
                inside = path.relative_to(root).as_posix()
                found.append(Library(inside, owners.get(inside, UNOWNED), links))
    return found


def _owners(root: Path) -> dict[str, str]:
    """Each library file's path (under `root`) -> "name version" of the distribution whose
    RECORD lists it (the dist-info folder's name gives both)."""
    out: dict[str, str] = {}
    for info in sorted(root.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        try:
            lines = (info / "RECORD").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            path = line.split(",", 1)[0]
            if is_library(path):
                out[os.path.normpath(path)] = f"{canonicalize_name(name)} {version}"
    return out


def _library_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            if is_library(name) and not path.is_symlink() and path.is_file():
                yield path


def _read(path: Path) -> ElfLinks | None:
    """The library's link facts; None for a file that is not an ELF library."""
    try:
        with path.open("rb") as stream:
            if stream.read(4) != MAGIC:
                return None
            return read_links(stream)
    except (OSError, ElfError):
        return None
