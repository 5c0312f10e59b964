#!/usr/bin/env bash
# First thing a maintainer runs on a new GPU machine: doctor and the GPU smoke test against an
# existing PyTorch env (no network needed). GPU_CHECK_PYTHON picks the interpreter (default python3).
set -uo pipefail
cd "$(dirname "$0")/.."
TOOL=${TOOL:-.venv/bin/verl-bootstrap}
[ -x "$TOOL" ] || TOOL=verl-bootstrap
PY=${GPU_CHECK_PYTHON:-$(command -v python3)}
echo "== verl-bootstrap doctor --env-python $PY"
"$TOOL" doctor --env-python "$PY"
doctor_rc=$?
echo
echo "== GPU smoke test in $PY (bf16 matmul + a tiny bf16 forward)"
# The probe always answers (exit 0) with a JSON verdict: the check is what that verdict says.
answer=$("$PY" verl_bootstrap/probes/verify_env.py \
  '{"imports": ["torch"], "versions": ["torch"], "gpu_smoke": true, "gpu_present": true, "bf16": true}' \
  | sed -n 's/^@@VERIFY@@//p')
printf '%s\n' "$answer" | "$PY" -m json.tool
printf '%s\n' "$answer" | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
bad = [i["module"] for i in r["imports"] if not i["ok"]]
gpu = r["gpu"]["status"]
print(f"smoke test: gpu {gpu}" + (f", failed imports {bad}" if bad else ""))
sys.exit(0 if gpu == "ok" and not bad else 1)'
smoke_rc=$?
echo
echo "doctor exit $doctor_rc, smoke test exit $smoke_rc"
[ "$doctor_rc" -ne 3 ] && [ "$smoke_rc" -eq 0 ]
