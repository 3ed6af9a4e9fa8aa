"""Review of the watcher-fed snapshot that reads files and the commit's objects without
`git status` (snapshot._changed_files) and of the object reader behind it
(checkpoints/gitobjects.py). Each test either held from the start or showed a bug that is fixed
since; the one strict xfail is a known limit (docs/daemon.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from coding_os.checkpoints.take import create
from coding_os.checkpoints.rewind import rewind_code
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import commit_all, tree
from tests.checkpoints.test_watch import running, same, stored, whole  # noqa: F401
from tests.conftest import git


def _take(tiers: Tiers, root: str) -> dict[str, object]:
    return create(tiers, root, session=None)


def _watched(tiers: Tiers, root: str) -> tuple[dict[str, object], dict[str, object]]:
    """A checkpoint that must be fed by the watcher, and the whole scan of the tree now."""
    record = _take(tiers, root)
    assert record["scan"] == "watcher"
    return stored(tiers, record), whole(tiers, root)


# -- the fast path ---------------------------------------------------------------------------------


def test_an_untracked_directory_moved_out_of_the_tree(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "d").mkdir()
    (project / "d" / "a.txt").write_text("a\n")
    (project / "d" / "b.txt").write_text("b\n")
    _take(tiers, root)  # the watch starts; d/a.txt and d/b.txt are in the overlay
    shutil.move(str(project / "d"), str(tmp_path / "trash"))
    fast, full = _watched(tiers, root)
    assert "d/a.txt" not in full["layers"][0]["overlay"]  # type: ignore[index]
    same(fast, full, root)


def test_a_file_back_where_a_directory_was_moved_away(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "f").write_text("tracked\n")
    commit_all(project)
    _take(tiers, root)
    os.remove(project / "f")
    (project / "f").mkdir()
    (project / "f" / "x").write_text("x\n")
    _take(tiers, root)  # git tells: f deleted, f/x untracked
    shutil.move(str(project / "f"), str(tmp_path / "gone"))
    (project / "f").write_text("tracked\n")  # the commit's file again
    fast, full = _watched(tiers, root)
    assert "f/x" not in full["layers"][0]["overlay"]  # type: ignore[index]
    same(fast, full, root)


def test_a_rewind_to_a_checkpoint_after_a_directory_moved_away(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "d").mkdir()
    (project / "d" / "a.txt").write_text("a\n")
    _take(tiers, root)
    shutil.move(str(project / "d"), str(tmp_path / "trash"))
    (project / "README.md").write_text("edited\n")
    wanted = tree(project)
    record = _take(tiers, root)
    assert record["scan"] == "watcher"
    (project / "README.md").write_text("edited again\n")
    (project / ".gitignore").write_text("*.log\n")  # the next checkpoint scans the whole tree
    rewind_code(tiers, root, str(record["id"]))
    assert tree(project) == wanted


def test_an_exec_bit_git_is_told_to_ignore(project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    git(project, "config", "core.fileMode", "false")
    _take(tiers, root)
    os.chmod(project / "README.md", 0o755)
    fast, full = _watched(tiers, root)
    assert full["layers"][0]["overlay"] == {}  # type: ignore[index]
    same(fast, full, root)


def test_a_file_converted_at_checkout_rewritten_unchanged(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (project / "notes.txt").write_bytes(b"one\ntwo\n")
    commit_all(project)
    os.remove(project / "notes.txt")
    git(project, "checkout", "--", "notes.txt")  # as a checkout writes it: CRLF
    assert (project / "notes.txt").read_bytes() == b"one\r\ntwo\r\n"
    _take(tiers, root)
    (project / "notes.txt").write_bytes(b"one\r\ntwo\r\n")  # saved again, unchanged
    fast, full = _watched(tiers, root)
    assert full["layers"][0]["overlay"] == {}  # type: ignore[index]
    same(fast, full, root)


@pytest.mark.xfail(strict=True, reason="known limit: a file marked assume-unchanged is read as "
                   "it is (its mark lives in the index's entries, which are not read); a whole "
                   "scan trusts the mark and holds the commit's bytes there")
def test_an_assume_unchanged_file_edited(project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    git(project, "update-index", "--assume-unchanged", "README.md")
    _take(tiers, root)
    (project / "README.md").write_text("edited\n")
    fast, full = _watched(tiers, root)
    assert full["layers"][0]["overlay"] == {}  # type: ignore[index]
    same(fast, full, root)


def test_a_skip_worktree_file_removed(project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "other.txt").write_text("other\n")
    commit_all(project)
    git(project, "update-index", "--skip-worktree", "other.txt")
    _take(tiers, root)
    os.remove(project / "other.txt")
    fast, full = _watched(tiers, root)
    assert full["layers"][0]["overlay"] == {}  # type: ignore[index]
    same(fast, full, root)


def _replaced(project: Path) -> tuple[str, str]:
    """HEAD's commit (f.txt = "two\\n") replaced (`git replace`) by one where f.txt is
    "three\\n", the index and the file as git sees HEAD: clean to git status."""
    (project / "f.txt").write_text("three\n")
    commit_all(project, "replacement")
    replacement = git(project, "rev-parse", "HEAD")
    git(project, "reset", "-q", "--hard", "HEAD~1")
    (project / "f.txt").write_text("two\n")
    commit_all(project, "original")
    original = git(project, "rev-parse", "HEAD")
    git(project, "replace", original, replacement)
    git(project, "reset", "-q", "--hard")
    assert (project / "f.txt").read_text() == "three\n"
    assert git(project, "status", "--porcelain") == ""
    return original, replacement


def test_a_rewind_in_a_repository_with_a_replaced_commit(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _replaced(project)
    wanted = tree(project)
    first = _take(tiers, root)  # git status: clean, every file the (replaced) commit's
    (project / "f.txt").write_text("edited\n")
    rewind_code(tiers, root, str(first["id"]))
    assert tree(project) == wanted


def test_a_replaced_commit_on_the_fast_path(project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _replaced(project)
    (project / "f.txt").write_text("edited\n")
    _take(tiers, root)
    (project / "f.txt").write_text("two\n")  # the original commit's bytes, not git's HEAD's
    fast, full = _watched(tiers, root)
    assert "f.txt" in full["layers"][0]["overlay"]  # type: ignore[index]
    assert fast["layers"] == full["layers"]


def test_a_rewind_without_the_daemon_in_a_repository_with_a_replaced_commit(
        project: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _replaced(project)
    (project / "f.txt").write_text("two\n")  # modified, to git: the replacement says three
    wanted = tree(project)
    first = _take(tiers, root)
    git(project, "checkout", "--", "f.txt")  # clean again: three
    rewind_code(tiers, root, str(first["id"]))
    assert tree(project) == wanted


def test_a_group_exec_bit_git_does_not_count(project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _take(tiers, root)
    os.chmod(project / "README.md", 0o654)
    fast, full = _watched(tiers, root)
    assert full["layers"][0]["overlay"] == {}  # type: ignore[index]
    same(fast, full, root)


def test_odd_names_of_the_commit_edited_and_put_back(
        project: Path, running: dict[str, object]) -> None:
    """Names with spaces, not UTF-8, and names that are prefixes of others, in a packed
    repository: each edited, put back to the commit's bytes, removed, given an exec bit."""
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    odd = os.fsdecode(b"caf\xe9 au lait.txt")
    names = ["a", "a.txt", "a-b", "a b", "ab/a", "ab/a.b", "ab c/x y", odd]
    for name in names:
        os.makedirs(os.path.dirname(os.path.join(root, name)) or root, exist_ok=True)
        Path(root, name).write_text(f"{name!r}\n")
    commit_all(project)
    git(project, "gc", "-q")
    _take(tiers, root)
    Path(root, "a").write_text("edited\n")
    Path(root, "a b").write_text("edited\n")
    os.remove(os.path.join(root, "a.txt"))
    os.chmod(os.path.join(root, "ab/a.b"), 0o755)
    Path(root, odd).write_text("edited\n")
    Path(root, "ab c/x y").write_text("edited\n")
    fast, full = _watched(tiers, root)
    assert fast["layers"] == full["layers"]
    Path(root, "a").write_text(f"{'a'!r}\n")  # the commit's again
    Path(root, odd).write_text(f"{odd!r}\n")
    Path(root, "a.txt").write_text("new\n")
    Path(root, "ab c/x y").unlink()
    fast, full = _watched(tiers, root)
    assert fast["layers"] == full["layers"]


def test_intent_to_add_ignored_but_tracked_and_replaced_by_links(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "logs").mkdir()
    (project / "logs" / "keep.log").write_text("tracked\n")
    (project / "other.txt").write_text("other\n")
    (project / "dir").mkdir()
    (project / "dir" / "x").write_text("x\n")
    commit_all(project)
    (project / ".gitignore").write_text("*.log\n")
    commit_all(project)
    (project / "ita.txt").write_text("new\n")
    git(project, "add", "-N", "ita.txt")
    _take(tiers, root)
    (project / "ita.txt").write_text("newer\n")
    (project / "logs" / "keep.log").write_text("edited\n")
    os.remove(project / "other.txt")
    os.symlink("dir", project / "other.txt")  # a tracked file now a symlink to a directory
    fast, full = _watched(tiers, root)
    assert fast["layers"] == full["layers"]
    os.remove(project / "ita.txt")
    os.remove(project / "other.txt")
    (project / "other.txt").write_text("other\n")
    (project / "logs" / "keep.log").write_text("tracked\n")
    fast, full = _watched(tiers, root)
    same(fast, full, root)


def test_a_root_below_the_repository_top_reads_its_own_paths(
        project: Path, running: dict[str, object]) -> None:
    """The tree is `sub/` of its repository; the commit has `x` both at the top and in `sub`."""
    (project / "x").write_text("top\n")
    (project / "sub").mkdir()
    (project / "sub" / "x").write_text("sub\n")
    (project / "sub" / "y").write_text("y\n")
    commit_all(project)
    root = str(project / "sub")
    tiers = Tiers(str(project / "state-of-sub"))
    _take(tiers, root)
    (project / "sub" / "x").write_text("top\n")  # the bytes the top's x has
    (project / "sub" / "y").write_text("changed\n")
    fast, full = _watched(tiers, root)
    assert fast["layers"] == full["layers"]
    (project / "sub" / "x").write_text("sub\n")
    os.chmod(project / "sub" / "y", 0o755)
    fast, full = _watched(tiers, root)
    assert fast["layers"] == full["layers"]


# -- gitobjects ------------------------------------------------------------------------------------

from coding_os.git.objects import Objects, Unreadable, objects_of  # noqa: E402


def _git_out(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def _revisions(repo: Path, count: int, name: str = "f.txt") -> None:
    """`count` commits each changing one line of a 300-line file (long delta chains)."""
    lines = [f"line {n}\n" for n in range(300)]
    for number in range(count):
        lines[number % 300] = f"edited {number}\n"
        (repo / name).write_text("".join(lines))
        git(repo, "add", name)
        git(repo, "commit", "-q", "-m", str(number))


def _reads_as_git(repo: Path, objects: Objects) -> None:
    out = _git_out(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    for line in out.decode().splitlines():
        sha, kind = line.split()
        try:
            found = objects.read(sha)
        except Unreadable:
            continue  # left to git: allowed
        assert found == (kind, _git_out(repo, "cat-file", kind, sha)), sha


def test_an_alternate_repacked_after_the_first_read(tmp_path: Path, repo: Path) -> None:
    _revisions(repo, 5)
    (repo / "g.txt").write_text("in a second pack\n")
    commit_all(repo)
    git(repo, "repack", "-dq")  # one pack for the history
    (repo / "h.txt").write_text("a third\n")
    commit_all(repo)
    git(repo, "repack", "-dq")  # and a second one
    clone = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(clone))
    blob = git(repo, "rev-parse", "HEAD:h.txt")
    objects = objects_of(str(clone))
    assert objects is not None
    with pytest.raises(Unreadable):
        objects.read("0" * 40)  # the packs are listed, none of their data mapped yet
    git(repo, "repack", "-adq")  # the source repository packs anew: the old packs are gone
    again = objects_of(str(clone))
    assert again is not None
    try:
        assert again.read(blob) == ("blob", b"a third\n")
    except Unreadable:
        pass  # left to git: fine


def test_a_repository_packed_with_ref_deltas_only_reads_as_git(repo: Path) -> None:
    _revisions(repo, 60)
    git(repo, "-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq", "--depth=50",
        "--window=50")
    objects = objects_of(str(repo))
    assert objects is not None
    head = git(repo, "rev-parse", "HEAD")
    assert objects.tree_entry(head, "f.txt") is not None
    _reads_as_git(repo, objects)


def test_nested_alternates_and_a_pack_without_its_index(tmp_path: Path, repo: Path) -> None:
    """Objects only an alternate of an alternate has, or only a pack whose .idx is gone, are
    not found here (git is asked), never read wrong."""
    _revisions(repo, 3)
    middle = tmp_path / "middle"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(middle))
    last = tmp_path / "last"
    git(tmp_path, "clone", "-q", "--shared", str(middle), str(last))
    objects = objects_of(str(last))
    assert objects is not None
    head = git(last, "rev-parse", "HEAD")
    try:
        assert objects.tree_entry(head, "f.txt") == (
            0o100644, git(last, "rev-parse", "HEAD:f.txt"))
    except Unreadable:
        pass
    blob = git(repo, "rev-parse", "HEAD:f.txt")
    git(repo, "gc", "-q")
    pack_dir = repo / ".git" / "objects" / "pack"
    for idx in pack_dir.glob("*.idx"):
        idx.unlink()
    with pytest.raises(Unreadable):
        Objects(str(repo / ".git" / "objects")).read(blob)
