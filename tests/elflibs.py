"""Real ELF shared libraries for the native-link tests, built here with gcc and a linker version
script: a provider of `greet@GREET_1` (its old release) or of `greet` and `wave` at `GREET_1`
(its new one, the same SONAME), and a user linked against the new one, which so needs both."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

SONAME = "libgreet.so.1"
VERSION = "GREET_1"


@dataclass(frozen=True)
class Built:
    """The libraries: the old provider, the new one (each as libgreet.so.1 in its own folder)
    and the user of the new one."""

    old: Path
    new: Path
    user: Path


def gcc() -> str:
    found = shutil.which("gcc")
    if found is None:
        pytest.fail("gcc is needed to build the test's libraries (make test-deps installs it)")
    return found


def _library(folder: Path, name: str, source: str, *extra: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(source, encoding="utf-8")
    out = folder / (SONAME if name == "greet" else f"lib{name}.so")
    argv = [gcc(), "-shared", "-fPIC", "-o", str(out), str(folder / f"{name}.c"), *extra]
    subprocess.run(argv, check=True)
    return out


def _provider(folder: Path, symbols: tuple[str, ...]) -> Path:
    script = folder / "greet.map"
    folder.mkdir(parents=True, exist_ok=True)
    script.write_text(f"{VERSION} {{ global: {'; '.join(symbols)}; local: *; }};\n")
    source = "".join(f"int {s}(void) {{ return {n}; }}\n" for n, s in enumerate(symbols, 1))
    flags = (f"-Wl,--version-script={script}", f"-Wl,-soname,{SONAME}")
    return _library(folder, "greet", source, *flags)


def build(root: Path) -> Built:
    """The three libraries under `root`."""
    old = _provider(root / "old", ("greet",))
    new = _provider(root / "new", ("greet", "wave"))
    user_source = "int greet(void); int wave(void);\nint hello(void) { return greet() + wave(); }\n"
    user = _library(root / "user", "user", user_source, f"-L{new.parent}", "-l:" + SONAME)
    return Built(old, new, user)
