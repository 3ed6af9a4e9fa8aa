"""A review of the restore as the journal and the deferred object store make it durable: crash
and recovery, a full disk, power cuts (what is flushed before the journal goes), journals of
the first layout, temporary objects, and what the tree's other users see (hard links, running
programs, mapped files). Each bug it found is fixed; the tests stay."""

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

from tests.checkpoints.conftest import commit_all, create, nothing_staged, rewind_ok, tree
from tests.conftest import cos

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

# A checkpoint killed once its objects are in their temporary files, before the flush that
# renames them into place (the whole snapshot is this window now).
KILL_CREATE_BEFORE_FLUSH = """
import os, sys
from coding_os.checkpoints import store
def die(self, also=None):
    os._exit(9)
store.ObjectStore.flush = die
from coding_os import api
api.checkpoint_create(cwd=sys.argv[1])
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


def _temporaries(project: Path) -> list[Path]:
    return [p for p in (_folder(project) / "objects").rglob("*") if ".tmp-" in p.name]


# -- the deferred object store: temporary objects left behind ------------------------------------


def _killed_create(project: Path) -> list[Path]:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    create(project)
    for number in range(5):
        (project / f"new{number}.txt").write_text(f"new content {number}\n")
    killed = subprocess.run([sys.executable, "-c", KILL_CREATE_BEFORE_FLUSH, str(project)],
                            cwd=project, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    left = _temporaries(project)
    assert left, "the killed checkpoint left no temporary object (the window was missed)"
    return left


def test_a_checkpoint_killed_before_its_flush_does_not_make_verify_report_damage(
        project: Path) -> None:
    _killed_create(project)
    # Nothing refers to them: no checkpoint was recorded. The store is not damaged.
    report = json.loads(cos("checkpoints", "verify", "--json", cwd=project).stdout)
    assert report["damaged"] == [], report["damaged"]


def test_verify_during_a_checkpoint_being_taken_reports_no_damage(project: Path) -> None:
    from coding_os.checkpoints.store import ObjectStore

    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    create(project)
    # What `take.create` holds while it snapshots a large tree: objects not yet flushed.
    store = ObjectStore(str(_folder(project)), defer_sync=True)
    for number in range(3):
        store.put(f"being checkpointed {number}\n".encode())
    try:
        proc = cos("checkpoints", "verify", "--json", cwd=project)
        report = json.loads(proc.stdout)
        assert report["damaged"] == [], report["damaged"]
        assert report["ok"] is True
    finally:
        store.discard()


def test_gc_removes_the_temporary_objects_of_a_killed_checkpoint(project: Path) -> None:
    left = _killed_create(project)
    old = time.time() - 3 * 3600  # well past gc's grace of an hour
    for path in left:
        os.utime(path, (old, old))
    proc = cos("gc", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert _temporaries(project) == []


def test_a_checkpoint_killed_before_its_flush_leaves_no_record_and_the_next_one_works(
        project: Path) -> None:
    _killed_create(project)
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    ids = [c["id"] for c in (listed if isinstance(listed, list) else listed["checkpoints"])]
    record = create(project)
    (project / "new0.txt").write_text("changed\n")
    rewind_ok(project, str(record["id"]), "--code")
    assert (project / "new0.txt").read_text() == "new content 0\n"
    assert str(record["id"]) not in ids


# -- durability and atomicity of the apply phase ------------------------------------------------


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


# -- things that work: kept as coverage ----------------------------------------------------------


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
        time.sleep(0.2)
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
    # What 89f313f left when killed after renaming a.txt into place: b.txt still staged.
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
