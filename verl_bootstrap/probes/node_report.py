"""Runs on each node of a cluster (in a Ray task, or under srun): the env's fingerprint and checks.

Standard library only, Python 3.8+, and self-contained: Ray ships it to each node as source, and
srun runs it with `python -c`. The prefix may name variables (`$LOCAL_SCRATCH/verl`); they are
expanded here, on the node. The fingerprint: the env's lockfile hash, a digest of its installed
distributions, verl's commit, Python, the NVIDIA driver, the GPUs, /dev/shm, and the CUDA
libraries the env's processes really load. The verification runs the verify probe (sent along as
source) in the env's interpreter, and reads /proc/self/maps in that same process afterwards.
Before any of it, the env is checked as the user's by the tool's own rule (probes/envowner.py,
sent along as source): on a node the prefix may be a node-local folder that was purged and made
again by another user, and then nothing of it runs (its python, its verify, `--train`) and the
node's answer says whose it is. This report itself runs outside the env: under srun in the
node's python3 (lab/cluster/srun.py picks it), through Ray in the worker's Python, which Ray starts.
With `train` (`cluster verify --train LEVEL`), the tool's own `verify --train LEVEL --json` runs
here too, in a private scratch folder of this node's (an env on a shared filesystem is trained by
every node at once), and its result goes into the answer.
Usage under srun: python -c "$(cat node_report.py)" '<json args>'   (prints one framed answer)

Under srun the answer is framed (`frame`), not one JSON line: srun cuts a task's lines at 1 KiB,
labels each piece, interleaves the tasks and mixes in stderr. So the JSON goes out in base64
(no newline, no label-like text, untouched by the masking of secrets in logs) as numbered parts
of a few hundred characters, after a header with its byte length and sha256; the reader checks
both and names what is missing or garbled instead of guessing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

SCHEMA = "verl-bootstrap.node/1"
FRAME = "@@VB-ANSWER@@"
_PART = 512  # base64 characters a line: with srun's label, far below its 1 KiB cut
_MAPS_MARK = "@@MAPS@@"
_VERIFY_MARK = "@@VERIFY@@"
_LOCK = ".verl-bootstrap/verl-bootstrap.lock.yaml"
_SMI_QUERY = "--query-gpu=name,compute_cap,memory.total"
# Runs the verify probe's source as __main__, then reports the watched libraries it loaded.
_WRAPPER = """
import json, sys
source, request = sys.argv[1], sys.argv[2]
sys.argv = ["verify_env.py", request]
try:
    exec(compile(source, "verify_env.py", "exec"), {"__name__": "__main__"})
except SystemExit:
    pass
watched = ("libcudnn", "libnccl", "libcublas", "libcudart")
paths = []
for line in open("/proc/self/maps", encoding="utf-8", errors="replace"):
    fields = line.split(maxsplit=5)
    path = fields[5].strip() if len(fields) == 6 else ""
    name = path.rsplit("/", 1)[-1]
    if path.startswith("/") and name.startswith(watched) and ".so" in name and path not in paths:
        paths.append(path)
sys.stdout.write("\\n@@MAPS@@" + json.dumps(paths) + "\\n")
"""


def _sha256(path: Path):
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _metadata(info: Path):
    name = version = None
    try:
        with (info / "METADATA").open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
    except OSError:
        return None
    return (re.sub(r"[-_.]+", "-", name).lower(), version) if name and version else None


def distributions(prefix: Path):
    """{name: [version, digest of its RECORD]} for every installed distribution."""
    found = {}
    for info in sorted(prefix.glob("lib/python3*/site-packages/*.dist-info")):
        meta = _metadata(info)
        if meta:
            record = _sha256(info / "RECORD")
            found[meta[0]] = [meta[1], record[:16] if record else None]
    return found


def verl_commit(prefix: Path):
    """The commit of the env's verl checkout (read from .git, no git needed)."""
    git = prefix / "src" / "verl" / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    mark = prefix / "src" / "verl" / ".verl-bootstrap-sdist"
    return "sdist " + mark.read_text().split()[-1][:16] if mark.is_file() else None


def driver():
    """The NVIDIA kernel driver's version, or None."""
    for path in ("/sys/module/nvidia/version", "/proc/driver/nvidia/version"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        found = re.search(r"Kernel Module\s+(\S+)", text)
        return found.group(1) if found else text.strip()
    return None


def gpus():
    """Each GPU as 'name, compute capability, memory' (no UUIDs: they differ by design)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", _SMI_QUERY, "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def shm_bytes():
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return stat.f_blocks * stat.f_frsize


def _marked(output: str, mark: str):
    for line in reversed(output.splitlines()):
        if line.startswith(mark):
            return json.loads(line[len(mark) :])
    return None


def run_checks(python: Path, verify_source: str, request, timeout: float):
    """The verify probe and the loaded libraries, from one process of the env's interpreter."""
    env = dict(os.environ, PYTHONNOUSERSITE="1", PYTHONWARNINGS="ignore")
    try:
        done = subprocess.run(
            [str(python), "-c", _WRAPPER, verify_source, json.dumps(request)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, None, f"the checks did not finish: {exc}"
    verify, maps = _marked(done.stdout, _VERIFY_MARK), _marked(done.stdout, _MAPS_MARK)
    error = None
    if verify is None:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        error = f"the checks exited {done.returncode}: {tail}"
    return verify, maps, error


def _train_error(done):
    """Why `verify --train` gave no training result: its own error line, else its exit."""
    lines = [ln for ln in (done.stderr or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith(("error:", "hint:"))] or lines[-3:]
    return f"verify --train exited {done.returncode}: " + " | ".join(said)


def _train_result(body, done):
    """The training part of `verify --json`'s answer; when the level did not run, why not."""
    if not isinstance(body, dict) or isinstance(body.get("error"), dict):
        return {"ok": False, "error": _train_error(done)}
    train = body.get("train")
    if not isinstance(train, dict):
        failed = [str(c.get("name")) for c in body.get("checks", []) if c.get("status") == "fail"]
        why = "the env failed verify's checks: " + (", ".join(failed) or f"exit {done.returncode}")
        return {"ok": False, "error": "the training step did not run: " + why}
    keys = ("level", "route", "ok", "seconds", "figures", "checks")
    return {k: train.get(k) for k in keys}


def run_train(train):
    """`verify --train LEVEL --json` on this node, its scratch folder removed afterwards."""
    scratch = tempfile.mkdtemp(prefix="verl-bootstrap-train-")
    argv = [os.path.expandvars(a) for a in train["command"]] + ["--train-dir", scratch]
    # a Ray task's RAY_ADDRESS is harmless here: the RL step's own variables start its own Ray
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=train["timeout"], check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"the training step did not finish: {exc}"
        return {"ok": False, "level": train.get("level"), "error": why}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        body = json.loads(done.stdout)
    except ValueError:
        body = None
    return dict(_train_result(body, done), level=train.get("level"))


def not_yours(prefix: Path, rule_source: str):
    """Why the env at `prefix` is not this user's to run, as the node's failure says it (None:
    it is): the first part the ownership rule (envowner.py's source) finds another user's or
    writable by others."""
    rule = {"__name__": "verl_bootstrap_envowner"}
    exec(compile(rule_source, "envowner.py", "exec"), rule)
    found = rule["not_yours"](prefix)
    if found is None:
        return None
    part, why = found
    return f"not yours: {part} {why} (nothing of the env was run on this node)"


def node_report(prefix, verify_source, rule_source, request, *, timeout=600.0, train=None):
    """Everything this node says about the env at `prefix` (expanded here), once it is found
    to be the user's (`not_yours`)."""
    expanded = Path(os.path.expandvars(prefix)).expanduser()
    report = {"schema": SCHEMA, "host": socket.gethostname(), "prefix": str(expanded)}
    if os.environ.get("SLURMD_NODENAME"):  # srun sets it: the name Slurm knows the node by
        report["node_name"] = os.environ["SLURMD_NODENAME"]
    refused = not_yours(expanded, rule_source)
    if refused:
        report["error"] = refused
        return report
    python = expanded / "bin" / "python"
    if not python.exists():
        report["error"] = f"no env at {expanded}"
        return report
    dists = distributions(expanded)
    blob = json.dumps(dists, sort_keys=True).encode()
    request = dict(request, gpu_present=driver() is not None)
    verify, maps, error = run_checks(python, verify_source, request, timeout)
    report.update(
        lock_sha256=_sha256(expanded / _LOCK),
        distributions=dists,
        dists_digest=hashlib.sha256(blob).hexdigest(),
        verl_commit=verl_commit(expanded),
        python=verify.get("python") if verify else None,
        driver=driver(),
        gpus=gpus(),
        shm_bytes=shm_bytes(),
        cuda_libraries=maps,
        verify=verify,
        error=error,
    )
    if train:
        report["train"] = run_train(train)
    return report


def frame(answer):
    """`answer` as framed lines: begin (bytes, sha256, parts), the numbered parts, end."""
    data = json.dumps(answer).encode()
    text = base64.b64encode(data).decode("ascii")
    parts = [text[i : i + _PART] for i in range(0, len(text), _PART)]
    head = f"{FRAME} begin {len(data)} {hashlib.sha256(data).hexdigest()} {len(parts)}"
    body = [f"{FRAME} {i} {part}" for i, part in enumerate(parts)]
    return "\n".join(["", head, *body, f"{FRAME} end", ""])


def main():
    args = json.loads(sys.argv[1])
    sys.stdout.write(frame(node_report(**args)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
