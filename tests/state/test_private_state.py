"""Everything cos keeps is private (DESIGN.md §11, docs/security.md): a whole session run as a
user runs it, under umask 022 — `cos init`, the hooks of a Claude Code turn with their
checkpoints, a checkpoint made by hand and a rewind to it, a background job in its worktree, a
foreground run, `cos web` asked for a page, `cos gc` — leaves every folder of the state dir and
of the hub 0700 and every file 0600, whichever code path made it; a file that existed with wider
modes is 0600 once cos wrote it again.

What is not cos's own is documented and checked as such: the files checked out in a job's
worktree are the user's project files (they keep the user's umask, as a checkout does; the
worktree's folder and git's `.git` link in it are cos's), what an agent writes in its job's
`tmp/` is the agent's, and checkpoint objects are 0400 (written once, never rewritten)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import COS, cos, cos_json, create, fire, rewind_ok, until

NATIVE = "0d4f7a52-3c1e-4b7a-9f0e-6a2b8c1d9e35"


@pytest.fixture
def umask_022() -> Iterator[None]:
    """This process (and so every `cos` it runs, the daemon and the job runners) under the
    umask most users have."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def not_private(root: Path) -> list[str]:
    """Each path under `root` (itself included) whose mode is not what cos gives what it
    keeps, as `<mode> <path>`: folders 0700, files 0600, checkpoint objects 0400, no symlink;
    of a job's worktree only its folder and `.git` link, of a job's `tmp/` only the folder."""
    wrong: list[str] = []

    def check(path: Path, wanted: int) -> None:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or stat.S_IMODE(info.st_mode) != wanted:
            wrong.append(f"{stat.filemode(info.st_mode)} {path}")

    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        check(here, 0o700)
        inside = here.relative_to(root).parts
        if (len(inside) == 2 and inside[0] == "worktrees") or (
                len(inside) == 3 and inside[0] == "jobs" and inside[2] == "tmp"):
            if (here / ".git").exists():
                check(here / ".git", 0o600)
            dirs[:] = []
            continue
        for name in dirs:
            if (here / name).is_symlink():
                check(here / name, 0o700)
        objects = inside[:2] == ("checkpoints", "objects")
        for name in files:
            check(here / name, 0o400 if objects else 0o600)
    return wrong


def turn_with_checkpoints(project: Path) -> None:
    """The hooks of one Claude Code turn: a Bash call and an Edit call, each checkpointed."""
    for event, payload in [
            ("SessionStart", {"source": "startup"}),
            ("UserPromptSubmit", {"prompt": "add notes", "prompt_id": "p-1"}),
            ("PreToolUse", {"tool_name": "Bash", "tool_use_id": "t-1",
                            "tool_input": {"command": "echo shell > notes.txt"}}),
            ("PostToolUse", {"tool_name": "Bash", "tool_use_id": "t-1",
                             "tool_input": {"command": "echo shell > notes.txt"},
                             "tool_response": {"stdout": ""}}),
            ("PreToolUse", {"tool_name": "Edit", "tool_use_id": "t-2",
                            "tool_input": {"file_path": str(project / "README.md"),
                                           "old_string": "hello", "new_string": "hi"}}),
            ("PostToolUse", {"tool_name": "Edit", "tool_use_id": "t-2",
                             "tool_input": {"file_path": str(project / "README.md")},
                             "tool_response": {}}),
            ("Stop", {"stop_hook_active": False, "last_assistant_message": "done"})]:
        proc = fire(event, {"session_id": NATIVE, **payload}, cwd=project)
        assert proc.returncode == 0, (event, proc.stderr)
        if event == "PreToolUse" and payload["tool_name"] == "Bash":
            (project / "notes.txt").write_text("shell\n", encoding="utf-8")
        elif event == "PreToolUse":
            (project / "README.md").write_text("hi\n", encoding="utf-8")


@pytest.mark.slow
def test_a_whole_session_under_umask_022_leaves_every_folder_0700_and_every_file_0600(
        repo: Path, isolated_env: Path, umask_022: None) -> None:
    state, hub = repo / ".coding-os", isolated_env / ".coding-os"
    assert cos("init", "--agent", "claude", cwd=repo).returncode == 0
    turn_with_checkpoints(repo)
    # Files an older cos (or the user) left wider are private again once cos writes them.
    for wider in (state / ".hooks.log", state / "coding-os.db"):
        os.chmod(wider, 0o644)
    assert fire("UserPromptSubmit", {"session_id": NATIVE, "prompt": "and more"},
                cwd=repo).returncode == 0
    assert cos("sessions", cwd=repo).returncode == 0
    point = str(create(repo)["id"])
    (repo / "later.txt").write_text("later\n", encoding="utf-8")
    rewind_ok(repo, point, "--code")
    assert not (repo / "later.txt").exists()

    started = cos("bg", "--json", "--exec", "echo made > made.txt", "--name", "maker",
                  cwd=repo)
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["id"]
    until(lambda: any(row["id"] == job and row["state"] == "done" and row["pid"] is None
                      for row in cos_json("agents", "--all", cwd=repo)), "the job to end")
    assert (state / "worktrees" / job / "made.txt").read_text(encoding="utf-8") == "made\n"
    ran = cos("run", "--agent", "exec", "echo ran", cwd=repo)
    assert ran.returncode == 0, ran.stderr

    web = subprocess.Popen([COS, "web", "--json", "--port", "0"], cwd=repo,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert web.stdout is not None
        line = web.stdout.readline()
        assert line, web.stderr.read() if web.stderr else ""
        with httpx.Client(timeout=60, follow_redirects=True) as client:
            assert client.get(json.loads(line)["url"]).status_code == 200
        gc = cos("gc", cwd=repo)
        assert gc.returncode == 0, gc.stderr
        # Walked while the web view and the daemon still run, their files open.
        wrong = not_private(state) + not_private(hub)
    finally:
        web.terminate()
        web.communicate(timeout=30)
    assert (state / "checkpoints" / "objects").is_dir() and (hub / "jobs" / job).is_dir()
    assert wrong == [], "\n".join(wrong)


def test_the_hub_is_0700_when_the_daemon_is_what_makes_it(isolated_env: Path,
                                                          umask_022: None) -> None:
    started = cos("daemon", "start", cwd=isolated_env)
    assert started.returncode == 0, started.stderr
    try:
        wrong = not_private(isolated_env / ".coding-os")
    finally:
        assert cos("daemon", "stop", cwd=isolated_env).returncode == 0
    assert wrong == [], "\n".join(wrong)


def test_the_index_database_its_wal_and_shm_are_0600_from_its_first_open(
        tmp_path: Path, umask_022: None) -> None:
    folder = tmp_path / "state"
    with SQLiteStorage(str(folder / "coding-os.db")):
        made = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}
    assert {"coding-os.db", "coding-os.db-wal", "coding-os.db-shm"} <= set(made)
    assert set(made.values()) == {0o600}, made
