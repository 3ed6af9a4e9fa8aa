"""Reading a repository's HEAD from its git dir's files instead of starting git
(`git.repo.head_from_files`): what it reads must be what `git rev-parse` says in every layout it
reads (loose and packed refs, symrefs, worktrees, `.git` files, submodules, a rebase), and left to
git (None) in the others (unborn branches, per-worktree refs, reftable). And the files that decide
what git ignores and how it reads a file (`config_files`, `ignore_rules`): those git reads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from coding_os.git.repo import head, head_from_files
from tests.helpers import commit_all, git


def test_head_read_from_the_git_dir_is_what_git_says(repo: Path, tmp_path: Path) -> None:
    """A checkpoint of an unchanged tree reads HEAD from the git dir's files instead of
    starting git: it must agree with `git rev-parse` in every layout it reads, and leave the
    others to git."""
    from coding_os.git.repo import head, head_from_files

    def agree(root: Path, readable: bool = True) -> None:
        expected = subprocess.run(["git", "-C", str(root), "rev-parse", "-q", "--verify",
                                   "HEAD^{commit}"], capture_output=True,
                                  text=True).stdout.strip() or None
        assert head(str(root)) == expected
        assert head_from_files(str(root)) == (expected if readable else None)

    agree(repo)  # a loose branch ref
    (repo / "sub").mkdir()
    agree(repo / "sub")  # a tree below the repository's top
    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "two")
    git(repo, "reset", "-q", "--soft", "HEAD~1")  # HEAD moved, no file written
    agree(repo)
    git(repo, "pack-refs", "--all")  # the branch now only in packed-refs
    agree(repo)
    git(repo, "checkout", "-q", "--detach")
    agree(repo)
    git(repo, "checkout", "-q", "main")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    agree(wt.resolve())  # `.git` is a file; the branch ref in the common dir
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q", "-b", "main")
    agree(unborn, readable=False)  # no commit yet: git says


def _git_head(root: Path) -> str | None:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "-q", "--verify",
                           "HEAD^{commit}"], capture_output=True,
                          text=True).stdout.strip() or None


def _agree(root: Path) -> None:
    """What HEAD is read as is what git says, or left to git (None)."""
    expected = _git_head(root)
    assert head(str(root)) == expected
    assert head_from_files(str(root)) in (expected, None)


def _worktree(repo: Path, tmp_path: Path) -> Path:
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side", "HEAD~1")
    return wt.resolve()


def test_a_per_worktree_ref_is_not_taken_from_the_main_worktree(
        repo: Path, tmp_path: Path) -> None:
    wt = _worktree(repo, tmp_path)
    git(wt, "symbolic-ref", "HEAD", "refs/worktree/x")  # unborn in this worktree
    git(repo, "update-ref", "refs/worktree/x", "main")  # the main worktree's own
    assert _git_head(wt) is None
    _agree(wt)


def test_a_branch_file_in_a_worktrees_own_git_dir_is_not_what_git_reads(
        repo: Path, tmp_path: Path) -> None:
    wt = _worktree(repo, tmp_path)
    private = Path(git(wt, "rev-parse", "--absolute-git-dir"))
    (private / "refs" / "heads").mkdir(parents=True)
    (private / "refs" / "heads" / "side").write_text(git(repo, "rev-parse", "main") + "\n")
    assert _git_head(wt) != git(repo, "rev-parse", "main")
    _agree(wt)


def test_head_agrees_with_git_in_the_layouts_it_reads(repo: Path, tmp_path: Path) -> None:
    """The layouts git has: a stale loose ref beside packed-refs (git prefers the loose one), a
    symref to a symref, refs with trailing whitespace or garbage, a `.git` file with a
    relative gitdir, a submodule whose `.git` points into the superproject's modules dir,
    GIT_DIR in the environment, HEAD during a rebase, a per-worktree ref of the worktree."""
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "pack-refs", "--all")  # packed: second
    (repo / ".git" / "refs" / "heads" / "main").write_text(first + "\n")  # loose: first
    assert head(str(repo)) == first == _git_head(repo)
    (repo / ".git" / "refs" / "heads" / "main").write_text(second + "  \n\n")
    _agree(repo)
    (repo / ".git" / "refs" / "heads" / "main").write_text(second + " junk\n")
    _agree(repo)
    (repo / ".git" / "refs" / "heads" / "main").write_text(second.upper() + "\n")
    _agree(repo)
    (repo / ".git" / "refs" / "heads" / "main").write_text(second + "\n")
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    _agree(repo)
    git(repo, "symbolic-ref", "HEAD", "refs/heads/main")
    # GIT_DIR naming another repository: git is run without it, the files read are the tree's
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    os.environ["GIT_DIR"] = str(other / ".git")
    try:
        assert head(str(repo)) == second
    finally:
        del os.environ["GIT_DIR"]
    # a separate git dir: `.git` is a file with a relative gitdir
    sep = tmp_path / "sep"
    git(tmp_path, "init", "-q", "-b", "main", "--separate-git-dir", str(tmp_path / "sep.git"),
        str(sep))
    (sep / ".git").write_text("gitdir: ../sep.git\n")
    git(sep, "commit", "-q", "--allow-empty", "-m", "s")
    _agree(sep.resolve())
    assert head_from_files(str(sep.resolve())) == _git_head(sep)
    # a submodule
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sep), "mod")
    mod = repo / "mod"
    assert (mod / ".git").is_file()
    _agree(mod)
    assert head_from_files(str(mod)) == _git_head(mod)
    git(mod, "commit", "-q", "--allow-empty", "-m", "in the submodule")
    _agree(mod)
    # a rebase stopped halfway: HEAD detached
    (repo / "c.txt").write_text("1\n")
    commit_all(repo, "c1")
    git(repo, "checkout", "-q", "-b", "topic", "HEAD~1")
    (repo / "c.txt").write_text("2\n")
    commit_all(repo, "c2")
    subprocess.run(["git", "-C", str(repo), "rebase", "-q", "main"], capture_output=True)
    assert (repo / ".git" / "rebase-merge").is_dir()
    _agree(repo)
    assert head_from_files(str(repo)) == _git_head(repo)
    git(repo, "rebase", "--abort")
    # a linked worktree's own per-worktree ref
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    git(wt.resolve(), "update-ref", "refs/worktree/mine", "HEAD")
    git(wt.resolve(), "symbolic-ref", "HEAD", "refs/worktree/mine")
    _agree(wt.resolve())


def test_a_reftable_like_layout_is_left_to_git(tmp_path: Path) -> None:
    """git 2.39 cannot make a reftable repository: its layout (HEAD naming
    `refs/heads/.invalid`, `refs/heads` a file) is built by hand; nothing is read from it."""
    top = tmp_path / "rt"
    (top / ".git" / "refs").mkdir(parents=True)
    (top / ".git" / "HEAD").write_text("ref: refs/heads/.invalid\n")
    (top / ".git" / "refs" / "heads").write_text("this repository uses the reftable format\n")
    assert head_from_files(str(top)) is None


def test_the_checkout_is_found_as_git_finds_it_passing_over_an_empty_dot_git(
        repo: Path, tmp_path: Path) -> None:
    """An empty `.git` directory (Codex's sandbox leaves one where it ran) or a `.git` file that
    names no git dir is no repository to git: the walk passes over it to the real checkout
    above, or finds none; a `.git` file with `gitdir:` (a linked worktree) is one."""
    from coding_os.git.repo import checkout_root

    (repo / "plain" / ".git").mkdir(parents=True)
    (repo / "plain" / "deep").mkdir()
    assert checkout_root(str(repo / "plain" / "deep")) == str(repo.resolve())
    (repo / "notes").mkdir()
    (repo / "notes" / ".git").write_text("not a pointer\n", encoding="utf-8")
    assert checkout_root(str(repo / "notes")) == str(repo.resolve())
    alone = tmp_path / "alone"
    (alone / ".git").mkdir(parents=True)
    assert checkout_root(str(alone)) is None or checkout_root(str(alone)) != str(alone)
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    assert checkout_root(str(tmp_path / "wt")) == str((tmp_path / "wt").resolve())


def configuration_origins(repo: Path, env: dict[str, str]) -> set[str]:
    """The files `git config --list` took a setting from, run with `env` alone."""
    out = subprocess.run(["git", "-C", str(repo), "config", "--list", "--show-origin", "-z"],
                         env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                         check=True).stdout
    return {os.path.join(repo, origin[5:].decode()) for origin in out.split(b"\0")[0::2]
            if origin.startswith(b"file:")}


def test_the_configuration_files_are_those_git_reads(repo: Path, tmp_path: Path) -> None:
    from coding_os.git.repo import config_files

    home, xdg = tmp_path / "home", tmp_path / "xdg"
    (xdg / "git").mkdir(parents=True)
    (home / ".gitconfig").parent.mkdir(parents=True, exist_ok=True)
    for path in (home / ".gitconfig", xdg / "git" / "config", tmp_path / "global.cfg",
                 tmp_path / "system.cfg"):
        path.write_text("[cos]\n\ttest = 1\n", encoding="utf-8")
    git_dir = str(repo / ".git")
    for env in ({"HOME": str(home), "XDG_CONFIG_HOME": str(xdg),
                 "GIT_CONFIG_SYSTEM": str(tmp_path / "system.cfg")},
                {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(tmp_path / "global.cfg"),
                 "GIT_CONFIG_SYSTEM": str(tmp_path / "system.cfg")},
                {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
                 "GIT_CONFIG_SYSTEM": str(tmp_path / "system.cfg")}):
        origins = configuration_origins(repo, env)
        named = config_files(git_dir, git_dir, env)
        assert origins <= set(named), env
        assert (str(tmp_path / "system.cfg") in named) == ("GIT_CONFIG_NOSYSTEM" not in env)
    assert len(origins) >= 2  # the repository's config and the user's


def test_ignore_rules_follow_home_nested_and_conditional_includes(repo: Path) -> None:
    from coding_os.git.repo import config_files, ignore_rules

    home = Path(os.environ["HOME"])
    git(repo, "config", "include.path", "~/home.cfg")
    git(repo, "config", "includeIf.gitdir:/nowhere/.path", "cond.cfg")  # condition false
    (home / "home.cfg").write_text("[include]\n\tpath = deeper/more.cfg\n")
    rules = ignore_rules(str(repo), {})
    assert rules is not None
    found = rules.outside
    assert str(home / "home.cfg") in found
    assert str(home / "deeper" / "more.cfg") in found  # relative to the including file
    assert str(repo / ".git" / "cond.cfg") in found
    assert set(config_files(str(repo / ".git"), str(repo / ".git"), os.environ)) <= set(found)
