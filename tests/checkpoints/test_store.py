"""The object store (checkpoints/store.py) and `cos checkpoints verify`: content-addressed,
algorithm-tagged ids, one write per content, damage reported without touching anything; a store
that defers its flush; the rewind's packs (`ObjectStore(pack=True)`), the readers' look into
`objects/packs/`, and what `verify`, `du`, `gc` and the cap's pruning do with packs.

Crashes are os._exit(9) (as SIGKILL) in a child at a patched point; a race with `cos gc` is an
in-process interleaving (a reader that takes no lock, with `collect` run between two of its steps,
as another process could); bad input is a file written into `objects/packs/` by hand."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from coding_os.daemon.client import ask_watcher
from coding_os.checkpoints import rewind
from coding_os.checkpoints.upkeep import collect, usage
from coding_os.checkpoints.store import DamagedObject, ObjectStore, pack_entries, valid_oid
from coding_os.errors import InvalidInput
from coding_os.state.tiers import Tiers
from tests.helpers import (RESTORE_KILLS, cos, create, git, raw_bytes, rewind_ok, tree, until,
                           waits_for_lock)


def test_put_then_get_returns_the_same_bytes_under_a_sha256_tagged_id(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path / "checkpoints"))
    data = bytes(range(256)) * 40 + b"\0tail"
    oid, written = store.put(data)
    assert oid == "sha256:" + hashlib.sha256(data).hexdigest()
    assert written > 0 and valid_oid(oid)
    assert store.get(oid) == data
    assert store.path(oid).startswith(str(tmp_path / "checkpoints" / "objects" / "sha256"))


def test_the_same_content_gets_the_same_id_and_is_written_once(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path / "checkpoints"))
    first, written = store.put(b"same content\n")
    path = store.path(first)
    before = os.stat(path)
    second, again = store.put(b"same content\n")
    assert (second, again) == (first, 0)
    after = os.stat(path)
    # The same file, not rewritten: only its mtime moves on (in use again, so `cos gc`'s grace
    # counts from now).
    assert after.st_ino == before.st_ino and after.st_size == before.st_size
    assert after.st_mtime_ns >= before.st_mtime_ns
    assert written > 0 and len(list(store)) == 1


def test_the_empty_content_is_an_object_too(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path / "checkpoints"))
    oid, _ = store.put(b"")
    assert store.get(oid) == b""


@pytest.mark.parametrize("bad", ["../x", "sha256:../../etc/passwd", "sha256:abc",
                                 "sha256:" + "a" * 63, "sha256:" + "a" * 65,
                                 "sha256:" + "A" * 64, "md5:" + "a" * 64, "a" * 64,
                                 "sha256:" + "a" * 62 + "/x", ""])
def test_a_malformed_object_id_is_refused_before_any_path_is_built(tmp_path: Path,
                                                                   bad: str) -> None:
    store = ObjectStore(str(tmp_path / "checkpoints"))
    assert not valid_oid(bad)
    for call in (store.path, store.get, store.has, store.remove):
        with pytest.raises(InvalidInput):
            call(bad)
    assert not (tmp_path / "checkpoints").exists()


def test_get_of_a_damaged_or_missing_object_raises_damaged_object(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path / "checkpoints"))
    oid, _ = store.put(b"original bytes\n")
    path = Path(store.path(oid))
    os.chmod(path, 0o600)
    path.write_bytes(zlib.compress(b"other bytes\n"))
    with pytest.raises(DamagedObject, match="damaged"):
        store.get(oid)
    path.write_bytes(b"not zlib at all")
    with pytest.raises(DamagedObject, match="cannot be read"):
        store.get(oid)
    path.unlink()
    with pytest.raises(DamagedObject, match="missing"):
        store.get(oid)


def _flip_a_byte(path: Path) -> None:
    os.chmod(path, 0o600)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.chmod(path, 0o400)


def test_verify_reports_a_flipped_byte_and_a_missing_object_and_changes_nothing(
        project: Path) -> None:
    (project / "a.txt").write_text("alpha\n" * 50, encoding="utf-8")
    (project / "b.txt").write_text("beta\n" * 50, encoding="utf-8")
    record = create(project)
    store = ObjectStore(str(project / ".coding-os" / "checkpoints"))
    manifest = json.loads(store.get(str(record["manifest"])))
    overlay = manifest["layers"][0]["overlay"]
    flipped, missing = overlay["a.txt"][3], overlay["b.txt"][3]
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"] is True, proc.stderr

    _flip_a_byte(Path(store.path(flipped)))
    os.unlink(store.path(missing))
    state = project / ".coding-os"
    before = raw_bytes(state)
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    assert [item["object"] for item in report["damaged"]] == [flipped]
    assert any(missing in item["problem"] for item in report["missing"])
    assert raw_bytes(state) == before

    proc = cos("checkpoints", "verify", cwd=project)
    assert "DAMAGED" in proc.stdout
    assert raw_bytes(state) == before


def test_verify_reports_a_git_blob_the_repository_no_longer_has(project: Path) -> None:
    # A staged file is git's already: the checkpoint refers to its blob instead of copying it.
    (project / "staged.txt").write_text("staged content\n", encoding="utf-8")
    git(project, "add", "staged.txt")
    record = create(project)
    store = ObjectStore(str(project / ".coding-os" / "checkpoints"))
    entry = json.loads(store.get(str(record["manifest"])))["layers"][0]["overlay"]["staged.txt"]
    assert entry[3] is None
    sha = entry[1]
    assert sha == git(project, "hash-object", "staged.txt")
    (project / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    state = project / ".coding-os"
    before = raw_bytes(state)
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    assert any(sha in item["problem"] for item in report["missing"]), report
    assert raw_bytes(state) == before


@pytest.mark.parametrize("as_json", [True, False])
def test_verify_of_a_damaged_store_exits_6(project: Path, as_json: bool) -> None:
    (project / "a.txt").write_text("alpha\n", encoding="utf-8")
    record = create(project)
    store = ObjectStore(str(project / ".coding-os" / "checkpoints"))
    entry = json.loads(store.get(str(record["manifest"])))["layers"][0]["overlay"]["a.txt"]
    _flip_a_byte(Path(store.path(entry[3])))
    proc = cos("checkpoints", "verify", *(["--json"] if as_json else []), cwd=project)
    assert proc.returncode == 6, (proc.stdout, proc.stderr)


def test_a_deferred_object_is_seen_by_no_one_else_until_flushed_then_in_place(
        tmp_path: Path) -> None:
    mine = ObjectStore(str(tmp_path), defer_sync=True)
    other = ObjectStore(str(tmp_path))
    oid, written = mine.put(b"pending bytes")
    assert written > 0 and mine.has(oid) and mine.get(oid) == b"pending bytes"
    assert not other.has(oid)  # never named before it is on disk
    assert mine.put(b"pending bytes") == (oid, 0)
    mine.flush()
    assert other.has(oid) and other.get(oid) == b"pending bytes"
    assert [p for p in tmp_path.rglob("*") if ".tmp-" in p.name] == []


def test_a_snapshot_given_up_leaves_no_object_and_no_temporary_file(tmp_path: Path) -> None:
    mine = ObjectStore(str(tmp_path), defer_sync=True)
    oid, _ = mine.put(b"never flushed")
    mine.discard()
    assert not mine.has(oid)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_flush_that_fails_discards_what_it_held_and_says_so_in_one_error(
        tmp_path: Path) -> None:
    from coding_os.errors import StateIOError

    mine = ObjectStore(str(tmp_path), defer_sync=True)
    oid, _ = mine.put(b"held")
    with pytest.raises(StateIOError):
        mine.flush(also=[str(tmp_path / "no such file")])
    assert not mine.has(oid)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_new_store_makes_its_256_fan_out_directories_once(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path))
    store.put(b"first")
    fans = sorted(p.name for p in (tmp_path / "objects" / "sha256").iterdir())
    assert fans == [f"{n:02x}" for n in range(256)]
    assert sum(1 for _ in store) == 1


def test_an_uncompressed_store_writes_stored_blocks_every_store_reads(tmp_path: Path) -> None:
    data = b"the same line again and again\n" * 200
    fast = ObjectStore(str(tmp_path), compress=False)
    oid, written = fast.put(data)
    assert written > len(data)  # stored as it is, in a zlib stream
    on_disk = Path(fast.path(oid)).read_bytes()
    assert data[:1000] in on_disk and zlib.decompress(on_disk) == data
    assert ObjectStore(str(tmp_path)).get(oid) == data
    # The same content put by a compressing store is already there: written once.
    assert ObjectStore(str(tmp_path)).put(data) == (oid, 0)


def test_a_rewinds_snapshot_is_one_uncompressed_pack_that_verifies_and_undoes(
        project: Path) -> None:
    (project / "notes.txt").write_text("at the checkpoint\n" * 50, encoding="utf-8")
    (project / "other.txt").write_text("other at the checkpoint\n", encoding="utf-8")
    checkpoint = str(create(project)["id"])
    changed = "changed after the checkpoint, kept by the rewind's snapshot\n" * 50
    (project / "notes.txt").write_text(changed, encoding="utf-8")
    (project / "other.txt").write_text("other changed\n", encoding="utf-8")
    rewind_ok(project, checkpoint, "--code")
    oid = "sha256:" + hashlib.sha256(changed.encode()).hexdigest()
    store = ObjectStore(str(project / ".coding-os" / "checkpoints"))
    assert not os.path.exists(store.path(oid))  # not loose: in the rewind's pack
    packs = store.packs()
    assert len(packs) == 1
    assert changed.encode()[:200] in Path(packs[0]).read_bytes()  # not compressed
    assert {entry[0] for entry in pack_entries(packs[0])} >= {
        oid, "sha256:" + hashlib.sha256(b"other changed\n").hexdigest()}
    assert store.has(oid) and store.get(oid) == changed.encode()
    report = json.loads(cos("checkpoints", "verify", "--json", cwd=project).stdout)
    assert report["ok"] is True, report
    assert report["objects_checked"] >= 3  # the pack's objects are checked one by one
    du = json.loads(cos("checkpoints", "du", "--json", cwd=project).stdout)
    assert du["object_bytes"] >= os.lstat(packs[0]).st_blocks * 512
    assert cos("rewind", "--undo", "--json", cwd=project).returncode == 0
    assert (project / "notes.txt").read_text(encoding="utf-8") == changed


def test_a_pack_store_writes_one_file_at_flush_and_nothing_when_given_up(
        tmp_path: Path) -> None:
    mine = ObjectStore(str(tmp_path), pack=True)
    oids = [mine.put(f"object {n}\n".encode() * 30)[0] for n in range(5)]
    assert mine.put(b"object 0\n" * 30) == (oids[0], 0)
    assert all(mine.has(oid) for oid in oids)
    assert mine.get(oids[3]) == b"object 3\n" * 30
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # held in memory
    other = ObjectStore(str(tmp_path))
    assert not other.has(oids[0])
    extra = tmp_path / "extra"
    extra.write_bytes(b"flushed with the pack")
    mine.flush(also=[str(extra)])
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != extra]
    assert len(files) == 1 and files[0].parent.name == "packs"
    fresh = ObjectStore(str(tmp_path))
    assert [fresh.get(oid) for oid in oids] == [f"object {n}\n".encode() * 30 for n in range(5)]
    given_up = ObjectStore(str(tmp_path), pack=True)
    given_up.put(b"never flushed")
    given_up.discard()
    given_up.flush()  # nothing held: no pack
    assert len(ObjectStore(str(tmp_path)).packs()) == 1


def test_a_pack_flush_that_fails_leaves_no_pack_nor_temporary_file(tmp_path: Path) -> None:
    from coding_os.errors import StateIOError

    mine = ObjectStore(str(tmp_path), pack=True)
    oid, _ = mine.put(b"held")
    with pytest.raises(StateIOError):
        mine.flush(also=[str(tmp_path / "not there")])
    assert not ObjectStore(str(tmp_path)).has(oid) and not mine.has(oid)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def _rewound(project: Path) -> tuple[str, str]:
    """A checkpoint, notes.txt changed after it, then a rewind to it (whose snapshot holds the
    change in a pack); returns the checkpoint and the changed text."""
    (project / "notes.txt").write_text("at the checkpoint\n", encoding="utf-8")
    checkpoint = str(create(project)["id"])
    changed = "after the checkpoint\n" * 40
    (project / "notes.txt").write_text(changed, encoding="utf-8")
    rewind_ok(project, checkpoint, "--code")
    return checkpoint, changed


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flip", "truncate", "index"])
def test_a_damaged_pack_is_reported_by_verify_and_read_as_damaged(project: Path,
                                                                  damage: str) -> None:
    checkpoint, changed = _rewound(project)
    store = ObjectStore(str(project / ".coding-os" / "checkpoints"))
    pack = Path(store.packs()[0])
    data = bytearray(pack.read_bytes())
    os.chmod(pack, 0o600)
    oid = "sha256:" + hashlib.sha256(changed.encode()).hexdigest()
    if damage == "flip":  # a byte of the changed file's bytes (stored as they are)
        _, offset, length = next(e for e in pack_entries(str(pack)) if e[0] == oid)
        data[offset + length // 2] ^= 0x01
    elif damage == "truncate":
        del data[-5:]
    else:
        data[len(b"cos-pack 1\n") + 3] = ord("!")
    pack.write_bytes(bytes(data))
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    assert proc.returncode == 6
    report = json.loads(proc.stdout)
    assert report["ok"] is False and report["damaged"], report
    with pytest.raises(DamagedObject):
        ObjectStore(str(project / ".coding-os" / "checkpoints")).get(oid)
    undo = cos("rewind", "--undo", "--json", cwd=project)
    assert undo.returncode != 0 and len(undo.stderr.strip().splitlines()) == 1
    assert (project / "notes.txt").read_text(encoding="utf-8") == "at the checkpoint\n"


def test_gc_moves_a_packs_needed_objects_out_and_removes_it(project: Path) -> None:
    from coding_os.checkpoints.upkeep import collect
    from coding_os.state.tiers import Tiers
    checkpoint, changed = _rewound(project)
    folder = project / ".coding-os" / "checkpoints"
    assert len(ObjectStore(str(folder)).packs()) == 1
    tiers = Tiers(str(project / ".coding-os"))
    assert collect(tiers, grace_s=3600)["objects_removed"] == 0  # young: left alone
    assert len(ObjectStore(str(folder)).packs()) == 1
    dry = collect(tiers, dry_run=True, grace_s=0)
    assert len(ObjectStore(str(folder)).packs()) == 1 and dry["dry_run"] is True
    collect(tiers, grace_s=0)
    store = ObjectStore(str(folder))
    assert store.packs() == []
    oid = "sha256:" + hashlib.sha256(changed.encode()).hexdigest()
    assert os.path.exists(store.path(oid))  # still needed by the before-rewind checkpoint
    report = json.loads(cos("checkpoints", "verify", "--json", cwd=project).stdout)
    assert report["ok"] is True, report
    assert cos("rewind", "--undo", "--json", cwd=project).returncode == 0
    assert (project / "notes.txt").read_text(encoding="utf-8") == changed
    # With every checkpoint gone, nothing of it is kept.
    again = "changed once more\n" * 40
    (project / "notes.txt").write_text(again, encoding="utf-8")
    rewind_ok(project, checkpoint, "--code")
    assert len(ObjectStore(str(folder)).packs()) == 1
    collect(tiers, older_than_s=-60, grace_s=0)
    assert ObjectStore(str(folder)).packs() == []
    assert not os.path.exists(store.path(oid))
    assert not ObjectStore(str(folder)).has("sha256:" + hashlib.sha256(again.encode()).hexdigest())


def test_the_cap_prunes_a_pack_with_the_checkpoints_that_needed_it(project: Path) -> None:
    from coding_os.checkpoints.upkeep import _prune
    (project / "notes.txt").write_text("at the checkpoint\n", encoding="utf-8")
    checkpoint = str(create(project)["id"])
    (project / "notes.txt").write_text("after the checkpoint\n" * 40, encoding="utf-8")
    rewind_ok(project, checkpoint, "--code")
    folder = project / ".coding-os" / "checkpoints"
    pack = ObjectStore(str(folder)).packs()[0]
    size = os.lstat(pack).st_blocks * 512
    before = json.loads(cos("checkpoints", "--json", cwd=project).stdout)[0]
    assert before["trigger"] == "before-rewind"  # the checkpoint whose objects are the pack's
    pruned: list[str] = []
    left = _prune(str(folder), 0, checkpoint, 10**9, pruned)
    assert pruned == [before["id"]] and not os.path.exists(pack)
    assert left <= 10**9 - size


def test_a_reader_whose_pack_gc_moved_out_meanwhile_reads_the_loose_object(
        project: Path) -> None:
    from coding_os.checkpoints.upkeep import collect
    from coding_os.state.tiers import Tiers
    checkpoint, changed = _rewound(project)
    folder = str(project / ".coding-os" / "checkpoints")
    oid = "sha256:" + hashlib.sha256(changed.encode()).hexdigest()
    reader = ObjectStore(folder)
    assert reader.get(oid) == changed.encode()  # from the pack: its index is now known
    collect(Tiers(str(project / ".coding-os")), grace_s=0)
    assert ObjectStore(folder).packs() == []
    assert reader.get(oid) == changed.encode()  # the pack is gone: read loose


# -- the packs: readers racing gc, damaged copies, what gc and du count ------------------------


CHANGED = "after the checkpoint, kept in the rewind's pack\n" * 40


def _folder(project: Path) -> Path:
    return project / ".coding-os" / "checkpoints"


def _tiers(project: Path) -> Tiers:
    return Tiers(str(project / ".coding-os"))


def _oid(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _rewound_with_tree_before(project: Path) -> tuple[str, dict]:  # type: ignore[type-arg]
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


@pytest.mark.parametrize("step", ["_in_pack", "get_packed"])
def test_an_undo_reading_its_packed_manifest_while_gc_moves_the_pack_out_succeeds(
        project: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    checkpoint, before = _rewound_with_tree_before(project)
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
        rewind.undo(tiers, str(project), watcher=ask_watcher)
    finally:
        monkeypatch.undo()
    assert raced[0] and ObjectStore(str(_folder(project))).packs() == []  # gc did move it out
    assert tree(project) == before


# A lock-free reader (verify's check for missing objects) that finds the object neither loose
# nor in a pack because gc moved the pack out meanwhile looks loose again.
def test_has_of_a_packed_object_while_gc_moves_the_pack_out_is_true(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rewound_with_tree_before(project)
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


def test_gc_waits_for_a_rewind_holding_the_lock(project: Path) -> None:
    """`cos gc` takes the restore lock: it never moves a pack out under a rewind that reads it."""
    from coding_os.checkpoints.lock import restore_lock

    _rewound_with_tree_before(project)
    folder = _folder(project)
    (pack,) = ObjectStore(str(folder)).packs()
    _age(pack)
    with restore_lock(str(folder), exclusive=True):
        proc = subprocess.Popen([sys.executable, "-c", (
            "import sys\nfrom coding_os.checkpoints.upkeep import collect\n"
            "from coding_os.state.tiers import Tiers\n"
            "print(collect(Tiers(sys.argv[1]), grace_s=0)['objects_removed'])\n"),
            str(project / ".coding-os")], stdout=subprocess.PIPE, text=True)
        until(lambda: proc.poll() is not None or waits_for_lock(folder / "restore.lock"),
              "cos gc to wait for the restore lock")
        assert proc.poll() is None  # waiting on the lock
        assert os.path.exists(pack)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and int(out) >= 0
    assert not os.path.exists(pack)
    assert _verify(project)[0] == 0


def test_gc_dry_run_reports_the_bytes_the_real_run_frees(project: Path) -> None:
    _rewound_with_tree_before(project)
    tiers = _tiers(project)
    dry = collect(tiers, dry_run=True, grace_s=0)
    assert len(ObjectStore(str(_folder(project))).packs()) == 1  # a dry run changes nothing
    real = collect(tiers, grace_s=0)
    assert ObjectStore(str(_folder(project))).packs() == []
    assert dry["objects_removed"] == real["objects_removed"]
    assert dry["bytes_freed"] == real["bytes_freed"], (dry, real)


# gc checks a needed object's loose copy as it is (not through the pack standing in for it):
# a damaged loose copy does not count, and the pack holding the only intact copy is kept.
def test_gc_keeps_the_intact_packed_copy_when_the_loose_copy_is_damaged(
        project: Path) -> None:
    checkpoint, before = _rewound_with_tree_before(project)
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


# verify checks a loose object as it is, not through a pack's copy of it.
def test_verify_reports_a_damaged_loose_copy_that_a_pack_stands_in_for(project: Path) -> None:
    _rewound_with_tree_before(project)
    store = ObjectStore(str(_folder(project)))
    oid = _oid(CHANGED.encode())
    loose = Path(store.path(oid))
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_bytes(zlib.compress(b"bit rot\n"))
    code, report = _verify(project)
    assert code == 6 and any(d["object"] == oid for d in report["damaged"]), report


def test_gc_of_a_pack_listing_a_needed_id_twice_counts_what_du_counts(project: Path) -> None:
    _rewound_with_tree_before(project)
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


def test_gc_counts_what_du_sees_removed_and_the_undo_works_after(project: Path) -> None:
    _rewound_with_tree_before(project)
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
    _rewound_with_tree_before(project)
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


@pytest.mark.slow
def test_a_rewind_killed_once_its_pack_is_in_place_leaves_an_orphan_gc_removes(
        project: Path) -> None:
    (project / "notes.txt").write_text("at the checkpoint\n", encoding="utf-8")
    checkpoint = str(create(project)["id"])
    (project / "notes.txt").write_text(CHANGED, encoding="utf-8")
    before = tree(project)
    killed = _child(project, RESTORE_KILLS["after_pack_in_place"][0] + """
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
    checkpoint, before = _rewound_with_tree_before(project)
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


def test_the_cap_prunes_the_before_checkpoint_and_its_pack_and_the_undo_fails_cleanly(
        project: Path) -> None:
    _rewound_with_tree_before(project)
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


def test_a_reader_of_a_packed_object_fails_as_damaged_on_a_flipped_byte(project: Path) -> None:
    _rewound_with_tree_before(project)
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


# -- bad files in objects/packs/ ---------------------------------------------------------------


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


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["empty", "not a pack", "truncated header", "huge header line",
                                  "wrong lengths", "directory", "dangling symlink"])
def test_a_bad_file_named_like_a_pack_is_reported_left_alone_and_blocks_nothing(
        project: Path, tmp_path: Path, kind: str) -> None:
    checkpoint, before = _rewound_with_tree_before(project)
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
    _, before = _rewound_with_tree_before(project)
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
    _rewound_with_tree_before(project)
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
    _rewound_with_tree_before(project)
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


# -- a store that defers its flush -------------------------------------------------------------


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
