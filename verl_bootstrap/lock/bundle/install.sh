#!/bin/sh
# Install verl-bootstrap from this bundle, then the env, with no network at all.
#   tar -xf BUNDLE.tar install.sh && sh install.sh BUNDLE.tar --profile NAME [--prefix DIR] ...
# The tool's wheels are checked against the bundle's manifest before pip sees them; the env's
# members are checked again by the tool itself (`--bundle`), which refuses a host it does not fit.
set -eu
[ $# -ge 1 ] || { echo "usage: sh install.sh BUNDLE.tar [install flags]" >&2; exit 2; }
bundle=$1
shift
python=${VERL_BOOTSTRAP_PYTHON:-@PYTHON@}
tool=${VERL_BOOTSTRAP_HOME:-$HOME/.verl-bootstrap}/tool-@VERSION@
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$python" - "$bundle" "$wheels" <<'PY'
import hashlib, json, pathlib, sys, tarfile

bundle, out = sys.argv[1], pathlib.Path(sys.argv[2])
with tarfile.open(bundle, "r|") as tar:
    first = tar.next()
    if first is None or first.name != "manifest.json":
        sys.exit(f"{bundle}: not a verl-bootstrap bundle")
    manifest = json.load(tar.extractfile(first))
    wanted = {m["path"]: m["sha256"] for m in manifest["members"] if m["role"] == "tool"}
    for member in tar:
        if member.name not in wanted:
            continue
        data = tar.extractfile(member).read()
        if hashlib.sha256(data).hexdigest() != wanted.pop(member.name):
            sys.exit(f"{bundle}: {member.name} does not match the manifest's sha256; refused")
        (out / pathlib.PurePosixPath(member.name).name).write_bytes(data)
        if not wanted:
            break
if wanted:
    sys.exit(f"{bundle}: missing {', '.join(sorted(wanted))}")
PY
[ -x "$tool/bin/verl-bootstrap" ] || {
  "$python" -m venv "$tool"
  "$tool/bin/python" -m pip install -q --no-index --find-links "$wheels" verl-bootstrap
}
exec "$tool/bin/verl-bootstrap" --bundle "$bundle" "$@"
