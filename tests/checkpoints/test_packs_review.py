"""A review of the rewind's packs (4512a11, c2dff57, 9cefe7f): `ObjectStore(pack=True)`, the
readers' look into `objects/packs/`, and what `verify`, `du`, `gc` (`_unpack_one`) and the cap's
pruning do with packs.

Crashes are os._exit(9) (as SIGKILL) in a child at a patched point; a race with `cos gc` is an
in-process interleaving (a reader that takes no lock, with `collect` run between two of its
steps, as another process could); bad input is a file written into `objects/packs/` by hand."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from coding_os.checkpoints import rewind
from coding_os.checkpoints.upkeep import collect, usage
from coding_os.checkpoints.store import DamagedObject, ObjectStore, pack_entries
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import create, rewind_ok, tree
from tests.checkpoints.test_staging_review import KILLS
from tests.conftest import cos

CHANGED = "after the checkpoint, kept in the rewind's pack\n" * 40


def _folder(project: Path) -> Path:
    return project / ".coding-os" / "checkpoints"


def _tiers(project: Path) -> Tiers:
    return Tiers(str(project / ".coding-os"))


def _oid(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _rewound(project: Path) -> tuple[str, dict]:  # type: ignore[type-arg]
    """A checkpoint, notes.txt changed after it, a rewind to it: the before-rewind checkpoint's
    new objects (the changed bytes, its manifest) are one pack. Returns the checkpoint and the
    tree as it was before the rewind."""
    (project / "notes.txt").write_text("at the checkpoint\n", encoding="utf-8")
    checkpoint = str(create(project)["id"])
    (project / "notes.txt").write_text(CHANGED, encoding="utf-8")
    before = tree(project)
    rewind_ok(project, checkpoint, "--code")
    assert len(ObjectStore(str(_folder(project))).packs()) == 1
    return checkpoint, before


def _age(path: str | Path, seconds: float = 7200) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old), follow_symlinks=False)


def _verify(project: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    return proc.returncode, json.loads(proc.stdout)


def _write_pack(folder: Path, rows: list[tuple[str, bytes]]) -> Path:
    """A pack in the documented format holding `rows` (id, zlib stream), named by its hash."""
    body = b"".join([b"cos-pack 1\n", *(f"{oid} {len(s)}\n".encode() for oid, s in rows),
                     b"\n", *(s for _, s in rows)])
    packs = folder / "objects" / "packs"
    packs.mkdir(parents=True, exist_ok=True)
    path = packs / f"{hashlib.sha256(body).hexdigest()}.pack"
    path.write_bytes(body)
    return path


def _undo_ok(project: Path) -> None:
    proc = cos("rewind", "--undo", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr


def _child(project: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import os, sys\n" + script, *args],
                          cwd=project, capture_output=True, text=True, timeout=120)


# -- bugs of 9cefe7f (each fails there; all fixed since) -------------------------------------------


@pytest.mark.parametrize("step", ["_in_pack", "get_packed"])
def test_an_undo_reading_its_packed_manifest_while_gc_moves_the_pack_out_succeeds(
        project: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    checkpoint, before = _rewound(project)
    tiers = _tiers(project)
    real = getattr(ObjectStore, step)
    raced: list[dict] = []  # type: ignore[type-arg]

    def racing(self: ObjectStore, *args: object) -> object:
        if not raced:
            raced.append({})  # once: gc's own reads below go through
            # `cos gc` in another process, between the reader's loose miss and its pack read
            # (`_target` reads the checkpoint's manifest before the rewind takes its lock).
            raced[0] = collect(tiers, grace_s=0)
        return real(self, *args)

    monkeypatch.setattr(ObjectStore, step, racing)
    try:
        rewind.undo(tiers, str(project))
    finally:
        monkeypatch.undo()
    assert raced[0] and ObjectStore(str(_folder(project))).packs() == []  # gc did move it out
    assert tree(project) == before


def test_gc_dry_run_reports_the_bytes_the_real_run_frees(project: Path) -> None:
    _rewound(project)
    tiers = _tiers(project)
    dry = collect(tiers, dry_run=True, grace_s=0)
    assert len(ObjectStore(str(_folder(project))).packs()) == 1  # a dry run changes nothing
    real = collect(tiers, grace_s=0)
    assert ObjectStore(str(_folder(project))).packs() == []
    assert dry["objects_removed"] == real["objects_removed"]
    assert dry["bytes_freed"] == real["bytes_freed"], (dry, real)


# Found by the review, fixed: _unpack_one deletes the pack holding the only intact copy of a
# needed object whose loose copy is damaged: it checks the loose copy with loose.get, which falls
# back to that very pack (at 9cefe7f: existence only)
def test_gc_keeps_the_intact_packed_copy_when_the_loose_copy_is_damaged(
        project: Path) -> None:
    checkpoint, before = _rewound(project)
    folder = _folder(project)
    store = ObjectStore(str(folder))
    oid = _oid(CHANGED.encode())
    loose = Path(store.path(oid))
    assert not loose.exists()
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_bytes(zlib.compress(b"bit rot\n"))  # a damaged loose copy (verify says so)
    collect(_tiers(project), grace_s=0)
    intact = []
    for pack in ObjectStore(str(folder)).packs():
        for entry, offset, length in pack_entries(pack):
            if entry == oid:
                intact.append(store.get_packed(oid, pack, offset, length))
    assert intact == [CHANGED.encode()], "gc removed the only intact copy of a needed object"


def test_gc_of_a_pack_listing_a_needed_id_twice_counts_what_du_counts(project: Path) -> None:
    _rewound(project)
    folder = _folder(project)
    store = ObjectStore(str(folder))
    (pack,) = store.packs()
    rows = []
    with open(pack, "rb") as f:
        data = f.read()
    for oid, offset, length in pack_entries(pack):
        rows.append((oid, data[offset:offset + length]))
    changed = next(r for r in rows if r[0] == _oid(CHANGED.encode()))
    os.chmod(pack, 0o600)
    os.unlink(pack)
    _write_pack(folder, [*rows, changed])  # the changed bytes listed twice, both intact
    assert _verify(project)[0] == 0
    tiers = _tiers(project)
    du_before = usage(tiers)
    report = collect(tiers, grace_s=0)
    du_after = usage(tiers)
    assert ObjectStore(str(folder)).packs() == []
    assert report["bytes_freed"] == du_before["object_bytes"] - du_after["object_bytes"], report
    assert report["objects_removed"] == du_before["objects"] - du_after["objects"], report


# -- properties that hold -------------------------------------------------------------------------


def test_gc_counts_what_du_sees_removed_and_the_undo_works_after(project: Path) -> None:
    _rewound(project)
    tiers = _tiers(project)
    du_before = usage(tiers)
    report = collect(tiers, grace_s=0)
    du_after = usage(tiers)
    assert ObjectStore(str(_folder(project))).packs() == []
    assert report["bytes_freed"] == du_before["object_bytes"] - du_after["object_bytes"]
    assert report["objects_removed"] == du_before["objects"] - du_after["objects"]
    assert _verify(project)[0] == 0
    _undo_ok(project)
    assert (project / "notes.txt").read_text(encoding="utf-8") == CHANGED


def test_a_young_pack_is_left_alone_by_cos_gc_and_an_old_one_moved_out(project: Path) -> None:
    _rewound(project)
    folder = _folder(project)
    proc = cos("gc", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert len(ObjectStore(str(folder)).packs()) == 1
    _age(ObjectStore(str(folder)).packs()[0])
    proc = cos("gc", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert ObjectStore(str(folder)).packs() == []
    assert _verify(project)[0] == 0
    _undo_ok(project)
    assert (project / "notes.txt").read_text(encoding="utf-8") == CHANGED


def test_a_rewind_killed_once_its_pack_is_in_place_leaves_an_orphan_gc_removes(
        project: Path) -> None:
    (project / "notes.txt").write_text("at the checkpoint\n", encoding="utf-8")
    checkpoint = str(create(project)["id"])
    (project / "notes.txt").write_text(CHANGED, encoding="utf-8")
    before = tree(project)
    killed = _child(project, KILLS["after_pack_in_place"][0] + """
from coding_os import api
api.rewind(sys.argv[1], 'code', cwd=sys.argv[2])
""", checkpoint, str(project))
    assert killed.returncode == 9, killed.stderr
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    assert cos("checkpoints", "--json", cwd=project).returncode == 0  # the next call cleans up
    assert tree(project) == before
    assert not (folder / "journal.json").exists() and not (folder / "journal.json.tmp").exists()
    assert _verify(project)[0] == 0
    # No checkpoint names its objects: once old, gc removes it and counts them.
    entries = len(pack_entries(pack))
    _age(pack)
    report = json.loads(cos("gc", "--json", cwd=project).stdout)
    assert not os.path.exists(pack)
    assert report["checkpoints"]["objects_removed"] >= entries, report
    assert _verify(project)[0] == 0
    # And a rewind works again.
    rewind_ok(project, checkpoint, "--code")
    _undo_ok(project)
    assert tree(project) == before


def test_a_gc_killed_while_moving_a_pack_out_leaves_a_store_that_verifies(
        project: Path) -> None:
    checkpoint, before = _rewound(project)
    folder = _folder(project)
    killed = _child(project, """
from coding_os.checkpoints.store import ObjectStore
from coding_os.checkpoints.upkeep import collect
from coding_os.state.tiers import Tiers
real = ObjectStore.put
def put(self, data, **kwargs):
    out = real(self, data, **kwargs)
    os._exit(9)  # the first needed object is loose, the pack still in place
ObjectStore.put = put
collect(Tiers(sys.argv[1]), grace_s=0)
""", str(project / ".coding-os"))
    assert killed.returncode == 9, killed.stderr
    assert len(ObjectStore(str(folder)).packs()) == 1
    assert _verify(project)[0] == 0
    report = collect(_tiers(project), grace_s=0)  # done again, to the end
    assert ObjectStore(str(folder)).packs() == [] and report["problems"] == []
    assert _verify(project)[0] == 0
    _undo_ok(project)
    assert tree(project) == before


def _bad_pack(kind: str, folder: Path, tmp_path: Path) -> Path:
    packs = folder / "objects" / "packs"
    name = packs / f"{'ab' * 32}.pack"
    if kind == "empty":
        name.write_bytes(b"")
    elif kind == "not a pack":
        name.write_bytes(b"hello, I am a text file\n")
    elif kind == "truncated header":
        name.write_bytes(b"cos-pack 1\nsha256:" + b"a" * 30)
    elif kind == "huge header line":
        name.write_bytes(b"cos-pack 1\n" + b"x" * (4 << 20))
    elif kind == "wrong lengths":
        name.write_bytes(b"cos-pack 1\nsha256:" + b"a" * 64 + b" 99999999999\n\nshort")
    elif kind == "directory":
        name.mkdir()
        (name / "inside").write_bytes(b"x")
    elif kind == "dangling symlink":
        name.symlink_to(tmp_path / "nowhere.pack")
    else:
        raise AssertionError(kind)
    return name


@pytest.mark.parametrize("kind", ["empty", "not a pack", "truncated header", "huge header line",
                                  "wrong lengths", "directory", "dangling symlink"])
def test_a_bad_file_named_like_a_pack_is_reported_left_alone_and_blocks_nothing(
        project: Path, tmp_path: Path, kind: str) -> None:
    checkpoint, before = _rewound(project)
    folder = _folder(project)
    bad = _bad_pack(kind, folder, tmp_path)
    code, report = _verify(project)
    assert code == 6 and report["ok"] is False
    assert any(d["object"] == str(bad) for d in report["damaged"]), report
    du = cos("checkpoints", "du", "--json", cwd=project)
    assert du.returncode == 0, du.stderr
    _age(bad)
    for pack in ObjectStore(str(folder)).packs():
        _age(pack)
    proc = cos("gc", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert os.path.lexists(bad)  # left for the user: verify names it
    # The good pack's objects were moved out; the undo and a new rewind work.
    _undo_ok(project)
    assert tree(project) == before
    rewind_ok(project, checkpoint, "--code")
    assert (project / "notes.txt").read_text(encoding="utf-8") == "at the checkpoint\n"


def test_a_pack_listing_an_id_twice_reads_verifies_and_undoes(project: Path) -> None:
    _, before = _rewound(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    data = Path(pack).read_bytes()
    rows = [(oid, data[o:o + n]) for oid, o, n in pack_entries(pack)]
    os.unlink(pack)
    again = _write_pack(folder, [rows[-1], *rows])
    assert [e[0] for e in pack_entries(str(again))].count(rows[-1][0]) == 2
    code, report = _verify(project)
    assert code == 0, report
    assert ObjectStore(str(folder)).get(_oid(CHANGED.encode())) == CHANGED.encode()
    _undo_ok(project)
    assert tree(project) == before


def test_a_symlink_named_like_a_pack_is_removed_by_gc_never_its_target(project: Path,
                                                                       tmp_path: Path) -> None:
    _rewound(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    outside = tmp_path / "elsewhere.pack"
    outside.write_bytes(Path(pack).read_bytes())
    link = Path(pack).with_name(f"{'cd' * 32}.pack")
    link.symlink_to(outside)
    _age(link)
    collect(_tiers(project), grace_s=0)
    assert not os.path.lexists(link) and outside.read_bytes()  # the link only
    assert _verify(project)[0] == 0


def test_a_stray_pack_temporary_is_ignored_by_verify_and_removed_by_gc_once_old(
        project: Path) -> None:
    _rewound(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    tmp = Path(f"{pack}.tmp-1234-abcdef")
    tmp.write_bytes(b"cos-pack 1\nhalf writ")
    assert _verify(project)[0] == 0
    collect(_tiers(project))
    assert tmp.exists()  # young: may be a rewind's being written
    _age(tmp)
    report = collect(_tiers(project))
    assert not tmp.exists() and report["objects_removed"] >= 1
    assert _verify(project)[0] == 0


def test_the_cap_prunes_the_before_checkpoint_and_its_pack_and_the_undo_fails_cleanly(
        project: Path) -> None:
    _rewound(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    (project / ".coding-os.yaml").write_text("checkpoints:\n  max_total_bytes: 1\n",
                                             encoding="utf-8")
    (project / "new.txt").write_text("a new file\n", encoding="utf-8")
    record = create(project)
    assert record.get("pruned"), record
    assert not os.path.exists(pack)  # nothing left needs its objects
    assert _verify(project)[0] == 0
    at = tree(project)
    proc = cos("rewind", "--undo", "--json", cwd=project)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert tree(project) == at


def test_gc_waits_for_a_rewind_holding_the_lock(project: Path) -> None:
    """`cos gc` takes the restore lock: it never moves a pack out under a rewind that reads it."""
    from coding_os.checkpoints.lock import restore_lock

    _rewound(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    _age(pack)
    with restore_lock(str(folder), exclusive=True):
        proc = subprocess.Popen([sys.executable, "-c", (
            "import sys\nfrom coding_os.checkpoints.upkeep import collect\n"
            "from coding_os.state.tiers import Tiers\n"
            "print(collect(Tiers(sys.argv[1]), grace_s=0)['objects_removed'])\n"),
            str(project / ".coding-os")], stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        assert proc.poll() is None  # waiting on the lock
        assert os.path.exists(pack)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and int(out) >= 0
    assert not os.path.exists(pack)
    assert _verify(project)[0] == 0


def test_a_reader_of_a_packed_object_fails_as_damaged_on_a_flipped_byte(project: Path) -> None:
    _rewound(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    oid = _oid(CHANGED.encode())
    _, offset, length = next(e for e in pack_entries(pack) if e[0] == oid)
    data = bytearray(Path(pack).read_bytes())
    data[offset + length // 2] ^= 1
    os.chmod(pack, 0o600)
    Path(pack).write_bytes(bytes(data))
    with pytest.raises(DamagedObject):
        ObjectStore(str(folder)).get(oid)
    # gc does not move a damaged needed object out, nor remove its pack.
    collect(_tiers(project), grace_s=0)
    assert os.path.exists(pack)


# Found by the review, fixed: ObjectStore.has does not look loose again after _in_pack finds no
# pack: a lock-free reader (verify's missing check) racing gc's move out says a present object is
# missing
def test_has_of_a_packed_object_while_gc_moves_the_pack_out_is_true(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rewound(project)
    tiers = _tiers(project)
    oid = _oid(CHANGED.encode())
    real = ObjectStore._in_pack
    raced: list[bool] = []

    def racing(self: ObjectStore, wanted: str) -> object:
        if not raced:
            raced.append(True)
            collect(tiers, grace_s=0)  # another process's `cos gc`, after the loose miss
        return real(self, wanted)

    monkeypatch.setattr(ObjectStore, "_in_pack", racing)
    present = ObjectStore(str(_folder(project))).has(oid)
    monkeypatch.undo()
    assert ObjectStore(str(_folder(project))).packs() == []
    assert os.path.exists(ObjectStore(str(_folder(project))).path(oid))  # moved out, loose
    assert present


# Found by the review, fixed: verify checks a loose object with ObjectStore.get, which falls back
# to a pack's copy: a damaged loose file goes unreported (working tree)
def test_verify_reports_a_damaged_loose_copy_that_a_pack_stands_in_for(project: Path) -> None:
    _rewound(project)
    store = ObjectStore(str(_folder(project)))
    oid = _oid(CHANGED.encode())
    loose = Path(store.path(oid))
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_bytes(zlib.compress(b"bit rot\n"))
    code, report = _verify(project)
    assert code == 6 and any(d["object"] == oid for d in report["damaged"]), report
