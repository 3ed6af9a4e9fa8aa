"""Bad input to `cos rewind` and `cos checkpoint create`: one line on stderr, no traceback, a
documented exit code, and the tree (and anything outside it) untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cos, create, one_line_failure, raw_bytes, rewind, tree


def test_an_unknown_checkpoint_id_exits_1_with_one_line(project: Path) -> None:
    before = raw_bytes(project)
    proc = rewind(project, "cp-20200101-000000-000-abcd", "--code")
    assert "no checkpoint" in one_line_failure(proc, 1)
    assert raw_bytes(project) == before


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["../x", "cp-../..", "cp-20200101-000000-000-abcd/../../x",
                                 "/etc/passwd"])
def test_a_malformed_checkpoint_id_exits_2_before_any_file_is_opened(project: Path,
                                                                     bad: str) -> None:
    create(project)
    before = raw_bytes(project)
    for args in (("--code",), ("--conversation",), ("--summarize-up-to",)):
        proc = rewind(project, bad, *args)
        assert "not a checkpoint id" in one_line_failure(proc, 2)
    assert raw_bytes(project) == before


@pytest.mark.parametrize("bad", ["../outside.txt", "a/../../outside.txt", "/etc/hostname"])
def test_a_requested_path_outside_the_tree_exits_2(project: Path, bad: str) -> None:
    proc = cos("checkpoint", "create", "--mode", "tracked", "--paths", bad, cwd=project)
    one_line_failure(proc, 2)


def test_a_directory_replaced_by_a_symlink_outside_is_not_written_through(
        project: Path, tmp_path: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("inside\n", encoding="utf-8")
    record = create(project)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("outside, must stay\n", encoding="utf-8")
    (project / "src" / "a.py").unlink()
    (project / "src").rmdir()
    (project / "src").symlink_to(outside)
    before_outside = raw_bytes(outside)
    proc = rewind(project, str(record["id"]), "--code")
    assert raw_bytes(outside) == before_outside
    if proc.returncode == 0:  # the symlink is the tree's: removed, the directory restored
        assert not (project / "src").is_symlink()
        assert (project / "src" / "a.py").read_text(encoding="utf-8") == "inside\n"
    else:
        one_line_failure(proc, 1)
        assert (project / "src").is_symlink()


def test_a_tracked_path_under_a_symlink_outside_is_refused_and_not_followed(
        project: Path, tmp_path: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("inside\n", encoding="utf-8")
    record = create(project, "--mode", "tracked", "--paths", "src/a.py")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("outside, must stay\n", encoding="utf-8")
    (project / "src" / "a.py").unlink()
    (project / "src").rmdir()
    (project / "src").symlink_to(outside)
    before_tree, before_outside = tree(project), raw_bytes(outside)
    proc = rewind(project, str(record["id"]), "--code")
    assert "not followed" in one_line_failure(proc, 1)
    assert raw_bytes(outside) == before_outside
    assert tree(project) == before_tree


def holds_bytes(folder: Path, data: bytes) -> bool:
    """Whether any file under `folder` holds `data`, as it is or in a zlib stream (objects)."""
    import zlib

    for path in folder.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        raw = path.read_bytes()
        if data in raw:
            return True
        for start in range(len(raw)):  # packs hold several streams, one after another
            if raw[start:start + 1] != b"x":
                continue
            try:
                if data in zlib.decompressobj().decompress(raw[start:]):
                    return True
            except zlib.error:
                continue
    return False


@pytest.mark.parametrize("target", ["outside", "inside"])
def test_a_tracked_path_through_a_symlinked_directory_exits_2_and_stores_nothing(
        project: Path, tmp_path: Path, target: str) -> None:
    # `keys/id_rsa` with `keys` a symlink: outside the tree (a fake ~/.ssh), or to a directory
    # of the tree itself (the file has a path of its own there).
    secret = b"-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LW5vdC10by1zdG9yZQ==\n"
    if target == "outside":
        folder = tmp_path / "fake-ssh"
    else:
        folder = project / "real-keys"
    folder.mkdir()
    (folder / "id_rsa").write_bytes(secret)
    (project / "keys").symlink_to(folder)
    for given in ("keys/id_rsa", str(project / "keys" / "id_rsa"), "./keys/../keys/id_rsa"):
        proc = cos("checkpoint", "create", "--mode", "tracked", "--paths", given, cwd=project)
        assert "symlink" in one_line_failure(proc, 2)
    proc = cos("checkpoints", "--json", cwd=project)
    assert proc.returncode == 0 and json.loads(proc.stdout) == [], proc.stdout
    assert not holds_bytes(project / ".coding-os", secret)
