"""Each node of a cluster applies the tool's own ownership rule before anything of the env runs
there (probes/envowner.py, sent to the node with its report): a node-local prefix
(`$LOCAL_SCRATCH/verl`) purged and made again by another user is that node's failure, and its
python never runs.

The node's side runs here as srun runs it on a node, less srun: `sh -c` with the node script,
the prefix, the report's source and its arguments, exactly as `srun_argv` passes them, its framed
answer read back as srun's output is. The cases are real: the lab mate is a second real user
(tests/labmate.py), her folders and files hers, an ACL the kernel enforces, a real venv of the
victim's whose site-packages holds a `.pth` line that marks every start of its python. The
node's verdict is compared with the tool's own (run/state/ownership.py) on each.
"""

from __future__ import annotations

import ast
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from labmate import THEIRS, as_nobody, need_two_users, plant_env, set_acl, sticky_folder
from scaffold import run_tool, with_env

from verl_bootstrap.errors import EXIT_REFUSED
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lab.cluster.frames import read_answer
from verl_bootstrap.lab.cluster.nodes import NodeJob
from verl_bootstrap.lab.cluster.srun import SlurmOptions, srun_argv
from verl_bootstrap.paths import PROBES, activation_file, env_lockfile, state_dir, state_file
from verl_bootstrap.probes import envowner
from verl_bootstrap.run.state.ownership import not_yours

NOTHING_RAN = "(nothing of the env was run on this node)"
QUICK = {"imports": ["json"], "versions": [], "gpu_smoke": False}


@pytest.fixture(autouse=True)
def _two_real_users() -> None:
    need_two_users()


@pytest.fixture
def shared() -> Iterator[Path]:
    with sticky_folder() as path:
        yield path


def node(
    prefix: Path | str, *, path: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The node's part of `srun ... sh -c NODE_SCRIPT sh PREFIX SOURCE ARGS`, run here."""
    argv = srun_argv(NodeJob(prefix=str(prefix), request=QUICK), SlurmOptions(), nodes=None)
    env = dict(os.environ, PATH=path or os.environ["PATH"], SLURMD_NODENAME="n1")
    return subprocess.run(
        argv[argv.index("sh") :],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def answer_of(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    answer = read_answer(done.stdout.splitlines())
    assert isinstance(answer, dict), (answer, done.stdout[-2000:], done.stderr[-2000:])
    return answer


def victims_env(prefix: Path, marker: Path) -> Path:
    """A real venv of the victim's whose python, whenever it starts, adds a line to `marker`
    (a `.pth` line in its site-packages, which site runs at every start)."""
    subprocess.run([uv_binary(), "venv", "-q", "--python", "python3", str(prefix)], check=True)
    (prefix / ".verl-bootstrap").mkdir()
    (site,) = prefix.glob("lib/python3*/site-packages")
    (site / "mark.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    return prefix


def made_again_by_her(prefix: Path, marker: Path) -> None:
    """The victim's node-local prefix, purged, made again by her (her python also on PATH as
    python3, as an activated env puts it)."""
    plant_env(prefix, marker)
    assert as_nobody(f"cp {prefix}/bin/python {prefix}/bin/python3").returncode == 0


def open_to_all(prefix: Path, marker: Path) -> None:
    victims_env(prefix, marker).chmod(0o777)


def bin_open_to_her_by_acl(prefix: Path, marker: Path) -> None:
    victims_env(prefix, marker)
    set_acl(prefix / "bin", "u:nobody:rwx")
    assert as_nobody(f"touch {prefix}/bin/hers").returncode == 0  # the kernel lets her write


def python_links_to_hers(prefix: Path, marker: Path) -> None:
    """The victim's env, its python a link to a program in a folder of hers."""
    victims_env(prefix, marker)
    hers = prefix.parent / "hers"
    script = f"mkdir {hers}; printf '#!/bin/sh\\necho ran >> {marker}\\n' > {hers}/python; "
    assert as_nobody(script + f"chmod 755 {hers}/python").returncode == 0
    (prefix / "bin" / "python").unlink()
    (prefix / "bin" / "python").symlink_to(hers / "python")


CASES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "made again by her": (made_again_by_her, f"{{prefix}} {THEIRS}"),
    "mode 0777": (open_to_all, "{prefix} is writable by others (mode 777)"),
    "an ACL lets her write bin/": (
        bin_open_to_her_by_acl,
        "{prefix}/bin is writable by others (its ACL lets user nobody (65534) write)",
    ),
    "its python links to hers": (
        python_links_to_hers,
        f"{{prefix}}/bin/python links to {{shared}}/hers, which {THEIRS}",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_node_refuses_what_the_tool_refuses_and_runs_nothing_of_the_env(
    case: str, shared: Path, tmp_path: Path
) -> None:
    """On main the node's script ran the env's python (her program) to make its report."""
    make, expected = CASES[case]
    prefix, marker = shared / "rl", tmp_path / "ran-as-victim"
    make(prefix, marker)
    done = node(prefix, path=f"{prefix}/bin:{os.environ['PATH']}")
    answer = answer_of(done)
    found = not_yours(prefix)  # the tool's verdict on this host
    assert found is not None and found.reason == expected.format(prefix=prefix, shared=shared)
    assert answer["error"] == f"not yours: {found.reason} {NOTHING_RAN}"
    assert "verify" not in answer and "distributions" not in answer
    assert not marker.exists(), marker.read_text()


def test_a_nodes_own_env_is_run_as_before(shared: Path, tmp_path: Path) -> None:
    """The same venv, private: the tool and the node both pass it, and the node runs it."""
    prefix, marker = shared / "rl", tmp_path / "ran"
    victims_env(prefix, marker)
    assert not_yours(prefix) is None
    answer = answer_of(node(prefix))
    assert answer["error"] is None, answer["error"]
    verify = answer["verify"]
    assert isinstance(verify, dict) and [i["ok"] for i in verify["imports"]] == [True], verify
    assert marker.exists()


def test_the_report_never_runs_in_an_interpreter_inside_the_env(tmp_path: Path) -> None:
    """A node with no python3 but the env's (here the env is /usr, /usr/bin/python3 its own):
    the node fails saying so, and no report runs (on main the env's own python ran it)."""
    done = node("/usr", path="/usr/bin:/bin", cwd=tmp_path)
    assert done.returncode == 1
    assert "no Python 3.8+ on this node outside the env to check it with" in done.stdout
    assert read_answer(done.stdout.splitlines()) == "it gave no answer"


@pytest.mark.parametrize("profile", [[], ["--profile", "cpu"]])
def test_cluster_verify_refuses_an_env_here_that_is_not_yours_before_using_it(
    shared: Path, tmp_path: Path, profile: list[str]
) -> None:
    """This node reads the env's lockfile (no --profile) and runs its python as Ray's driver
    (no --ray-python): refused (exit 3) first. On main her python ran as the driver."""
    prefix, marker = shared / "rl", tmp_path / "ran-as-victim"
    plant_env(prefix, marker)
    argv = ["cluster", "verify", "--ray-address", "127.0.0.1:1", "--prefix", str(prefix)]
    done = run_tool(*argv, *profile, env=with_env(HOME=str(tmp_path)), timeout=120)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert f"cluster: the env at {prefix} is not yours: {prefix} {THEIRS}" in done.stderr
    assert not marker.exists()


def test_the_rule_checks_the_files_the_tool_keeps_under_the_names_it_keeps_them() -> None:
    """The rule names the state files itself (a node has no verl_bootstrap): they are paths'."""
    prefix = Path("/p")
    parts = list(envowner.env_parts(prefix))
    kept = [state_dir(prefix), state_file(prefix), env_lockfile(prefix)]
    kept += [activation_file(prefix, shell) for shell in ("bash", "fish")]
    assert [path for path in kept if path not in parts] == []
    assert parts[0] == prefix and prefix / "bin" / "python" in parts


@pytest.mark.parametrize("probe", ["envowner.py", "node_report.py"])
def test_what_runs_on_a_node_is_python_38(probe: str) -> None:
    """A node's python3 may be as old as 3.8 (its syntax here; its library calls are 3.8's)."""
    ast.parse((PROBES / probe).read_text(encoding="utf-8"), feature_version=(3, 8))
