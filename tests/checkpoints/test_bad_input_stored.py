"""Bad input that comes from stored data rather than the command line:
a manifest or a restore journal naming `../` or absolute paths, a read-only directory in the
way, and a full disk during a rewind. Each: one clear line, the documented exit code, nothing
written outside the tree, and the tree untouched."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os import jsonwire
from coding_os.checkpoints import points
from coding_os.checkpoints.store import ObjectStore
from tests.helpers import (
    COS,
    cos,
    create,
    needs_namespaces,
    nothing_staged,
    one_line_failure,
    rewind,
    tree,
)


def folder(project: Path) -> Path:
    return project / ".coding-os" / "checkpoints"


def sha1_of(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def crafted_checkpoint(project: Path, bad_path: str) -> str:
    """A checkpoint whose manifest (written as the real ones are) lists `bad_path` besides a
    real file; returns its id."""
    real = create(project)
    store = ObjectStore(str(folder(project)))
    manifest: Any = jsonwire.loads(store.get(str(real["manifest"])).decode("ascii"))
    evil = b"written outside the tree\n"
    oid, _ = store.put(evil)
    manifest["layers"][0]["overlay"][bad_path] = ["f", sha1_of(evil), 0o100644, oid]
    good = b"a good file\n"
    good_oid, _ = store.put(good)
    manifest["layers"][0]["overlay"]["good.txt"] = ["f", sha1_of(good), 0o100644, good_oid]
    manifest_oid, _ = store.put(jsonwire.dumps(manifest).encode("ascii"))
    record = {**{k: v for k, v in real.items() if k not in ("objects_written", "bytes_written")},
              "id": points.new_id(time.time() + 1), "manifest": manifest_oid}
    points.write(str(folder(project)), record)
    return str(record["id"])


def bad_paths(project: Path) -> list[tuple[str, Path]]:
    outside = project.parent
    return [("../evil", outside / "evil"), ("sub/../../evil2", outside / "evil2"),
            (str(outside / "evil-abs"), outside / "evil-abs")]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_stored_manifest_with_a_path_outside_the_tree_is_refused_and_nothing_is_written(
        project: Path, which: int) -> None:
    bad, where = bad_paths(project)[which]
    checkpoint = crafted_checkpoint(project, bad)
    before = tree(project)
    outside_before = sorted(os.listdir(project.parent))
    for args in (("--code",), ("--code", "--dry-run"), ("--both",)):
        proc = rewind(project, checkpoint, *args)
        assert proc.returncode in (1, 2), (args, proc.returncode, proc.stderr)
        one_line_failure(proc, proc.returncode)
        assert not where.exists()
        assert sorted(os.listdir(project.parent)) == outside_before
        assert tree(project) == before
        assert not (folder(project) / "journal.json").exists()


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_stored_manifest_with_a_path_outside_the_tree_fails_verify_or_rewind_not_the_disk(
        project: Path, which: int) -> None:
    bad, where = bad_paths(project)[which]
    crafted_checkpoint(project, bad)
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 6)
    assert not where.exists()


def crafted_journal(project: Path, before: str, ops: list[dict[str, object]]) -> None:
    """A journal left as if a restore of this tree had been interrupted after its journal was
    written: its own staging area with a staged file for each write, and a real `before`."""
    journal_id = points.new_id()
    staging = folder(project) / "staging" / journal_id
    staging.mkdir(parents=True)
    for number, op in enumerate(ops):
        if op["op"] == "write":
            (staging / str(number)).write_bytes(b"staged bytes\n")
    journal = {"id": journal_id, "kind": "rewind", "target": before, "before": before,
               "ts": "2026-01-01T00:00:00.000Z", "root": str(project), "staging": str(staging),
               "ops": ops}
    (folder(project) / "journal.json").write_text(json.dumps(journal), encoding="utf-8")


def write_op(path: str) -> dict[str, object]:
    return {"op": "write", "path": path, "kind": "f", "sha1": sha1_of(b"staged bytes\n"),
            "mode": 0o100644, "oid": None, "layer": "", "replaces": False}


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["../evil", "a/../../evil", "ABS"])
@pytest.mark.parametrize("command", [("checkpoints",), ("checkpoint", "create"),
                                     ("checkpoints", "du")])
def test_a_journal_naming_a_path_outside_the_tree_is_not_applied_and_is_reported_in_one_line(
        project: Path, bad: str, command: tuple[str, ...]) -> None:
    before = create(project)
    outside = project.parent
    victim = outside / "victim.txt"
    victim.write_text("must survive\n", encoding="utf-8")
    target = str(outside / "evil") if bad == "ABS" else bad
    delete_target = str(victim) if bad == "ABS" else bad.replace("evil", "victim.txt")
    crafted_journal(project, str(before["id"]), [{"op": "delete", "path": delete_target},
                                                  write_op("inside.txt"), write_op(target)])
    tree_before = tree(project)
    proc = cos(*command, cwd=project)
    assert "Traceback" not in proc.stderr
    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("cos: "), proc.stderr
    assert "interrupted rewind could not be completed" in warnings[0]
    assert "journal is kept at" in warnings[0] and str(before["id"]) in warnings[0]
    assert proc.returncode == 0, proc.stderr  # the command itself still runs
    assert not (outside / "evil").exists()
    assert victim.read_text(encoding="utf-8") == "must survive\n"
    # Not even the good write ran: the journal is refused whole, and kept aside for the user.
    assert tree(project) == tree_before
    assert not (folder(project) / "journal.json").exists()
    assert len(list(folder(project).glob("journal.failed-*.json"))) == 1
    again = cos(*command, cwd=project)
    assert again.returncode == 0 and again.stderr == ""
    assert not (outside / "evil").exists() and tree(project) == tree_before


def test_a_hook_meeting_a_journal_naming_a_path_outside_the_tree_logs_it_and_writes_nothing(
        project: Path) -> None:
    from tests.helpers import fire

    before = create(project)
    crafted_journal(project, str(before["id"]), [write_op("../evil")])
    tree_before = tree(project)
    proc = fire("UserPromptSubmit", {"session_id": "0f3c9a7e-1b2d-4c5e-8f90-0000000000e1",
                                     "prompt": "go"}, cwd=project)
    assert proc.returncode == 0 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert not (project.parent / "evil").exists()
    assert tree(project) == tree_before


# A read-only directory and a full disk, in a private mount namespace (as root, chmod does not
# stop anything: a read-only bind mount does).


@needs_namespaces
def test_a_read_only_directory_to_restore_into_exits_1_with_one_line_and_the_tree_untouched(
        project: Path) -> None:
    (project / "ro").mkdir()
    (project / "ro" / "conf.txt").write_text("v1\n", encoding="utf-8")
    (project / "top.txt").write_text("v1\n", encoding="utf-8")
    checkpoint = create(project)
    (project / "ro" / "conf.txt").write_text("v2\n", encoding="utf-8")
    (project / "ro" / "new.txt").write_text("new\n", encoding="utf-8")
    (project / "top.txt").write_text("v2\n", encoding="utf-8")
    before = tree(project)
    script = ('mount --bind "$RO" "$RO" && mount -o remount,bind,ro "$RO" && exec "$0" "$@"')
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, COS, "rewind", str(checkpoint["id"]), "--code"],
        cwd=project, env={**os.environ, "RO": str(project / "ro")}, capture_output=True,
        text=True, timeout=60)
    line = one_line_failure(proc, 1)
    assert "read-only" in line and "ro" in line
    assert tree(project) == before
    assert not (folder(project) / "journal.json").exists()
    assert nothing_staged(folder(project))


FULL_DISK = r'''
import json, os, subprocess, sys

repo, cos = sys.argv[1], sys.argv[2]
state = os.path.join(repo, ".coding-os")
os.mkdir(state)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", state], check=True)


def run(*args):
    proc = subprocess.run([cos, *args], cwd=repo, capture_output=True, text=True)
    return {"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


with open(os.path.join(repo, "big.bin"), "wb") as f:
    f.write(os.urandom(1 << 20))
with open(os.path.join(repo, "small.txt"), "w") as f:
    f.write("v1\n")
made = run("checkpoint", "create", "--json")
assert made["code"] == 0, made
checkpoint = json.loads(made["stdout"])["id"]
os.unlink(os.path.join(repo, "big.bin"))
with open(os.path.join(repo, "small.txt"), "w") as f:
    f.write("v2\n")
fill = os.path.join(state, "fill")
fd = os.open(fill, os.O_WRONLY | os.O_CREAT, 0o600)
full = None
try:
    while True:
        os.write(fd, b"\0" * 65536)
except OSError as exc:
    full = exc.strerror
# Room for the checkpoint taken before the rewind, none for the megabyte to stage.
os.ftruncate(fd, os.fstat(fd).st_size - (128 << 10))
os.close(fd)
result = run("rewind", checkpoint, "--code")
folder = os.path.join(state, "checkpoints")
staging = os.path.join(folder, "staging")
print(json.dumps({"full": full, "result": result,
                  "journal": os.path.exists(os.path.join(folder, "journal.json")),
                  "staging": sorted(os.listdir(staging)) if os.path.isdir(staging) else [],
                  "next": run("checkpoints", "--json")}))
'''


@needs_namespaces
def test_a_full_disk_during_a_rewind_exits_with_one_line_leaves_the_tree_and_no_journal(
        project: Path) -> None:
    proc = subprocess.run(["unshare", "-rm", sys.executable, "-c", FULL_DISK, str(project), COS],
                          cwd=project, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["full"] == "No space left on device"
    result = subprocess.CompletedProcess([], report["result"]["code"],
                                         report["result"]["stdout"], report["result"]["stderr"])
    assert result.returncode in (1, 6), report["result"]
    line = one_line_failure(result, result.returncode)
    assert "no space left on device" in line.lower() and "nothing was changed" in line, line
    assert report["journal"] is False and report["staging"] == []
    assert report["next"]["code"] == 0, report["next"]
    # The tree as it was before the rewind: big.bin still gone, small.txt still v2.
    assert not (project / "big.bin").exists()
    assert (project / "small.txt").read_text(encoding="utf-8") == "v2\n"
    assert set(tree(project)) == {"README.md", "small.txt"}


def test_a_journal_carrying_a_before_record_with_a_bad_id_writes_no_record_anywhere(
        project: Path) -> None:
    """The journal holds the before checkpoint's record (written again when a power cut lost
    it); a crafted one naming `../` as its id is refused, not written."""
    (project / "a.txt").write_text("a\n")
    bad = "../../../escaped-record"
    journal = {"id": points.new_id(), "kind": "rewind", "target": bad, "before": bad,
               "ts": "2026-01-01T00:00:00.000Z", "root": str(project), "layout": 2,
               "staging": str(folder(project) / "staging"), "ops": [],
               "before_record": {"id": bad, "root": str(project)}}
    folder(project).mkdir(parents=True, exist_ok=True)
    (folder(project) / "journal.json").write_text(json.dumps(journal), encoding="utf-8")
    proc = cos("checkpoints", "--json", cwd=project)
    assert "Traceback" not in proc.stderr and proc.returncode == 0, proc.stderr
    assert "interrupted rewind could not be completed" in proc.stderr
    assert not list(project.parent.rglob("escaped-record*"))
    assert not (folder(project) / "journal.json").exists()
