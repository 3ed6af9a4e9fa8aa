"""The object store (checkpoints/store.py) and `cos checkpoints verify`: content-addressed,
algorithm-tagged ids, one write per content, damage reported without touching anything."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

import pytest

from coding_os.checkpoints.store import DamagedObject, ObjectStore, pack_entries, valid_oid
from coding_os.errors import InvalidInput
from tests.checkpoints.conftest import create, raw_bytes, rewind_ok
from tests.conftest import cos, git


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
