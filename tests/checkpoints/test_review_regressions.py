"""What a review of the checkpoint code found, each as the user met it: a rewind must never lose
a file it did not capture, touch the state dir, stop half way, or fail on a name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.checkpoints.conftest import commit_all, create, nothing_staged, rewind_ok, tree
from tests.conftest import cos, git

KILL_AFTER_FIRST_RENAME = """
import os, sys
real = os.rename
def once(*args, **kwargs):
    real(*args, **kwargs)
    if "dst_dir_fd" in kwargs:
        os._exit(9)  # killed right after the first rename into the tree
os.rename = once
from coding_os import api
api.rewind(sys.argv[1], "code", cwd=sys.argv[2])
"""


def test_a_file_git_ignores_is_not_destroyed_by_a_rewind_and_the_undo_brings_it_back(
        project: Path) -> None:
    (project / "a.txt").write_text("base\n")
    commit_all(project, "base")
    (project / ".env").write_text("old secret\n")
    checkpoint = str(create(project)["id"])
    (project / ".gitignore").write_text(".env\n")
    (project / ".env").write_text("NEW PRECIOUS\n")  # now ignored: no snapshot holds it
    preview = rewind_ok(project, checkpoint, "--code", "--dry-run")
    actions = {f["path"]: f["action"] for f in preview["code"]["files"]}  # type: ignore[index]
    assert actions[".env"] == "restore"
    rewind_ok(project, checkpoint, "--code")
    assert (project / ".env").read_text() == "old secret\n"
    assert cos("rewind", "--undo", cwd=project).returncode == 0
    assert (project / ".env").read_text() == "NEW PRECIOUS\n"


def test_a_state_dir_below_the_top_of_the_repository_is_never_captured_nor_rewound(
        repo: Path) -> None:
    (repo / "top.txt").write_text("top\n")
    commit_all(repo, "top")
    package = repo / "pkg"
    (package / ".coding-os").mkdir(parents=True)
    (package / "code.py").write_text("v1\n")
    first = create(package)
    second = create(package)
    assert second["objects_written"] == 0  # the store did not snapshot itself
    (package / "code.py").write_text("v2\n")
    state_before = {p.relative_to(package) for p in (package / ".coding-os").rglob("*")
                    if "checkpoints" in p.parts and "objects" in p.parts}
    rewind_ok(package, str(first["id"]), "--code")
    assert (package / "code.py").read_text() == "v1\n"
    state_after = {p.relative_to(package) for p in (package / ".coding-os").rglob("*")
                   if "checkpoints" in p.parts and "objects" in p.parts}
    assert state_before <= state_after
    assert cos("rewind", "--undo", cwd=package).returncode == 0
    assert (package / "code.py").read_text() == "v2\n"


def test_a_restore_killed_in_a_directory_to_file_swap_is_completed_by_the_next_call(
        project: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "a").write_text("A\n")
    (project / "z").write_text("Z\n")
    checkpoint = str(create(project)["id"])
    at_checkpoint = tree(project)
    (project / "a").unlink()
    (project / "z").unlink()
    (project / "a").mkdir()
    (project / "a" / "x").write_text("x\n")
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_RENAME, checkpoint,
                             str(project)], cwd=project, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    assert (project / ".coding-os" / "checkpoints" / "journal.json").exists()
    after = cos("checkpoints", "--json", cwd=project)
    assert after.returncode == 0, after.stderr
    assert "completed the interrupted rewind" in after.stderr
    assert tree(project) == at_checkpoint
    assert not (project / ".coding-os" / "checkpoints" / "journal.json").exists()


def test_a_file_name_that_is_not_utf8_is_restored(project: Path) -> None:
    (project / "b.txt").write_text("b\n")
    commit_all(project, "base")
    name = os.fsdecode(b"caf\xe9.txt")
    (project / name).write_bytes(b"v1")
    checkpoint = str(create(project)["id"])
    (project / name).write_bytes(b"v2")
    rewind_ok(project, checkpoint, "--code")
    assert (project / name).read_bytes() == b"v1"
    assert nothing_staged(project / ".coding-os" / "checkpoints")


def test_a_file_too_large_to_store_is_left_alone_not_deleted(project: Path) -> None:
    (project / ".coding-os.yaml").write_text("checkpoints:\n  max_file_bytes: 1000\n")
    (project / "data.csv").write_text("small\n")
    commit_all(project, "base")
    (project / "data.csv").write_text("x" * 2700)
    made = create(project)
    assert made["skipped"] == [["data.csv", "larger than the limit", 2700]]
    (project / "data.csv").write_text("small again\n")
    report = rewind_ok(project, str(made["id"]), "--code")
    assert "data.csv" not in {f["path"] for f in report["code"]["files"]}  # type: ignore[index]
    assert (project / "data.csv").read_text() == "small again\n"


def test_a_linked_worktree_on_another_filesystem_is_restored_by_copies(
        project: Path, tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(project).st_dev:
        import pytest

        pytest.skip("needs /dev/shm on another filesystem than the test's tmp dir")
    (project / "a.txt").write_text("base\n")
    commit_all(project, "base")
    worktree = shm / f"cos-wt-{os.getpid()}-{tmp_path.name}"
    git(project, "worktree", "add", "-q", str(worktree), "-b", f"wt-{tmp_path.name}")
    try:
        checkpoint = str(create(worktree)["id"])
        (worktree / "new.txt").write_text("work\n")
        (worktree / "a.txt").write_text("changed\n")
        rewind_ok(worktree, checkpoint, "--code")
        assert (worktree / "a.txt").read_text() == "base\n"
        assert not (worktree / "new.txt").exists()
        assert not [p for p in worktree.iterdir() if p.name.startswith(".cos-restore")]
        assert cos("rewind", "--undo", cwd=worktree).returncode == 0
        assert (worktree / "new.txt").read_text() == "work\n"
    finally:
        git(project, "worktree", "remove", "--force", str(worktree))
