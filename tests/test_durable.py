"""Durable primitives: atomic replace, locked append, private directories."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from coding_os.errors import InvalidInput, StateIOError
from coding_os import durable


def test_a_torn_last_line_is_set_aside_before_the_next_record(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"whole line\nhalf a li")  # a writer killed mid-write
    durable.locked_append(str(log), b"next record\n")
    assert log.read_bytes() == b"whole line\nnext record\n"
    assert (tmp_path / "log.torn").read_bytes() == b"half a li\n"
    big = tmp_path / "big"
    big.write_bytes(b"x" * 200_000)  # torn with no newline at all, longer than one read block
    durable.locked_append(str(big), b"ok\n")
    assert big.read_bytes() == b"ok\n" and len((tmp_path / "big.torn").read_bytes()) == 200_001


def test_a_failed_append_leaves_the_file_exactly_as_it_was(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"one\n")
    real_write = os.write

    def disk_full_after_some_bytes(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:3]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full_after_some_bytes)
    with pytest.raises(StateIOError, match="no space left"):
        durable.locked_append(str(log), b"two two two\n")
    monkeypatch.undo()
    assert log.read_bytes() == b"one\n"


def test_a_failed_atomic_write_keeps_the_old_file_and_no_temp_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "dir" / "state"
    path.parent.mkdir()
    path.write_bytes(b"old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StateIOError):
        durable.atomic_write(str(path), b"new\n")
    monkeypatch.undo()
    assert path.read_bytes() == b"old\n"
    assert os.listdir(path.parent) == ["state"]


def test_directories_are_private_and_files_too(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c"
    durable.ensure_dir(str(target))
    for part in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert part.stat().st_mode & 0o777 == 0o700
    durable.atomic_write(str(target / "f"), b"x")
    durable.locked_append(str(target / "g"), b"x\n")
    assert (target / "f").stat().st_mode & 0o777 == 0o600
    assert (target / "g").stat().st_mode & 0o777 == 0o600


def _lock(path: str) -> None:
    with durable.exclusive_lock(path):
        pass


REWRITES: dict[str, Callable[[str], None]] = {
    "atomic_write": lambda path: durable.atomic_write(path, b"new\n", sync=False),
    "overwrite": lambda path: durable.overwrite(path, b"new\n"),
    "locked_append": lambda path: durable.locked_append(path, b"new\n"),
    "exclusive_lock": _lock,
    "set_aside_torn": lambda path: durable.set_aside_torn(path[:-len(".torn")], b"torn"),
    "open_private": lambda path: os.close(durable.open_private(path, os.O_WRONLY)),
}


@given(writer=st.sampled_from(sorted(REWRITES)), wider=st.integers(0o001, 0o077),
       umask=st.sampled_from([0o022, 0o002, 0o000]))
def test_a_file_that_existed_with_wider_modes_is_0600_after_cos_writes_it(
        writer: str, wider: int, umask: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "state.torn")
        with open(path, "wb") as f:
            f.write(b"old\n")
        os.chmod(path, 0o600 | wider)
        old = os.umask(umask)
        try:
            REWRITES[writer](path)
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_private_dir_makes_this_users_wider_directory_0700_and_leaves_its_parents(
        tmp_path: Path) -> None:
    parent = tmp_path / "project"
    folder = parent / "hub"
    folder.mkdir(parents=True)
    os.chmod(parent, 0o755)
    os.chmod(folder, 0o755)
    assert durable.private_dir(str(folder)) == str(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(parent.stat().st_mode) == 0o755
    old = os.umask(0o022)
    try:
        durable.private_dir(str(folder / "a" / "b"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((folder / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "a" / "b").stat().st_mode) == 0o700


def test_private_dir_refuses_a_symlink_and_changes_nothing_through_it(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chmod(elsewhere, 0o755)
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(StateIOError, match="symlink"):
        durable.private_dir(str(tmp_path / "link"))
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755


def test_open_private_never_opens_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    os.chmod(victim, 0o644)
    (tmp_path / "log").symlink_to(victim)
    with pytest.raises(OSError) as caught:
        durable.open_private(str(tmp_path / "log"), os.O_WRONLY | os.O_APPEND)
    assert caught.value.errno == errno.ELOOP
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_a_file_where_a_directory_belongs_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x", encoding="utf-8")
    with pytest.raises(StateIOError, match="not a directory"):
        durable.ensure_dir(str(tmp_path / "a" / "b"))


def test_appending_through_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"")
    link = tmp_path / "log"
    link.symlink_to(target)
    with pytest.raises(StateIOError, match="symlink"):
        durable.locked_append(str(link), b"x\n")
    assert target.read_bytes() == b""


def test_sync_files_flushes_files_and_directories_and_names_the_one_it_cannot(
        tmp_path: Path) -> None:
    paths = []
    for number in range(6):
        path = tmp_path / f"f{number}"
        path.write_bytes(b"x" * number)
        paths.append(str(path))
    durable.sync_files([*paths, str(tmp_path)])  # several at once, a directory among them
    durable.sync_files([])
    with pytest.raises(StateIOError) as caught:
        durable.sync_files([*paths, str(tmp_path / "gone")])
    assert "gone" in str(caught.value)


def test_overwrite_writes_in_place_and_never_through_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    durable.overwrite(str(path), b"a longer first version")
    inode = path.stat().st_ino
    durable.overwrite(str(path), b"short")
    assert path.read_bytes() == b"short" and path.stat().st_ino == inode
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    with pytest.raises(StateIOError):
        durable.overwrite(str(link), b"through the link")
    assert victim.read_bytes() == b"keep"


def test_read_regular_reads_a_regular_file_up_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert durable.read_regular(str(path), 10) is None
    path.write_bytes(b"0123456789")
    assert durable.read_regular(str(path), 10) == b"0123456789"
    with pytest.raises(InvalidInput, match="larger than"):
        durable.read_regular(str(path), 9)


def test_read_regular_refuses_devices_fifos_directories_and_symlinks_without_blocking(
        tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes it: opening it to read would wait forever
    (tmp_path / "real").write_bytes(b"{}")
    os.symlink(tmp_path / "real", tmp_path / "link")
    for path in ("/dev/zero", str(fifo), str(tmp_path), str(tmp_path / "link")):
        with pytest.raises(InvalidInput, match="not a regular file"):
            durable.read_regular(path, 1 << 20)
