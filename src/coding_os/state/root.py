"""Resolution of the project root and its state directory (DESIGN.md §3.1).

This module is the only implementation of the rule; every entry point (hook, CLI, MCP) calls
`resolve()`. It runs on the hook's hot path, so it uses `os` alone: no subprocess (linked git
worktrees are recognised from their `.git` file and `commondir`, which is what
`git rev-parse --git-common-dir` reads), no pathlib.
"""

from __future__ import annotations

import os

from coding_os.errors import Misroute
from coding_os.git.repo import checkout_root, git_dirs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ROOT_MARKERS",
    "STATE_DIR_NAME",
    "RULES",
    "Resolution",
    "resolve",
    "checkout_dir",
    "is_project",
    "hub_dir",
    "linked_worktree_main",
]

STATE_DIR_NAME = ".coding-os"
# A directory holding `.coding-os/` and one of these is a project root. `.git` alone never anchors.
ROOT_MARKERS = (".git", ".coding-os.yaml", "pyproject.toml", "package.json", "go.mod", "AGENTS.md")
RULES = (
    "explicit",
    "claude_project_dir",
    "cos_project_root",
    "marker_walk",
    "bare_walk",
    "worktree",
    "default",
)


class Resolution:
    """Where state lives for this caller, and which rule decided it."""

    __slots__ = ("state_dir", "project_root", "rule", "hub", "worktree")

    def __init__(
        self, state_dir: str, project_root: str, rule: str, hub: str, worktree: str | None
    ) -> None:
        self.state_dir = state_dir
        self.project_root = project_root
        self.rule = rule
        self.hub = hub
        # The linked worktree the caller is in, when routing sent it to the main repository.
        self.worktree = worktree

    def as_dict(self) -> dict[str, str | None]:
        return {
            "state_dir": self.state_dir,
            "project_root": self.project_root,
            "rule": self.rule,
            "hub": self.hub,
            "worktree": self.worktree,
        }


def hub_dir(env: Mapping[str, str] | None = None) -> str:
    """The global hub, `$HOME/.coding-os` (physical path); never a project's state dir."""
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(os.path.realpath(home), STATE_DIR_NAME)


def resolve(
    cwd: str | None = None, env: Mapping[str, str] | None = None
) -> Resolution:
    """Resolve the state directory for a caller in `cwd` with environment `env`.

    Raises:
        Misroute: resolution would bind to the global hub, or the state dir is a symlink.
    """
    env = os.environ if env is None else env
    cwd = os.path.realpath(cwd if cwd is not None else os.getcwd())
    hub = hub_dir(env)

    explicit = env.get("COS_STATE_DIR")
    if explicit and explicit != STATE_DIR_NAME:
        state_dir = os.path.join(cwd, explicit) if not os.path.isabs(explicit) else explicit
        state_dir = os.path.normpath(state_dir)
        _refuse_hub(state_dir, hub)
        return Resolution(state_dir, os.path.dirname(state_dir), "explicit", hub, None)

    rule = ""
    root = ""
    for name, var in (("claude_project_dir", "CLAUDE_PROJECT_DIR"),
                      ("cos_project_root", "COS_PROJECT_ROOT")):
        value = env.get(var)
        if value:
            rule, root = name, os.path.realpath(os.path.join(cwd, value))
            break

    worktree = None
    main = linked_worktree_main(root or cwd, env)
    if main is not None:
        worktree, main_root = main
        rule, root = "worktree", main_root
    elif not root:
        rule, root = _walk(cwd, env)
    elif not os.path.isdir(os.path.join(root, STATE_DIR_NAME)):
        # The agent was started in a subdirectory of an initialised project: its project dir has
        # no state of its own, so take the project's, as a shell there would (no nested state).
        walked_rule, walked = _walk(root, env)
        if walked_rule != "default":
            rule, root = walked_rule, walked

    state_dir = os.path.join(root, STATE_DIR_NAME)
    _refuse_hub(state_dir, hub)
    if os.path.islink(state_dir):
        raise Misroute(
            f"{state_dir} is a symlink to {os.path.realpath(state_dir)}; refusing to share state "
            "through it (set COS_STATE_DIR to the target to use it on purpose)"
        )
    return Resolution(state_dir, root, rule, hub, worktree)


def _refuse_hub(state_dir: str, hub: str) -> None:
    # `hub` is $HOME/.coding-os with HOME resolved; the hub itself may be a symlink too.
    if os.path.realpath(state_dir) in (hub, os.path.realpath(hub)) or state_dir == hub:
        raise Misroute(
            f"state would bind to the global hub {hub}; run cos inside a project "
            "or set COS_PROJECT_ROOT"
        )


def _walk(cwd: str, env: Mapping[str, str]) -> tuple[str, str]:
    """The upward walk of rule 4, or rule 5 when it finds nothing."""
    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    bare = None
    here = cwd
    while here != home and here != "/":
        if os.path.isdir(os.path.join(here, STATE_DIR_NAME)):
            for marker in ROOT_MARKERS:
                if os.path.lexists(os.path.join(here, marker)):
                    return "marker_walk", here
            if bare is None:
                bare = here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    if bare is not None:
        return "bare_walk", bare
    return "default", cwd


def is_project(resolution: Resolution, cwd: str, home: str) -> bool:
    """Whether a caller at `cwd` is in a project: a state dir decided where its state lives,
    or its directory is in a git checkout (not one at `home` or `/`, a dotfiles repository).
    Outside any, a command that only reads creates nothing."""
    if resolution.rule != "default" or os.path.isdir(resolution.state_dir):
        return True
    top = checkout_root(cwd)
    return top is not None and top not in (os.path.realpath(home), "/")


def checkout_dir(resolution: Resolution, cwd: str, home: str) -> str:
    """The checkout (or linked worktree) a caller at `cwd` works in: the default scope of a
    session listing, and the tree its checkpoints cover. A repository at `home` or `/` (a
    dotfiles repository) is not a project's checkout."""
    if resolution.worktree:
        return resolution.worktree
    top = checkout_root(cwd)
    if top in (os.path.realpath(home), "/"):
        top = None
    if resolution.rule == "default":  # no project here: the checkout, else the directory
        return top or os.path.realpath(cwd)
    if top is not None and top.startswith(resolution.project_root.rstrip(os.sep) + os.sep):
        return top  # a checkout nested in the project
    return resolution.project_root


def linked_worktree_main(
    start: str, env: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """If `start` is inside a linked git worktree, return (worktree top, main repository root).

    A linked worktree has a `.git` file (`gitdir: <main>/.git/worktrees/<name>`) whose git dir
    holds a `commondir` file; a submodule's git dir has none, so submodules are not routed.
    Worktrees under `COS_WORKTREE_ROOT` are recognised by their first path component there.
    """
    env = os.environ if env is None else env
    top = None
    wt_root = env.get("COS_WORKTREE_ROOT")
    if wt_root:
        wt_root = os.path.realpath(wt_root)
        if start.startswith(wt_root + os.sep):
            first = start[len(wt_root) + 1:].split(os.sep, 1)[0]
            top = os.path.join(wt_root, first)
    if top is None:
        top = checkout_root(start)
        if top is None:
            return None
    if not os.path.isfile(os.path.join(top, ".git")):
        return None
    dirs = git_dirs(top)
    if dirs is None or dirs[0] == dirs[1]:  # no `commondir`: a submodule, not a worktree
        return None
    common_dir = os.path.realpath(dirs[1])
    if os.path.basename(common_dir) == ".git":
        main_root = os.path.dirname(common_dir)
    else:  # worktree of a bare repository: the bare repository is the project
        main_root = common_dir
    return top, main_root
