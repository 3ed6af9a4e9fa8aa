"""With the daemon running, a checkpoint or a rewind of files git already covers starts no git
process: the snapshot reads the changed files and the commit's tree objects
(`snapshot._changed_files`), the rewind reads the blobs from the object files (gitobjects.py).
Where only git can tell (a path new to both, a staged one), it still asks, and the snapshot is
the one a whole `git status` takes. A `git` first on PATH logs each call `cos` makes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_os.checkpoints.manifest import diff
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import commit_all, create, rewind_ok, tree
from tests.checkpoints.test_watch import running, stored, whole  # noqa: F401 - fixture
from tests.conftest import git


@pytest.fixture
def logged(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """An environment whose `git` logs its arguments to a file, and that file."""
    real = shutil.which("git")
    log = tmp_path / "git-calls.log"
    folder = tmp_path / "logging-git"
    folder.mkdir()
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    yield {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}, log


def calls(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def same_as_whole(project: Path, record: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    assert diff(str(project), stored(tiers, record), whole(tiers, str(project))) == []


@pytest.fixture
def project(repo: Path) -> Path:
    with open(repo / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n*.log\n")
    (repo / "a.txt").write_text("a1\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "b.txt").write_text("b1\n")
    (repo / "sub" / "run.sh").write_text("#!/bin/sh\n")
    commit_all(repo, "base")
    return repo


def test_a_checkpoint_and_a_rewind_of_edited_tracked_files_start_no_git(
        project: Path, running: dict[str, object],  # noqa: F811
        logged: tuple[dict[str, str], Path]) -> None:
    env, log = logged
    first = create(project)
    (project / "a.txt").write_text("a2\n")
    (project / "sub" / "b.txt").unlink()
    (project / "sub" / "run.sh").chmod(0o755)
    calls(log)
    second = create(project, env=env)
    assert second["scan"] == "watcher"
    assert calls(log) == []
    same_as_whole(project, second)
    edited = tree(project)
    (project / "a.txt").write_text("a3\n")
    report = rewind_ok(project, str(first["id"]), "--code", env=env)
    assert sorted(f["path"] for f in report["code"]["files"]) == [  # type: ignore[index]
        "a.txt", "sub/b.txt", "sub/run.sh"]
    assert calls(log) == []  # the blobs came from the object files, the snapshot from the files
    assert (project / "a.txt").read_text() == "a1\n"
    assert (project / "sub" / "b.txt").read_text() == "b1\n"
    assert not os.access(project / "sub" / "run.sh", os.X_OK)
    rewind_ok(project, str(second["id"]), "--code", env=env)
    assert tree(project) == edited
    assert calls(log) == []


def test_the_blobs_of_a_packed_repository_are_read_without_git(
        project: Path, running: dict[str, object],  # noqa: F811
        logged: tuple[dict[str, str], Path]) -> None:
    env, log = logged
    git(project, "gc", "-q", "--aggressive")
    assert not [p for p in (project / ".git" / "objects").iterdir()
                if p.name not in ("info", "pack")]
    first = create(project)
    (project / "a.txt").write_text("changed\n")
    create(project)
    calls(log)
    rewind_ok(project, str(first["id"]), "--code", env=env)
    assert (project / "a.txt").read_text() == "a1\n"
    assert calls(log) == []


def test_a_new_file_and_a_staged_one_are_looked_at_by_git(
        project: Path, running: dict[str, object],  # noqa: F811
        logged: tuple[dict[str, str], Path]) -> None:
    env, log = logged
    create(project)
    (project / "new.txt").write_text("new\n")
    (project / "debug.log").write_text("ignored\n")
    calls(log)
    record = create(project, env=env)
    assert record["scan"] == "watcher"
    assert any(" status " in line for line in calls(log))
    same_as_whole(project, record)
    tiers = Tiers(str(project / ".coding-os"))
    assert "debug.log" not in str(stored(tiers, record)["layers"])
    (project / "a.txt").write_text("staged\n")
    git(project, "add", "a.txt")  # a change of the index: the next checkpoint scans it all
    (project / "a.txt").write_text("staged then edited\n")
    assert create(project)["scan"] == "full"
    (project / "a.txt").write_text("edited again\n")
    calls(log)
    record = create(project, env=env)
    assert record["scan"] == "watcher"
    made = calls(log)
    assert any(" status " in line and line.endswith(" a.txt") for line in made), made
    same_as_whole(project, record)
