"""What `srun --label` prints, read back: recorded from a real srun (tests/data/slurm, see its
README), then cut at 1 KiB, interleaved, garbled and mixed with noise; an answer that cannot be
read is that node's error, never an exception. A node is a hostile peer too: what it prints
never reads as srun's own word, nor as another node's (a fake `srun` on PATH replays what real
srun would print of such a node: the only fake here, standing for that node)."""

from __future__ import annotations

import itertools
import json
import resource
from pathlib import Path

import pytest
from scaffold import run_tool, with_env

from verl_bootstrap.lab.cluster.frames import read_answer, split_output
from verl_bootstrap.lab.cluster.nodes import NodeJob
from verl_bootstrap.lab.cluster.srun import _log_readable, read_answers
from verl_bootstrap.probes.node_report import frame

DATA = Path(__file__).parent / "data" / "slurm"
REPORT = NodeJob(prefix="/p")


def recorded(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def task_lines(output: str) -> dict[int, list[str]]:
    """Each task's labelled lines, label kept."""
    tasks: dict[int, list[str]] = {}
    for line in output.splitlines():
        head = line.split(":", 1)[0].strip()
        if head.isdigit():
            tasks.setdefault(int(head), []).append(line)
    return tasks


def errors(output: str) -> dict[str, str]:
    answers = read_answers(output, REPORT, nodes=3) or []
    return {a["node_name"]: a.get("error") or "" for a in answers}


def test_a_real_three_node_answer_is_read_whole() -> None:
    answers = read_answers(recorded("verify-3-nodes.txt"), REPORT, nodes=3)
    assert answers is not None
    assert [(a["task"], a["node_name"], a.get("error")) for a in answers] == [
        (0, "n1", None),
        (1, "n2", None),
        (2, "n3", None),
    ]
    assert answers[0]["schema"] == "verl-bootstrap.node/1"
    assert answers[0]["distributions"] == answers[2]["distributions"]
    assert answers[1]["distributions"] == {}  # n2's folder holds no env, only a noisy python
    assert answers[0]["dists_digest"] != answers[1]["dists_digest"]


def test_the_old_one_line_answer_is_cut_by_srun() -> None:
    """Why a frame: real srun cuts a 2500-byte line into labelled pieces of 1 KiB."""
    [task] = split_output(recorded("a-line-of-2500-bytes.txt")).values()
    assert [len(line) for line in task.lines] == [1024, 1024, 452, 5]
    assert task.lines[-1] == "noise"
    assert read_answer(task.lines) == "it gave no answer"


def test_an_answer_cut_after_one_kib_is_that_nodes_error() -> None:
    tasks = task_lines(recorded("verify-3-nodes.txt"))
    kept, size = [], 0
    for line in tasks[0]:
        size += len(line) + 1
        if size > 1024:
            break
        kept.append(line)
    output = "\n".join(kept + tasks[1] + tasks[2])
    assert errors(output) == {
        "n1": "task 0: its answer was cut short (no end line)",
        "n2": "",
        "n3": "",
    }


def test_tasks_interleaved_line_by_line_read_the_same() -> None:
    output = recorded("verify-3-nodes.txt")
    tasks = task_lines(output)
    mixed = itertools.chain.from_iterable(itertools.zip_longest(*tasks.values(), fillvalue=""))
    noise = [f"{t}: warning: stderr noise {t}" for t in tasks]
    shuffled = "\n".join([*noise, *mixed, *noise])
    assert read_answers(shuffled, REPORT, nodes=3) == read_answers(output, REPORT, nodes=3)


def _edit(task: int, change: object) -> str:
    tasks = task_lines(recorded("verify-3-nodes.txt"))
    tasks[task] = change(tasks[task])  # type: ignore[operator]
    return "\n".join(itertools.chain.from_iterable(tasks.values()))


def _flip(lines: list[str]) -> list[str]:
    """One base64 character of the second part changed (still base64)."""
    i = next(n for n, line in enumerate(lines) if " @@VB-ANSWER@@ 1 " in f" {line[3:]}")
    line = lines[i]
    lines[i] = line[:-5] + ("A" if line[-5] != "A" else "B") + line[-4:]
    return lines


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (_flip, "its answer is garbled (the sha256 does not match)"),
        (lambda ls: [ln for ln in ls if "@@VB-ANSWER@@ 3 " not in ln], "incomplete (6 of 7 parts)"),
        (lambda ls: [ln[:60] if "@@VB-ANSWER@@ 2 " in ln else ln for ln in ls], "garbled"),
        (lambda ls: [ln.replace("begin 2430", "begin 24x0") for ln in ls], "header is garbled"),
        (lambda ls: [ln.replace("@@VB-ANSWER@@ 4 ", "@@VB-ANSWER@@ 4 #") for ln in ls], "part"),
        (lambda ls: [ln for ln in ls if "@@VB-ANSWER@@ node" in ln or "@@" not in ln], "no answer"),
    ],
)
def test_a_garbled_answer_is_that_nodes_error(change: object, error: str) -> None:
    found = errors(_edit(2, change))
    assert error in found["n3"] and found["n3"].startswith("task 2: ")
    assert found["n1"] == "" and found["n2"] == ""


def test_a_task_killed_mid_answer_is_named_with_what_srun_said() -> None:
    """Recorded: n2's python killed by a signal part way through its answer; srun then stops
    the whole step, n1 among it, while n3 had answered."""
    answers = read_answers(recorded("verify-a-task-killed.txt"), REPORT, nodes=3)
    assert answers is not None
    assert [(a["node_name"], a["error"]) for a in answers] == [
        (
            "n1",
            "task 0: its answer was cut short (no end line); srun: Force Terminated StepId=13.0",
        ),
        ("n2", "task 1: its answer was cut short (no end line); srun: Killed"),
        ("n3", None),
    ]


def test_a_task_that_printed_nothing_and_srun_that_ran_none() -> None:
    output = "\n".join(task_lines(recorded("verify-3-nodes.txt"))[0])
    answers = read_answers(
        output + "\nsrun: error: n3: tasks 1-2: Exited with exit code 1\n", REPORT, nodes=3
    )
    assert answers is not None
    assert [(a["node_name"], a.get("error")) for a in answers[1:]] == [
        ("n3", "task 1: it gave no answer; srun: Exited with exit code 1"),
        ("n3", "task 2: it gave no answer; srun: Exited with exit code 1"),
    ]
    nothing = "srun: error: Unable to allocate resources: Invalid partition name specified\n"
    assert read_answers(nothing, REPORT, nodes=3) is None


def test_a_commands_exit_and_tail_per_task() -> None:
    output = "0: @@VB-ANSWER@@ node n1\n0: installed\n0: \n0: @@VB-ANSWER@@ exit 0\n"
    output += "1: @@VB-ANSWER@@ node n2\n1: half way\nsrun: error: n2: task 1: Killed\n"
    answers = read_answers(output, NodeJob(prefix="/p", command=("tool",)), nodes=2)
    assert answers == [
        {"task": 0, "node_name": "n1", "returncode": 0, "tail": ["installed"]},
        {"task": 1, "node_name": "n2", "returncode": -1, "tail": ["half way", "srun: Killed"]},
    ]


def test_the_log_holds_each_answer_decoded_and_masked_never_its_base64(tmp_path: Path) -> None:
    """A framed part is base64, which no redaction reads: the log keeps srun's own lines and the
    decoded answer instead, masked like every logged line."""
    secret = {"index": "https://lab:s3cr3t-t0ken@mirror.lab.example/simple", "ok": True}
    output = "\n".join(f"0: {line}" for line in frame(secret).splitlines()) + "\nnoise\n"
    answers = read_answers(output, REPORT, nodes=1)
    log = tmp_path / "run.log"
    _log_readable(log, ["srun", "--label", "sh", "-c", "x"], output, answers)
    text = log.read_text(encoding="utf-8")
    assert "s3cr3t-t0ken" not in text
    assert "mirror.lab.example/simple" in text  # the decoded answer, masked
    assert not [ln for ln in text.splitlines() if ln.startswith("0: @@VB-ANSWER@@ 0 ")]
    assert text.startswith("$ srun --label sh -c ...\n")
    assert "noise" in text


def forged(*lines: str, cut: int | None = None) -> str:
    """The recorded three-node answer with `lines` in n1's own output (after its first line),
    and task `cut`'s answer cut short (its end line lost)."""
    kept = recorded("verify-3-nodes.txt").split("\n")
    if cut is not None:
        kept.remove(f"{cut}: @@VB-ANSWER@@ end")
    first = kept.index("0: @@VB-ANSWER@@ node n1") + 1
    return "\n".join([*kept[:first], *lines, *kept[first:]])


# What n1 prints: a carriage return, then what srun's own note on n2 would say. srun labels the
# line as n1's ("0: "), and a terminal would show only the note.
OOM = "0: fetching 50%\rsrun: error: n2: task 1: Out of memory, rerun with --mem=0"


def test_a_carriage_return_in_a_nodes_line_forges_no_srun_note() -> None:
    answers = read_answers(forged(OOM, "0: \x0csrun: Force Terminated", cut=1), REPORT, nodes=3)
    assert answers is not None
    assert answers[1]["error"] == (
        "task 1: its answer was cut short (no end line); last lines: warning: a noisy sitecustomize"
    )
    assert answers[0]["error"] is None and answers[2]["error"] is None


def test_a_task_range_past_the_jobs_tasks_names_only_the_jobs_tasks() -> None:
    output = forged(cut=1) + "\nsrun: error: n2: tasks 1-999999: Killed\n"
    answers = read_answers(output, REPORT, nodes=3)
    assert answers is not None
    assert [a["task"] for a in answers] == [0, 1, 2]
    assert answers[1]["error"].startswith(
        "task 1: its answer was cut short (no end line); srun: Killed"
    )


def fake_srun(folder: Path, output: str) -> dict[str, str]:
    """A `srun` first on PATH that prints `output` as srun would, inside an allocation of three
    nodes: the environment of a run that calls it."""
    (folder / "bin").mkdir()
    (folder / "srun.out").write_text(output)
    srun = folder / "bin" / "srun"
    srun.write_text(f"#!/bin/sh\ncat '{folder / 'srun.out'}'\n")
    srun.chmod(0o755)
    path = f"{folder / 'bin'}:{with_env()['PATH']}"
    return with_env(PATH=path, SLURM_JOB_ID="7", SLURM_JOB_NUM_NODES="3")


def four_gib() -> None:
    """The child's address space capped (4 GiB): a run away list ends in MemoryError, not in
    the machine's swap."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_cluster_verify_reads_a_hostile_nodes_output_as_that_nodes_own(tmp_path: Path) -> None:
    """Through the real CLI and a fake srun on PATH: n1's line forges a note on n2, whose
    answer was cut, and one on `tasks 0-400000000` (built whole, that list took 16.7 GB in five
    minutes); the run names n2's own failure, n1 and n3 pass, in seconds and in 4 GiB."""
    killed = "0: x\rsrun: error: n1: tasks 0-400000000: Killed"
    env = fake_srun(tmp_path, forged(OOM, killed, cut=1))
    argv = ["cluster", "verify", "--slurm", "--prefix", "/p", "--fingerprint-only", "--json"]
    done = run_tool(*argv, env=env, timeout=120, preexec=four_gib)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["failures"] == [
        {
            "node": "n2",
            "failure": "task 1: its answer was cut short (no end line); "
            "last lines: warning: a noisy sitecustomize",
        }
    ]
    assert [n["node_name"] for n in report["nodes"]] == ["n1", "n2", "n3"]


def test_a_nodes_name_with_bidirectional_and_escape_characters_is_shown_escaped(
    tmp_path: Path,
) -> None:
    """A node names itself (its first line): U+202E would show the rest of the table's line
    right to left, ESC [2J would clear the screen. The table shows both escaped."""
    output = recorded("verify-3-nodes.txt").replace(
        "0: @@VB-ANSWER@@ node n1", "0: @@VB-ANSWER@@ node n1\u202eevil\x1b[2J"
    )
    argv = ["cluster", "verify", "--slurm", "--prefix", "/p", "--fingerprint-only"]
    done = run_tool(*argv, env=fake_srun(tmp_path, output), timeout=120)
    assert done.returncode == 1, done.stderr  # n2's recorded env holds nothing: they differ
    assert "n1\\u202eevil\\x1b[2J" in done.stdout
    assert "\u202e" not in done.stdout + done.stderr and "\x1b" not in done.stdout
