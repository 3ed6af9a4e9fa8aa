"""A background job's own worktree (jobs/worktrees.py, DESIGN.md §6): made without touching the
main checkout, routed to the main repository's state dir, and removed only when no work is lost."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from coding_os.jobs.worktrees import (WorkAtRisk, check_out, create_worktree, drop_spare,
                                        inspect_worktree, is_git_repository, needs_worktree,
                                        prepare_spare, remove_worktree, spare_ready)
from coding_os.errors import Conflict, InvalidId, InvalidInput
from tests.helpers import cos, git, tree

JOB = "0123abcd"


def checkout_state(repo: Path) -> tuple[object, ...]:
    """What a job must never change in the main checkout: its files, its index's bytes, what
    `git status` says, and its HEAD."""
    return (tree(repo), (repo / ".git" / "index").read_bytes(),
            git(repo, "status", "--porcelain", "--untracked-files=all"),
            (repo / ".git" / "HEAD").read_bytes(), git(repo, "rev-parse", "HEAD"))


def commit_in(folder: Path, name: str, text: str = "work\n") -> str:
    (folder / name).write_text(text, encoding="utf-8")
    git(folder, "add", name)
    git(folder, "commit", "-q", "-m", f"add {name}")
    return git(folder, "rev-parse", "HEAD")


def test_create_worktree_leaves_the_main_checkout_identical(repo: Path) -> None:
    (repo / "README.md").write_text("edited, not committed\n", encoding="utf-8")
    (repo / "notes.txt").write_text("untracked\n", encoding="utf-8")
    git(repo, "add", "notes.txt")
    (repo / "scratch.txt").write_text("untracked\n", encoding="utf-8")
    before = checkout_state(repo)

    made = create_worktree(str(repo), JOB)

    assert checkout_state(repo) == before
    assert made.path == str(repo / ".coding-os" / "worktrees" / JOB)
    assert (made.branch, made.base, made.cwd) == (f"cos/{JOB}", git(repo, "rev-parse", "HEAD"),
                                                 made.path)
    assert {name for name in tree(made.path)} == {"README.md", ".git"}  # `.git`: a file here
    assert tree(made.path)["README.md"] == ("f", b"hello\n", False)
    assert git(repo, "rev-parse", f"refs/heads/cos/{JOB}") == made.base
    assert git(made.path, "symbolic-ref", "HEAD") == f"refs/heads/cos/{JOB}"


def test_the_worktrees_folder_never_shows_in_the_main_checkouts_status(repo: Path) -> None:
    create_worktree(str(repo), JOB)
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    (repo / ".coding-os" / ".gitignore").unlink()  # the state dir's own, edited away
    shown = git(repo, "status", "--porcelain", "--untracked-files=all")
    assert shown and "worktrees" not in shown  # the state dir's files show, no worktree's
    git(repo, "check-ignore", "-q", f".coding-os/worktrees/{JOB}/README.md")


def test_a_worktree_made_without_its_files_gets_them_from_check_out(repo: Path) -> None:
    made = create_worktree(str(repo), "0123abcd", checkout=False)
    assert not (Path(made.path) / "README.md").exists()
    assert git(made.path, "rev-parse", "--abbrev-ref", "HEAD") == "cos/0123abcd"
    check_out(made.path)
    assert (Path(made.path) / "README.md").read_text() == "hello\n"
    assert git(made.path, "status", "--porcelain") == ""
    assert inspect_worktree(made.path, made.branch).at_risk is False


def test_a_worktree_is_made_from_a_detached_head(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    commit_in(repo, "later.txt")
    git(repo, "checkout", "-q", "--detach", first)
    made = create_worktree(str(repo), JOB)
    assert made.base == first
    assert "later.txt" not in tree(made.path)


def test_a_project_below_the_checkouts_top_runs_in_the_same_directory_of_the_worktree(
        repo: Path) -> None:
    (repo / "pkg").mkdir()
    commit_in(repo / "pkg", "mod.py")
    made = create_worktree(str(repo / "pkg"), JOB)
    assert made.path == str(repo / ".coding-os" / "worktrees" / JOB)
    assert made.cwd == os.path.join(made.path, "pkg")
    assert (Path(made.cwd) / "mod.py").is_file()


def test_a_repository_without_a_commit_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(InvalidInput, match="no commit yet"):
        create_worktree(str(empty), JOB)
    assert not (empty / ".coding-os").exists()


def test_a_crafted_job_id_is_refused_and_nothing_is_made(repo: Path) -> None:
    for job_id in ("../../victim", "0123ABCD", "0123abc", "abcd/1234", "", "0123abcd\n"):
        with pytest.raises(InvalidId):
            create_worktree(str(repo), job_id)
    assert not (repo / ".coding-os").exists()
    assert git(repo, "branch", "--list", "cos/*") == ""


def test_a_job_id_used_twice_is_refused(repo: Path) -> None:
    create_worktree(str(repo), JOB)
    with pytest.raises(Conflict, match="exists already"):
        create_worktree(str(repo), JOB)


def test_which_directories_need_a_worktree(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    made = create_worktree(str(repo), JOB)
    assert is_git_repository(str(repo)) and needs_worktree(str(repo))
    assert is_git_repository(made.path) and not needs_worktree(made.path)
    assert not is_git_repository(str(elsewhere)) and not needs_worktree(str(elsewhere))
    with pytest.raises(InvalidInput, match="already a linked worktree"):
        create_worktree(made.path, "4567abcd")
    with pytest.raises(InvalidInput, match="not in a git repository"):
        create_worktree(str(elsewhere), JOB)


def test_a_dotfiles_repository_at_home_is_no_project_checkout(isolated_env: Path) -> None:
    git(isolated_env, "init", "-q")
    (isolated_env / "notes").mkdir()
    assert not is_git_repository(str(isolated_env / "notes"))
    assert not needs_worktree(str(isolated_env / "notes"))


def test_cos_in_a_job_worktree_keeps_state_and_checkpoints_in_the_main_repository(
        repo: Path) -> None:
    made = Path(create_worktree(str(repo), JOB).path)
    where = cos("where", "--json", cwd=made)
    assert where.returncode == 0, where.stderr
    found = json.loads(where.stdout)
    assert (found["state_dir"], found["rule"], found["worktree"], found["state_dir_status"]) == (
        str(repo / ".coding-os"), "worktree", str(made), "own")

    (made / "job.txt").write_text("the job's file\n", encoding="utf-8")
    taken = cos("checkpoint", "create", "--json", cwd=made)
    assert taken.returncode == 0, taken.stderr
    checkpoint = json.loads(taken.stdout)
    assert checkpoint["root"] == str(made)
    listed = cos("checkpoints", "--json", cwd=made)
    assert listed.returncode == 0, listed.stderr
    assert checkpoint["id"] in listed.stdout
    assert not (made / ".coding-os").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_clean_worktree_would_lose_nothing(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    status = inspect_worktree(made.path, made.branch)
    assert (status.missing, status.dirty, status.unpushed, status.at_risk) == (
        False, [], [], False)


def test_changed_staged_and_untracked_files_are_dirty(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    folder = Path(made.path)
    (folder / "README.md").write_text("changed\n", encoding="utf-8")
    (folder / "staged.txt").write_text("s\n", encoding="utf-8")
    git(folder, "add", "staged.txt")
    (folder / "new.txt").write_text("n\n", encoding="utf-8")
    status = inspect_worktree(made.path, made.branch)
    assert sorted(status.dirty) == ["README.md", "new.txt", "staged.txt"]
    assert status.at_risk and "3 uncommitted changes" in status.loss()


def test_a_commit_only_the_job_branch_holds_is_unpushed(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit = commit_in(Path(made.path), "job.txt")
    status = inspect_worktree(made.path, made.branch)
    assert (status.dirty, status.unpushed) == ([], [commit])


def test_a_commit_merged_into_the_main_branch_is_not_unpushed(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit_in(Path(made.path), "job.txt")
    git(repo, "merge", "-q", "--ff-only", made.branch)
    assert inspect_worktree(made.path, made.branch).unpushed == []


def test_a_commit_on_a_remote_tracking_ref_or_another_branch_is_not_unpushed(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit = commit_in(Path(made.path), "job.txt")
    git(repo, "update-ref", "refs/remotes/origin/job", commit)
    assert inspect_worktree(made.path, made.branch).unpushed == []
    git(repo, "update-ref", "-d", "refs/remotes/origin/job")
    git(repo, "branch", "kept", commit)
    assert inspect_worktree(made.path, made.branch).unpushed == []


def test_a_commit_on_the_worktrees_detached_head_is_unpushed(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    git(made.path, "checkout", "-q", "--detach")
    commit = commit_in(Path(made.path), "detached.txt")
    assert inspect_worktree(made.path, made.branch).unpushed == [commit]


def test_commits_the_main_checkouts_detached_head_holds_are_not_unpushed(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    commit_in(repo, "only-on-detached-head.txt")
    made = create_worktree(str(repo), JOB)
    assert inspect_worktree(made.path, made.branch).unpushed == []


def test_removing_a_dirty_worktree_is_refused_and_keeps_everything(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    (Path(made.path) / "README.md").write_text("unsaved work\n", encoding="utf-8")
    with pytest.raises(WorkAtRisk) as refused:
        remove_worktree(str(repo), made.path, made.branch)
    message = str(refused.value)
    assert refused.value.exit_code == 1
    assert "\n" not in message and "1 uncommitted change (README.md)" in message
    assert "nothing was removed" in message
    assert (Path(made.path) / "README.md").read_text(encoding="utf-8") == "unsaved work\n"
    assert git(repo, "branch", "--list", made.branch) != ""


def test_removing_a_worktree_with_an_unpushed_commit_is_refused(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit = commit_in(Path(made.path), "job.txt")
    with pytest.raises(WorkAtRisk, match=f"1 commit on {made.branch}.*{commit[:12]}"):
        remove_worktree(str(repo), made.path, made.branch)
    assert Path(made.path, "job.txt").is_file()
    assert git(repo, "rev-parse", made.branch) == commit


def test_removing_a_worktree_whose_work_was_merged_removes_folder_and_branch(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit = commit_in(Path(made.path), "job.txt")
    git(repo, "merge", "-q", "--ff-only", made.branch)
    done = remove_worktree(str(repo), made.path, made.branch)
    assert (done["removed"], done["branch_deleted"], done["forced"]) == (True, True, False)
    assert not Path(made.path).exists()
    assert git(repo, "branch", "--list", made.branch) == ""
    assert git(repo, "rev-parse", "HEAD") == commit
    assert str(Path(made.path)) not in git(repo, "worktree", "list")


def test_force_removes_a_dirty_worktree_and_its_unpushed_branch(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit = commit_in(Path(made.path), "job.txt")
    (Path(made.path) / "scratch.txt").write_text("x\n", encoding="utf-8")
    before = checkout_state(repo)
    done = remove_worktree(str(repo), made.path, made.branch, force=True)
    assert done["lost"] == {"dirty": ["scratch.txt"], "unpushed": [commit]}
    assert not Path(made.path).exists()
    assert git(repo, "branch", "--list", made.branch) == ""
    assert checkout_state(repo) == before


def test_a_folder_already_gone_is_pruned_and_its_branch_deleted(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    shutil.rmtree(made.path)
    status = inspect_worktree(made.path, made.branch)
    assert (status.missing, status.at_risk) == (True, False)
    done = remove_worktree(str(repo), made.path, made.branch)
    assert (done["pruned"], done["branch_deleted"]) == (True, True)
    assert not (repo / ".git" / "worktrees" / JOB).exists()
    assert git(repo, "branch", "--list", made.branch) == ""


def test_a_folder_gone_with_unpushed_commits_on_its_branch_is_refused(repo: Path) -> None:
    made = create_worktree(str(repo), JOB)
    commit = commit_in(Path(made.path), "job.txt")
    shutil.rmtree(made.path)
    with pytest.raises(WorkAtRisk, match="1 commit"):
        remove_worktree(str(repo), made.path, made.branch)
    assert git(repo, "rev-parse", made.branch) == commit


def test_a_crafted_path_or_branch_never_removes_anything(repo: Path, tmp_path: Path) -> None:
    made = create_worktree(str(repo), JOB)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep\n", encoding="utf-8")
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other), "-b", "feature")
    folder = repo / ".coding-os" / "worktrees"
    crafted = [
        (str(victim), made.branch),
        (str(other), made.branch),
        (str(folder / JOB / ".." / ".." / ".."), made.branch),
        (f"{folder}/../worktrees/{JOB}/..", made.branch),
        (str(folder / "4567abcd"), made.branch),  # another job's folder than the branch's
        ("worktrees/" + JOB, made.branch),
    ]
    for path, branch in crafted:
        with pytest.raises(InvalidInput):
            remove_worktree(str(repo), path, branch)
    for branch in ("main", "feature", "cos/../main", f"cos/{JOB}/x", "refs/heads/main"):
        with pytest.raises(InvalidId):
            remove_worktree(str(repo), made.path, branch)
    (folder / "4567abcd").symlink_to(victim)
    with pytest.raises(InvalidInput):
        remove_worktree(str(repo), str(folder / "4567abcd"), "cos/4567abcd", force=True)
    assert (victim / "precious.txt").read_text(encoding="utf-8") == "keep\n"
    assert (other / "README.md").is_file() and Path(made.path, "README.md").is_file()
    assert git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split() == [
        "cos/0123abcd", "feature", "main"]


def test_a_planted_folder_that_is_no_worktree_of_the_repository_is_not_deleted(
        repo: Path) -> None:
    create_worktree(str(repo), JOB)
    planted = repo / ".coding-os" / "worktrees" / "89abcdef"
    planted.mkdir()
    git(planted, "init", "-q")
    (planted / "file.txt").write_text("keep\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a linked worktree"):
        remove_worktree(str(repo), str(planted), "cos/89abcdef", force=True)
    (planted / ".git").rename(planted / "moved.git")
    (planted / ".git").write_text(f"gitdir: {planted / 'moved.git'}\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a linked worktree"):
        remove_worktree(str(repo), str(planted), "cos/89abcdef", force=True)
    assert (planted / "file.txt").read_text(encoding="utf-8") == "keep\n"


def test_a_job_takes_over_the_spare_worktree_ready_at_head(repo: Path) -> None:
    create_worktree(str(repo), JOB)  # the first job makes the worktrees folder
    (repo / "README.md").write_text("edited, not committed\n", encoding="utf-8")
    before = checkout_state(repo)
    assert prepare_spare(str(repo)) and spare_ready(str(repo))
    spare = repo / ".coding-os" / "worktrees" / "spare"
    assert tree(spare)["README.md"] == ("f", b"hello\n", False)

    made = create_worktree(str(repo), "4567cdef", checkout=False, use_spare=True)

    assert made.checked_out and not spare.exists() and not spare_ready(str(repo))
    assert tree(made.path)["README.md"] == ("f", b"hello\n", False)
    assert git(made.path, "symbolic-ref", "HEAD") == "refs/heads/cos/4567cdef"
    assert git(made.path, "rev-parse", "HEAD") == made.base == git(repo, "rev-parse", "HEAD")
    assert git(made.path, "status", "--porcelain", "--untracked-files=all") == ""
    assert checkout_state(repo) == before
    remove_worktree(str(repo), made.path, made.branch)  # a job's worktree like any other
    assert not Path(made.path).exists()


def test_a_spare_made_before_head_moved_is_not_taken_and_is_replaced(repo: Path) -> None:
    create_worktree(str(repo), JOB)
    assert prepare_spare(str(repo))
    moved = commit_in(repo, "later.txt")
    assert not spare_ready(str(repo))

    made = create_worktree(str(repo), "4567cdef", checkout=False, use_spare=True)

    assert not made.checked_out and made.base == moved
    check_out(made.path)
    assert tree(made.path)["later.txt"] == ("f", b"work\n", False)
    assert prepare_spare(str(repo)) and spare_ready(str(repo))
    spare = repo / ".coding-os" / "worktrees" / "spare"
    assert git(spare, "rev-parse", "HEAD") == moved and "later.txt" in tree(spare)


def test_a_changed_spare_is_not_taken(repo: Path) -> None:
    create_worktree(str(repo), JOB)
    assert prepare_spare(str(repo))
    spare = repo / ".coding-os" / "worktrees" / "spare"
    (spare / "README.md").write_text("changed in the spare\n", encoding="utf-8")

    made = create_worktree(str(repo), "4567cdef", checkout=False, use_spare=True)

    assert not made.checked_out
    check_out(made.path)
    assert tree(made.path)["README.md"] == ("f", b"hello\n", False)


def test_drop_spare_removes_it_and_nothing_else_unless_its_lock_is_held(repo: Path) -> None:
    import fcntl

    made = create_worktree(str(repo), JOB)
    assert prepare_spare(str(repo))
    before = checkout_state(repo)
    with open(repo / ".coding-os" / "worktrees" / ".spare.lock", "a+b") as held:  # a job's take
        fcntl.flock(held, fcntl.LOCK_EX)
        assert drop_spare(str(repo)) is False
        assert spare_ready(str(repo))
    assert drop_spare(str(repo)) is True
    assert not (repo / ".coding-os" / "worktrees" / "spare").exists()
    assert not spare_ready(str(repo)) and checkout_state(repo) == before
    assert "worktrees/spare" not in git(repo, "worktree", "list")
    assert Path(made.path).is_dir()


def test_a_job_whose_branch_exists_is_refused_even_with_a_spare_ready(repo: Path) -> None:
    create_worktree(str(repo), JOB)
    assert prepare_spare(str(repo))
    git(repo, "branch", "cos/4567cdef")
    before = git(repo, "worktree", "list", "--porcelain")
    with pytest.raises(Conflict, match="exists already"):
        create_worktree(str(repo), "4567cdef", checkout=False, use_spare=True)
    assert not (repo / ".coding-os" / "worktrees" / "4567cdef").exists()
    assert "4567cdef" not in git(repo, "worktree", "list", "--porcelain")
    assert len(git(repo, "worktree", "list", "--porcelain").split("\n\n")) <= len(
        before.split("\n\n"))


def test_gc_removes_a_spare_no_supervisor_keeps_once_its_project_had_no_job_for_an_hour(
        project: Path) -> None:
    import fcntl
    import subprocess
    import time

    from coding_os.jobs import jobs

    made = create_worktree(str(project), JOB)
    dead = subprocess.Popen(["true"])  # its pid: a supervisor that no longer runs
    dead.wait()
    assert prepare_spare(str(project), owner=dead.pid)  # as a killed supervisor left it
    worktrees = project / ".coding-os" / "worktrees"
    spare = worktrees / "spare"
    job = jobs.new_job({"name": "j", "agent": "exec", "cwd": str(project),
                        "project": str(project), "worktree": made.path}, "true")
    jobs.update(job, state="done")

    def gc(*args: str) -> dict[str, Any]:
        done = cos("gc", "--json", *args, cwd=project)
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)["jobs"]
        return found

    # A job was made in a worktree of the project within the hour: the spare is still of use.
    assert gc("--dry-run") == {"removed": [], "kept": [], "spares": [], "kept_spares": []}
    jobs.update(job, startedAt=int((time.time() - 2 * 3600) * 1000))
    assert gc("--dry-run")["spares"] == [str(spare)]
    assert spare.is_dir() and "worktrees/spare" in git(project, "worktree", "list")

    with open(worktrees / ".spare.lock", "a+b") as held:  # a job taking it
        fcntl.flock(held, fcntl.LOCK_EX)
        found = gc()
        assert found["spares"] == []
        assert [kept["worktree"] for kept in found["kept_spares"]] == [str(spare)]
        assert spare.is_dir()

    done = cos("gc", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"removed the spare worktree {spare}" in done.stdout
    assert not spare.exists() and not (worktrees / "spare.ready").exists()
    assert "worktrees/spare" not in git(project, "worktree", "list")
    assert Path(made.path).is_dir() and made.path in git(project, "worktree", "list")
    assert gc("--dry-run")["spares"] == []
