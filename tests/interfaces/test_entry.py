"""The `cos` console script's fast paths (interfaces/entry.py).

`cos hook`'s fast exit: the hook runs with the cyclic collector off and ends with `os._exit`
once stdout and stderr are flushed, skipping the interpreter's teardown. These tests run whole
`cos hook <Event>` processes and check that nothing the hook does relies on that teardown (files,
the database, threads, children, atexit handlers, output, exit codes), even with a standard
stream started closed.

The plain forms of `cos rewind CHECKPOINT --code [--json]` and `cos checkpoint create [--json]`
skip the click CLI and end the same way: they say and do what the click CLI says and does (the
same output, errors and exit codes, on twin projects), leave an interrupted rewind and every
other form to it, and leave nothing to the skipped teardown."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import (
    COS, PG_URL, RESTORE_KILLS, changed_after_checkpoint, cos, fire, git, log_lines, pipe_full,
    replicator_stopped, rewind_in_child, run_shell, tree, until, waits_for_lock)


# Runs `cos hook EVENT` as the console script does, and reports, at the moment the hook calls
# os._exit, what the skipped teardown would have had to deal with.
PROBE = r"""
import os, sys
def _fds():
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return found
start_fds = _fds()
sys.argv = ["cos", "hook", sys.argv[1]]
real_exit = os._exit
def _exit(code):
    import atexit, gc, json
    children = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                children += f.read().split()
        except OSError:
            pass
    threads = None
    if "threading" in sys.modules:
        threads = [t.name for t in sys.modules["threading"].enumerate()]
    fds = _fds()
    info = {"code": code, "gc_enabled": gc.isenabled(), "garbage": gc.collect(),
            "tasks": len(os.listdir("/proc/self/task")), "threads": threads,
            "children": children, "atexit": atexit._ncallbacks(),
            "new_fds": {fd: fds[fd] for fd in fds if fd not in start_fds},
            "psycopg": "psycopg" in sys.modules}
    sys.stderr.write("\nPROBE " + json.dumps(info) + "\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = _exit
from coding_os.interfaces.entry import main
main()
raise SystemExit("main() returned instead of ending the process")
"""


def probe(event: str, payload: dict[str, object], cwd: Path,
          env: dict[str, str] | None = None) -> dict[str, object]:
    full = dict(os.environ, COS_AGENT="claude", **(env or {}))
    body = {"hook_event_name": event, "cwd": str(cwd), **payload}
    proc = subprocess.run([sys.executable, "-c", PROBE, event], cwd=cwd, input=json.dumps(body),
                          capture_output=True, text=True, env=full, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE ")]
    assert lines, (proc.returncode, proc.stderr)
    info = json.loads(lines[-1][len("PROBE "):])
    assert proc.returncode == info["code"]
    return info


HOOK_PAYLOADS = [
    ("SessionStart", {"session_id": "n1", "source": "startup"}),
    ("UserPromptSubmit", {"session_id": "n1", "prompt": "change the readme"}),
    ("PreToolUse", {"session_id": "n1", "tool_name": "Edit",
                    "tool_input": {"file_path": "README.md", "old_string": "a", "new_string": "b"}}),
    ("PostToolUse", {"session_id": "n1", "tool_name": "Edit",
                     "tool_input": {"file_path": "README.md"}, "tool_response": {"success": True}}),
    ("Stop", {"session_id": "n1", "last_assistant_message": "done"}),
    ("SessionEnd", {"session_id": "n1", "reason": "exit"}),
]


# -- nothing is left to the skipped teardown ---------------------------------------------------


def test_the_hook_process_ends_without_teardown_but_with_its_output_whole() -> None:
    # `cos hook` ends through entry._exit_now: what is buffered on stdout and stderr is
    # written (here more than a pipe holds), the exit code kept, and the interpreter's
    # teardown (atexit handlers, module cleanup) skipped.
    script = (
        "import atexit, sys\n"
        "from coding_os.interfaces.entry import _exit_now\n"
        "atexit.register(lambda: sys.stderr.write('teardown ran\\n'))\n"
        "sys.stdout.write('x' * 200000)\n"
        "sys.stderr.write('last words')\n"
        "_exit_now(5)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 5
    assert proc.stdout == "x" * 200000
    assert proc.stderr == "last words"


def test_every_event_leaves_no_open_file_thread_child_or_atexit_handler_at_os_exit(
        project: Path) -> None:
    (project / "src").mkdir()
    for i in range(30):
        (project / "src" / f"m{i}.py").write_text(f"x = {i}\n", encoding="utf-8")
    for event, payload in HOOK_PAYLOADS:
        if event == "PostToolUse":
            (project / "README.md").write_text("changed\n", encoding="utf-8")
        info = probe(event, payload, project)
        assert info["code"] == 0, (event, info)
        assert info["gc_enabled"] is False
        assert info["new_fds"] == {}, (event, info)  # database, spool, log, locks all closed
        assert info["tasks"] == 1 and info["children"] == [], (event, info)
        assert info["threads"] in (None, ["MainThread"]), (event, info)
        assert info["atexit"] == 0, (event, info)
    lines = log_lines(project)
    assert [ln.split(" event=")[1].split()[0] for ln in lines] == [e for e, _ in HOOK_PAYLOADS]
    assert any("checkpoint=" in ln for ln in lines)


def test_a_hook_session_in_sqlite_is_committed_and_the_database_closed_before_the_exit(
        project: Path) -> None:
    for event, payload in HOOK_PAYLOADS:
        proc = fire(event, payload, cwd=project)
        assert proc.returncode == 0, (event, proc.stderr)
    state = project / ".coding-os"
    # The last connection's close checkpoints the WAL and removes it: it ran before os._exit.
    assert not (state / "coding-os.db-wal").exists()
    with sqlite3.connect(state / "coding-os.db") as conn:
        (status,) = conn.execute("SELECT status FROM sessions WHERE native_id = 'n1'").fetchone()
        observations = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        summaries = conn.execute("SELECT count(*) FROM session_summaries").fetchone()[0]
    assert status == "ended"
    assert summaries == 1
    # SessionStart, UserPromptSubmit, PostToolUse, Stop, SessionEnd spool one each.
    assert observations == 5
    spool = state / ".observations.jsonl"
    inode, _, offset = (state / ".observations.offset").read_text().split()
    assert int(inode) == spool.stat().st_ino and int(offset) == spool.stat().st_size
    assert len(log_lines(project)) == len(HOOK_PAYLOADS)


@pytest.fixture
def pg_url_and_schema() -> Iterator[tuple[str, str]]:
    """The URL of a fresh schema of the test database, and the schema's name."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError as exc:
        pytest.skip(f"psycopg is not installed ({exc})")
    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL unreachable: {str(exc).splitlines()[0]}")
    schema = f"cos_fastexit_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}", schema
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()


@pytest.mark.slow
def test_postgres_hooks_commit_close_their_connection_and_leave_nothing_at_os_exit(
        project: Path, pg_url_and_schema: tuple[str, str]) -> None:
    import psycopg

    url, schema = pg_url_and_schema
    env = {"COS_DATABASE_URL": url}
    for event, payload in HOOK_PAYLOADS:
        info = probe(event, payload, project, env=env)
        assert info["code"] == 0, (event, info)
        assert info["new_fds"] == {}, (event, info)  # the server connection was closed
        assert info["tasks"] == 1 and info["children"] == [], (event, info)
        if info["psycopg"]:
            # `logging` (imported by psycopg) registers logging.shutdown; no handler needs it.
            assert info["atexit"] <= 1, (event, info)
    assert not any("db_error" in ln for ln in log_lines(project))
    # The hooks handed their lines over to a background replicator, whose connection is its
    # own: once it has stopped, no connection of cos's is left.
    replicator_stopped(project / ".coding-os")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        (status,) = conn.execute("SELECT status FROM sessions WHERE native_id = 'n1'").fetchone()
        observations = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        summaries = conn.execute("SELECT count(*) FROM session_summaries").fetchone()[0]
        until(lambda: conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'coding-os'"
        ).fetchone()[0] == 0, "every connection of cos's to end")
    assert (status, observations, summaries) == ("ended", 5, 1)


# -- the cyclic collector is off: memory must not grow with the work ---------------------------


def _tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / "big" / f"d{i % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"line {i}\n" * 3, encoding="utf-8")


def _garbage_of_first_checkpoint(base: Path, files: int) -> tuple[int, str]:
    root = base / f"tree{files}"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".coding-os").mkdir()
    _tree(root, files)
    git(root, "add", "big")
    git(root, "commit", "-q", "-m", "big")
    _tree(root / "untracked", files // 2)  # untracked files are hashed and stored too
    assert fire("SessionStart", {"session_id": "g", "source": "startup"}, cwd=root).returncode == 0
    info = probe("UserPromptSubmit", {"session_id": "g", "prompt": "go"}, root)
    assert info["code"] == 0
    assert "checkpoint=" in log_lines(root)[-1]
    return int(info["garbage"]), log_lines(root)[-1]


@pytest.mark.slow
def test_a_first_checkpoint_of_a_large_tree_leaves_no_more_cyclic_garbage_than_a_small_one(
        tmp_path: Path) -> None:
    small, _ = _garbage_of_first_checkpoint(tmp_path, 40)
    large, line = _garbage_of_first_checkpoint(tmp_path, 1600)
    assert large <= small + 20, (small, large, line)


def _garbage_of_session_start_ingest(base: Path, observations: int) -> int:
    root = base / f"spool{observations}"
    root.mkdir()
    (root / ".coding-os").mkdir()
    (root / "AGENTS.md").write_text("x\n", encoding="utf-8")
    assert fire("SessionStart", {"session_id": "i", "source": "startup"}, cwd=root).returncode == 0
    session = (root / ".coding-os" / "claude" / "panels" / "i" / "session-id").read_text().split()[0]
    with open(root / ".coding-os" / ".observations.jsonl", "a", encoding="ascii") as f:
        for i in range(observations):
            f.write(json.dumps({
                "oid": os.urandom(8).hex(), "session": session, "agent": "claude", "panel": "i",
                "ts": "2026-01-01T00:00:00.000Z", "event": "PostToolUse", "tool": "Edit",
                "text": f"edit {i}", "data": {"paths": [f"/f{i}"], "ok": i % 7 != 0}}) + "\n")
    # A new startup on the same panel ingests the spool and summarises the previous session.
    info = probe("SessionStart", {"session_id": "i", "source": "startup"}, root)
    assert info["code"] == 0
    assert "recovered=" in log_lines(root)[-1]
    with sqlite3.connect(root / ".coding-os" / "coding-os.db") as conn:
        assert conn.execute("SELECT count(*) FROM observations").fetchone()[0] >= observations
    return int(info["garbage"])


def test_session_start_ingesting_a_large_spool_leaves_no_more_cyclic_garbage_than_a_small_one(
        tmp_path: Path) -> None:
    small = _garbage_of_session_start_ingest(tmp_path, 50)
    large = _garbage_of_session_start_ingest(tmp_path, 8000)
    assert large <= small + 20, (small, large)


# -- output and exit codes through os._exit ----------------------------------------------------


def test_documented_exit_codes_survive_the_fast_exit(project: Path, isolated_env: Path) -> None:
    ok = fire("PostToolUse", {"session_id": "e", "tool_name": "Bash",
                              "tool_input": {"command": "ls"}}, cwd=project)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")
    bad = cos("hook", "PostToolUse", cwd=project, env={"COS_AGENT": "claude"}, input="{not json")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith("cos hook: ") and len(bad.stderr.splitlines()) == 1
    assert "error=" in log_lines(project)[-1]
    (project / ".coding-os.yaml").write_text("gates:\n  protect_paths: [.env]\n", encoding="utf-8")
    for agent in ("claude", "codex"):
        block = fire("PreToolUse", {"session_id": "e", "tool_name": "Write", "tool_input": {
                         "file_path": str(project / ".env"), "content": "x"}},
                     cwd=project, agent=agent)
        assert block.returncode == 2, (agent, block.stdout, block.stderr)
        decision = json.loads(block.stdout)["hookSpecificOutput"]
        assert decision["permissionDecision"] == "deny"
        assert block.stderr.strip() == decision["permissionDecisionReason"]
    misroute = fire("SessionStart", {"session_id": "m", "source": "startup"}, cwd=isolated_env)
    assert misroute.returncode == 3 and "COS_STATE_MISROUTE" in misroute.stderr


def test_a_large_output_reaches_a_pipe_whole_before_the_process_ends(project: Path) -> None:
    big = "y" * (6 << 20)  # far more than a pipe holds: the flush must finish before os._exit
    tool_input = {"text": big, "n": 1}
    proc = fire("PreToolUse", {"session_id": "o", "tool_name": "mcp__cos__cos_work_log_append",
                               "tool_input": tool_input}, cwd=project)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow"
    session = out["updatedInput"].pop("agent_session")
    assert out["updatedInput"] == tool_input and session.startswith("ses-claude-")


def test_a_slow_reader_still_gets_the_whole_output(project: Path) -> None:
    body = json.dumps({"hook_event_name": "PreToolUse", "cwd": str(project), "session_id": "s",
                       "tool_name": "mcp__cos__cos_search", "tool_input": {"q": "z" * (1 << 20)}})
    with subprocess.Popen([COS, "hook", "PreToolUse"], cwd=project, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env=dict(os.environ, COS_AGENT="claude")) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(body.encode())
        proc.stdin.close()
        out = proc.stdout.fileno()
        until(lambda: pipe_full(out), "the hook to block on a full pipe")
        data = proc.stdout.read()
        assert proc.wait(timeout=60) == 0
    assert json.loads(data)["hookSpecificOutput"]["updatedInput"]["q"] == "z" * (1 << 20)


def test_a_hook_interrupted_while_waiting_ends_and_the_next_one_works(project: Path) -> None:
    assert fire("SessionStart", {"session_id": "k", "source": "startup"}, cwd=project).returncode == 0
    panel = project / ".coding-os" / "claude" / "panels" / "k"
    fd = os.open(panel, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the hook waits for the panel lock
        body = json.dumps({"hook_event_name": "PostToolUse", "cwd": str(project),
                           "session_id": "k", "tool_name": "Bash", "tool_input": {"command": "x"}})
        with subprocess.Popen([COS, "hook", "PostToolUse"], cwd=project, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, COS_AGENT="claude")) as proc:
            assert proc.stdin is not None
            proc.stdin.write(body.encode())
            proc.stdin.close()
            until(lambda: proc.poll() is not None or waits_for_lock(panel),
                  "the hook to wait for the panel lock")
            assert proc.poll() is None  # still waiting for the lock
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=30)
    finally:
        os.close(fd)
    assert code not in (0, 2)
    lines_before = len(log_lines(project))
    after = fire("PostToolUse", {"session_id": "k", "tool_name": "Bash",
                                 "tool_input": {"command": "y"}}, cwd=project)
    assert after.returncode == 0, after.stderr
    assert len(log_lines(project)) == lines_before + 1


# -- a standard stream that is closed ----------------------------------------------------------


# fd 1 closed: `_exit_now` flushes no stream that is None, and the exit code is kept.
def test_a_hook_started_with_stdout_closed_still_exits_0(project: Path) -> None:
    proc = run_shell("exec {cos} hook {event} >&-", project,
                     {"session_id": "c", "tool_name": "Bash", "tool_input": {"command": "ls"}},
                     "PostToolUse")
    assert "event=PostToolUse" in log_lines(project)[-1]  # the work itself was done
    assert (proc.returncode, proc.stderr) == (0, "")


# The same with fd 2 closed.
def test_a_hook_started_with_stderr_closed_still_exits_0(project: Path) -> None:
    proc = run_shell("exec {cos} hook {event} 2>&-", project,
                     {"session_id": "c", "tool_name": "Bash", "tool_input": {"command": "ls"}},
                     "PostToolUse")
    assert "event=PostToolUse" in log_lines(project)[-1]
    assert (proc.returncode, proc.stdout) == (0, "")


# A misroute with fd 1 closed keeps its documented exit 3, with no traceback.
def test_a_misroute_with_stdout_closed_still_exits_3(isolated_env: Path) -> None:
    proc = run_shell("exec {cos} hook {event} >&-", isolated_env,
                     {"session_id": "m", "source": "startup"}, "SessionStart")
    assert not (isolated_env / ".coding-os").exists()  # nothing written, as documented
    assert "COS_STATE_MISROUTE" in proc.stderr
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr


# -- the plain forms of cos rewind and cos checkpoint create ------------------------------------


# The click CLI itself, as `cos` runs it for every form the plain paths leave to it.
CLICK_CLI = "import sys; from coding_os.interfaces.cli import run; sys.exit(run(sys.argv[1:]))"


def click_cos(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLICK_CLI, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


# Runs `cos ARGS` as the console script does, and reports which of a few heavy modules were
# imported when the process ends (through os._exit or by returning).
IMPORTED = r"""
import os, sys
sys.argv = ["cos", *sys.argv[1:]]
def report():
    heavy = [m for m in ("click", "json", "threading", "_hashlib", "coding_os.interfaces.cli")
             if m in sys.modules]
    sys.stderr.write("\nIMPORTED " + json_list(heavy) + "\n")
    sys.stderr.flush()
def json_list(names):
    return "[" + ",".join('"' + n + '"' for n in names) + "]"
real_exit = os._exit
def _exit(code):
    report()
    real_exit(code)
os._exit = _exit
from coding_os.interfaces.entry import main
code = main()
report()
sys.exit(code)
"""


def imported(args: list[str], cwd: Path) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-c", IMPORTED, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("IMPORTED ")][-1]
    return proc.returncode, json.loads(line[len("IMPORTED "):])


def plain_cos(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cos ARGS` as the console script runs it, which must take its plain path: neither the
    click CLI nor json nor threading nor OpenSSL (hashlib) is loaded."""
    proc = subprocess.run([sys.executable, "-c", IMPORTED, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    said, found, heavy = proc.stderr.rpartition("\nIMPORTED ")
    assert found and json.loads(heavy) == [], proc.stderr
    proc.stderr = said
    return proc


@pytest.fixture
def same_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits made alike are the same commit, whenever they are made."""
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")


def twin(path: Path) -> Path:
    """A git repository with one commit and its state dir kept out of git; two made alike
    (under `same_dates`) are alike to the byte but for their path."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n", encoding="utf-8")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    with open(path / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return path.resolve()


_MOMENTS = re.compile(r"cp-[0-9]{8}-[0-9]{6}-[0-9]{3}-[0-9a-f]{4}"
                      r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z")


def told(proc: subprocess.CompletedProcess[str], project: Path,
         checkpoint: str = "") -> tuple[int, str, str]:
    """What a run said, its project's path and the ids and times of the moment left out (the
    checkpoint rewound to kept)."""
    def plain(text: str) -> str:
        text = text.replace(str(project), "PROJECT")
        text = text.replace(checkpoint, "TARGET") if checkpoint else text
        return _MOMENTS.sub("MOMENT", text)

    return proc.returncode, plain(proc.stdout), plain(proc.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [True, False])
@pytest.mark.usefixtures("same_dates")
def test_the_plain_rewind_says_and_does_what_the_click_cli_does(tmp_path: Path,
                                                                 as_json: bool) -> None:
    runs = []
    for name, run in (("plain", plain_cos), ("click", click_cos)):
        project = twin(tmp_path / name)
        checkpoint, at, _ = changed_after_checkpoint(project)
        args = ("rewind", checkpoint, "--code", *(("--json",) if as_json else ()))
        proc = run(*args, cwd=project)
        assert proc.returncode == 0, proc.stderr
        assert tree(project) == at
        runs.append(told(proc, project, checkpoint))
        undone = cos("rewind", "--undo", "--json", cwd=project)  # the undo it made still works
        assert undone.returncode == 0, undone.stderr
    assert runs[0] == runs[1]
    assert "TARGET" in runs[0][1] and "restore" in runs[0][1]


@pytest.mark.parametrize("as_json", [True, False])
@pytest.mark.usefixtures("same_dates")
def test_the_plain_checkpoint_create_says_what_the_click_cli_says(tmp_path: Path,
                                                                   as_json: bool) -> None:
    runs = []
    for name, run in (("plain", plain_cos), ("click", click_cos)):
        project = twin(tmp_path / name)
        (project / "big.bin").write_bytes(b"x" * 3000)
        (project / ".coding-os.yaml").write_text("checkpoints:\n  max_file_bytes: 1000\n",
                                                 encoding="utf-8")
        (project / "notes.txt").write_text("notes\n", encoding="utf-8")
        proc = run("checkpoint", "create", *(("--json",) if as_json else ()), cwd=project)
        assert proc.returncode == 0, proc.stderr
        runs.append(told(proc, project))
    assert runs[0] == runs[1]
    assert "big.bin" in (runs[0][1] if as_json else runs[0][2])  # skipped, as too large


@pytest.mark.parametrize("args", [
    ("rewind", "cp-20260101-000000-000-abcd", "--code", "--json"),  # no such checkpoint
    ("rewind", "cp-nonsense", "--code"),  # not a checkpoint id
    ("rewind", "OTHER", "--code"),  # a checkpoint of another tree
])
def test_the_plain_rewind_refuses_as_the_click_cli_does(tmp_path: Path,
                                                        args: tuple[str, ...]) -> None:
    other = twin(tmp_path / "other")
    elsewhere = json.loads(cos("checkpoint", "create", "--json", cwd=other).stdout)["id"]
    args = tuple(elsewhere if arg == "OTHER" else arg for arg in args)
    project = twin(tmp_path / "project")
    (project / "README.md").write_text("changed\n", encoding="utf-8")
    plain, full = plain_cos(*args, cwd=project), click_cos(*args, cwd=project)
    assert plain.returncode == full.returncode not in (0, 70)
    assert plain.stderr == full.stderr and plain.stderr.count("\n") == 1
    assert plain.stdout == full.stdout == ""
    assert (project / "README.md").read_text(encoding="utf-8") == "changed\n"


def test_outside_any_project_the_plain_forms_say_what_the_click_cli_says(
        isolated_env: Path) -> None:
    for args in (("checkpoint", "create"), ("rewind", "cp-20260101-000000-000-abcd", "--code")):
        plain, full = plain_cos(*args, cwd=isolated_env), click_cos(*args, cwd=isolated_env)
        assert plain.returncode == full.returncode == 3
        assert plain.stderr == full.stderr and "COS_STATE_MISROUTE" in plain.stderr
    assert not (isolated_env / ".coding-os").exists()


def test_an_interrupted_rewind_is_completed_by_the_click_cli_before_a_plain_form(
        project: Path) -> None:
    checkpoint, at, _ = changed_after_checkpoint(project)
    patch, committed = RESTORE_KILLS["after_rename"]
    assert committed
    assert rewind_in_child(project, patch, checkpoint).returncode == 9
    proc = cos("checkpoint", "create", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"cos: completed the interrupted rewind to {checkpoint}\n"
    assert tree(project) == at
    assert json.loads(proc.stdout)["objects_written"] == 0  # the tree is the checkpoint's


def test_the_plain_forms_load_neither_click_nor_json_nor_threading_nor_openssl(
        project: Path) -> None:
    checkpoint, _, _ = changed_after_checkpoint(project)
    for args in (["rewind", checkpoint, "--code", "--json"], ["rewind", "--code", checkpoint],
                 ["checkpoint", "create"], ["checkpoint", "create", "--json"]):
        (project / "README.md").write_text(f"{args}\n", encoding="utf-8")
        assert plain_cos(*args, cwd=project).returncode == 0, args


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["rewind", "CP", "--code", "--dry-run"], ["rewind", "CP", "--both"],
    ["rewind", "CP", "--code", "--json", "--json"], ["rewind", "CP", "--code", "--help"],
    ["rewind", "--", "CP", "--code"], ["rewind", "--undo"],
    ["checkpoint", "create", "--mode", "worktree"], ["checkpoint", "create", "--json", "--json"],
    ["checkpoint", "create", "--help"],
])
def test_every_other_form_is_left_to_the_click_cli(project: Path, args: list[str]) -> None:
    checkpoint = json.loads(cos("checkpoint", "create", "--json", cwd=project).stdout)["id"]
    _, modules = imported([checkpoint if arg == "CP" else arg for arg in args], project)
    assert "coding_os.interfaces.cli" in modules and "click" in modules


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [True, False])
def test_the_plain_forms_started_with_stdout_closed_do_their_work_and_exit_as_click_does(
        project: Path, as_json: bool) -> None:
    checkpoint, at, changed = changed_after_checkpoint(project)
    flag = " --json" if as_json else ""
    for cos_command in (COS, f"{sys.executable} -c '{CLICK_CLI}'"):
        for command, after in ((f"rewind {checkpoint} --code{flag}", at),
                               (f"checkpoint create{flag}", at)):
            done = subprocess.run(["sh", "-c", f"exec {cos_command} {command} >&-"],
                                  cwd=project, capture_output=True, text=True, timeout=120)
            assert (done.returncode, done.stderr) == (0, ""), (command, cos_command)
            assert tree(project) == after
        assert cos("rewind", "--undo", cwd=project).returncode == 0
        assert tree(project) == changed
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    assert sum(row["trigger"] == "manual" for row in listed) == 3  # the first, and one each


# Runs `cos ARGS` as the console script does, and reports, when the process calls os._exit,
# what the skipped teardown would have had to deal with.
TEARDOWN_PROBE = r"""
import os, sys
def _fds():
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return found
start_fds = _fds()
sys.argv = ["cos", *sys.argv[1:]]
real_exit = os._exit
def _exit(code):
    import atexit, gc, time
    # A flush thread that has released its caller is ending: given a moment, a thread that
    # still works (the thing to catch) stays listed.
    deadline = time.monotonic() + 2
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    children = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            children += f.read().split()
    fds = _fds()
    sys.stderr.write("\nPROBE " + repr({
        "code": code, "gc_enabled": gc.isenabled(),
        "tasks": len(os.listdir("/proc/self/task")), "children": children,
        "atexit": atexit._ncallbacks(),
        "new_fds": {fd: fds[fd] for fd in fds if fd not in start_fds}}) + "\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = _exit
from coding_os.interfaces.entry import main
main()
raise SystemExit("main() returned instead of ending the process")
"""


def test_the_plain_forms_leave_nothing_to_the_skipped_teardown(project: Path) -> None:
    import ast

    checkpoint, at, _ = changed_after_checkpoint(project)
    for args in (["checkpoint", "create", "--json"], ["rewind", checkpoint, "--code"],
                 ["rewind", "cp-20260101-000000-000-abcd", "--code"]):
        proc = subprocess.run([sys.executable, "-c", TEARDOWN_PROBE, *args], cwd=project,
                              capture_output=True, text=True, timeout=120)
        line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE ")][-1]
        info = ast.literal_eval(line[len("PROBE "):])
        assert proc.returncode == info["code"] and info["gc_enabled"] is False
        assert info["new_fds"] == {}, (args, info)
        assert info["tasks"] == 1 and info["children"] == [], (args, info)
        assert info["atexit"] == 0, (args, info)
        assert proc.stdout.endswith("\n") if info["code"] == 0 else proc.stdout == ""
    assert tree(project) == at
