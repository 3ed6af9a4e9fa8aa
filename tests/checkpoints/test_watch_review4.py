"""The fourth review of the daemon's file watcher: the hook path end to end (several panels, a
rewind and its undo between), whole-process interleavings (a checkpoint killed between the
daemon's answer and the base it keeps, bases remembered out of order, a daemon restarted
meanwhile), symlinked directories and hard links in the tree, and the daemon's lifetime (idle
trees forgotten, a tree removed while watched, an answer that came too late). Some tests are
bugs it found, proven closed; the others are checks that held."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coding_os.daemon import server
from coding_os.checkpoints import points, settings, snapshot, take, watch
from coding_os.checkpoints.rewind import rewind_code
from coding_os.checkpoints.rewind import undo
from coding_os.checkpoints.store import ObjectStore
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import commit_all, rewind_ok, tree
from tests.checkpoints.test_watch import running, same, stored, whole  # noqa: F401
from tests.conftest import cos, fire, git

PANELS = (("claude", "0f3c9a7e-1b2d-4c5e-8f90-0000000004a1", {"CLAUDE_PID": "4101"}),
          ("codex", "0f3c9a7e-1b2d-4c5e-8f90-0000000004a2", {"CODEX_PID": "4102"}))


def _create(tiers: Tiers, root: str, **kwargs: object) -> dict[str, object]:
    return take.create(tiers, root, session=None, **kwargs)  # type: ignore[arg-type]


def _base(tiers: Tiers, root: str) -> dict[str, object] | None:
    return watch._base(tiers.checkpoints_dir, root)


def _last_log(project: Path) -> dict[str, str]:
    line = (project / ".coding-os" / ".hooks.log").read_text(encoding="utf-8").splitlines()[-1]
    return dict(part.split("=", 1) for part in line.split(" ") if "=" in part)


# -- (1) the hook path end to end -----------------------------------------------------------------


def _hook(project: Path, panel: tuple[str, str, dict[str, str]], event: str,
          **payload: object) -> dict[str, str]:
    agent, native, env = panel
    proc = fire(event, {"session_id": native, **payload}, cwd=project, agent=agent, env=env)
    assert proc.returncode == 0, proc.stderr
    return _last_log(project)


def test_hooks_of_two_panels_with_a_rewind_and_its_undo_between_stay_true(
        project: Path, running: dict[str, object]) -> None:
    """Real `cos hook` processes of two panels take every checkpoint of the tree; each is the
    whole scan of the tree as it was, across a `cos rewind --code` and a `cos rewind --undo`."""
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("a = 1\n")
    (project / "link").symlink_to("src")
    commit_all(project, "base")
    for panel in PANELS:
        _hook(project, panel, "SessionStart", source="startup")
    folder = tiers.checkpoints_dir
    taken: list[str] = []
    kept: list[bool] = []

    def check(log: dict[str, str]) -> None:
        assert "checkpoint_error" not in log, log
        record = points.load(folder, log["checkpoint"])
        same(stored(tiers, record), whole(tiers, root), root)
        taken.append(str(record["id"]))
        base = _base(tiers, root)
        kept.append(base is not None and base["manifest"] == record["manifest"])

    for turn in range(3):
        for number, panel in enumerate(PANELS):
            check(_hook(project, panel, "UserPromptSubmit", prompt=f"turn {turn}"))
            (project / "src" / f"p{number}.py").write_text(f"{turn}\n")
            (project / "link" / "a.py").write_text(f"a = {turn}{number}\n")  # through a symlink
            check(_hook(project, panel, "PreToolUse", tool_name="Bash",
                        tool_use_id=f"{number}-{turn}", tool_input={"command": "make"}))
            os.replace(project / "src" / f"p{number}.py", project / f"moved{number}.py")
        if turn == 1:
            wanted = tree(project)
            target = taken[-1]
            (project / "src" / "a.py").write_text("after the checkpoint\n")
            rewind_ok(project, target, "--code")
            (project / "src" / "late.py").write_text("late\n")
            check(_hook(project, PANELS[0], "PreToolUse", tool_name="Bash", tool_use_id="r",
                        tool_input={"command": "ls"}))
            proc = cos("rewind", "--undo", "--json", cwd=project)
            assert proc.returncode == 0, proc.stderr
            check(_hook(project, PANELS[1], "PreToolUse", tool_name="Bash", tool_use_id="u",
                        tool_input={"command": "ls"}))
            assert wanted != tree(project)
    assert sum(kept) >= len(kept) - 2, kept  # the hooks asked the daemon and kept its base
    record = _create(tiers, root)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root), root)


# -- (2) whole-process interleavings --------------------------------------------------------------


KILLER = r'''
import os, signal, sys
from coding_os.checkpoints import take, watch
from coding_os.state.tiers import Tiers

state, root, where = sys.argv[1:4]
if where == "remember":  # between storing the manifest (and record) and keeping the base
    watch.remember = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
else:  # between the daemon's answer and the snapshot
    real = watch.look
    def look(*args, **kwargs):
        answer = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    watch.look = look
take.create(Tiers(state), root, session=None)
'''


@pytest.mark.parametrize("where", ["look", "remember"])
def test_a_checkpoint_killed_before_it_kept_its_base_leaves_the_next_one_true(
        project: Path, running: dict[str, object], where: str) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "a.txt").write_text("one\n")
    _create(tiers, root)
    (project / "a.txt").write_text("two\n")
    (project / "b.txt").write_text("b\n")
    proc = subprocess.run([sys.executable, "-c", KILLER, tiers.state_dir, root, where],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (project / "c.txt").write_text("c\n")
    record = _create(tiers, root)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))


def test_an_older_base_remembered_after_a_newer_one_stays_true(
        project: Path, running: dict[str, object]) -> None:
    """A looks and snapshots, B checkpoints whole, A keeps its (older) base last."""
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    store = ObjectStore(tiers.checkpoints_dir)
    _create(tiers, root)
    (project / "a.txt").write_text("one\n")
    cap, manifest, looked = snapshot.snapshot_now(tiers, root, store, settings.Settings())
    assert looked is not None
    oid, _ = store.put(json.dumps(manifest, separators=(",", ":")).encode("ascii"))
    (project / "a.txt").write_text("two, after A looked\n")
    (project / "b.txt").write_text("b\n")
    newer = _create(tiers, root)  # B
    same(stored(tiers, newer), whole(tiers, root))
    watch.remember(tiers.checkpoints_dir, root, oid, looked.token, snapshot.scope(cap))  # A, late
    (project / "c.txt").write_text("c\n")
    record = _create(tiers, root)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))


def test_a_daemon_restarted_between_the_look_and_the_remember_makes_the_next_one_scan(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    store = ObjectStore(tiers.checkpoints_dir)
    _create(tiers, root)
    cap, manifest, looked = snapshot.snapshot_now(tiers, root, store, settings.Settings())
    assert looked is not None
    oid, _ = store.put(json.dumps(manifest, separators=(",", ":")).encode("ascii"))
    server.stop()
    (project / "unseen.txt").write_text("nobody watched\n")
    server.start()
    watch.remember(tiers.checkpoints_dir, root, oid, looked.token, snapshot.scope(cap))
    record = _create(tiers, root)
    assert record["scan"] == "full"
    same(stored(tiers, record), whole(tiers, root))


# -- (3) rewind --undo with the daemon ------------------------------------------------------------


def test_undo_after_a_rewind_with_the_daemon_brings_the_tree_back(
        project: Path, running: dict[str, object]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "d").mkdir()
    (project / "d" / "x.txt").write_text("x\n")
    (project / "l").symlink_to("d")
    first = _create(tiers, root)
    (project / "d" / "x.txt").write_text("x2\n")
    os.rename(project / "d", project / "e")
    (project / "e" / "y.txt").write_text("y\n")
    (project / "l").unlink()
    (project / "l").mkdir()  # the symlink is now a directory
    (project / "l" / "z.txt").write_text("z\n")
    os.remove(project / "README.md")
    _create(tiers, root)
    (project / "e" / "y.txt").write_text("y2, after the last checkpoint\n")
    before = tree(project)
    rewind_code(tiers, root, str(first["id"]))
    assert (project / "l").is_symlink() and (project / "d" / "x.txt").read_text() == "x\n"
    record = _create(tiers, root)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))
    undo(tiers, root)
    assert tree(project) == before
    record = _create(tiers, root)
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, root))
    undo(tiers, root)  # the undo undone: the rewind again
    assert (project / "l").is_symlink()
    record = _create(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


def test_undo_of_a_rewind_over_a_symlink_that_replaced_a_directory(project: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "d").mkdir()
    (project / "d" / "x.txt").write_text("x\n")
    first = _create(tiers, root)
    os.rename(project / "d", project / "e")
    (project / "e" / "x.txt").write_text("x2\n")
    (project / "e" / "y.txt").write_text("y\n")
    (project / "d").symlink_to("e")
    before = tree(project)
    report = rewind_code(tiers, root, str(first["id"]))
    held = stored(tiers, points.load(tiers.checkpoints_dir, str(report["before"])))
    assert "d/x.txt" not in held["layers"][0]["overlay"]  # type: ignore[index]
    undo(tiers, root)
    assert tree(project) == before


# -- (4) symlinks, hard links, renames ------------------------------------------------------------


def test_changes_through_and_around_symlinked_directories_stay_true(
        project: Path, running: dict[str, object], tmp_path: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("o\n")
    (project / "real").mkdir()
    (project / "real" / "r.txt").write_text("r\n")
    (project / "in").symlink_to("real")
    (project / "out").symlink_to(outside)
    (project / "gone").mkdir()
    (project / "gone" / "g.txt").write_text("g\n")
    commit_all(project, "links")
    _create(tiers, root)
    steps = [
        lambda: (project / "in" / "r.txt").write_text("through the link\n"),
        lambda: (project / "in" / "new.txt").write_text("new through the link\n"),
        lambda: (outside / "o.txt").write_text("outside, not part of the tree\n"),
        lambda: ((project / "in").unlink(), (project / "in").mkdir(),
                 (project / "in" / "r.txt").write_text("a directory now\n")),
        lambda: (shutil.rmtree(project / "gone"), (project / "gone").symlink_to("real")),
        lambda: (project / "gone" / "via.txt").write_text("via the new link\n"),
        lambda: ((project / "gone").unlink(), (project / "gone").mkdir(),
                 (project / "gone" / "g.txt").write_text("g again\n")),
        lambda: (os.rename(project / "real", project / "real2"),
                 (project / "real").symlink_to("real2")),
    ]
    for step in steps:
        step()
        record = _create(tiers, root)
        same(stored(tiers, record), whole(tiers, root))


def test_a_tree_reached_through_a_symlink_is_followed(
        isolated_env: Path, running: dict[str, object], tmp_path: Path) -> None:
    """The hook resolves the tree to its real path: a checkpoint from the symlinked path
    and one from the real one share the watch; repointing the link is another tree."""
    real = tmp_path / "real" / "repo"
    real.mkdir(parents=True)
    git(real, "init", "-q", "-b", "main")
    (real / "a.txt").write_text("a\n")
    commit_all(real, "a")
    (tmp_path / "via").symlink_to(real.parent)
    via = tmp_path / "via" / "repo"
    first = json.loads(cos("checkpoint", "create", "--json", cwd=via).stdout)
    assert first["root"] == str(real)
    (via / "a.txt").write_text("b\n")
    second = json.loads(cos("checkpoint", "create", "--json", cwd=real).stdout)
    assert second["scan"] == "watcher"
    tiers = Tiers(str(real / ".coding-os"))
    same(stored(tiers, second), whole(tiers, str(real)))


def test_a_file_written_through_one_of_two_hard_links_in_the_tree_is_seen(
        project: Path, running: dict[str, object]) -> None:
    """Both names are in the tree: inotify reports only the one written through."""
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "a").mkdir()
    (project / "b").mkdir()
    (project / "a" / "one.txt").write_text("one\n")
    os.link(project / "a" / "one.txt", project / "b" / "two.txt")
    _create(tiers, root)
    with open(project / "a" / "one.txt", "w") as f:
        f.write("changed through a/one.txt\n")
    record = _create(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


def test_the_state_dir_inside_a_renamed_directory_stays_out(
        tmp_path: Path, isolated_env: Path, running: dict[str, object]) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "tools").mkdir()
    (root / "tools" / "t.txt").write_text("t\n")
    commit_all(root, "t")
    tiers = Tiers(str(root / "tools" / "state"))
    _create(tiers, str(root))
    os.rename(root / "tools", root / "tools2")  # the state dir went with it
    (root / "tools2" / "t.txt").write_text("t2\n")
    record = _create(tiers, str(root))  # a new state dir is made at tools/state
    same(stored(tiers, record), whole(tiers, str(root)))
    (root / "x.txt").write_text("x\n")
    record = _create(tiers, str(root))
    assert record["scan"] == "watcher"
    same(stored(tiers, record), whole(tiers, str(root)))


# -- (5) the daemon's lifetime --------------------------------------------------------------------


def test_forgotten_idle_trees_and_removed_trees_make_the_next_checkpoint_scan(
        tmp_path: Path, isolated_env: Path) -> None:
    """In process: the server's idle sweep, a tree removed and made again, many trees."""
    from coding_os.daemon.server import IDLE_FORGET_S, _Server

    server = _Server(str(tmp_path / "d"))
    try:
        roots = []
        for number in range(5):
            root = tmp_path / f"t{number}"
            root.mkdir()
            git(root, "init", "-q", "-b", "main")
            roots.append(str(root))
        tokens = {}
        for root in roots:
            answer = server.handle({"op": "changes", "root": root, "state_dir": None,
                                    "since": None, "env": {}})
            tokens[root] = answer["token"]
        Path(roots[0], "f").write_text("f\n")
        answer = server.handle({"op": "changes", "root": roots[0], "state_dir": None,
                                "since": tokens[roots[0]], "env": {}})
        assert answer["changed"] == ["f"]
        tokens[roots[0]] = answer["token"]
        for tree_ in server.watches.trees.values():
            if tree_.root == roots[1]:
                tree_.asked -= IDLE_FORGET_S + 1
        shutil.rmtree(roots[2])
        server.watches.drain()
        server.forget_idle()
        assert sorted(t.root for t in server.watches.trees.values()) == [
            roots[0], roots[3], roots[4]]
        assert server.watches._wds, "the watches of the others are kept"
        for root in roots[1:3]:
            os.makedirs(root, exist_ok=True)
            git(Path(root), "init", "-q", "-b", "main")
            answer = server.handle({"op": "changes", "root": root, "state_dir": None,
                                    "since": tokens[root], "env": {}})
            assert answer["ok"] is True and answer["changed"] is None
        Path(roots[0], "g").write_text("g\n")
        answer = server.handle({"op": "changes", "root": roots[0], "state_dir": None,
                                "since": tokens[roots[0]], "env": {}})
        assert answer["changed"] == ["g"]
    finally:
        server.watches.inotify.close()


def test_an_answer_that_came_too_late_once_does_not_keep_the_tree_scanning(
        project: Path, running: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.daemon import client

    for number in range(2000):  # a tree whose watch takes longer than the (shortened) timeout
        (project / f"d{number}" / "e").mkdir(parents=True)
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    real = client.request
    monkeypatch.setattr(client, "request",
                        lambda folder, message, timeout=5.0: real(folder, message, 0.04))
    scans = [_create(tiers, root)["scan"] for _ in range(4)]
    assert "watcher" in scans, scans


def test_two_panels_with_other_git_variables_each_get_watcher_fed_checkpoints(
        project: Path, running: dict[str, object], isolated_env: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    scans = []
    for number in range(4):
        if number % 2:
            monkeypatch.setenv("XDG_CONFIG_HOME", str(isolated_env / ".config"))
        else:
            monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        (project / f"f{number}.txt").write_text(f"{number}\n")
        record = _create(tiers, root)
        same(stored(tiers, record), whole(tiers, root))
        scans.append(record["scan"])
    assert scans[2:] == ["watcher", "watcher"], scans


# -- ignore rules from a file git's configuration includes ----------------------------------------


def test_an_ignore_file_named_in_an_included_config_is_followed(
        project: Path, running: dict[str, object], isolated_env: Path) -> None:
    included = isolated_env / "included.gitconfig"
    included.write_text("")
    (isolated_env / ".gitconfig").write_text(f"[include]\n\tpath = {included}\n")
    ignore = isolated_env / "ignore"
    ignore.write_text("build/\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    _create(tiers, root)
    included.write_text(f"[core]\n\texcludesFile = {ignore}\n")  # build/ is ignored now
    record = _create(tiers, root)
    same(stored(tiers, record), whole(tiers, root))
