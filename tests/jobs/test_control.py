"""Background jobs as a user runs them (docs/background.md): `cos bg`, `cos agents`, `cos attach`,
`cos reply`, `cos approve`, `cos stop`, `cos respawn`, `cos rm`, each a `cos` subprocess, with
command jobs and the example Python agent (no model). The real Claude Code and Codex jobs are in
tests/e2e/test_agents_real.py."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coding_os.jobs import jobs
from tests.helpers import (COS, ECHO_AGENT, Terminal, cos, git, raw_bytes, runners_of,
                           stop_runners_of, until)
from tests.helpers import bg_job as bg, until

ECHO = f"python:{ECHO_AGENT}"
WAIT = 60.0


def agents(project: Path, *args: str) -> dict[str, dict[str, Any]]:
    done = cos("agents", "--json", *args, cwd=project)
    assert done.returncode == 0, done.stderr
    return {row["id"]: row for row in json.loads(done.stdout)}


def state_of(project: Path, job: str, *states: str) -> dict[str, Any]:
    row: dict[str, Any] = until(lambda: (r := agents(project).get(job)) and r["state"] in states
                                and r, f"job {job} to be {'/'.join(states)}")
    return row


def stored_events(project: Path, job: str) -> list[dict[str, Any]]:
    done = cos("logs", job, "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = json.loads(done.stdout)["events"]
    return events


def checkout_files(project: Path) -> dict[str, bytes]:
    """The checkout's files (not git's own, nor cos's state dir) and their bytes."""
    return {name: data for name, data in raw_bytes(project).items()
            if not name.startswith((".git/", ".coding-os/"))}


@pytest.mark.slow
def test_bg_returns_at_once_and_the_job_runs_in_its_own_worktree(project: Path) -> None:
    before = checkout_files(project)
    status_before = git(project, "status", "--porcelain")
    head = git(project, "rev-parse", "HEAD")
    started = time.monotonic()
    done = cos("bg", "--exec", "sleep 2; echo made > made.txt; echo finished", "--name", "maker",
               cwd=project)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith("backgrounded · ") and line.endswith(" · maker"), line
    job = line.split(" · ")[1]
    row = agents(project)[job]
    assert row["state"] in ("starting", "working") and took < 2 + 5  # returned before the end
    row = until(lambda: (r := agents(project)[job])["state"] == "done" and r["pid"] is None
                and r, "the command's runner to end")
    worktree = project / ".coding-os" / "worktrees" / job
    assert row["worktree"] == str(worktree) and row["cwd"] == str(worktree)
    assert row["branch"] == f"cos/{job}" and row["exit_code"] == 0 and row["pid"] is None
    assert row["kind"] == "background" and row["agent"] == "exec"
    assert isinstance(row["startedAt"], int) and row["cos_session"].startswith("ses-exec-")
    assert (worktree / "made.txt").read_text() == "made\n"
    assert git(worktree, "rev-parse", "--abbrev-ref", "HEAD") == f"cos/{job}"
    # The main checkout is as it was: its files, its status, its HEAD.
    assert checkout_files(project) == before
    assert git(project, "status", "--porcelain") == status_before
    assert git(project, "rev-parse", "HEAD") == head
    # The job's session is a session like any other.
    texts = [e["msg"].get("text") for e in stored_events(project, job)]
    assert "finished" in texts
    listed = cos("sessions", "--json", "--scope", "repo", cwd=project)
    assert row["cos_session"] in listed.stdout


@pytest.mark.slow
def test_two_attached_clients_see_the_same_events_as_the_stored_log(project: Path) -> None:
    row = bg(project, "--exec", "for i in $(seq 1 30); do echo line $i; sleep 0.05; done")
    job = row["id"]
    until(lambda: stored_events(project, job), "the first event")
    attached = [subprocess.Popen([COS, "attach", job, "--json"], cwd=project,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    outputs = [proc.communicate(timeout=WAIT)[0] for proc in attached]
    assert [proc.returncode for proc in attached] == [0, 0]
    stored = stored_events(project, job)
    seqs = [event["seq"] for event in stored]
    assert seqs == list(range(1, len(seqs) + 1))
    for output in outputs:
        seen = [json.loads(line) for line in output.splitlines()]
        assert seen == stored
    # From a given seq: only what comes after it.
    since = cos("attach", job, "--json", "--since", "5", cwd=project)
    assert [json.loads(line)["seq"] for line in since.stdout.splitlines()] == seqs[5:]
    beyond = cos("attach", job, "--json", "--since", str(len(seqs) + 10), cwd=project)
    assert beyond.returncode == 2 and "beyond the end" in beyond.stderr


@pytest.mark.slow
def test_an_approval_blocks_the_job_until_cos_approve_then_a_reply_starts_the_next_task(
        project: Path) -> None:
    job = bg(project, "--agent", ECHO, "write notes.txt: first line")["id"]
    row = state_of(project, job, "blocked")
    assert row["status"] == "waiting" and row["waitingFor"] == "permission prompt"
    approved = cos("approve", job, "--json", cwd=project)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["decision"] == "allow"
    row = state_of(project, job, "done")
    assert row["status"] == "idle" and row["pid"] is not None  # it waits for the next input
    worktree = Path(row["worktree"])
    assert (worktree / "notes.txt").read_text() == "first line\n"
    assert not (project / "notes.txt").exists()
    none_waiting = cos("approve", job, cwd=project)
    assert none_waiting.returncode == 7 and "waits for no approval" in none_waiting.stderr
    replied = cos("reply", job, "hello again", "--json", cwd=project)
    assert replied.returncode == 0, replied.stderr
    assert json.loads(replied.stdout)["task"] == 2
    until(lambda: any(e["msg"].get("text") == "echo: hello again"
                      for e in stored_events(project, job)), "the reply's answer")
    # Denied: the tool does not run.
    cos("reply", job, "write denied.txt: no", cwd=project)
    state_of(project, job, "blocked")
    assert cos("approve", job, "--deny", cwd=project).returncode == 0
    state_of(project, job, "done")
    assert not (worktree / "denied.txt").exists()


@pytest.mark.slow
def test_stop_ends_the_runner_and_the_supervisor_never_restarts_the_job(project: Path) -> None:
    job = bg(project, "--agent", ECHO, "--name", "sleepy", "sleep 30")["id"]
    state_of(project, job, "working")
    stopped = cos("stop", "sleepy", cwd=project)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"stopped · {job} · sleepy"
    # cos stop returns once the runner has let go of the job; its process ends just after.
    until(lambda: not runners_of(job), "the stopped runner to exit")
    kinds = [(e["msg"]["type"], e["msg"].get("reason")) for e in stored_events(project, job)]
    assert ("turn_aborted", "shutdown") in kinds
    time.sleep(2.5)  # more than one sweep of the supervisor
    row = agents(project)[job]
    assert row["state"] == "stopped" and row["pid"] is None and not runners_of(job)
    refused = cos("reply", job, "anyone?", cwd=project)
    assert refused.returncode == 7 and "cos respawn" in refused.stderr


@pytest.mark.slow
def test_a_job_stopped_while_its_runner_takes_it_stays_stopped_and_leaves_no_process(
        project: Path) -> None:
    # A tree large enough that the runner, holding the job, writes the worktree's files for a
    # while before it says its pid (the first job of a project has no spare worktree).
    for n in range(1500):
        folder = project / "tree" / f"d{n % 30}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"{n}\n" * 400, encoding="utf-8")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a larger tree")
    job = bg(project, "--exec", "sleep 631.7")["id"]  # a command no other test runs
    folder = Path(os.environ["HOME"]) / ".coding-os" / "jobs" / job
    until(lambda: jobs.runner_alive(jobs.load(job)), "the runner to take the job", timeout=WAIT)
    stopped = cos("stop", job, cwd=project)
    assert stopped.returncode == 0, stopped.stderr
    time.sleep(2.5)  # more than one sweep of the supervisor
    assert not runners_of(job)
    row = agents(project)[job]
    assert row["state"] == "stopped" and row["pid"] is None
    assert json.loads((folder / "state.json").read_text())["state"] == "stopped"
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit()
                and b"sleep 631.7" in _cmdline(pid)]


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ")
    except OSError:
        return b""


@pytest.mark.slow
def test_a_killed_runner_is_marked_failed_and_respawn_resumes_the_same_job_once(
        project: Path) -> None:
    job = bg(project, "--agent", ECHO, "first")["id"]
    row = state_of(project, job, "done")
    pid, session = row["pid"], row["cos_session"]
    os.kill(pid, signal.SIGKILL)
    row = state_of(project, job, "failed")
    stored = stored_events(project, job)
    assert row["last_seq"] == stored[-1]["seq"] and row["pid"] is None
    respawned = cos("respawn", job, "--json", cwd=project)
    assert respawned.returncode == 0, respawned.stderr
    row = state_of(project, job, "done")
    assert row["cos_session"] == session and row["pid"] not in (None, pid)
    assert runners_of(job) == [row["pid"]]
    again = cos("respawn", job, cwd=project)  # one runner per job, never two
    assert again.returncode == 7 and "running" in again.stderr
    assert runners_of(job) == [row["pid"]]
    cos("reply", job, "second", cwd=project)
    until(lambda: any(e["msg"].get("text") == "echo: second"
                      for e in stored_events(project, job)), "the answer after respawn")
    seqs = [e["seq"] for e in stored_events(project, job)]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.slow
def test_a_second_runner_of_a_job_exits_and_leaves_the_first_serving(project: Path) -> None:
    job = bg(project, "--agent", ECHO, "first")["id"]
    row = state_of(project, job, "done")
    import sys

    second = subprocess.run([sys.executable, "-m", "coding_os.jobs.runner", job],
                            capture_output=True, text=True, timeout=WAIT)
    assert second.returncode == 3 and "has a runner already" in second.stderr
    assert runners_of(job) == [row["pid"]]
    assert agents(project)[job]["pid"] == row["pid"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_the_daemon_killed_at_random_moments_loses_no_job_and_no_event(
        project: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = 40
    ids = [bg(project, "--exec", f"for i in $(seq 1 {lines}); do echo $i; sleep 0.05; done",
              "--name", f"counter-{n}")["id"] for n in range(3)]
    daemon_info = Path(os.environ["HOME"]) / ".coding-os" / "daemon" / "daemon.json"
    for _ in range(10):
        time.sleep(rng.uniform(0, 0.3))
        try:
            os.kill(json.loads(daemon_info.read_text())["pid"], signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
        rows = agents(project)  # starts it again, and it adopts the runners
        assert set(ids) <= set(rows)
        for job in ids:
            assert len(runners_of(job)) <= 1
            assert rows[job]["state"] != "failed", rows[job]
    for job in ids:
        row = state_of(project, job, "done", "failed")
        assert row["state"] == "done" and row["exit_code"] == 0, row
        events = stored_events(project, job)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert [e["msg"]["text"] for e in events if e["msg"]["type"] == "agent_message"] == [
            str(i) for i in range(1, lines + 1)]


@pytest.mark.slow
def test_a_deleted_or_damaged_roster_is_rebuilt_with_the_same_rows(project: Path) -> None:
    ids = [bg(project, "--exec", f"echo {n}")["id"] for n in range(3)]
    for job in ids:
        state_of(project, job, "done")
    rows = agents(project)
    roster = Path(os.environ["HOME"]) / ".coding-os" / "daemon" / "roster.json"
    assert roster.exists()
    roster.unlink()
    assert agents(project) == rows
    roster.write_bytes(b'{"version": 1, "jobs": {"torn')
    assert agents(project) == rows
    assert json.loads(roster.read_text())["version"] == 1


@pytest.mark.slow
def test_rm_refuses_a_worktree_with_work_unless_forced_and_keeps_the_session(
        project: Path) -> None:
    job = bg(project, "--exec", "echo dirty > dirty.txt")["id"]
    row = state_of(project, job, "done")
    events = Path(jobs.load(job).state["events"])
    refused = cos("rm", job, cwd=project)
    assert refused.returncode == 1 and "dirty.txt" in refused.stderr
    assert Path(row["worktree"]).is_dir()
    committed = bg(project, "--exec", "echo c > c.txt && git add c.txt && "
                                      "git -c user.name=t -c user.email=t@t commit -qm c")["id"]
    state_of(project, committed, "done")
    unpushed = cos("rm", committed, cwd=project)
    assert unpushed.returncode == 1 and "commit" in unpushed.stderr
    forced = cos("rm", job, "--force", "--json", cwd=project)
    assert forced.returncode == 0, forced.stderr
    assert not Path(row["worktree"]).exists()
    assert f"cos/{job}" not in git(project, "branch", "--list")
    assert events.exists() and job not in agents(project)
    assert cos("export", row["cos_session"], cwd=project).returncode == 0


@pytest.mark.slow
def test_ids_are_ids_unique_prefixes_or_names_and_an_ambiguous_one_lists_the_candidates(
        project: Path) -> None:
    first = bg(project, "--exec", "echo a", "--name", "twin")["id"]
    second = bg(project, "--exec", "echo b", "--name", "twin")["id"]
    for job in (first, second):
        state_of(project, job, "done")
    ambiguous = cos("logs", "twin", cwd=project)
    assert ambiguous.returncode == 5
    assert first in ambiguous.stderr and second in ambiguous.stderr
    assert len(ambiguous.stderr.strip().splitlines()) == 1
    prefix = next(first[:n] for n in range(1, 9) if not second.startswith(first[:n]))
    assert cos("logs", prefix, "--json", cwd=project).returncode == 0
    missing = cos("logs", "nosuchjob", cwd=project)
    assert missing.returncode == 1 and "no job" in missing.stderr


def test_bad_input_is_a_one_line_error_and_makes_no_job(project: Path, tmp_path: Path) -> None:
    jobs_root = Path(os.environ["HOME"]) / ".coding-os" / "jobs"
    cases = [
        (["bg", "--agent", "nosuch", "hi"], 2, "no agent"),
        (["bg", "--exec", "true", "--agent", "codex"], 2, "--exec"),
        (["bg"], 2, "PROMPT"),
        (["bg", "--param", "a=b", "hi"], 2, "--recipe"),
        (["bg", "--name", "a\nb", "hi"], 2, "name"),
    ]
    for args, code, words in cases:
        done = cos(*args, cwd=project)
        assert done.returncode == code and words in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    no_claude = cos("bg", "hi", cwd=project, env={"PATH": "/usr/bin:/bin"})
    assert no_claude.returncode == 2 and "not found on PATH" in no_claude.stderr
    huge = cos("bg", "--agent", ECHO, "-", cwd=project, input="x" * (10 << 20))
    assert huge.returncode == 2 and "at most 1 MB" in huge.stderr
    outside = tmp_path / "nowhere"
    outside.mkdir()
    nowhere = cos("bg", "--exec", "true", cwd=outside)
    assert nowhere.returncode == 2 and "no project" in nowhere.stderr
    assert not jobs_root.exists() or not any(jobs_root.iterdir())


def test_a_planted_job_folder_is_passed_over(project: Path, tmp_path: Path) -> None:
    real = bg(project, "--exec", "echo real")["id"]
    state_of(project, real, "done")
    root = Path(os.environ["HOME"]) / ".coding-os" / "jobs"
    # A state file naming another id, a symlink to a folder elsewhere, a folder of another user.
    (root / "0badc0de").mkdir()
    (root / "0badc0de" / "state.json").write_text(json.dumps({"id": "feedface", "pid": 1}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "state.json").write_text(json.dumps({"id": "facefeed", "pid": 1}))
    (root / "facefeed").symlink_to(elsewhere)
    if os.geteuid() == 0:
        (root / "deadbeef").mkdir()
        (root / "deadbeef" / "state.json").write_text(json.dumps({"id": "deadbeef", "pid": 1}))
        os.chown(root / "deadbeef", 4242, 4242)
        os.chown(root / "deadbeef" / "state.json", 4242, 4242)
    assert list(agents(project, "--all")) == [real]
    for planted in ("0badc0de", "facefeed", "deadbeef"):
        done = cos("stop", planted, cwd=project)
        assert done.returncode == 1 and "no job" in done.stderr
    assert (elsewhere / "state.json").exists()


@pytest.mark.slow
def test_gc_removes_jobs_ended_before_the_period_but_keeps_a_worktree_with_work(
        project: Path) -> None:
    clean = bg(project, "--exec", "echo clean")["id"]
    dirty = bg(project, "--exec", "echo work > work.txt")["id"]
    recent = bg(project, "--exec", "echo recent")["id"]
    for job in (clean, dirty, recent):
        state_of(project, job, "done")
    old = time.time() - 3 * 86400
    for job in (clean, dirty):
        os.utime(jobs.load(job).path(jobs.STATE), (old, old))
    events = Path(jobs.load(clean).state["events"])
    done = cos("gc", "--json", cwd=project, env={"COS_CLEANUP_PERIOD_DAYS": "2"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["jobs"]
    assert report["removed"] == [clean]
    assert [kept["id"] for kept in report["kept"]] == [dirty]
    assert "work.txt" in report["kept"][0]["why"]
    assert set(agents(project)) == {dirty, recent}
    assert not (project / ".coding-os" / "worktrees" / clean).exists()
    assert (project / ".coding-os" / "worktrees" / dirty / "work.txt").exists()
    assert events.exists()


def test_attach_on_a_terminal_replies_interrupts_and_detaches_leaving_the_job_running(
        project: Path) -> None:
    job = bg(project, "--agent", ECHO, "--name", "chat", "hello")["id"]
    state_of(project, job, "done")
    term = Terminal(project, "attach", "chat")
    try:
        term.expect("echo: hello")  # the replay
        term.type("sleep 30\n")  # a reply typed at the terminal
        term.expect("sleeping 30s")
        term.type("\x03")  # Ctrl-C: the task is interrupted, the attach goes on
        term.expect("interrupted")
        term.type("again\n")
        term.expect("echo: again")
        term.type("\x04")  # Ctrl-D: detach
        assert term.wait() == 0
        assert b"detached" in term.shown
    finally:
        term.end()
    row = agents(project)[job]
    assert row["state"] == "done" and row["pid"] is not None and runners_of(job) == [row["pid"]]
    kinds = [(e["msg"]["type"], e["msg"].get("reason")) for e in stored_events(project, job)]
    assert ("turn_aborted", "interrupted") in kinds


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A git repository on a filesystem of 3 MB (a tmpfs: mounting needs root)."""
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("mounting a small filesystem needs root")
    folder = tmp_path / "small"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(folder)], check=True)
    try:
        git(folder, "init", "-q", "-b", "main")
        (folder / "a.txt").write_text("a\n")
        git(folder, "add", ".")
        git(folder, "commit", "-q", "-m", "init")
        yield folder
    finally:
        stop_runners_of(Path(os.environ["HOME"]))
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
def test_a_full_disk_fails_the_job_with_its_reason_and_keeps_what_was_stored(
        small_disk: Path) -> None:
    job = bg(small_disk, "--isolation", "none", "--exec",
             "for i in $(seq 1 200000); do echo line $i of a job that fills the disk; done")["id"]
    row = state_of(small_disk, job, "failed")
    assert row["pid"] is None
    # The runner writes its last state, then exits: it is gone soon after.
    until(lambda: not runners_of(job), "the failed job's runner to exit")
    state = jobs.load(job).state
    assert "can no longer be stored" in state["error"] and "no space left" in state["error"]
    events = stored_events(small_disk, job)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert row["last_seq"] == len(events) > 100
    texts = [e["msg"]["text"] for e in events if e["msg"]["type"] == "agent_message"]
    assert texts == [f"line {i} of a job that fills the disk" for i in range(1, len(texts) + 1)]


def test_bg_from_a_recipe_runs_its_rendered_prompt_and_records_the_seed(project: Path) -> None:
    recipe = project / "greet.yaml"
    recipe.write_text("title: Greet\nprompt: 'say {{ who }}'\nparameters:\n"
                      "  - key: who\n    input_type: string\n    requirement: required\n")
    job = bg(project, "--agent", ECHO, "--recipe", str(recipe), "--param", "who=world")["id"]
    state_of(project, job, "done")
    events = stored_events(project, job)
    assert any(e["msg"].get("text") == "echo: say world" for e in events)
    seed = jobs.load(job).state["seed_ref"]
    assert seed["params"] == {"who": "world"} and seed["path"] == str(recipe)
    assert events[0]["msg"]["options"]["seed_ref"] == seed
    missing = cos("bg", "--agent", ECHO, "--recipe", str(recipe), cwd=project)
    assert missing.returncode == 2 and "who" in missing.stderr


def test_attach_right_after_bg_waits_for_the_runner_and_follows_the_job(project: Path) -> None:
    from coding_os import api
    from coding_os.jobs import control

    go = project.parent / "go"  # the job ends only once the test has attached
    job = api.bg_start(None, command=f"echo started; until [ -e '{go}' ]; do sleep 0.05; done; "
                                     "echo ended", cwd=str(project))["id"]
    found, connection, stored = control.attach(job, 0)  # at once: the job may still be starting
    assert connection is not None
    go.touch()
    seen = list(connection.events())
    connection.close()
    followed = stored + seen
    assert [e["msg"].get("text") for e in followed if e["msg"]["type"] == "agent_message"] == [
        "started", "ended"]
    assert followed == stored_events(project, job)


@pytest.mark.slow
def test_a_blocked_job_shows_its_request_in_cos_agents_and_cos_attach_answers_it(
        project: Path) -> None:
    job = bg(project, "--agent", ECHO, "--name", "asker", "write notes.txt: first line")["id"]
    row = state_of(project, job, "blocked")
    approval = row["approval"]
    worktree = Path(row["worktree"])
    assert approval["tool"] == "Write" and approval["path"] == str(worktree / "notes.txt")
    assert approval["request"] is not None and approval["command"] is None
    assert "+first line" in approval["diff"].splitlines()
    table = cos("agents", cwd=project)
    assert table.returncode == 0, table.stderr
    line = next(line for line in table.stdout.splitlines() if "asks:" in line)
    assert f"Write {worktree / 'notes.txt'} (request {approval['request']})" in line
    assert f"cos approve {job}" in line
    assert "      +first line" in table.stdout.splitlines()
    term = Terminal(project, "attach", job)
    try:
        term.expect(f"job {job} asks to run Write {worktree / 'notes.txt'}")
        term.expect("type allow or deny")
        term.expect("+first line")
        term.type("allow\n")
        term.expect("▸ Write")
        until(lambda: agents(project)[job]["state"] == "done", "the approved write to end")
        term.type("\x04")  # Ctrl-D: detach
        assert term.wait() == 0
    finally:
        term.end()
    assert (worktree / "notes.txt").read_text() == "first line\n"
    assert agents(project)[job]["approval"] is None
    # Denied from the terminal: the tool does not run.
    cos("reply", job, "write denied.txt: no", cwd=project)
    state_of(project, job, "blocked")
    term = Terminal(project, "attach", job)
    try:
        term.expect("asks to run Write")
        term.expect("denied.txt")
        term.type("deny\n")
        term.expect("not allowed to write denied.txt")
        term.type("\x04")
        assert term.wait() == 0
    finally:
        term.end()
    assert state_of(project, job, "done")["approval"] is None
    assert not (worktree / "denied.txt").exists()


@pytest.mark.slow
def test_a_command_that_exits_non_zero_is_failed_with_its_exit_code(project: Path) -> None:
    job = bg(project, "--exec", "echo trying; exit 3", "--name", "failing")["id"]
    row = until(lambda: (r := agents(project)[job])["state"] == "failed" and r["pid"] is None
                and r, "the command to fail")
    assert row["exit_code"] == 3
    table = cos("agents", cwd=project).stdout
    assert table.splitlines()[0].split() == [
        "ID", "NAME", "AGENT", "STATE", "STATUS", "AGE", "WHERE"]
    line = next(line for line in table.splitlines() if line.startswith(job))
    assert " failed " in line and "exit 3" in line
    assert line.index("failed") == table.splitlines()[0].index("STATE")
    attached = cos("attach", job, cwd=project)
    assert attached.returncode == 1 and "trying" in attached.stdout
    # It ran to its end: `cos respawn --all` does not run it again.
    assert json.loads(cos("respawn", "--all", "--json", cwd=project).stdout) == []
    ok = bg(project, "--exec", "exit 0")["id"]
    # A job not yet started has no pid either: wait for an end, then say which.
    ended = until(lambda: (r := agents(project)[ok])["state"] in ("done", "failed")
                  and r["pid"] is None and r, "the command to end")
    assert ended["state"] == "done" and ended["exit_code"] in (0, None)


@pytest.mark.slow
def test_rm_removes_a_finished_idle_job_and_refuses_one_that_runs_a_task(
        project: Path) -> None:
    idle = bg(project, "--agent", ECHO, "--name", "idle", "hello")["id"]
    row = state_of(project, idle, "done")
    assert row["status"] == "idle" and row["pid"] is not None  # its runner waits for input
    removed = cos("rm", idle, "--json", cwd=project)
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["id"] == idle
    assert idle not in agents(project) and runners_of(idle) == []
    assert not Path(row["worktree"]).exists()
    busy = bg(project, "--agent", ECHO, "--name", "busy", "sleep 30")["id"]
    state_of(project, busy, "working")
    refused = cos("rm", busy, cwd=project)
    assert refused.returncode == 7 and f"is running: cos stop {busy} first" in refused.stderr
    assert busy in agents(project)
    # A finished job whose worktree holds work is refused as it is: its runner goes on.
    kept = bg(project, "--agent", ECHO, "--name", "kept", "write kept.txt: work")["id"]
    state_of(project, kept, "blocked")
    assert cos("approve", kept, cwd=project).returncode == 0
    pid = state_of(project, kept, "done")["pid"]
    at_risk = cos("rm", kept, cwd=project)
    assert at_risk.returncode == 1 and "kept.txt" in at_risk.stderr
    assert agents(project)[kept]["pid"] == pid and runners_of(kept) == [pid]
    for job in (busy, kept):
        assert cos("stop", job, cwd=project).returncode == 0


def _dirty(project: Path) -> None:
    """Uncommitted changes of every kind: unstaged, staged, untracked, ignored, deleted."""
    (project / "README.md").write_text("hello, changed\n")
    (project / "kept.txt").write_text("committed\n")
    git(project, "add", "kept.txt")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kept")
    (project / "staged.txt").write_text("staged\n")
    git(project, "add", "staged.txt")
    (project / "new").mkdir()
    (project / "new" / "untracked.txt").write_text("untracked\n")
    (project / ".gitignore").write_text("*.log\n")
    (project / "noise.log").write_text("ignored\n")
    (project / "kept.txt").unlink()


@pytest.mark.slow
def test_bg_in_a_dirty_tree_says_it_starts_from_head_and_carry_takes_the_changes_along(
        project: Path) -> None:
    clean = cos("bg", "--exec", "true", cwd=project)  # a clean tree: not a word of it
    assert clean.returncode == 0 and clean.stderr == "", clean.stderr
    _dirty(project)
    status = git(project, "status", "--porcelain")
    index = (project / ".git" / "index").read_bytes()
    head = git(project, "rev-parse", "HEAD")
    plain = cos("bg", "--exec", "true", cwd=project)
    assert plain.returncode == 0, plain.stderr
    [said] = plain.stderr.strip().splitlines()
    assert said == (f"cos: the job starts from the last commit (HEAD {head[:12]}); the 5 "
                    "uncommitted paths of this checkout stay here (cos bg --carry takes them "
                    "along)")
    job = plain.stdout.strip().split(" · ")[1]
    worktree = Path(state_of(project, job, "done")["worktree"])
    assert (worktree / "README.md").read_text() == "hello\n"
    assert (worktree / "kept.txt").read_text() == "committed\n"
    assert not (worktree / "staged.txt").exists() and not (worktree / "new").exists()
    carried = cos("bg", "--carry", "--json", "--exec", "cat README.md staged.txt new/*.txt",
                  cwd=project)
    assert carried.returncode == 0, carried.stderr
    assert carried.stderr.strip() == (
        f"cos: the job starts from the last commit (HEAD {head[:12]}) with the 5 uncommitted "
        "paths of this checkout carried into its worktree")
    job = json.loads(carried.stdout)["id"]
    worktree = Path(state_of(project, job, "done")["worktree"])
    texts = [e["msg"].get("text") for e in stored_events(project, job)]
    assert "hello, changed" in texts and "staged" in texts and "untracked" in texts
    assert (worktree / "README.md").read_text() == "hello, changed\n"
    assert (worktree / "staged.txt").read_text() == "staged\n"
    assert (worktree / "new" / "untracked.txt").read_text() == "untracked\n"
    assert (worktree / ".gitignore").read_text() == "*.log\n"
    assert not (worktree / "noise.log").exists() and not (worktree / "kept.txt").exists()
    assert git(worktree, "rev-parse", "HEAD") == head  # on the commit, the changes not staged
    assert git(worktree, "diff", "--cached", "--name-only") == ""
    # The checkout is as it was: its files, its index, its HEAD.
    assert (project / ".git" / "index").read_bytes() == index
    assert git(project, "status", "--porcelain") == status
    assert (project / "noise.log").read_text() == "ignored\n"
