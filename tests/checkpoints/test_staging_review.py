"""A review of abd32d3: the rewind's snapshot objects flushed with the staged bytes
(`ObjectStore.flush`, `durable.sync_files`: an early background flush of the objects was tried
and dropped, it made the restore slower), and the staging directory that stays between restores (`journal.json.tmp` written first, `pending` = journal or temporary journal,
`_unstage(None)` empties staging/, `_finish` unstages before removing the journal).

A restore is killed (os._exit(9), as SIGKILL) at each point of `restore`, in a child process;
the flush fails for an object, a staged file or the journal; a rewind is refused after the
snapshot put its objects; a checkpoint is taken while a rewind stages; leftovers of an older
version, of an abandoned journal and a symlink where the staging directory belongs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.checkpoints.conftest import commit_all, create, nothing_staged, rewind_ok, tree
from tests.conftest import cos

N = 6


def _folder(project: Path) -> Path:
    return project / ".coding-os" / "checkpoints"


def _temporaries(project: Path) -> list[Path]:
    return [p for p in (_folder(project) / "objects").rglob("*") if ".tmp-" in p.name]


def _setup(project: Path) -> tuple[str, dict, dict]:  # type: ignore[type-arg]
    """A checkpoint of untracked files (their bytes are in the cos store), then a tree changed
    everywhere: rewritten files, a new file (deleted by the rewind), a deeper one."""
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "sub").mkdir()
    for number in range(N):
        (project / f"f{number}.txt").write_text(f"at the checkpoint {number}\n" * 10)
    (project / "sub" / "deep.txt").write_text("deep at the checkpoint\n")
    (project / "link").symlink_to("f0.txt")
    checkpoint = str(create(project)["id"])
    at = tree(project)
    for number in range(N):
        (project / f"f{number}.txt").write_text(f"after {number}\n" * 12)
    (project / "sub" / "deep.txt").write_text("deep after\n")
    (project / "extra.txt").write_text("made after the checkpoint\n")
    (project / "link").unlink()
    (project / "link").symlink_to("f1.txt")
    return checkpoint, at, tree(project)


def _child(project: Path, patch: str, checkpoint: str, *, tail: str | None = None,
           **kwargs: object) -> subprocess.CompletedProcess[str]:
    script = "import os, sys, json, time, threading\n" + patch + "\n" + (tail or (
        "from coding_os import api\n"
        "api.rewind(sys.argv[1], 'code', cwd=sys.argv[2])\n"))
    return subprocess.run([sys.executable, "-c", script, checkpoint, str(project)],
                          cwd=project, capture_output=True, text=True, timeout=120,
                          **kwargs)  # type: ignore[call-overload]


def _verify_ok(project: Path) -> None:
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    report = json.loads(proc.stdout)
    assert report["ok"] is True, report


# -- SIGKILL at every point of `restore` ----------------------------------------------------------

KILLS = {
    # Uncommitted: the tree stays as before.
    "after_tmp_journal": ("""
from coding_os import durable
real = durable.overwrite
def overwrite(path, data):
    real(path, data)
    if path.endswith("journal.json.tmp"):
        os._exit(9)
durable.overwrite = overwrite
""", False),
    "during_staging": ("""
from coding_os.checkpoints import restore
real = restore._staged
calls = []
def staged(journal, number):
    calls.append(number)
    if len(calls) == 3:
        os._exit(9)
    return real(journal, number)
restore._staged = staged
""", False),
    "during_flush_sync": ("""
from coding_os import durable
real = durable.sync_files
def sync_files(paths):
    if any(p.endswith("journal.json.tmp") for p in paths):
        os._exit(9)
    return real(paths)
durable.sync_files = sync_files
""", False),
    # The snapshot's objects are one pack: killed once it is written, and once it is in place.
    "after_pack_written": ("""
from coding_os import durable
real = durable.sync_files
def sync_files(paths):
    if any(os.sep + "packs" + os.sep in p for p in paths):
        os._exit(9)
    return real(paths)
durable.sync_files = sync_files
""", False),
    "after_pack_in_place": ("""
real = os.replace
def replace(src, dst, *args, **kwargs):
    real(src, dst, *args, **kwargs)
    if ".pack.tmp-" in str(src):
        os._exit(9)
os.replace = replace
""", False),
    "after_flush_before_record": ("""
from coding_os.checkpoints import points
def write(*args, **kwargs):
    os._exit(9)
points.write = write
""", False),
    "after_record_before_rename": ("""
real = os.replace
def replace(src, dst, *args, **kwargs):
    if str(src).endswith("journal.json.tmp"):
        os._exit(9)
    return real(src, dst, *args, **kwargs)
os.replace = replace
""", False),
    # Committed: the next call completes the restore.
    "after_rename": ("""
real = os.replace
def replace(src, dst, *args, **kwargs):
    real(src, dst, *args, **kwargs)
    if str(src).endswith("journal.json.tmp"):
        os._exit(9)
os.replace = replace
""", True),
    "during_apply": ("""
real = os.rename
calls = []
def rename(*args, **kwargs):
    real(*args, **kwargs)
    if "dst_dir_fd" in kwargs:
        calls.append(1)
        if len(calls) == 2:
            os._exit(9)
os.rename = rename
""", True),
    "after_apply": ("""
from coding_os.checkpoints import rewind
def remember(*args, **kwargs):
    os._exit(9)
rewind.remember_rewind = remember
""", True),
    "during_unstage": ("""
from coding_os.checkpoints import restore
real = restore._remove_quietly
def remove(path):
    real(path)
    # the first removal once the restore is committed (a staged file left, then the tmp)
    if os.path.exists(os.path.join(os.path.dirname(os.path.dirname(path)), "journal.json")):
        os._exit(9)
restore._remove_quietly = remove
""", True),
    "after_unstage_before_unlink": ("""
real = os.unlink
def unlink(path, *args, **kwargs):
    if str(path).endswith(os.sep + "journal.json"):
        os._exit(9)
    return real(path, *args, **kwargs)
os.unlink = unlink
""", True),
}


@pytest.mark.parametrize("point", list(KILLS))
def test_a_restore_killed_at_each_point_is_completed_or_rolled_back_with_nothing_left(
        project: Path, point: str) -> None:
    checkpoint, at, before = _setup(project)
    patch, committed = KILLS[point]
    killed = _child(project, patch, checkpoint)
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


def test_doctor_fails_on_a_stale_temporary_journal_until_the_next_cos_call(
        project: Path) -> None:
    checkpoint, _, before = _setup(project)
    killed = _child(project, KILLS["during_staging"][0], checkpoint)
    assert killed.returncode == 9, killed.stderr
    proc = cos("doctor", "--json", cwd=project, timeout=120)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["checkpoints"]["status"] == "fail"
    assert "cos" in (checks["checkpoints"].get("fix") or "")
    # doctor changes nothing
    assert (_folder(project) / "journal.json.tmp").exists()
    cos("checkpoints", "--json", cwd=project)
    proc = cos("doctor", "--json", cwd=project, timeout=120)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["checkpoints"]["status"] == "ok", checks["checkpoints"]
    assert tree(project) == before


# -- a failing flush: of an object, a staged file, the journal -------------------------------------

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
time.sleep(0.2)
print(json.dumps({"error": error, "failed": len(failed),
                  "threads": [t.name for t in threading.enumerate()
                              if t is not threading.main_thread()]}))
"""


@pytest.mark.parametrize("part,errno_name", [
    ("/objects/", "EIO"),   # the snapshot's objects
    ("/staging/", "ENOSPC"),  # the staged bytes
    ("journal.json.tmp", "EIO"),
])
def test_a_failing_flush_is_reported_once_and_leaves_nothing(
        project: Path, part: str, errno_name: str) -> None:
    checkpoint, _, before = _setup(project)
    patch = FAILING_FSYNC.replace("PART", repr(part)).replace("ERRNO", f"errno.{errno_name}")
    proc = _child(project, patch, checkpoint, tail=REPORT)
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
    assert _temporaries(project) == []
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
    checkpoint, _, before = _setup(project)
    proc = _child(project, REMOVE_BEHIND_ITS_BACK, checkpoint, tail=REPORT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None, out
    assert out["error"][0] in ("StateIOError", "DamagedObject"), out
    assert out["threads"] == []
    folder = _folder(project)
    assert tree(project) == before
    assert not (folder / "journal.json").exists()
    assert nothing_staged(folder)
    assert _temporaries(project) == []
    _verify_ok(project)


def test_the_cli_reports_a_flush_failure_on_one_line(project: Path) -> None:
    checkpoint, _, before = _setup(project)
    patch = FAILING_FSYNC.replace("PART", repr("/objects/")).replace("ERRNO", "errno.EIO")
    tail = ("from coding_os.interfaces.cli import run\n"
            "sys.exit(run(['rewind', sys.argv[1], '--code']))\n")
    proc = _child(project, patch, checkpoint, tail=tail)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cos") and "nothing was changed" in lines[0]
    assert tree(project) == before
    assert nothing_staged(_folder(project))


# -- a rewind refused after the snapshot put its objects ------------------------------------------


def test_a_rewind_refused_after_the_snapshot_leaves_no_temporary_object_nor_thread(
        project: Path, tmp_path: Path) -> None:
    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    (project / "d").mkdir()
    (project / "d" / "x.txt").write_text("x at the checkpoint\n")
    for number in range(N):
        (project / f"f{number}.txt").write_text(f"at the checkpoint {number}\n")
    checkpoint = str(create(project)["id"])
    for number in range(N):
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
    proc = _child(project, patch, checkpoint, tail=REPORT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] is not None and out["error"][0] == "RestoreError", out
    assert out["failed"] >= 1, "the snapshot put no new object"
    assert out["threads"] == []
    assert tree(project) == before
    assert (elsewhere / "keep.txt").read_text() == "not the tree's\n"
    assert _temporaries(project) == []
    assert nothing_staged(_folder(project))
    assert not (_folder(project) / "journal.json").exists()


def test_discard_removes_every_temporary_and_a_later_flush_is_a_no_op(tmp_path: Path) -> None:
    from coding_os.checkpoints.store import ObjectStore

    store = ObjectStore(str(tmp_path / "cp"), defer_sync=True)
    for number in range(20):
        store.put(f"object {number}\n".encode() * 100)
    before = threading.active_count()
    store.discard()
    assert threading.active_count() <= before
    assert [p for p in (tmp_path / "cp").rglob("*") if p.is_file()] == []
    store.flush()  # after a discard: a no-op, not an error


def test_flush_puts_every_object_in_place_with_the_files_also_flushed(tmp_path: Path) -> None:
    from coding_os.checkpoints.store import ObjectStore

    store = ObjectStore(str(tmp_path / "cp"), defer_sync=True)
    first = [store.put(f"first {n}\n".encode())[0] for n in range(8)]
    later = [store.put(f"later {n}\n".encode())[0] for n in range(8)]
    extra = tmp_path / "extra"
    extra.write_bytes(b"x")
    store.flush(also=[str(extra)])
    fresh = ObjectStore(str(tmp_path / "cp"))
    for oid in first + later:
        assert os.path.exists(fresh.path(oid))
        fresh.get(oid)
    assert not [p for p in (tmp_path / "cp").rglob("*") if ".tmp-" in p.name]


def test_a_flush_error_raises_once_from_flush_then_store_is_clean(tmp_path: Path) -> None:
    from coding_os.checkpoints.store import ObjectStore
    from coding_os.errors import StateIOError

    store = ObjectStore(str(tmp_path / "cp"), defer_sync=True)
    oids = [store.put(f"o {n}\n".encode())[0] for n in range(6)]
    os.unlink(next(iter(store._pending.values())))  # removed behind its back
    before = threading.active_count()
    with pytest.raises(StateIOError):
        store.flush()
    assert threading.active_count() <= before
    store.discard()  # nothing more raised
    assert not [p for p in (tmp_path / "cp").rglob("*") if p.is_file()]
    assert not any(ObjectStore(str(tmp_path / "cp")).has(oid) for oid in oids)


# -- two processes ----------------------------------------------------------------------------------

SLOW_STAGING = """
from coding_os import durable
real = durable.overwrite
def overwrite(path, data):
    real(path, data)
    if path.endswith("journal.json.tmp"):
        open(sys.argv[2] + "/../staging-started", "w").close()
        time.sleep(2)
durable.overwrite = overwrite
"""


def test_a_checkpoint_taken_while_a_rewind_stages_waits_and_sees_one_whole_tree(
        project: Path) -> None:
    checkpoint, at, before = _setup(project)
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


# -- leftovers: an abandoned journal, an older version's crash, a symlink ---------------------------


def test_the_staged_files_of_an_abandoned_journal_are_removed(project: Path) -> None:
    checkpoint, at, before = _setup(project)
    folder = _folder(project)
    # Killed after the first file renamed into place (sub/deep.txt is among the last).
    killed = _child(project, KILLS["during_apply"][0], checkpoint)
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

    checkpoint, at, _ = _setup(project)
    folder = _folder(project)
    # e78cf46's restore staged first, then wrote journal.json.tmp: killed in between, it left
    # staging/<id>.<n> and no temporary journal; its `pending` saw the staging directory.
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
    _setup(project)
    folder = _folder(project)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("not cos's\n")
    staging = folder / "staging"
    if staging.exists():
        shutil_rm(staging)
    staging.symlink_to(victim)
    (folder / "journal.json.tmp").write_text("{}")  # a restore that never committed
    cos("checkpoints", "--json", cwd=project)
    assert not (folder / "journal.json.tmp").exists()
    assert (victim / "precious.txt").exists()


def test_a_stale_temporary_journal_alone_is_cleaned_by_any_call(project: Path) -> None:
    checkpoint, at, before = _setup(project)
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

