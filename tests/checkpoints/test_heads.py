"""A small tree's checkpoints skip `git status` when a stat shows nothing changed since the
session's latest checkpoint (its head's fingerprint, checkpoints/heads.py), and never miss a
change."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from coding_os.checkpoints.upkeep import collect
from coding_os.state.tiers import Tiers
from tests.helpers import commit_all, cos_json, fire


SESSION = "6b1d2c3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"


def settle() -> None:
    """Let a change age past the racy margin, so the next checkpoint may keep a fingerprint."""
    time.sleep(0.15)


def bash(repo: Path, path_env: str | None = None) -> dict[str, str]:
    """Fire PreToolUse (Bash) for the session; return its hooks-log fields."""
    env = {"PATH": path_env} if path_env is not None else None
    payload = {"session_id": SESSION, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    proc = fire("PreToolUse", payload, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    line = (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8").splitlines()[-1]
    return dict(part.split("=", 1) for part in line.split(" ") if "=" in part)


@pytest.fixture
def session_repo(project: Path) -> Path:
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("print('v1')\n")
    (project / ".gitignore").write_text("build/\n")
    commit_all(project, "base")
    assert fire("SessionStart", {"session_id": SESSION, "source": "startup"},
                cwd=project).returncode == 0
    settle()
    first = bash(project)
    assert "checkpoint" in first and "checkpoint_error" not in first
    assert (project / ".coding-os" / "checkpoints" / "heads").is_dir()
    return project


def no_git_path(tmp_path: Path) -> str:
    """A PATH holding python but not git: a hook that needs git then logs checkpoint_error."""
    folder = tmp_path / "no-git-bin"
    folder.mkdir(exist_ok=True)
    return str(folder)


def test_an_unchanged_small_tree_is_checkpointed_without_git(session_repo: Path,
                                                              tmp_path: Path) -> None:
    first = bash(session_repo)
    fields = bash(session_repo, path_env=no_git_path(tmp_path))
    assert "checkpoint_error" not in fields, fields
    assert fields["checkpoint"] == first["checkpoint"] and fields.get("checkpoint_reused") == "1"


@pytest.mark.slow
@pytest.mark.parametrize("change", ["rewrite-same-size", "chmod", "new-file", "delete",
                                    "rename", "new-dir"])
def test_any_change_where_a_snapshot_looks_is_seen(session_repo: Path, tmp_path: Path,
                                                  change: str) -> None:
    first = bash(session_repo)
    app = session_repo / "src" / "app.py"
    if change == "rewrite-same-size":
        st = app.stat()
        app.write_text("print('v2')\n")
        os.utime(app, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime put back: ctime tells
    elif change == "chmod":
        app.chmod(0o755)
    elif change == "new-file":
        (session_repo / "src" / "new.py").write_text("x = 1\n")
    elif change == "delete":
        app.unlink()
    elif change == "rename":
        app.rename(session_repo / "src" / "main.py")
    else:
        (session_repo / "docs").mkdir()
        (session_repo / "docs" / "readme.md").write_text("hi\n")
    after = bash(session_repo, path_env=no_git_path(tmp_path))
    # git is needed to look again: without it the hook logs why and takes no checkpoint.
    assert "checkpoint_error" in after and after.get("checkpoint") != first["checkpoint"]
    fields = bash(session_repo)
    assert "checkpoint_error" not in fields and fields["checkpoint"] != first["checkpoint"]
    assert fields.get("checkpoint_reused") is None


def test_a_file_git_ignores_does_not_make_the_tree_look_changed(session_repo: Path,
                                                               tmp_path: Path) -> None:
    (session_repo / "build").mkdir()
    (session_repo / "build" / "out.o").write_bytes(b"\0" * 10)
    settle()
    bash(session_repo)  # the new ignored directory changed the root: git looks once
    settle()
    again = bash(session_repo)
    (session_repo / "build" / "more.o").write_bytes(b"\0" * 10)
    fields = bash(session_repo, path_env=no_git_path(tmp_path))
    assert "checkpoint_error" not in fields, fields
    assert fields["checkpoint"] == again["checkpoint"]


def fingerprint_of(repo: Path) -> dict[str, object] | None:
    """The fingerprint the session's head keeps, or None."""
    heads = repo / ".coding-os" / "checkpoints" / "heads"
    head = next(p for p in heads.iterdir() if p.name.startswith("ses-"))
    lines = head.read_text(encoding="ascii").split("\n")
    return json.loads(lines[2]) if len(lines) > 2 and lines[2] else None


def test_a_change_during_the_snapshot_is_never_trusted(session_repo: Path) -> None:
    """A file written just before a checkpoint (inside the racy margin) keeps no fingerprint:
    the next checkpoint asks git, so a second write in the same clock tick is not missed."""
    app = session_repo / "src" / "app.py"
    app.write_text("print('v2')\n")
    # Stamped a minute ahead: inside the margin whenever the hook's process gets to run.
    ahead = time.time_ns() + 60_000_000_000
    os.utime(app, ns=(ahead, ahead))
    bash(session_repo)
    assert fingerprint_of(session_repo) is None
    os.utime(app, ns=(time.time_ns(),) * 2)
    settle()
    bash(session_repo)
    kept = fingerprint_of(session_repo)
    assert kept is not None and "src/app.py" in kept["paths"]  # type: ignore[operator]


def test_a_checkpoint_removed_by_gc_is_never_named_again_by_an_unchanged_tree(
        session_repo: Path) -> None:
    first = bash(session_repo)
    assert first.get("checkpoint_scan") == "fingerprint"
    removed = collect(Tiers(str(session_repo / ".coding-os")), older_than_s=0, grace_s=0)
    assert first["checkpoint"] in removed["checkpoints_removed"]  # type: ignore[operator]
    fields = bash(session_repo)
    assert fields["checkpoint"] != first["checkpoint"] and "checkpoint_reused" not in fields
    listed = cos_json("checkpoints", cwd=session_repo)
    assert [row["id"] for row in listed] == [fields["checkpoint"]]  # type: ignore[union-attr]
