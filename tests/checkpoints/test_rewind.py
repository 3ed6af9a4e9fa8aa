"""Rewinding the code to a checkpoint and undoing it (checkpoints/core.py: `preview`,
`rewind_code`, `undo`): a rewind never destroys a file no snapshot holds (a file git ignores, a
file over the size limit), and the undo brings the tree back as it was before the rewind."""

from __future__ import annotations

import os
from pathlib import Path

from coding_os.daemon.client import ask_watcher
from coding_os.checkpoints import points
from coding_os.checkpoints.rewind import rewind_code
from coding_os.checkpoints.rewind import undo
from coding_os.state.tiers import Tiers
from tests.helpers import checkpoint_now, commit_all, cos, create, rewind_ok, stored, tree


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


def test_undo_of_a_rewind_over_a_symlink_that_replaced_a_directory(project: Path) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "d").mkdir()
    (project / "d" / "x.txt").write_text("x\n")
    first = checkpoint_now(tiers, root)
    os.rename(project / "d", project / "e")
    (project / "e" / "x.txt").write_text("x2\n")
    (project / "e" / "y.txt").write_text("y\n")
    (project / "d").symlink_to("e")
    before = tree(project)
    report = rewind_code(tiers, root, str(first["id"]), watcher=ask_watcher)
    held = stored(tiers, points.load(tiers.checkpoints_dir, str(report["before"])))
    assert "d/x.txt" not in held["layers"][0]["overlay"]  # type: ignore[index]
    undo(tiers, root, watcher=ask_watcher)
    assert tree(project) == before
