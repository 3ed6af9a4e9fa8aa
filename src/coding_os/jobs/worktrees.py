"""A background job's own git worktree (DESIGN.md §6): made before the agent starts, looked at
and removed when the job is cleaned up, never losing work on the way.

A job `<id>` of a project in a git repository gets `<project>/.coding-os/worktrees/<id>`, a linked
worktree on a new branch `cos/<id>` made from the commit the main checkout has checked out. The
main checkout's files, index and HEAD are never touched, and the worktrees folder is ignored by
git there (the state dir's `.gitignore` of `*`, and one of its own). In the worktree cos's hooks
route to the main repository's state dir (§3.1), so its checkpoints and state land there.

Writing a worktree's files costs in proportion to the tree (a second or more for a few thousand
files on a slow disk), so the supervisor keeps a spare: `<worktrees>/spare`, a detached worktree
whose files are all written, made (at low priority) at the commit the main checkout has checked
out, with `spare.ready` naming that commit once it is complete. A job made while the spare is
ready at the checkout's HEAD takes it over (`git worktree move` to its own path, then its branch
made there) instead of writing its files; a spare at another commit (HEAD moved since), changed,
or half made is never taken, and is replaced. `.spare.lock` (flock) keeps a take, a
preparation and a removal apart. `spare.owner` names the pid of the supervisor that made the
spare: one that no running supervisor keeps (it was stopped or killed) is removed by `cos gc`
once its project has had no job for a while (control.gc_jobs), and the supervisor removes its
own when it stops.

Removing a worktree would lose its uncommitted changes and the commits of its branch that no
other branch, tag, remote-tracking ref or checkout holds; `remove_worktree` refuses that unless
forced. Every path and branch is rebuilt from the job id and checked against a strict pattern
(§11: a crafted job file must not make cos delete elsewhere), and every removal goes through
git, which removes only what it registered as this repository's worktree.
"""

from __future__ import annotations

import os
import re

from coding_os import durable
from coding_os.errors import Conflict, CosError, ForeignState, InvalidId, InvalidInput
from coding_os.git.command import git
from coding_os.git.repo import (checkout_root, git_dirs, head, inside_prefix,
                                 status_paths)
from coding_os.state import registry
from coding_os.state.root import STATE_DIR_NAME, hub_dir, linked_worktree_main

__all__ = ["JOB_ID_RE", "BRANCH_PREFIX", "WORKTREES_DIR", "SPARE", "Worktree", "WorktreeStatus",
           "WorkAtRisk", "is_git_repository", "needs_worktree", "worktrees_dir",
           "create_worktree", "check_out", "inspect_worktree", "remove_worktree",
           "spare_ready", "prepare_spare", "drop_spare", "spare_projects", "spare_owner",
           "spare_locked", "main"]

# A job id as cos mints it: lower-case hex. Nothing else is ever made a path or a branch name.
JOB_ID_RE = re.compile(r"[0-9a-f]{8,32}")
BRANCH_PREFIX = "cos/"
WORKTREES_DIR = "worktrees"  # in the state dir (a name state/tiers.py reserves)
_IGNORE_ALL = b"# made by coding-os: job worktrees are never part of the main checkout\n*\n"
_SHOWN = 5  # paths or commits a refusal names before "and N more"
SPARE, SPARE_READY, SPARE_LOCK = "spare", "spare.ready", ".spare.lock"  # in the worktrees folder
SPARE_OWNER = "spare.owner"  # in the worktrees folder: the pid of the supervisor that made it


class _Value:
    """A plain value class (`cos bg` imports this module: no dataclasses, which pull in
    `inspect`): equal when of the same class with the same fields."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Value) and type(other) is type(self) and (
            self._fields() == other._fields())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"


class Worktree(_Value):
    """A job's worktree: its top, its branch, the commit it was made from, the directory in it
    that matches the project directory it was made for (the job's working directory), and
    whether its files are written (`checked_out`; otherwise check_out writes them)."""

    __slots__ = ("path", "branch", "base", "cwd", "checked_out")

    def __init__(self, path: str, branch: str, base: str, cwd: str,
                 checked_out: bool = True) -> None:
        self.path, self.branch, self.base, self.cwd = path, branch, base, cwd
        self.checked_out = checked_out

    def as_dict(self) -> dict[str, str]:
        return {"worktree": self.path, "branch": self.branch, "base": self.base,
                "cwd": self.cwd}


class WorktreeStatus(_Value):
    """What removing a job's worktree and branch would lose: `dirty` (paths `git status` shows
    changed or untracked), `unpushed` (commits only the branch or the worktree's HEAD holds,
    newest first); `missing` when the folder is gone."""

    __slots__ = ("path", "branch", "missing", "dirty", "unpushed")

    def __init__(self, path: str, branch: str, missing: bool, dirty: list[str] | None = None,
                 unpushed: list[str] | None = None) -> None:
        self.path, self.branch, self.missing = path, branch, missing
        self.dirty: list[str] = list(dirty or [])
        self.unpushed: list[str] = list(unpushed or [])

    @property
    def at_risk(self) -> bool:
        """Whether removing it would lose work."""
        return bool(self.dirty or self.unpushed)

    def loss(self) -> str:
        """What would be lost, in words ("" when nothing)."""
        parts = []
        if self.dirty:
            parts.append(f"{_count(len(self.dirty), 'uncommitted change')} "
                         f"({_some(self.dirty)})")
        if self.unpushed:
            parts.append(f"{_count(len(self.unpushed), 'commit')} on {self.branch} that no "
                         f"other branch holds ({_some([c[:12] for c in self.unpushed])})")
        return " and ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {"worktree": self.path, "branch": self.branch, "missing": self.missing,
                "dirty": list(self.dirty), "unpushed": list(self.unpushed)}


class WorkAtRisk(CosError):
    """Removing a job's worktree would lose uncommitted changes or unpushed commits."""

    exit_code = 1


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _some(items: list[str]) -> str:
    shown = ", ".join(repr(item)[1:-1] if not item.isprintable() else item
                      for item in items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _checkout_of(path: str) -> str | None:
    """The top of the git checkout holding `path`; a repository at `$HOME` or `/` (a dotfiles
    repository) is no project's checkout."""
    top = checkout_root(path)
    home = os.path.realpath(os.environ.get("HOME") or os.path.expanduser("~"))
    return None if top in (home, "/") else top


def is_git_repository(path: str) -> bool:
    """Whether `path` lies in a project's git checkout (a main checkout or a linked worktree;
    not a dotfiles repository at `$HOME` or `/`)."""
    return _checkout_of(path) is not None


def needs_worktree(project: str) -> bool:
    """Whether a job started in `project` gets a worktree of its own: in a git checkout, unless
    that is already a linked worktree (the job then runs in place)."""
    top = _checkout_of(project)
    return top is not None and linked_worktree_main(top) is None


def worktrees_dir(project: str) -> str:
    """`<top>/.coding-os/worktrees` of the main checkout holding `project`.

    Raises:
        InvalidInput: `project` is in no git checkout, or in a linked worktree.
    """
    top = _checkout_of(project)
    if top is None:
        raise InvalidInput(f"{project} is not in a git repository: a job there runs in place "
                           "(--isolation none)")
    if linked_worktree_main(top) is not None:
        raise InvalidInput(f"{top} is already a linked worktree: a job there runs in place "
                           "(--isolation none)")
    return os.path.join(top, STATE_DIR_NAME, WORKTREES_DIR)


def _check_job_id(job_id: str) -> None:
    if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):
        raise InvalidId(f"invalid job id {str(job_id)[:80]!r}: expected 8 to 32 lower-case hex "
                        "digits")


def _job_of_branch(branch: str) -> str:
    """The job id of a job's branch `cos/<id>`.

    Raises:
        InvalidId: `branch` is not such a name.
    """
    if not isinstance(branch, str) or not branch.startswith(BRANCH_PREFIX) \
            or not JOB_ID_RE.fullmatch(branch[len(BRANCH_PREFIX):]):
        raise InvalidId(f"invalid job branch {str(branch)[:80]!r}: expected cos/<job id>")
    return branch[len(BRANCH_PREFIX):]


def _own_folder(folder: str) -> None:
    """Refuse a state dir or worktrees folder reached through a symlink (§11).

    Raises:
        InvalidInput: `folder` is a symlink or lies below one.
    """
    if os.path.lexists(folder) and (os.path.islink(folder)
                                    or os.path.realpath(folder) != folder):
        raise InvalidInput(f"{folder} is reached through a symlink; cos keeps job worktrees in "
                           "its own folder only")


def create_worktree(project: str, job_id: str, checkout: bool = True,
                    use_spare: bool = False) -> Worktree:
    """Make job `job_id`'s worktree `<project>/.coding-os/worktrees/<job_id>` on a new branch
    `cos/<job_id>` from the commit the project's checkout has checked out (a detached HEAD
    too); the project's state dir is made and registered first when it does not exist yet.
    Without `checkout`, the worktree is registered and its branch made but its files are not
    written yet: `check_out` writes them (what costs in proportion to the tree). With
    `use_spare`, the spare worktree is taken over when it is ready at that commit (its files
    are then written: `checked_out`).

    Raises:
        InvalidId: `job_id` is not a job id.
        InvalidInput: `project` is in no git checkout, in a linked worktree, in a repository
            with no commit yet, or its state dir is reached through a symlink.
        ForeignState: the project's state dir is not this user's.
        Conflict: the worktree's folder or its branch exists already.
        StateIOError: the state dir or the worktrees folder cannot be made.
        GitError: git failed.
    """
    _check_job_id(job_id)
    folder = worktrees_dir(project)
    state_dir = os.path.dirname(folder)
    top = os.path.dirname(state_dir)
    base = head(top)
    if base is None:
        raise InvalidInput(f"{top} has no commit yet: a job's worktree starts from one "
                           "(commit once, or use --isolation none)")
    _own_folder(state_dir)
    hub = hub_dir()
    owner = registry.check(state_dir, hub, top)
    if owner.status == "foreign":
        raise ForeignState(f"{state_dir} is not this user's state dir: {owner.reason}; "
                           "`cos init` moves it aside and starts a fresh one")
    if owner.status == "absent":
        registry.create(state_dir, hub)
    _own_folder(folder)
    durable.ensure_dir(folder)
    # The state dir's `.gitignore` already leaves it all out of git; this one keeps the
    # worktrees out even where that one was edited.
    ignore = os.path.join(folder, ".gitignore")
    if not os.path.lexists(ignore):
        durable.atomic_write(ignore, _IGNORE_ALL)
    path = os.path.join(folder, job_id)
    branch = BRANCH_PREFIX + job_id
    if os.path.lexists(path):
        raise Conflict(f"{path} exists already; a job's worktree is made once")
    within = inside_prefix(os.path.realpath(project))
    cwd = os.path.join(path, within.rstrip("/")) if within else path
    # Taking the spare makes the branch, which fails when it exists (then checked below).
    if use_spare and _take_spare(top, folder, path, branch, base):
        return Worktree(path=path, branch=branch, base=base, cwd=cwd)
    if _commit(top, f"refs/heads/{branch}") is not None:
        raise Conflict(f"branch {branch} exists already in {top}; a job's branch is made once")
    git(top, "worktree", "add", "-q", *(() if checkout else ("--no-checkout",)), "-b", branch,
        path, base)
    _private_root(path)
    return Worktree(path=path, branch=branch, base=base, cwd=cwd, checked_out=checkout)


def _private_root(path: str) -> None:
    """The worktree's folder made 0700 and git's link file in it 0600, as all cos keeps in the
    state dir (git made them under the user's umask). The project's files checked out in it
    are the user's and keep the user's umask.

    Raises:
        StateIOError: they cannot be made private.
    """
    durable.private_dir(path)
    link = os.path.join(path, ".git")
    try:
        os.close(durable.open_private(link, os.O_RDONLY))
    except OSError as exc:
        raise durable.io_error(link, exc) from None


def _spare_lock(folder: str) -> int | None:
    """The spare's lock in the worktrees `folder`, held; None when another process holds it."""
    import fcntl

    try:
        fd = os.open(os.path.join(folder, SPARE_LOCK),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _ready_base(folder: str) -> str | None:
    """The commit the spare in the worktrees `folder` is ready at, or None."""
    data = durable.read_small(os.path.join(folder, SPARE_READY), 128)
    text = data.decode("ascii", "replace").strip() if data is not None else ""
    return text if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text) else None


def _take_spare(top: str, folder: str, path: str, branch: str, base: str) -> bool:
    """Move the spare, ready at `base` and unchanged, to `path` on a new branch `branch`;
    whether it was (otherwise nothing of it is at `path`)."""
    if _ready_base(folder) != base:
        return False
    lock = _spare_lock(folder)
    if lock is None:
        return False  # being made (or taken by another job)
    try:
        spare = os.path.join(folder, SPARE)
        if _ready_base(folder) != base or head(spare) != base or git(
                spare, "status", "--porcelain", "-z", "--untracked-files=all",
                "--ignore-submodules=none").strip(b"\0"):
            return False  # changed since it was made: the supervisor makes another
        durable.unlink_quietly(os.path.join(folder, SPARE_READY))  # this job's from here on
        durable.unlink_quietly(os.path.join(folder, SPARE_OWNER))
        try:
            git(top, "worktree", "move", spare, path)
            git(path, "checkout", "-q", "-b", branch)
        except CosError:  # the branch exists, or a tree git cannot move (submodules)
            _remove_spare_at(top, path)
            _remove_spare_at(top, spare)
            return False
        return True
    except CosError:
        return False
    finally:
        os.close(lock)


def _remove_spare_at(top: str, path: str) -> None:
    """Remove a spare worktree (at `path`, with no branch of its own), whatever its state."""
    import shutil

    if os.path.lexists(path):
        git(top, "worktree", "remove", "--force", "--force", path, check=False)
    if os.path.lexists(path):  # not a worktree git knows (any more): the folder alone
        shutil.rmtree(path, ignore_errors=True)


def spare_ready(project: str) -> bool:
    """Whether the spare worktree of `project`'s checkout is ready at the commit checked out
    there (no process run: the git dir's files and the spare's marker are read)."""
    try:
        folder = worktrees_dir(project)
    except CosError:
        return False
    top = os.path.dirname(os.path.dirname(folder))
    base = head(top)
    return base is not None and _ready_base(folder) == base


def prepare_spare(project: str, owner: int | None = None) -> bool:
    """Make the spare worktree of `project`'s checkout at the commit checked out there, unless
    it is ready at that commit already (one at another commit is replaced); whether one is
    ready. Nothing is made before a job made the worktrees folder, nor while another process
    holds the spare's lock. `owner`: the pid of the supervisor it is made for (`spare.owner`),
    which then keeps it.

    Raises:
        CosError: git failed, or the spare's marker could not be written.
    """
    folder = worktrees_dir(project)
    top = os.path.dirname(os.path.dirname(folder))
    base = head(top)
    if base is None or not os.path.isdir(folder) or os.path.islink(folder):
        return False
    lock = _spare_lock(folder)
    if lock is None:
        return False
    try:
        if _ready_base(folder) == base:
            return True
        durable.unlink_quietly(os.path.join(folder, SPARE_READY))
        spare = os.path.join(folder, SPARE)
        _remove_spare_at(top, spare)
        if owner is None:
            durable.unlink_quietly(os.path.join(folder, SPARE_OWNER))
        else:
            durable.atomic_write(os.path.join(folder, SPARE_OWNER), b"%d\n" % owner)
        git(top, "worktree", "add", "-q", "-f", "--detach", "--no-checkout", spare, base)
        _private_root(spare)
        check_out(spare)
        # Its index's stat data brought up to date now, so the status a take asks is quick.
        git(spare, "update-index", "-q", "--refresh", check=False)
        durable.atomic_write(os.path.join(folder, SPARE_READY), base.encode("ascii") + b"\n")
        return True
    finally:
        os.close(lock)


def drop_spare(project: str) -> bool:
    """Remove the spare worktree of `project`'s checkout, if there is one and nobody is
    taking it (or making it); False when another process holds the spare's lock, and then
    nothing is removed. Only `<worktrees>/spare` is ever removed: a job's worktree never."""
    try:
        folder = worktrees_dir(project)
        _own_folder(os.path.dirname(folder))
        _own_folder(folder)
    except CosError:
        return True
    spare = os.path.join(folder, SPARE)
    if not os.path.lexists(spare) and not os.path.lexists(os.path.join(folder, SPARE_READY)):
        return True
    lock = _spare_lock(folder)
    if lock is None:
        return False
    try:
        durable.unlink_quietly(os.path.join(folder, SPARE_READY))
        _remove_spare_at(os.path.dirname(os.path.dirname(folder)), spare)
        durable.unlink_quietly(os.path.join(folder, SPARE_OWNER))
        return True
    finally:
        os.close(lock)


def spare_projects(hub: str) -> list[str]:
    """The tops of the main checkouts whose state dir (one registered in `hub`, this user's)
    holds a spare worktree or its marker, each once, sorted."""
    found = set()
    for state_dir in registry.state_dirs(hub):
        folder = os.path.join(state_dir, WORKTREES_DIR)
        if os.path.basename(state_dir) != STATE_DIR_NAME or not (
                os.path.lexists(os.path.join(folder, SPARE))
                or os.path.lexists(os.path.join(folder, SPARE_READY))):
            continue
        top = os.path.dirname(state_dir)
        try:
            if worktrees_dir(top) == folder:
                found.add(top)
        except CosError:
            continue
    return sorted(found)


def spare_owner(project: str) -> int | None:
    """The pid of the supervisor that made the spare worktree of `project`'s checkout (None
    when unknown)."""
    try:
        folder = worktrees_dir(project)
    except CosError:
        return None
    try:
        data = durable.read_small(os.path.join(folder, SPARE_OWNER), 64)
    except (CosError, OSError):
        return None
    text = data.decode("ascii", "replace").strip() if data is not None else ""
    return int(text) if text.isdigit() and len(text) < 12 else None


def spare_locked(project: str) -> bool:
    """Whether another process holds the lock of the spare worktree of `project`'s checkout
    (a job taking it, or a supervisor making or removing it)."""
    try:
        folder = worktrees_dir(project)
    except CosError:
        return False
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False
    lock = _spare_lock(folder)
    if lock is None:
        return True
    os.close(lock)
    return False


def main(argv: list[str]) -> int:
    """`--prepare PROJECT…` (make each project's spare worktree) or `--drop PROJECT…`: what the
    supervisor runs at low priority in a process of its own; 1 when one failed."""
    import sys

    if len(argv) < 2 or argv[0] not in ("--prepare", "--drop"):
        sys.stderr.write("usage: worktrees (--prepare | --drop) PROJECT...\n")
        return 2
    code = 0
    for project in argv[1:]:
        try:
            if argv[0] == "--drop":
                drop_spare(project)
            else:  # run by the supervisor (through nice, which execs): the spare is its
                prepare_spare(project, owner=os.getppid())
        except CosError as exc:
            sys.stderr.write(f"cos: the spare worktree of {project} was not made: {exc}\n")
            code = 1
    return code


def check_out(path: str) -> None:
    """Write the files of a worktree made without them (`create_worktree(checkout=False)`):
    its index and tree as its branch's commit.

    Raises:
        GitError: git failed.
    """
    git(path, "reset", "-q", "--hard", "HEAD")


def _commit(repo: str, name: str) -> str | None:
    """The commit `name` names in `repo`, or None."""
    out = git(repo, "rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False)
    return out.decode("ascii", "replace").strip() or None


def inspect_worktree(path: str, branch: str) -> WorktreeStatus:
    """What removing the worktree at `path` (in a folder of the repository's main checkout) and
    deleting its branch `branch` would lose.

    Raises:
        InvalidId: `branch` is not `cos/<job id>`.
        InvalidInput: a folder stands at `path` that is no linked worktree of that repository.
        GitError: git failed on the worktree or its repository.
    """
    _job_of_branch(branch)
    missing = not os.path.lexists(os.path.join(path, ".git"))
    main = checkout_root(os.path.dirname(os.path.abspath(path)))
    if main is None:
        if missing:
            return WorktreeStatus(path, branch, missing)
        raise InvalidInput(f"{path} is in no git repository's folder; it is no job's worktree")
    if not missing:
        dirs, main_dirs = git_dirs(path), git_dirs(main)
        if (dirs is None or main_dirs is None or dirs[0] == dirs[1]
                or os.path.realpath(dirs[1]) != os.path.realpath(main_dirs[1])):
            raise InvalidInput(f"{path} is not a linked worktree of {main}; nothing was removed")
    repo = main if missing else path
    dirty = [] if missing else _changed_paths(path)
    tips = []
    if not missing and _commit(path, "HEAD") is not None:
        tips.append("HEAD")  # the worktree's own: a detached HEAD holds commits too
    if _commit(repo, f"refs/heads/{branch}") is not None:
        tips.append(f"refs/heads/{branch}")
    unpushed: list[str] = []
    if tips:
        held = _other_checkouts_heads(repo, path)
        out = git(repo, "rev-list", *tips, "--not", f"--exclude={branch}", "--branches",
                  "--tags", "--remotes", *held, "--")
        unpushed = out.decode("ascii", "replace").split()
    return WorktreeStatus(path, branch, missing, dirty, unpushed)


def _changed_paths(worktree: str) -> list[str]:
    """The paths `git status` shows changed, staged or untracked in `worktree`."""
    return status_paths(worktree, "--ignore-submodules=none")


def _other_checkouts_heads(repo: str, path: str) -> list[str]:
    """The commits the repository's other checkouts have checked out (a detached HEAD holds
    its commits as a branch does)."""
    out = git(repo, "worktree", "list", "--porcelain", "-z")
    heads, top = [], ""
    own = os.path.realpath(path)
    for line in out.split(b"\0"):
        text = line.decode("utf-8", "surrogateescape")
        if text.startswith("worktree "):
            top = os.path.realpath(text[len("worktree "):])
        elif text.startswith("HEAD ") and top != own:
            sha = text[len("HEAD "):]
            if sha.strip("0"):  # an unborn branch shows zeros
                heads.append(sha)
    return heads


def remove_worktree(project: str, path: str, branch: str, force: bool = False) -> dict[str, object]:
    """Remove job worktree `path` of `project` and delete its branch `branch`, unless that
    would lose uncommitted changes or unpushed commits (then nothing is removed) or `force`.
    A folder already gone is pruned from git's list. Returns what was done and, when forced,
    what was lost.

    Raises:
        InvalidId: `branch` is not `cos/<job id>`.
        InvalidInput: `path` is not `<project>/.coding-os/worktrees/<job id>` of that branch's
            job, reached without a symlink; `project` is in no main git checkout.
        WorkAtRisk: removing it would lose work and not `force` (exit code 1).
        GitError: git failed (the worktree is not one of this repository's, say).
    """
    job_id = _job_of_branch(branch)
    folder = worktrees_dir(project)
    _own_folder(os.path.dirname(folder))
    _own_folder(folder)
    expected = os.path.join(folder, job_id)
    given = os.path.realpath(path) if isinstance(path, str) else ""
    if given != expected or os.path.islink(expected):
        raise InvalidInput(f"{str(path)[:200]!r} is not the worktree of job {job_id} "
                           f"({expected}); nothing was removed")
    top = os.path.dirname(os.path.dirname(folder))
    status = inspect_worktree(expected, branch)
    if status.at_risk and not force:
        raise WorkAtRisk(f"{expected} holds work that removing it would lose: {status.loss()}; "
                         "nothing was removed (commit and push or merge it, or --force)")
    if status.missing:
        git(top, "worktree", "prune")
    else:
        git(top, "worktree", "remove", *(["--force"] if force else []), expected)
    deleted = _commit(top, f"refs/heads/{branch}") is not None
    if deleted:
        git(top, "branch", "-D", branch)
    return {"worktree": expected, "branch": branch, "removed": not status.missing,
            "pruned": status.missing, "branch_deleted": deleted, "forced": force,
            "lost": {"dirty": status.dirty, "unpushed": status.unpushed}}
