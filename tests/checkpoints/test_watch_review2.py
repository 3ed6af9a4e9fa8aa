"""The second review of the daemon's file watcher: each test is a way a watcher-fed checkpoint
differed from a whole scan (or a rewind restored or deleted the wrong thing, in a tree below its
repository's top even without the daemon), and proves it closed; beside them, the same scenarios
without the daemon. The one strict xfail is a known limit (docs/daemon.md)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from coding_os.daemon import server
from coding_os.checkpoints.take import create
from coding_os.checkpoints.rewind import rewind_code
from coding_os.checkpoints.manifest import resolve
from coding_os.checkpoints.store import ObjectStore
from coding_os.checkpoints.settings import Settings
from coding_os.checkpoints.snapshot import capture_of
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import commit_all
from tests.checkpoints.test_watch import (  # noqa: F401
    daemon_env,
    running,
    start_daemon_ignoring,
    same,
    stored,
    whole,
)
from tests.checkpoints.test_watch_review import unstaged_then_gc
from tests.conftest import git


def _nested(project: Path) -> Path:
    inner = project / "lib"
    inner.mkdir()
    git(inner, "init", "-q", "-b", "main")
    (inner / "a.txt").write_text("a\n")
    commit_all(inner, "lib")
    return inner


# -- git's index: entries not in the overlay ------------------------------------------------------


def _force_added(project: Path) -> tuple[Tiers, str]:
    (project / ".gitignore").write_text("*.log\n")
    commit_all(project, "ignore")
    (project / "x.log").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)  # x.log ignored: not part of it
    git(project, "add", "-f", "x.log")  # only git's index changes
    return tiers, root


def test_a_file_force_added_to_the_index_joins_the_snapshot(
        project: Path, running: dict[str, object]) -> None:
    tiers, root = _force_added(project)
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root), root)


def test_a_rewind_to_a_checkpoint_after_git_add_f_restores_the_file(
        project: Path, running: dict[str, object]) -> None:
    tiers, root = _force_added(project)
    record = create(tiers, root, session=None)
    (project / "x.log").write_text("two\n")
    create(tiers, root, session=None)
    rewind_code(tiers, root, str(record["id"]))
    assert (project / "x.log").exists(), "the rewind deleted a file its checkpoint held"
    assert (project / "x.log").read_text() == "one\n"


def test_without_the_daemon_the_rewind_after_git_add_f_restores_the_file(project: Path) -> None:
    tiers, root = _force_added(project)
    record = create(tiers, root, session=None)
    (project / "x.log").write_text("two\n")
    create(tiers, root, session=None)
    rewind_code(tiers, root, str(record["id"]))
    assert (project / "x.log").read_text() == "one\n"


def _soft_reset_then_gc(project: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "a.txt").write_text("a\n")
    commit_all(project, "a")
    create(tiers, root, session=None)
    (project / "a.txt").write_text("b\n")
    git(project, "commit", "-q", "-am", "b")
    create(tiers, root, session=None)
    git(project, "reset", "-q", "--soft", "HEAD~1")  # HEAD moves back, no file changes
    git(project, "reset", "-q")  # unstaged: "b" is in the tree only
    record = create(tiers, root, session=None)
    git(project, "reflog", "expire", "--expire=now", "--all")
    git(project, "gc", "-q", "--prune=now")  # the commit "b" is gone
    (project / "a.txt").write_text("c\n")
    try:
        rewind_code(tiers, root, str(record["id"]))
    except Exception:  # noqa: BLE001 - the checkpoint names a pruned commit
        pass
    assert (project / "a.txt").read_text() == "b\n"


def test_a_head_moved_back_is_noticed(project: Path, running: dict[str, object]) -> None:
    _soft_reset_then_gc(project)


def test_without_the_daemon_a_head_moved_back_is_noticed(project: Path) -> None:
    _soft_reset_then_gc(project)


def _ignored_dir_with_tracked_file(project: Path) -> tuple[Tiers, str]:
    (project / ".gitignore").write_text("build/\n")
    commit_all(project, "ignore")
    (project / "build").mkdir()
    (project / "build" / "keep.txt").write_text("one\n")
    (project / "build" / "out.o").write_text("o\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)  # the watch leaves build/ unwatched
    git(project, "add", "-f", "build/keep.txt")
    git(project, "commit", "-q", "-m", "keep")
    return tiers, root


def test_a_commit_of_a_file_in_an_unwatched_directory_is_seen(
        project: Path, running: dict[str, object]) -> None:
    tiers, root = _ignored_dir_with_tracked_file(project)
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root), root)


def test_edits_of_a_file_tracked_after_the_watch_began_in_an_ignored_dir_are_seen(
        project: Path, running: dict[str, object]) -> None:
    tiers, root = _ignored_dir_with_tracked_file(project)
    (project / "README.md").write_text("a path to look at: the new commit makes it scan\n")
    assert create(tiers, root, session=None)["scan"] == "full"
    (project / "build" / "keep.txt").write_text("two\n")
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root), root)


# -- nested repositories: their git dirs are not watched ------------------------------------------


def test_unstaging_in_a_nested_repository_does_not_leave_bytes_only_in_git(
        project: Path, running: dict[str, object]) -> None:
    unstaged_then_gc(project, _nested(project))


def test_without_the_daemon_unstaging_in_a_nested_repository_is_restored(project: Path) -> None:
    unstaged_then_gc(project, _nested(project))


def test_a_nested_repositorys_exclude_file_is_followed(
        project: Path, running: dict[str, object]) -> None:
    inner = _nested(project)
    (inner / ".git" / "info").mkdir(exist_ok=True)
    (inner / ".git" / "info" / "exclude").write_text("*.log\n")
    (inner / "x.log").write_text("log\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)
    (inner / ".git" / "info" / "exclude").write_text("")  # lib/x.log is part of the tree now
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root))


# -- ignore rules outside the tree ----------------------------------------------------------------


def test_an_exclude_file_in_a_new_info_directory_is_followed(
        project: Path, running: dict[str, object]) -> None:
    shutil.rmtree(project / ".git" / "info")
    (project / ".gitignore").write_text("/.coding-os/\n")
    commit_all(project, "i")
    (project / "x.log").write_text("log\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)
    (project / ".git" / "info").mkdir()
    (project / ".git" / "info" / "exclude").write_text("*.log\n")
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root))


def test_the_xdg_git_config_is_followed(
        project: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
        daemon_env: dict[str, str]) -> None:
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")  # git then reads ~/.gitconfig and the XDG one
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    server.start()
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)
    ignore = isolated_env / "my-ignore"
    ignore.write_text("build/\n")
    (isolated_env / ".config" / "git").mkdir(parents=True)
    (isolated_env / ".config" / "git" / "config").write_text(
        f"[core]\n\texcludesFile = {ignore}\n")
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root))


def test_the_daemons_environment_does_not_decide_what_is_watched(
        project: Path, isolated_env: Path, daemon_env: dict[str, str]) -> None:
    start_daemon_ignoring(daemon_env, isolated_env, "build/")
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)
    (project / "build" / "out.txt").write_text("two\n")
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root))


# -- a root below the repository's top: HEAD entries ----------------------------------------------


def _subdir_rewind(project: Path) -> Path:
    (project / "a.txt").write_text("top\n")
    sub = project / "sub"
    sub.mkdir()
    (sub / "a.txt").write_text("sub one\n")
    (sub / "only.txt").write_text("only one\n")
    commit_all(project, "sub")
    tiers = Tiers(str(sub / ".coding-os"))
    root = str(sub)
    first = create(tiers, root, session=None)
    (sub / "a.txt").write_text("sub two\n")
    (sub / "only.txt").write_text("only two\n")
    create(tiers, root, session=None)
    rewind_code(tiers, root, str(first["id"]))
    return sub


def test_a_rewind_in_a_subdirectory_root_restores_its_own_files(
        project: Path, running: dict[str, object]) -> None:
    sub = _subdir_rewind(project)
    assert (sub / "only.txt").exists(), "the rewind deleted a file of the commit"
    assert (sub / "a.txt").read_text() == "sub one\n"
    assert (sub / "only.txt").read_text() == "only one\n"


def test_without_the_daemon_a_subdirectory_rewind_restores_its_own_files(project: Path) -> None:
    sub = _subdir_rewind(project)
    assert (sub / "a.txt").read_text() == "sub one\n"
    assert (sub / "only.txt").read_text() == "only one\n"
    assert (project / "a.txt").read_text() == "top\n"


def test_commit_entries_from_git_status_match_ls_tree(project: Path, tmp_path: Path) -> None:
    """Capture.commit_entries (HEAD columns of `git status`) give what ls-tree gives: a file
    added to the index only, a HEAD directory now a file, a symlink, an executable, a HEAD file
    now a directory, a submodule, at the top and in a subdirectory root."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "u.txt").write_text("u\n")
    commit_all(upstream, "u")
    for top in (project, project / "sub"):
        top.mkdir(exist_ok=True)
        (top / "dir").mkdir()
        (top / "dir" / "f.txt").write_text("f\n")
        (top / "file").write_text("file\n")
        os.symlink("file", top / "link")
        (top / "run.sh").write_text("#!/bin/sh\n")
        os.chmod(top / "run.sh", 0o755)
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream),
        "sub/mod")
    commit_all(project, "shapes")
    for top in (project, project / "sub"):
        shutil.rmtree(top / "dir")
        (top / "dir").write_text("now a file\n")
        (top / "file").unlink()
        (top / "file").mkdir()
        (top / "file" / "x").write_text("x\n")
        (top / "link").unlink()
        (top / "link").write_text("no longer a link\n")
        os.chmod(top / "run.sh", 0o644)
        (top / "added.txt").write_text("added\n")
    git(project, "add", "-A")
    (project / "sub" / "mod" / "u.txt").write_text("dirty\n")
    for top in (project, project / "sub"):
        tiers = Tiers(str(tmp_path / f"state-{top.name}"))
        cap = capture_of(tiers, str(top), ObjectStore(tiers.checkpoints_dir), Settings())
        from coding_os.checkpoints.snapshot import capture

        manifest = capture(cap, "worktree")
        paths = {"dir", "dir/f.txt", "file", "file/x", "link", "run.sh", "added.txt", "mod"}
        empty = {**manifest, "layers": [{**layer, "overlay": {}}  # type: ignore[dict-item]
                                        for layer in manifest["layers"]]}  # type: ignore[union-attr]
        known = resolve(str(top), empty, paths, cap.commit_entries)
        if top == project:  # ls-tree is right at the top (see the subdirectory xfail above)
            asked = resolve(str(top), empty, paths)
            assert known == asked
        assert known["dir/f.txt"][0] is not None and known["dir"][0] is None
        assert known["added.txt"][0] is None and known["file"][0] is not None
        assert known["link"][0][0] == "l" and int(known["run.sh"][0][2]) == 0o100755


# -- minor ----------------------------------------------------------------------------------------


@pytest.mark.xfail(strict=True, reason="known limit: a commit inside a submodule writes only to "
                   "its git dir; the watcher-fed snapshot does not list the submodule in skipped "
                   "as a whole scan does")
def test_a_submodule_moved_to_another_commit_is_listed_as_skipped(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "u.txt").write_text("u\n")
    commit_all(upstream, "u")
    git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream),
        "mod")
    git(project, "commit", "-q", "-m", "mod")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    create(tiers, root, session=None)
    git(project / "mod", "commit", "-q", "--allow-empty", "-m", "moved")
    record = create(tiers, root, session=None)
    same(stored(tiers, record), whole(tiers, root), root)


def test_a_second_state_dir_for_the_same_tree_sees_the_first_ones_files(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    (project / ".git" / "info" / "exclude").write_text("")
    first = Tiers(str(project / "state"))
    create(first, str(project), session=None)  # the watch leaves state/ unwatched
    second = Tiers(str(tmp_path / "elsewhere"))
    root = str(project)
    create(second, root, session=None)
    (project / "state" / "note.txt").write_text("part of the tree for the second\n")
    record = create(second, root, session=None)
    same(stored(second, record), whole(second, root))


def test_in_a_linked_worktree_its_own_index_is_watched(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(project, "worktree", "add", "-q", str(wt), "-b", "side")
    wt = wt.resolve()
    tiers = Tiers(str(tmp_path / "wt-state"))
    root = str(wt)
    (wt / "staged.txt").write_text("only in the index\n")
    git(wt, "add", "staged.txt")
    create(tiers, root, session=None)
    git(wt, "reset", "-q", "--", "staged.txt")
    record = create(tiers, root, session=None)
    assert record["scan"] == "full"  # the worktree's own index changed: looked at again
    same(stored(tiers, record), whole(tiers, root))
    (wt / "staged.txt").write_text("then edited\n")
    record = create(tiers, root, session=None)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))
