"""A git checkout as its files show it: its top, its git dirs, the commit and branch checked out,
whether git compares its files as they are, the paths of its commits, and the files that decide
what git ignores and how it reads a file (its ignore and configuration files: the one copy of
those rules, which the checkpoints' snapshot and the daemon's file watch both follow). Read
without starting git wherever the files are plain; git is asked for the rest (`git.command`).

Every reader here takes the repository holding the tree, whatever `GIT_DIR`-style variables say
(as `git.command` runs git).
"""

from __future__ import annotations

import os

from coding_os.git.command import GitError, git

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["checkout_root", "git_dirs", "linked_worktrees", "head", "head_from_files",
           "index_entries", "status_paths", "is_sha", "branch", "compares_raw", "config_raw",
           "plain_attributes", "inside_prefix", "relative", "commit_paths", "changed_between",
           "commit_files", "RULE_FILES", "INFO_RULE_FILES", "config_files", "IgnoreRules",
           "ignore_rules", "rules_changed", "tracked_in"]


def checkout_root(start: str) -> str | None:
    """The top of the git checkout holding `start` (the nearest ancestor whose `.git` git would
    take for a repository), or None."""
    here = os.path.realpath(start)
    while not _is_repository(os.path.join(here, ".git")):
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    return here


def _is_repository(dot_git: str) -> bool:
    """Whether git takes `dot_git` for a repository, as its discovery does: a directory with a
    HEAD, or a `gitdir:` file. An empty `.git` directory (Codex's sandbox leaves one as a mount
    point where it ran) is passed over, and the walk goes on upward."""
    if os.path.isdir(dot_git):
        return os.path.lexists(os.path.join(dot_git, "HEAD"))
    try:
        with open(dot_git, "rb") as f:
            return f.read(8) == b"gitdir: "
    except OSError:
        return False


def git_dirs(top: str) -> tuple[str, str] | None:
    """The git dir and the common dir of the checkout whose top is `top` (the same for a main
    checkout; a linked worktree has its own git dir and shares the main one's), or None when
    `.git` is neither a directory nor a plain `gitdir:` file."""
    git_dir = os.path.join(top, ".git")
    try:
        if not os.path.isdir(git_dir):
            with open(git_dir, encoding="utf-8") as f:
                line = f.read().strip()
            if not line.startswith("gitdir:"):
                return None
            git_dir = os.path.join(top, line[len("gitdir:"):].strip())
        common = git_dir
        try:
            with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as f:
                common = os.path.join(git_dir, f.read().strip())
        except FileNotFoundError:
            pass
    except (OSError, UnicodeDecodeError):
        return None
    return git_dir, common


def linked_worktrees(main: str) -> list[str]:
    """The tops of the linked worktrees of the main checkout at `main`, as its git dir lists
    them (`.git/worktrees/<name>/gitdir` names each one's `.git`)."""
    worktrees = os.path.join(main, ".git", "worktrees")
    try:
        names = os.listdir(worktrees)
    except OSError:
        return []
    tops = []
    for name in sorted(names):
        try:
            with open(os.path.join(worktrees, name, "gitdir"), encoding="utf-8") as f:
                pointer = f.read(4096).strip()  # <worktree>/.git
        except (OSError, UnicodeDecodeError):
            continue
        if pointer:
            tops.append(os.path.dirname(os.path.realpath(os.path.join(worktrees, name, pointer))))
    return tops


def head(root: str) -> str | None:
    """The commit checked out in the repository holding `root`; None before the first. Read
    from the git dir's files when they are plain (`HEAD`, a loose or packed ref): no process
    for a checkpoint of an unchanged tree; else `git rev-parse`."""
    found = head_from_files(root)
    if found is not None:
        return found
    out = git(root, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
    return out.decode("ascii", "replace").strip() or None


def head_from_files(root: str) -> str | None:
    """`head` from the git dir's files alone; None when they do not tell (ask git then)."""
    top = checkout_root(root)
    dirs = git_dirs(top) if top is not None else None
    if dirs is None:
        return None
    git_dir, common = dirs  # shared refs live in the common dir, loose or packed
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="utf-8") as f:
            pointer = f.read().strip()
        if is_sha(pointer):
            return pointer  # detached
        if not pointer.startswith("ref: refs/"):
            return None
        ref = pointer[len("ref: "):]
        if ref.startswith(("refs/worktree/", "refs/bisect/", "refs/rewritten/")):
            return None  # a worktree's own refs: git knows where they live
        try:
            with open(os.path.join(common, ref), encoding="utf-8") as f:
                value = f.read().strip()
            return value if is_sha(value) else None
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            pass
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as f:
            for line in f:
                sha, _, name = line.strip().partition(" ")
                if name == ref and is_sha(sha):
                    return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None  # an unborn branch, or refs kept another way: ask git


def index_entries(top: str) -> int | None:
    """How many entries the index of the checkout whose top is `top` holds (the files git
    tracks, from the index's header), or None when it has no readable index."""
    dirs = git_dirs(top)
    if dirs is None:
        return None
    try:
        with open(os.path.join(dirs[0], "index"), "rb") as f:
            header = f.read(12)
    except OSError:
        return None
    if len(header) < 12 or header[:4] != b"DIRC":
        return None
    return int.from_bytes(header[8:12], "big")


def is_sha(text: str) -> bool:
    """Whether `text` is a full object id (SHA-1 or SHA-256, lower case)."""
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def branch(worktree: str) -> str | None:
    """The branch checked out in `worktree` (from its HEAD, without starting git), or None."""
    dirs = git_dirs(worktree)
    if dirs is None:
        return None
    try:
        with open(os.path.join(dirs[0], "HEAD"), encoding="utf-8") as f:
            found = f.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    prefix = "ref: refs/heads/"
    return found[len(prefix):] if found.startswith(prefix) else None


# Settings under which `git status` does not compare a file's bytes and exec bit as they are
# (conversions, the exec bit ignored, sparse checkouts, case folding), by their value: where one
# is set so, or a configuration file brings in others (includes), git tells.
_FALSE, _TRUE = ("false", "no", "off", "0"), ("true", "yes", "on", "1", "")
_NOT_RAW: dict[str, object] = {
    "core.filemode": _FALSE, "core.symlinks": _FALSE, "core.autocrlf": ("true", "input", ""),
    "core.ignorecase": _TRUE, "core.precomposeunicode": _TRUE, "core.sparsecheckout": _TRUE,
    "core.eol": None, "core.attributesfile": None}  # None: any value
_CONVERTING = (b"text", b"eol", b"crlf", b"filter", b"ident", b"encoding")


def compares_raw(top: str, git_dir: str, common: str) -> bool:
    """Whether git compares the files of the checkout at `top` as they are: none of `_NOT_RAW`
    set so in the configuration files git reads, no include, no configuration given in the
    environment, no converting attributes in `info/attributes`, and an index of version 2
    (git writes 3 or 4 for skip-worktree entries, as a sparse checkout makes, or when told
    to)."""
    if any(name in os.environ for name in ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")):
        return False
    for path in config_files(git_dir, common, os.environ):
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return False
        if not config_raw(text):
            return False
    if not _attributes_plain(os.path.join(common, "info", "attributes")):
        return False
    try:
        with open(os.path.join(git_dir, "index"), "rb") as f:
            header = f.read(8)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return header[:4] == b"DIRC" and header[4:8] == b"\0\0\0\2"


def config_raw(text: str) -> bool:
    """Whether a git configuration file's text sets none of `_NOT_RAW` so, and includes
    nothing (a line it cannot read makes it not so: git tells)."""
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            name = line[1:line.find("]")] if "]" in line else line[1:]
            section = name.split('"')[0].split(".")[0].strip().lower()
            if section in ("include", "includeif"):
                return False
            line = line[line.find("]") + 1:].strip() if "]" in line else ""
            if not line:
                continue
        key, _, value = line.partition("=")
        value = value.split("#")[0].split(";")[0].strip().strip('"').lower()
        wanted = _NOT_RAW.get(f"{section}.{key.strip().lower()}", ())
        if wanted is None or value in wanted:  # type: ignore[operator]
            return False
    return True


def _attributes_plain(path: str) -> bool:
    """Whether the attributes file at `path` (absent, or) converts nothing."""
    try:
        with open(path, "rb") as f:
            text = f.read().lower()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return not any(word in text for word in _CONVERTING)


def plain_attributes(top: str, path: str, seen: dict[str, bool]) -> bool:
    """Whether no `.gitattributes` on the way from the checkout's top to `path` (from the
    top) converts anything (`seen` keeps each directory's answer)."""
    parts = path.split("/")[:-1]
    for depth in range(len(parts) + 1):
        folder = "/".join(parts[:depth])
        if folder not in seen:
            seen[folder] = _attributes_plain(os.path.join(top, folder, ".gitattributes"))
        if not seen[folder]:
            return False
    return True


def commit_paths(repo: str, *args: str, paths: list[str] | None = None) -> list[str]:
    """The paths a `git ls-tree --full-tree` / `diff-tree` listing of the repository names,
    relative to `repo` (which may lie below the repository's top, where git's paths start),
    limited to `paths` (relative to `repo` too) or to what lies under `repo`."""
    within = inside_prefix(repo)
    out = git(repo, *args, "--", *([within + p for p in paths] if paths is not None
                                   else [within] if within else []))
    names = []
    for raw in out.split(b"\0"):
        name = raw.decode("utf-8", "surrogateescape")
        if name and name.startswith(within):
            names.append(name[len(within):])
    return names


def status_paths(checkout: str, *options: str) -> list[str]:
    """The paths `git status` shows staged, changed or untracked in `checkout` (a renamed or
    copied file by its new path), with git's `options` (which untracked files, submodules).

    Raises:
        GitError: git failed.
    """
    out = git(checkout, "status", "--porcelain=v1", "-z", *options)
    paths = []
    entries = iter(out.split(b"\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.append(entry[3:].decode("utf-8", "surrogateescape"))
        if entry[:1] in (b"R", b"C"):
            next(entries, None)  # the path it was renamed or copied from
    return paths


def inside_prefix(top: str) -> str:
    """The path of `top` inside its repository's working tree ("" at the top), with a slash."""
    found = checkout_root(top)
    if found is None or os.path.samefile(found, top):
        return ""
    return os.path.relpath(top, found).replace(os.sep, "/") + "/"


def relative(path: str, within: str) -> str | None:
    """A path from the repository's top (as git prints it) relative to the directory whose
    `inside_prefix` is `within`; None when it lies outside that directory."""
    if not within:
        return path
    return path[len(within):] if path.startswith(within) else None


def changed_between(repo: str, old: str, new: str) -> list[str]:
    """The paths (relative to `repo`) that differ between two commits, under `repo`."""
    return commit_paths(repo, "diff-tree", "-z", "-r", "--no-renames", "--name-only", old, new)


def commit_files(repo: str, commit: str) -> list[str]:
    """Every file of `commit` under `repo`, relative to it."""
    return commit_paths(repo, "ls-tree", "-z", "-r", "--name-only", "--full-tree", commit)


# ---------------------------------------------------------------------------------------------
# What git ignores, and how it reads a file: the files that decide it

# In the tree: what is ignored, how a file is read.
RULE_FILES = (".gitignore", ".gitattributes")
# In the git dir's `info`: what is ignored, how a file is read, what is checked out.
INFO_RULE_FILES = ("exclude", "attributes", "sparse-checkout")


def config_files(git_dir: str, common: str, env: Mapping[str, str | None]) -> list[str]:
    """The configuration files git reads for the checkout whose git dir and common dir these
    are, run with `env` (the asker's HOME, XDG_CONFIG_HOME and GIT_CONFIG_* variables): the
    repository's (`config`, `config.worktree`), the user's (`$XDG_CONFIG_HOME/git/config`,
    `GIT_CONFIG_GLOBAL` else `~/.gitconfig`) and the system's (`GIT_CONFIG_SYSTEM` else
    /etc/gitconfig, unless GIT_CONFIG_NOSYSTEM). What they include is git's to tell
    (`IgnoreRules`)."""
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [os.path.join(common, "config"), os.path.join(git_dir, "config.worktree"),
             os.path.join(xdg, "git", "config"),
             env.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig")]
    if not env.get("GIT_CONFIG_NOSYSTEM"):
        files.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    return files


class IgnoreRules:
    """What git's view of a tree's ignored files depends on beside the rule files inside it:
    the directories of the tree an ignore pattern matches themselves (relative to the tree),
    the repository's `info` dir and git dir (None when missing), and the files outside the tree
    that decide what is ignored or how a file is read: the configuration files and what they
    include, `info/exclude` and `info/attributes`, the global excludes and attributes files,
    and the rule files of the directories between a tree below the repository's top and it."""

    __slots__ = ("ignored", "info_dir", "git_dir", "outside")

    def __init__(self, ignored: set[str], info_dir: str | None, git_dir: str | None,
                 outside: list[str]) -> None:
        self.ignored = ignored
        self.info_dir = info_dir
        self.git_dir = git_dir
        self.outside = outside


def ignore_rules(root: str, env: dict[str, str | None]) -> IgnoreRules | None:
    """The ignore rules of the tree at `root` for git run with `env` (see IgnoreRules); None
    when it is in no repository (or git cannot tell)."""
    try:
        # Only directories an ignore pattern matches themselves: a directory whose files all
        # happen to be ignored (what `ls-files --directory` folds into one line) may get a file
        # that is not. The paths are the repository top's.
        out = git(root, "status", "--porcelain=v2", "-z", "--untracked-files=all",
                  "--ignored=matching", "--no-renames", "--ignore-submodules=all", "--", ".",
                  env=env)
        found = git(root, "rev-parse", "--path-format=absolute", "--git-path", "info",
                    "--absolute-git-dir", "--show-toplevel", "--git-common-dir", env=env)
    except GitError:
        return None
    within = inside_prefix(root)
    ignored = set()
    for raw in out.split(b"\0"):
        if raw.startswith(b"! ") and raw.endswith(b"/"):
            inside = relative(raw[2:].decode("utf-8", "surrogateescape"), within)
            if inside:
                ignored.add(inside.rstrip("/"))
    info, git_dir, top, common = (line.strip() for line in
                                  found.decode("utf-8", "surrogateescape").splitlines()[:4])
    outside = [*config_files(git_dir, common, env),
               os.path.join(common, "info", "exclude"),
               os.path.join(common, "info", "attributes"),
               _global_file(root, env, "core.excludesFile", "ignore"),
               _global_file(root, env, "core.attributesFile", "attributes")]
    outside.extend(_included_files(top, git_dir, env, outside))
    above = os.path.dirname(root)
    while within and len(above) >= len(top):
        outside.extend(os.path.join(above, name) for name in RULE_FILES)
        if os.path.samefile(above, top):
            break
        above = os.path.dirname(above)
    return IgnoreRules(ignored, info if os.path.isdir(info) else None,
                       git_dir if os.path.isdir(git_dir) else None, outside)


def rules_changed(paths: list[str]) -> bool:
    """Whether changed `paths` (relative to a tree at the repository's top, or below it) hold
    a rule file or a file of `.git/info`: what git ignores, or how it reads a file, may have
    changed."""
    return any(path.rsplit("/", 1)[-1] in RULE_FILES or path.startswith(".git/info/")
               for path in paths)


def tracked_in(root: str, folders: list[str], env: dict[str, str | None]) -> bool:
    """Whether the index tracks a file in one of `folders` of the tree at `root` (as `git add
    -f` does in an ignored one); True when git cannot tell."""
    try:
        return bool(git(root, "ls-files", "-z", "--", *folders, env=env).strip(b"\0"))
    except GitError:
        return True


def _included_files(top: str, git_dir: str, env: dict[str, str | None],
                    known: list[str]) -> list[str]:
    """The files git's configuration depends on that `known` does not name yet: those
    `[include]` and `[includeIf]` pull in (any may set `core.excludesFile`), and the git dir's
    `HEAD` when an `includeIf "onbranch:..."` makes the configuration follow the branch. Run at
    the repository's `top`, where git's relative origins start."""
    found: list[str] = []

    def add(path: str) -> None:
        if path not in known and path not in found:
            found.append(path)

    try:
        out = git(top, "config", "--list", "--show-origin", "--includes", "-z", env=env)
    except GitError:
        return []
    for origin in out.split(b"\0")[0::2]:
        if origin.startswith(b"file:"):
            add(os.path.join(top, origin[5:].decode("utf-8", "surrogateescape")))
    try:  # an included file with nothing in it yet lists no setting, so no origin either
        out = git(top, "config", "--show-origin", "--path", "-z", "--get-regexp",
                  r"^include(if\..*)?\.path$", env=env)
    except GitError:
        out = b""
    items = out.split(b"\0")
    for origin, setting in zip(items[0::2], items[1::2]):
        key, _, value = setting.decode("utf-8", "surrogateescape").partition("\n")
        if origin.startswith(b"file:") and value:
            including = os.path.join(top, origin[5:].decode("utf-8", "surrogateescape"))
            add(os.path.join(os.path.dirname(including), value))
        if key.startswith("includeif.onbranch:"):
            add(os.path.join(git_dir, "HEAD"))
    return found


def _global_file(root: str, env: dict[str, str | None], setting: str, name: str) -> str:
    """Where git reads its global excludes (`core.excludesFile`, `ignore`) or attributes
    (`core.attributesFile`, `attributes`) file for the asker."""
    try:
        return git(root, "config", "--path", "--get", setting, env=env).decode(
            "utf-8", "surrogateescape").strip()
    except GitError:
        home = env.get("HOME") or os.path.expanduser("~")
        base = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        return os.path.join(base, "git", name)
