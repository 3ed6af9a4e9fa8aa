"""Disk budget and retention of checkpoints (DESIGN.md §5, docs/checkpoints.md): `cos gc`
collects what no checkpoint reaches and what is past `cleanup_period_days`, `cos checkpoints du`
reports use, and `checkpoints.max_total_bytes` prunes the oldest checkpoints."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os.checkpoints import points
from coding_os.checkpoints.store import ObjectStore
from coding_os.state.hookslog import parse_line
from tests.helpers import commit_all, cos, cos_json, create, fire, killed_create, temporaries


HOUR = 3600
DAY = 86400


def folder(project: Path) -> Path:
    return project / ".coding-os" / "checkpoints"


def backdate(path: str | Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def age_record(project: Path, checkpoint: str, days: float) -> str:
    """Give a checkpoint the id it would have had `days` ago (ids sort by time, and that is how
    retention tells a checkpoint's age); returns the new id."""
    top = str(folder(project))
    record = points.load(top, checkpoint)
    old = points.new_id(time.time() - days * DAY)
    points.write(top, {**record, "id": old})
    points.remove(top, checkpoint)
    return old


def objects(project: Path) -> set[str]:
    return {oid for oid, _ in ObjectStore(str(folder(project))) if oid}


def reached(project: Path, checkpoint: str) -> set[str]:
    store = ObjectStore(str(folder(project)))
    record = points.load(str(folder(project)), checkpoint)
    manifest = json.loads(store.get(str(record["manifest"])))
    found = {str(record["manifest"])}
    for layer in manifest["layers"]:
        found.update(str(e[3]) for e in layer["overlay"].values() if e and e[3])
    return found


def listed_ids(project: Path) -> list[str]:
    rows: list[dict[str, Any]] = cos_json("checkpoints", cwd=project)  # type: ignore[assignment]
    return [str(row["id"]) for row in rows]


def gc(project: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    report = cos_json("gc", *args, cwd=project, env=env)
    assert isinstance(report, dict)
    checkpoints = report["checkpoints"]
    assert isinstance(checkpoints, dict)
    return checkpoints


def test_gc_removes_unreferenced_objects_past_the_grace_and_keeps_referenced_and_young_ones(
        project: Path) -> None:
    (project / "work.txt").write_text("kept by a checkpoint\n", encoding="utf-8")
    record = create(project)
    kept = reached(project, str(record["id"]))
    store = ObjectStore(str(folder(project)))
    stray_old, _ = store.put(b"an object no checkpoint reaches, two hours old")
    stray_young, _ = store.put(b"an object no checkpoint reaches, written just now")
    for oid in kept | {stray_old}:
        backdate(store.path(oid), 2 * HOUR)

    report = gc(project)

    assert report["objects_removed"] == 1 and int(str(report["bytes_freed"])) > 0
    assert report["checkpoints_removed"] == [] and report["dry_run"] is False
    assert report["problems"] == []
    assert objects(project) == kept | {stray_young}
    assert cos("checkpoints", "verify", "--json", cwd=project).returncode == 0


def test_gc_dry_run_reports_and_removes_nothing(project: Path) -> None:
    record = create(project)
    store = ObjectStore(str(folder(project)))
    stray, _ = store.put(b"unreferenced")
    backdate(store.path(stray), 2 * HOUR)
    old = age_record(project, str(record["id"]), 40)
    before = objects(project)

    report = gc(project, "--dry-run")

    assert report["dry_run"] is True
    assert report["checkpoints_removed"] == [old]
    assert report["objects_removed"] == 1  # the manifest is an hour young: kept anyway
    assert objects(project) == before
    assert listed_ids(project) == [old]


def test_gc_removes_checkpoints_older_than_the_cleanup_period_and_then_their_old_objects(
        project: Path) -> None:
    (project / "a.txt").write_text("only the old checkpoint has this\n", encoding="utf-8")
    old_record = create(project)
    (project / "a.txt").unlink()
    (project / "b.txt").write_text("the recent checkpoint has this\n", encoding="utf-8")
    recent = create(project)
    old_objects = reached(project, str(old_record["id"])) - reached(project, str(recent["id"]))
    assert old_objects
    for oid in objects(project):
        backdate(ObjectStore(str(folder(project))).path(oid), 2 * HOUR)
    old = age_record(project, str(old_record["id"]), 10)
    week = age_record(project, str(recent["id"]), 5)

    report = gc(project, env={"COS_CLEANUP_PERIOD_DAYS": "7"})

    assert report["checkpoints_removed"] == [old]
    assert report["objects_removed"] == len(old_objects)
    assert listed_ids(project) == [week]
    assert objects(project) == reached(project, week)
    assert cos("checkpoints", "verify", "--json", cwd=project).returncode == 0


@pytest.mark.slow
def test_the_cleanup_period_from_the_config_file_applies_when_the_environment_is_silent(
        project: Path) -> None:
    (project / ".coding-os.yaml").write_text("cleanup_period_days: 3\n", encoding="utf-8")
    record = create(project)
    old = age_record(project, str(record["id"]), 4)
    young = age_record(project, str(create(project)["id"]), 2)
    report = gc(project)
    assert report["checkpoints_removed"] == [old]
    assert listed_ids(project) == [young]


def test_du_reports_objects_records_total_and_the_cap(project: Path) -> None:
    (project / "data.bin").write_bytes(os.urandom(10000))
    create(project)
    create(project)
    du = cos_json("checkpoints", "du", cwd=project)
    assert isinstance(du, dict)
    assert set(du) == {"objects", "object_bytes", "checkpoints", "record_bytes", "total_bytes",
                       "cap_bytes", "percent_of_cap"}
    assert du["objects"] == len(objects(project)) == 2
    assert du["checkpoints"] == 2
    assert du["object_bytes"] >= 10000 and du["record_bytes"] > 0
    assert du["total_bytes"] == du["object_bytes"] + du["record_bytes"]
    assert du["cap_bytes"] == 2 << 30
    assert du["percent_of_cap"] == round(100 * du["total_bytes"] / du["cap_bytes"], 2)
    proc = cos("checkpoints", "du", cwd=project)
    assert proc.returncode == 0 and proc.stdout.strip() and proc.stderr == ""


CAP = 20000


def _capped(project: Path) -> None:
    (project / ".coding-os.yaml").write_text(
        f"checkpoints:\n  max_total_bytes: {CAP}\n", encoding="utf-8")


@pytest.mark.slow
def test_over_the_cap_the_oldest_checkpoints_are_pruned_never_the_new_one_and_said_so(
        project: Path) -> None:
    _capped(project)
    ids = []
    pruned: list[str] = []
    for _ in range(6):
        (project / "data.bin").write_bytes(os.urandom(3000))
        record = create(project)
        ids.append(str(record["id"]))
        assert str(record["id"]) not in record.get("pruned", [])  # type: ignore[operator]
        pruned += record.get("pruned", [])  # type: ignore[arg-type]
    assert pruned and pruned == sorted(pruned) and set(pruned) <= set(ids[:-1])
    listed = listed_ids(project)
    assert listed[0] == ids[-1] and not set(listed) & set(pruned)
    (project / "data.bin").write_bytes(os.urandom(3000))
    proc = cos("checkpoint", "create", cwd=project)
    assert proc.returncode == 0 and "pruned" in proc.stderr and "Traceback" not in proc.stderr
    assert cos("checkpoints", "verify", "--json", cwd=project).returncode == 0


def test_a_hook_checkpoint_over_the_cap_logs_checkpoints_pruned(project: Path) -> None:
    _capped(project)
    native = "0f3c9a7e-1b2d-4c5e-8f90-0000000000c1"
    assert fire("SessionStart", {"session_id": native, "source": "startup"},
                cwd=project).returncode == 0
    for i in range(6):
        (project / "data.bin").write_bytes(os.urandom(3000))
        proc = fire("UserPromptSubmit", {"session_id": native, "prompt": f"prompt {i}"},
                    cwd=project)
        assert proc.returncode == 0 and proc.stdout == ""
    lines = [parse_line(line + "\n") for line in (project / ".coding-os" / ".hooks.log")
             .read_text(encoding="utf-8").splitlines()]
    assert all(f is not None and "checkpoint_error" not in f for f in lines)
    assert any(f is not None and f.get("checkpoints_pruned") for f in lines)


def test_taking_checkpoints_of_changing_content_keeps_du_near_the_cap(project: Path) -> None:
    _capped(project)
    for _ in range(8):
        (project / "data.bin").write_bytes(os.urandom(3000))
        create(project)
    du = cos_json("checkpoints", "du", cwd=project)
    assert isinstance(du, dict)
    # The newest checkpoint alone (its file, its manifest, its record) may be over; no more.
    assert du["total_bytes"] <= CAP + 4 * 4096, du
    # Each checkpoint here holds about three 4 KiB blocks (its file, manifest and record), so
    # a 20,000-byte cap keeps the newest one and prunes every older one.
    assert du["checkpoints"] >= 1, du


# -- the temporary objects of a checkpoint being taken or killed -------------------------------


def test_a_checkpoint_killed_before_its_flush_does_not_make_verify_report_damage(
        project: Path) -> None:
    killed_create(project)
    # Nothing refers to them: no checkpoint was recorded. The store is not damaged.
    report = json.loads(cos("checkpoints", "verify", "--json", cwd=project).stdout)
    assert report["damaged"] == [], report["damaged"]


def test_verify_during_a_checkpoint_being_taken_reports_no_damage(project: Path) -> None:
    from coding_os.checkpoints.store import ObjectStore

    (project / "base.txt").write_text("base\n")
    commit_all(project, "base")
    create(project)
    # What `take.create` holds while it snapshots a large tree: objects not yet flushed.
    store = ObjectStore(str(folder(project)), defer_sync=True)
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
    left = killed_create(project)
    old = time.time() - 3 * 3600  # well past gc's grace of an hour
    for path in left:
        os.utime(path, (old, old))
    proc = cos("gc", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert temporaries(project) == []


# -- checkpoints of a background job's worktree (`cos rm` takes them with it) ---------------------


def job_worktree(project: Path, job: str = "0badc0de") -> Path:
    """A linked worktree where a job's would be (`.coding-os/worktrees/<id>`, branch
    `cos/<id>`) with one checkpoint taken in it and one in the main checkout; the worktree."""
    from tests.helpers import git

    create(project)  # the state dir, and a checkpoint of the main checkout
    path = project / ".coding-os" / "worktrees" / job
    git(project, "worktree", "add", "-q", "-b", f"cos/{job}", str(path))
    (path / "job.txt").write_text("written in the job's worktree\n", encoding="utf-8")
    record = create(path)
    assert record["root"] == str(path)
    return path


def roots(project: Path) -> list[str]:
    return sorted(str(r["root"]) for r in points.all_records(str(folder(project))))


def test_drop_worktree_removes_the_checkpoints_of_that_worktree_only(project: Path) -> None:
    from coding_os.checkpoints.upkeep import drop_worktree
    from coding_os.state.tiers import Tiers

    worktree = job_worktree(project)
    taken = [r["id"] for r in points.all_records(str(folder(project)))
             if r["root"] == str(worktree)]
    dropped = drop_worktree(Tiers(str(project / ".coding-os")), str(worktree))
    assert dropped == taken and len(dropped) == 1
    assert roots(project) == [str(project)]


def test_verify_lists_checkpoints_of_a_job_worktree_that_is_gone_and_reports_no_damage(
        project: Path) -> None:
    from tests.helpers import git

    worktree = job_worktree(project)
    git(project, "worktree", "remove", "--force", str(worktree))
    git(project, "branch", "-D", "cos/0badc0de")
    proc = cos("checkpoints", "verify", "--json", cwd=project)
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["missing"] == [] and report["damaged"] == []
    assert [o["root"] for o in report["orphaned"]] == [str(worktree)]
    text = cos("checkpoints", "verify", cwd=project).stdout
    assert "`cos gc` drops them" in text


def test_a_vanished_tree_that_was_no_job_worktree_is_still_missing_its_git_objects(
        project: Path, tmp_path: Path) -> None:
    from tests.helpers import git

    create(project)
    other = tmp_path / "elsewhere"
    git(project, "worktree", "add", "-q", "-b", "mine", str(other))
    (other / "mine.txt").write_text("mine\n", encoding="utf-8")
    create(other)
    git(project, "worktree", "remove", "--force", str(other))
    report = json.loads(cos("checkpoints", "verify", "--json", cwd=project).stdout)
    assert report["orphaned"] == [] and report["ok"] is False
    assert any(m.get("repository") == str(other) for m in report["missing"])


def test_gc_drops_checkpoints_of_a_job_worktree_that_is_gone_whatever_their_age(
        project: Path) -> None:
    from tests.helpers import git

    worktree = job_worktree(project)
    git(project, "worktree", "remove", "--force", str(worktree))
    gone = [str(r["id"]) for r in points.all_records(str(folder(project)))
            if r["root"] == str(worktree)]

    would = gc(project, "--dry-run")
    assert would["orphans_removed"] == gone and would["checkpoints_removed"] == []
    assert roots(project) == sorted([str(project), str(worktree)])

    done = gc(project)
    assert done["orphans_removed"] == gone
    assert roots(project) == [str(project)]
    assert json.loads(cos("checkpoints", "verify", "--json", cwd=project).stdout)["orphaned"] == []
