"""The uncommitted changes a background job starts with (`cos bg --carry`, DESIGN.md §6).

A job's worktree starts from the commit the project's checkout has checked out; what the
checkout holds beside it (staged and unstaged changes, untracked files that are not ignored)
stays there unless carried. `uncommitted` lists those paths (`cos bg` says in one line that
they stay behind); `snapshot` records them, without touching the checkout, its index or HEAD,
as a git tree written through a copy of the checkout's index; the job's runner writes that tree
into the job's worktree (`carry_into`) once its files are there, as changes not staged (a file
staged in the checkout is a changed file in the worktree), before the agent starts.
"""

from __future__ import annotations

import os

from coding_os.git.command import git
from coding_os.git.repo import status_paths

__all__ = ["uncommitted", "snapshot", "carry_into"]


def uncommitted(checkout: str) -> list[str]:
    """The paths `git status` shows staged, changed or untracked (not ignored) in `checkout`.

    Raises:
        GitError: git failed.
    """
    return status_paths(checkout, "--untracked-files=all")


def snapshot(checkout: str, scratch: str) -> str:
    """The id of a git tree of `checkout`'s files as they are now (tracked ones with their
    changes, staged or not, and the untracked ones git does not ignore), written through a copy
    of its index in the folder `scratch` (removed after): the checkout is left as it was.

    Raises:
        GitError: git failed.
    """
    import shutil

    index = os.path.join(scratch, "carry.index")
    real = git(checkout, "rev-parse", "--path-format=absolute", "--git-path", "index")
    real_path = real.decode("utf-8", "surrogateescape").strip()
    try:
        if os.path.isfile(real_path):
            shutil.copyfile(real_path, index)  # its stat cache: only changed files are read
        else:
            git(checkout, "read-tree", "HEAD", env={"GIT_INDEX_FILE": index})
        git(checkout, "add", "-A", env={"GIT_INDEX_FILE": index})
        return git(checkout, "write-tree", env={"GIT_INDEX_FILE": index}).decode(
            "ascii").strip()
    finally:
        try:
            os.unlink(index)
        except OSError:
            pass


def carry_into(worktree: str, tree: str) -> None:
    """Make `worktree`'s files those of `tree` (snapshot), its index and HEAD staying at its
    commit: the carried changes are changes in the worktree, not staged.

    Raises:
        GitError: git failed (the tree is gone, the worktree has changes of its own).
    """
    git(worktree, "read-tree", "-m", "-u", "HEAD", tree)
    git(worktree, "reset", "-q")
