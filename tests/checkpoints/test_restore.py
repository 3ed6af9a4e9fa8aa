"""The journaled restore (checkpoints/rewind.py): a restore killed at any point (os._exit(9),
as SIGKILL, in a child at a patched point) is completed or rolled back by the next `cos` call,
with nothing left staged; a failing flush or a full disk leaves the tree as it was and says so once;
the files restored are on disk before the journal is removed; a checkpoint taken meanwhile waits
and sees one whole tree. What the tree's other users see (hard links, running programs, mapped
files), read-only files, names that are not UTF-8, another filesystem, the umask of a recovery, and
what an earlier layout of the journal and the staging directory left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import (
    CHANGED_FILES,
    RESTORE_KILLS,
    changed_after_checkpoint,
    commit_all,
    cos,
    create,
    git,
    nothing_staged,
    rewind_in_child,
    rewind_ok,
    temporaries,
    tree,
    until,
)


KILL_AFTER_FIRST_WRITE = """
import os, sys
real = os.rename
def once(*args, **kwargs):
    real(*args, **kwargs)
    if "dst_dir_fd" in kwargs:
        os._exit(9)  # killed right after the first file put into the tree
os.rename = once
from coding_os import api
api.rewind(sys.argv[1], "code", cwd=sys.argv[2])
"""
# The restore, watching which files were flushed to disk (fsync, fdatasync, sync) by the time
# the journal, the only thing that could redo the restore, is removed.
WATCH_SYNC = """
import json, os, sys
synced = set()
real_fsync, real_fdatasync, real_sync, real_unlink = os.fsync, os.fdatasync, os.sync, os.unlink
def fsync(fd):
    st = os.fstat(fd)
    synced.add((st.st_dev, st.st_ino))
    return real_fsync(fd)
def fdatasync(fd):
    st = os.fstat(fd)
    synced.add((st.st_dev, st.st_ino))
    return real_fdatasync(fd)
def sync():
    synced.add("all")
    return real_sync()
report = {}
def unlink(path, *args, **kwargs):
    if isinstance(path, str) and path.endswith(os.sep + "journal.json"):
        for name in sys.argv[3:]:
            st = os.stat(os.path.join(sys.argv[2], name))
            report[name] = "all" in synced or (st.st_dev, st.st_ino) in synced
    return real_unlink(path, *args, **kwargs)
os.fsync, os.fdatasync, os.sync, os.unlink = fsync, fdatasync, sync, unlink
from coding_os import api
api.rewind(sys.argv[1], "code", cwd=sys.argv[2])
print(json.dumps(report))
"""
# The restore on a disk that fills up while it writes the new bytes: the second file's write
# fails with ENOSPC.
FULL_DISK_IN_APPLY = """
import errno, os, sys
from coding_os.checkpoints import restore
real_stage, real_write = restore._stage, os.write
calls = []
def full(fd, data):
    calls.append(1)
    if len(calls) == 2:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_write(fd, data)
def stage(*args, **kwargs):
    os.write = full
    try:
        return real_stage(*args, **kwargs)
    finally:
        os.write = real_write
restore._stage = stage
from coding_os import api
try:
    api.rewind(sys.argv[1], "code", cwd=sys.argv[2])
except Exception as exc:
    print(type(exc).__name__, exc, file=sys.stderr)
    sys.exit(3)
"""
# A program with a file of the tree mapped in memory (a shared library it loaded, a database
# file): it waits, then reads every page of its mapping.
MAPPER = """
import mmap, sys
with open(sys.argv[1], "rb") as f:
    view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
print("mapped", flush=True)
sys.stdin.readline()
print(sum(view[:]), flush=True)
"""


def _folder(project: Path) -> Path:
    return project / ".coding-os" / "checkpoints"


def _kill_after_first_write(project: Path, checkpoint: str, **kwargs: object) -> None:
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_WRITE, checkpoint,
                             str(project)], cwd=project, capture_output=True, text=True,
                            **kwargs)  # type: ignore[call-overload]
    assert killed.returncode == 9, killed.stderr
    assert (_folder(project) / "journal.json").exists()


def _verify_ok(project: Path) -> None:
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    report = json.loads(proc.stdout)
    assert report["ok"] is True, report


# -- killed at each point of `restore` ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("point", list(RESTORE_KILLS))
def test_a_restore_killed_at_each_point_is_completed_or_rolled_back_with_nothing_left(
        project: Path, point: str) -> None:
    checkpoint, at, before = changed_after_checkpoint(project)
    patch, committed = RESTORE_KILLS[point]
    killed = rewind_in_child(project, patch, checkpoint)
    assert killed.returncode == 9, killed.stderr
    folder = _folder(project)
    # The window was hit: a committed kill leaves the journal, an uncommitted one the
    # temporary journal only.
    assert (folder / "journal.json").exists() is committed
    if not committed:
        assert (folder / "journal.json.tmp").exists()
    proc = cos("checkpoints", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert tree(project) == (at if committed else before)
    assert not (folder / "journal.json").exists()
    assert nothing_staged(folder), sorted(os.listdir(folder / "staging"))
    assert not [p for p in folder.iterdir() if p.name.startswith("journal.failed")]
    _verify_ok(project)
    if committed:
        # The completed rewind is undone as any other: the tree as it was before it.
        proc = cos("rewind", "--undo", "--json", cwd=project)
        assert proc.returncode == 0, proc.stderr
        assert tree(project) == before
        assert nothing_staged(folder)
    # And the store goes on working.
    rewind_ok(project, checkpoint, "--code")
    assert tree(project) == at
    assert nothing_staged(folder)
    _verify_ok(project)


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_killed_restore_of_a_non_utf8_name_is_completed_and_undone(project: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "a.txt").write_text("A 1\n")
    (project / name).write_bytes(b"latin-1 name, v1\n")
    checkpoint = str(create(project)["id"])
    at_checkpoint = tree(project)
    (project / "a.txt").write_text("A 2\n")
    (project / name).write_bytes(b"latin-1 name, v2\n")
    (project / "z.txt").write_text("new\n")
    before = tree(project)
    _kill_after_first_write(project, checkpoint)
    proc = cos("checkpoints", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert tree(project) == at_checkpoint
    assert not (_folder(project) / "journal.json").exists()
    undo = cos("rewind", "--undo", cwd=project, input=b"")
    assert undo.returncode == 0, undo.stderr
    assert tree(project) == before


def test_a_symlink_swapped_in_between_the_kill_and_the_recovery_is_not_followed(
        project: Path, tmp_path: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "a.txt").write_text("A 1\n")
    (project / "b.txt").write_text("B 1\n")
    checkpoint = str(create(project)["id"])
    at_checkpoint = tree(project)
    (project / "a.txt").write_text("A 2\n")
    (project / "b.txt").write_text("B 2\n")
    _kill_after_first_write(project, checkpoint)
    victim = tmp_path / "victim.txt"
    victim.write_text("must stay\n")
    (project / "b.txt").unlink()
    (project / "b.txt").symlink_to(victim)
    proc = cos("checkpoints", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "must stay\n"
    assert tree(project) == at_checkpoint


def test_a_recovery_under_another_umask_gives_the_modes_of_the_interrupted_restore(
        project: Path) -> None:
    # Files of the commit (restored from git) get 0o644 or 0o755 under the umask of the
    # restoring process, kept in the journal: the recovering process's umask must not count.
    (project / "a.txt").write_text("A committed\n")
    (project / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(project / "run.sh", 0o755)
    commit_all(project, "base")
    checkpoint = str(create(project)["id"])
    at_checkpoint = tree(project)
    (project / "a.txt").write_text("A edited\n")
    (project / "run.sh").write_text("#!/bin/sh\necho edited\n")
    create(project)

    def restrictive() -> None:
        os.umask(0o077)

    _kill_after_first_write(project, checkpoint, preexec_fn=restrictive)
    old = os.umask(0o022)
    try:
        proc = cos("checkpoints", "--json", cwd=project)
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    assert tree(project) == at_checkpoint
    assert stat.S_IMODE(os.stat(project / "a.txt").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(project / "run.sh").st_mode) == 0o700


# -- durability: flushes, a full disk ----------------------------------------------------------


def _two_files(project: Path) -> tuple[str, dict, dict]:  # type: ignore[type-arg]
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "a.txt").write_text("A at the checkpoint\n" * 50)
    (project / "b.txt").write_text("B at the checkpoint\n" * 50)
    checkpoint = str(create(project)["id"])
    at_checkpoint = tree(project)
    (project / "a.txt").write_text("A edited later\n")
    (project / "b.txt").write_text("B edited later\n")
    create(project)
    return checkpoint, at_checkpoint, tree(project)


def test_the_files_restored_are_on_disk_before_the_journal_is_removed(
        project: Path) -> None:
    checkpoint, at_checkpoint, _ = _two_files(project)
    proc = subprocess.run([sys.executable, "-c", WATCH_SYNC, checkpoint, str(project),
                           "a.txt", "b.txt"], cwd=project, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert tree(project) == at_checkpoint
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"a.txt": True, "b.txt": True}, report


def test_a_disk_full_while_staging_leaves_the_tree_as_it_was(project: Path) -> None:
    checkpoint, at_checkpoint, before = _two_files(project)
    proc = subprocess.run([sys.executable, "-c", FULL_DISK_IN_APPLY, checkpoint, str(project)],
                          cwd=project, capture_output=True, text=True)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    # The disk has room again; the next cos call.
    after = cos("checkpoints", "--json", cwd=project)
    now = tree(project)
    assert now == before, (after.stderr, {p: now.get(p) for p in ("a.txt", "b.txt")})


# os.fsync failing with `ERRNO` for the files whose path holds `PART` (looked up through
# /proc/self/fd: fsync gets a descriptor). The rewind is then run through the API; what it
# raised, the threads still running and the temporary objects are printed.
FAILING_FSYNC = """
import errno
real = os.fsync
failed = []
def fsync(fd):
    where = os.readlink(f"/proc/self/fd/{fd}")
    if PART in where:
        failed.append(where)
        raise OSError(ERRNO, os.strerror(ERRNO))
    return real(fd)
os.fsync = fsync
"""
REPORT = """
from coding_os import api
from coding_os.errors import CosError
try:
    api.rewind(sys.argv[1], 'code', cwd=sys.argv[2])
    error = None
except CosError as exc:
    error = [type(exc).__name__, str(exc)]
# A thread that is ending has ended within the deadline; one that still works stays listed.
deadline = time.monotonic() + 2
while threading.active_count() > 1 and time.monotonic() < deadline:
    time.sleep(0.001)
print(json.dumps({"error": error, "failed": len(failed),
                  "threads": [t.name for t in threading.enumerate()
                              if t is not threading.main_thread()]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("part,errno_name", [
    ("/objects/", "EIO"),   # the snapshot's objects
    ("/staging/", "ENOSPC"),  # the staged bytes
    ("journal.json.tmp", "EIO"),
])
def test_a_failing_flush_is_reported_once_and_leaves_nothing(
        project: Path, part: str, errno_name: str) -> None:
    checkpoint, _, before = changed_after_checkpoint(project)
    patch = FAILING_FSYNC.replace("PART", repr(part)).replace("ERRNO", f"errno.{errno_name}")
    proc = rewind_in_child(project, patch, checkpoint, tail=REPORT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["failed"] >= 1, "the failing fsync was never reached"
    assert out["error"] is not None and out["error"][0] == "StateIOError", out
    message = out["error"][1]
    assert message.count("nothing was changed") == 1, message
    assert "\n" not in message
    assert out["threads"] == [], out["threads"]
    folder = _folder(project)
    assert tree(project) == before
    assert not (folder / "journal.json").exists()
    assert nothing_staged(folder)
    assert temporaries(project) == []
    _verify_ok(project)
    # No checkpoint "before" was recorded for a rewind that did not happen.
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    rows = listed if isinstance(listed, list) else listed["checkpoints"]
    assert not [r for r in rows if str(r.get("trigger")) == "before-rewind"]


REMOVE_BEHIND_ITS_BACK = """
from coding_os import durable
real = durable.sync_files
failed = []
def sync_files(paths):
    # The snapshot's pack, written to its temporary file, disappears before the flush.
    left = [p for p in paths if ".pack.tmp-" in p]
    assert left, "no temporary pack to remove"
    os.unlink(left[0])
    failed.append(left[0])
    return real(paths)
durable.sync_files = sync_files
"""


def test_the_temporary_pack_removed_before_the_flush(project: Path) -> None:
    checkpoint, _, before = changed_after_checkpoint(project)
    proc = rewind_in_child(project, REMOVE_BEHIND_ITS_BACK, checkpoint, tail=REPORT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None, out
    assert out["error"][0] in ("StateIOError", "DamagedObject"), out
    assert out["threads"] == []
    folder = _folder(project)
    assert tree(project) == before
    assert not (folder / "journal.json").exists()
    assert nothing_staged(folder)
    assert temporaries(project) == []
    _verify_ok(project)


def test_the_cli_reports_a_flush_failure_on_one_line(project: Path) -> None:
    checkpoint, _, before = changed_after_checkpoint(project)
    patch = FAILING_FSYNC.replace("PART", repr("/objects/")).replace("ERRNO", "errno.EIO")
    tail = ("from coding_os.interfaces.cli import run\n"
            "sys.exit(run(['rewind', sys.argv[1], '--code']))\n")
    proc = rewind_in_child(project, patch, checkpoint, tail=tail)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cos") and "nothing was changed" in lines[0]
    assert tree(project) == before
    assert nothing_staged(_folder(project))


# -- a rewind refused after the snapshot put its objects ---------------------------------------


def test_a_rewind_refused_after_the_snapshot_leaves_no_temporary_object_nor_thread(
        project: Path, tmp_path: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "d").mkdir()
    (project / "d" / "x.txt").write_text("x at the checkpoint\n")
    for number in range(CHANGED_FILES):
        (project / f"f{number}.txt").write_text(f"at the checkpoint {number}\n")
    checkpoint = str(create(project)["id"])
    for number in range(CHANGED_FILES):
        (project / f"f{number}.txt").write_text(f"after {number}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not the tree's\n")
    (project / "d" / "x.txt").unlink()
    (project / "d").rmdir()
    (project / "d").symlink_to(elsewhere)
    with open(project / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/d\n")  # ignored: not the snapshot's to delete, so it stands in the way
    before = tree(project)
    # The snapshot's objects are counted as they are put: the refusal comes after them.
    patch = """
from coding_os.checkpoints import store
real = store.ObjectStore.put
failed = []
def put(self, data, **kwargs):
    oid, written = real(self, data, **kwargs)
    if written:
        failed.append(oid)
    return oid, written
store.ObjectStore.put = put
"""
    proc = rewind_in_child(project, patch, checkpoint, tail=REPORT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None and out["error"][0] == "RestoreError", out
    assert out["failed"] >= 1, "the snapshot put no new object"
    assert out["threads"] == []
    assert tree(project) == before
    assert (elsewhere / "keep.txt").read_text() == "not the tree's\n"
    assert temporaries(project) == []
    assert nothing_staged(_folder(project))
    assert not (_folder(project) / "journal.json").exists()


# -- what the tree's other users see -----------------------------------------------------------


def test_a_program_with_a_file_of_the_tree_mapped_survives_a_rewind(project: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "lib.so").write_bytes(b"A" * 100)
    checkpoint = str(create(project)["id"])
    (project / "lib.so").write_bytes(b"B" * (4 * 4096))
    create(project)
    mapper = subprocess.Popen([sys.executable, "-c", MAPPER, str(project / "lib.so")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert mapper.stdout is not None and mapper.stdin is not None
        assert mapper.stdout.readline().strip() == "mapped"
        rewind_ok(project, checkpoint, "--code")
        assert (project / "lib.so").read_bytes() == b"A" * 100
        mapper.stdin.write("go\n")
        mapper.stdin.flush()
        out = mapper.stdout.readline().strip()
        code = mapper.wait(timeout=30)
    finally:
        if mapper.poll() is None:
            mapper.kill()
            mapper.wait()
        for pipe in (mapper.stdin, mapper.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
    assert code == 0, f"the program with the file mapped died: {code} " \
                      f"({signal.Signals(-code).name if code < 0 else code})"
    assert out == str(ord("B") * 4 * 4096)


def test_a_hard_link_to_a_restored_file_is_not_written_through(project: Path,
                                                                tmp_path: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "a.txt").write_text("at the checkpoint\n")
    checkpoint = str(create(project)["id"])
    (project / "a.txt").unlink()
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("someone else's bytes\n")
    os.link(outside, project / "a.txt")
    (project / "inside.txt").write_text("x\n")
    os.unlink(project / "inside.txt")
    os.link(outside, project / "inside.txt")  # a second name inside the tree too
    rewind_ok(project, checkpoint, "--code")
    assert (project / "a.txt").read_text() == "at the checkpoint\n"
    assert outside.read_text() == "someone else's bytes\n"
    assert not (project / "inside.txt").exists()  # not in the checkpoint: deleted
    assert outside.stat().st_nlink == 1


def test_a_running_executable_is_replaced_not_refused(project: Path) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "tool").write_bytes(b"#!/bin/sh\necho checkpointed\n")
    os.chmod(project / "tool", 0o755)
    checkpoint = str(create(project)["id"])
    (project / "tool").unlink()
    shutil.copy(sleep, project / "tool")
    os.chmod(project / "tool", 0o755)
    running = subprocess.Popen([str(project / "tool"), "30"])
    try:
        until(lambda: os.readlink(f"/proc/{running.pid}/exe") == str(project / "tool"),
              "the tool to run")
        with pytest.raises(OSError) as busy:
            os.open(project / "tool", os.O_WRONLY)
        assert busy.value.errno == 26  # ETXTBSY: writing over it would be refused
        rewind_ok(project, checkpoint, "--code")
        assert (project / "tool").read_bytes() == b"#!/bin/sh\necho checkpointed\n"
        assert os.stat(project / "tool").st_mode & 0o111
        assert running.poll() is None  # the running program was left alone
    finally:
        running.kill()
        running.wait()


def test_a_read_only_file_is_restored_with_its_bits(project: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "ro.txt").write_text("read only at the checkpoint\n")
    os.chmod(project / "ro.txt", 0o444)
    checkpoint = str(create(project)["id"])
    os.chmod(project / "ro.txt", 0o644)
    (project / "ro.txt").write_text("edited\n")
    os.chmod(project / "ro.txt", 0o400)
    rewind_ok(project, checkpoint, "--code")
    assert (project / "ro.txt").read_text() == "read only at the checkpoint\n"
    assert stat.S_IMODE(os.stat(project / "ro.txt").st_mode) == 0o444


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


def test_a_linked_worktree_on_another_filesystem_is_restored_by_copies(
        project: Path, tmp_path: Path) -> None:
    # /dev/shm (RAM) when the test's tmp dir is on a disk, /var/tmp (a disk) when it is in RAM.
    here = os.stat(project).st_dev
    other = next((Path(d) for d in ("/dev/shm", "/var/tmp")
                  if os.path.isdir(d) and os.access(d, os.W_OK) and os.stat(d).st_dev != here),
                 None)
    if other is None:
        import pytest

        pytest.skip("needs /dev/shm or /var/tmp on another filesystem than the test's tmp dir")
    (project / "a.txt").write_text("base\n")
    commit_all(project, "base")
    worktree = other / f"cos-wt-{os.getpid()}-{tmp_path.name}"
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


# -- two processes -----------------------------------------------------------------------------


def test_two_restores_at_once_leave_one_checkpoint_whole(project: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    states = []
    ids = []
    for version in range(2):
        for number in range(40):
            (project / f"f{number}.txt").write_text(f"version {version} of {number}\n" * 20)
        ids.append(str(create(project)["id"]))
        states.append(tree(project))
    for number in range(40):
        (project / f"f{number}.txt").write_text("third\n")
    create(project)
    procs = [subprocess.Popen([str(Path(sys.executable).with_name("cos")), "rewind", cid,
                               "--code", "--json"], cwd=project, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for cid in ids]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert tree(project) in states
    assert not (_folder(project) / "journal.json").exists()
    assert not (_folder(project) / "journal.json.tmp").exists()


SLOW_STAGING = """
from coding_os import durable
real = durable.overwrite
def overwrite(path, data):
    real(path, data)
    if path.endswith("journal.json.tmp"):
        open(sys.argv[2] + "/../staging-started", "w").close()
        time.sleep(2)  # not a wait: the rewind stays in its staging while the test checkpoints
durable.overwrite = overwrite
"""


@pytest.mark.slow
def test_a_checkpoint_taken_while_a_rewind_stages_waits_and_sees_one_whole_tree(
        project: Path) -> None:
    checkpoint, at, before = changed_after_checkpoint(project)
    marker = project.parent / "staging-started"
    script = ("import os, sys, time\n" + SLOW_STAGING +
              "from coding_os import api\napi.rewind(sys.argv[1], 'code', cwd=sys.argv[2])\n")
    child = subprocess.Popen([sys.executable, "-c", script, checkpoint, str(project)],
                             cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.time() + 60
        while not marker.exists():
            assert child.poll() is None, child.communicate()
            assert time.time() < deadline
            time.sleep(0.01)
        proc = cos("checkpoint", "create", "--json", cwd=project)
        assert proc.returncode == 0, proc.stderr
        record = json.loads(proc.stdout)
    finally:
        _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert tree(project) == at
    assert nothing_staged(_folder(project))
    assert not (_folder(project) / "journal.json").exists()
    # The checkpoint taken meanwhile is of one whole tree: rewinding to it gives `at` or
    # `before`, never a mix.
    (project / "f0.txt").write_text("changed again\n")
    rewind_ok(project, str(record["id"]), "--code")
    assert tree(project) in (at, before)
    _verify_ok(project)


# -- leftovers: an abandoned journal, an earlier layout, a symlink -----------------------------


def test_the_staged_files_of_an_abandoned_journal_are_removed(project: Path) -> None:
    checkpoint, at, before = changed_after_checkpoint(project)
    folder = _folder(project)
    # Killed after the first file renamed into place (sub/deep.txt is among the last).
    killed = rewind_in_child(project, RESTORE_KILLS["during_apply"][0], checkpoint)
    assert killed.returncode == 9
    journal = json.loads((folder / "journal.json").read_text())
    # Then a directory holding a file of the user stands where sub/deep.txt goes: the journal
    # cannot be completed and is moved aside.
    (project / "sub" / "deep.txt").unlink(missing_ok=True)
    (project / "sub" / "deep.txt").mkdir()
    (project / "sub" / "deep.txt" / "mine").write_text("mine\n")
    proc = cos("checkpoints", "--json", cwd=project)
    assert "could not be completed" in proc.stderr
    assert [p for p in folder.iterdir() if p.name.startswith("journal.failed")]
    assert journal["ops"], journal
    # The abandoned restore's staged bytes are gone at once (its before checkpoint is the way
    # back), and a later rewind works.
    assert nothing_staged(folder), sorted(os.listdir(folder / "staging"))
    cos("checkpoints", "--json", cwd=project)
    shutil_rm(project / "sub" / "deep.txt")
    rewind_ok(project, checkpoint, "--code")
    assert tree(project) == at
    assert nothing_staged(folder), sorted(os.listdir(folder / "staging"))


def shutil_rm(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


def test_staging_left_by_the_previous_version_killed_while_staging_is_removed(
        project: Path) -> None:
    from coding_os.checkpoints import points

    checkpoint, at, _ = changed_after_checkpoint(project)
    folder = _folder(project)
    # The previous version's restore staged first, then wrote journal.json.tmp: killed in
    # between, it left staging/<id>.<n> and no temporary journal; its `pending` saw the
    # staging directory.
    staging = folder / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    marker = points.new_id()
    (staging / f"{marker}.0").write_bytes(b"half a restore\n" * 1000)
    (staging / f"{marker}.1").symlink_to("f0.txt")
    cos("checkpoints", "--json", cwd=project)
    rewind_ok(project, checkpoint, "--code")
    assert tree(project) == at
    assert nothing_staged(folder), sorted(os.listdir(staging))


def test_a_symlink_at_staging_is_never_followed_by_the_cleanup(project: Path,
                                                               tmp_path: Path) -> None:
    changed_after_checkpoint(project)
    folder = _folder(project)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("not cos's\n")
    staging = folder / "staging"
    if staging.exists():
        shutil_rm(staging)
    staging.symlink_to(victim)
    (folder / "journal.json.tmp").write_text("{}")  # a restore that never committed
    proc = cos("checkpoints", "--json", cwd=project)
    # A symlink in the state dir makes it foreign: nothing is read from it, nor cleaned.
    assert proc.returncode == 8 and "holds a symlink (checkpoints/staging)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (folder / "journal.json.tmp").exists()
    assert (victim / "precious.txt").exists()


def test_a_stale_temporary_journal_alone_is_cleaned_by_any_call(project: Path) -> None:
    checkpoint, at, before = changed_after_checkpoint(project)
    folder = _folder(project)
    (folder / "journal.json.tmp").write_bytes(b'{"id": "torn')  # torn, never committed
    (folder / "staging").mkdir(exist_ok=True)
    (folder / "staging" / "cp-20260101-000000-000-abcd.0").write_text("x")
    old = folder / "staging" / "cp-20260101-000000-000-abce"
    old.mkdir()
    (old / "0").write_text("first layout\n")
    proc = cos("checkpoint", "create", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert nothing_staged(folder)
    assert (folder / "staging").is_dir()  # stays for the next restore
    assert tree(project) == before


def test_a_restore_interrupted_under_the_previous_version_is_completed_after_the_upgrade(
        project: Path) -> None:
    import hashlib

    from coding_os.checkpoints import points
    from coding_os.checkpoints.store import ObjectStore

    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "a.txt").write_text("A 1\n")
    (project / "b.txt").write_text("B 1\n")
    checkpoint = str(create(project)["id"])
    at_checkpoint = tree(project)
    (project / "a.txt").write_text("A 2\n")
    (project / "b.txt").write_text("B 2\n")
    before = str(create(project)["id"])
    # What the previous version's journal left when killed after renaming a.txt into place:
    # b.txt still staged.
    folder = _folder(project)
    marker = points.new_id()
    staging = folder / "staging" / marker
    staging.mkdir(parents=True)
    (staging / "1").write_bytes(b"B 1\n")
    os.chmod(staging / "1", 0o644)
    (project / "a.txt").write_text("A 1\n")
    ops = []
    for name, data in (("a.txt", b"A 1\n"), ("b.txt", b"B 1\n")):
        sha1 = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        ops.append({"op": "write", "path": name, "kind": "f", "sha1": sha1, "mode": 0o100644,
                    "oid": ObjectStore.oid_of(data), "layer": "", "replaces": True})
    journal = {"id": marker, "kind": "code", "target": checkpoint, "before": before,
               "ts": "2026-01-01T00:00:00.000Z", "root": str(project), "staging": str(staging),
               "ops": ops}
    (folder / "journal.json").write_text(json.dumps(journal))
    cos("checkpoints", "--json", cwd=project)
    assert tree(project) == at_checkpoint
    assert nothing_staged(folder)
