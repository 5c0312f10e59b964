#!/usr/bin/env bash
# zsh and fish for the activation and completion tests (bash and sh are always there).
# As root with apt-get: installed from Debian's packages. Otherwise, with no root: Debian's
# packages downloaded by apt-get (which needs no root for that) and unpacked into
# $VENV/test-shells, each shell behind a wrapper that points it at its own files.
# tests/shells.py looks on PATH first, then in $VENV/test-shells/bin.
set -euo pipefail
VENV=${VENV:-.venv}
HERE=$(cd "$(dirname "$0")/.." && pwd)
DEST="$HERE/$VENV/test-shells"

if command -v zsh >/dev/null && command -v fish >/dev/null; then
    exit 0
fi
if [ -x "$DEST/bin/zsh" ] && [ -x "$DEST/bin/fish" ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "test-shells: no apt-get here: install zsh and fish with your package manager" >&2
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    echo "test-shells: installing zsh and fish (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zsh fish >/dev/null
    exit 0
fi

echo "test-shells: no root: unpacking Debian's zsh and fish into $DEST"
rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp/debs" "$DEST.tmp/root" "$DEST.tmp/bin" "$DEST.tmp/zdotdir"
(cd "$DEST.tmp/debs" && apt-get download -qq zsh zsh-common fish fish-common libpcre2-32-0)
for deb in "$DEST.tmp"/debs/*.deb; do
    dpkg-deb -x "$deb" "$DEST.tmp/root"
done
rm -rf "$DEST.tmp/debs"
LIB=$(cd "$DEST.tmp/root" && dirname "$(find usr/lib -name 'libpcre2-32.so.0' -print -quit)")
MODULES=$(cd "$DEST.tmp/root" && find usr/lib -type d -path '*/zsh/*' -prune -print -quit)
# zsh takes its module path and function path from .zshenv: the environment cannot set them
{
    echo "module_path=('$DEST/root/$MODULES')"
    echo "fpath=("
    (cd "$DEST.tmp/root" && find usr/share/zsh/functions -type d | sort) |
        while read -r dir; do echo "  '$DEST/root/$dir'"; done
    echo ")"
} >"$DEST.tmp/zdotdir/.zshenv"
cat >"$DEST.tmp/bin/zsh" <<EOF
#!/bin/sh
ZDOTDIR='$DEST/zdotdir' exec '$DEST/root/bin/zsh' "\$@"
EOF
# fish needs Debian's libpcre2-32: the loader is told where, and LD_LIBRARY_PATH stays the test's
for LOADER in /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.*; do [ -e "$LOADER" ] && break; done
cat >"$DEST.tmp/bin/fish" <<EOF
#!/bin/sh
exec '$LOADER' --library-path '$DEST/root/$LIB' '$DEST/root/usr/bin/fish' "\$@"
EOF
chmod 755 "$DEST.tmp/bin/zsh" "$DEST.tmp/bin/fish"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
if ! "$DEST/bin/zsh" -c 'autoload -U compinit && compinit -u && zmodload zsh/zle' ||
    ! "$DEST/bin/fish" -c 'complete -C "ls /" >/dev/null'; then
    rm -rf "$DEST"
    echo "test-shells: the unpacked zsh or fish does not run here: install them as root" >&2
    exit 1
fi
echo "test-shells: zsh and fish in $DEST/bin"
