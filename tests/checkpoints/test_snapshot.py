"""Taking a snapshot (checkpoints/snapshot.py): the HEAD entries read from `git status` are
those `git ls-tree` lists, and the checks of a path see through symlinked directories, hard links
and nested repositories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from coding_os.checkpoints.snapshot import _in_nested, _linked, beyond_link
from coding_os.checkpoints.manifest import resolve
from coding_os.checkpoints.store import ObjectStore
from coding_os.checkpoints.settings import Settings
from coding_os.checkpoints.snapshot import capture_of
from coding_os.state.tiers import Tiers
from tests.helpers import commit_all, git


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
        if top == project:  # ls-tree is right at the top only
            asked = resolve(str(top), empty, paths)
            assert known == asked
        assert known["dir/f.txt"][0] is not None and known["dir"][0] is None
        assert known["added.txt"][0] is None and known["file"][0] is not None
        assert known["link"][0][0] == "l" and int(known["run.sh"][0][2]) == 0o100755


def test_link_checks_see_through_a_symlinked_directory_component(
        repo: Path, tmp_path: Path) -> None:
    root = str(repo)
    (repo / "real").mkdir()
    (repo / "real" / "f.txt").write_text("f\n")
    (repo / "via").symlink_to("real")
    (repo / "deep").mkdir()
    (repo / "deep" / "via").symlink_to("../real")
    assert beyond_link(root, "via/f.txt") and beyond_link(root, "deep/via/f.txt")
    assert not beyond_link(root, "real/f.txt")
    (repo / "file").write_text("x\n")
    assert beyond_link(root, "file/f.txt")
    os.link(repo / "real" / "f.txt", repo / "twin.txt")
    assert _linked(root, "via/f.txt") and _linked(root, "real/f.txt")
    assert not _linked(root, "via")  # the symlink itself
    nested = tmp_path / "nested"
    git(tmp_path, "init", "-q", str(nested))
    (repo / "to_nested").symlink_to(nested)
    assert _in_nested(root, "to_nested/x.txt")  # errs on the side of a scan


def test_a_tracked_path_under_a_symlinked_directory_is_absent_and_never_read(
        project: Path, tmp_path: Path) -> None:
    # As a rewind's snapshot of the tree before it finds it: `keys` now a symlink to a fake
    # ~/.ssh. The tree holds no file at `keys/id_rsa`; the one the link leads to is not read.
    from coding_os.checkpoints.snapshot import capture

    secret = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-to-be-stored\n"
    folder = tmp_path / "fake-ssh"
    folder.mkdir()
    (folder / "id_rsa").write_bytes(secret)
    (project / "keys").symlink_to(folder)
    tiers = Tiers(str(tmp_path / "state"))
    store = ObjectStore(tiers.checkpoints_dir)
    cap = capture_of(tiers, str(project), store, Settings())
    manifest = capture(cap, "tracked", ["keys/id_rsa", "keys"])
    overlay = manifest["layers"][0]["overlay"]  # type: ignore[index]
    assert overlay["keys/id_rsa"] is None
    assert overlay["keys"][0] == "l"
    assert cap.files_hashed == 0


def test_a_nested_repository_whose_git_dir_lies_outside_the_tree_is_read_as_plain_files(
        project: Path, tmp_path: Path) -> None:
    """A `.git` file in the tree pointing at a repository elsewhere (as a clone can bring) does
    not make git read that repository's index or objects: the directory is a plain layer, every
    file listed, no commit of the other repository's."""
    from coding_os.checkpoints.snapshot import capture

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q", "-b", "main")
    (elsewhere / "secret.txt").write_text("the user's other repository\n")
    commit_all(elsewhere, "other")
    (project / "vendored").mkdir()
    (project / "vendored" / "lib.txt").write_text("lib\n")
    (project / "vendored" / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    inside = project / "inside"
    git(project, "init", "-q", "-b", "main", str(inside))
    (inside / "kept.txt").write_text("kept\n")
    commit_all(inside, "inside")
    tiers = Tiers(str(tmp_path / "state"))
    cap = capture_of(tiers, str(project), ObjectStore(tiers.checkpoints_dir), Settings())
    layers = {layer["dir"]: layer for layer in capture(cap, "worktree")["layers"]}  # type: ignore[union-attr]
    assert layers["vendored"]["commit"] is None
    assert set(layers["vendored"]["overlay"]) == {"lib.txt"}  # type: ignore[arg-type]
    assert layers["inside"]["commit"] is not None  # a clone kept inside is still its own layer
