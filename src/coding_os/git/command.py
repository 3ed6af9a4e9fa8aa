"""Running git: the user's repository is read, never locked or written.

Every call runs with `GIT_OPTIONAL_LOCKS=0` (so `git status` never rewrites the user's index, the
way editors' background refreshes do it), literal pathspecs, and without the `GIT_DIR`-style
variables a calling git hook may have set. Processes are started with `posix_spawn`, not through
`subprocess`, to keep the hook path light.

Nothing a repository's configuration names is run (DESIGN.md §11): a repository nested in the
project (a dependency cloned by a build step, an unpacked archive) is configured by whoever made
it, and even `git status` would run its `core.fsmonitor` program. So every call turns off the
fsmonitor, hooks and GPG (signature display), allows no transport (a lazy fetch, an `ext::` URL
or `core.sshCommand` would run a program; cos never fetches), and passes `--no-ext-diff
--no-textconv` to `diff`, `log` and `show`. With `nested`, every filter driver (clean, smudge,
process) its configuration knows is turned off too; the project's own repository keeps its
filters (git-lfs, git-crypt): its configuration is the user's, as for a plain `git status`. The
settings are given as `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>` pairs after the
caller's (command-line scope wins over every file), so a name of any spelling is expressible.
"""

from __future__ import annotations

import os

from coding_os.errors import CosError
from coding_os import durable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from threading import Thread as _Writer

__all__ = ["GitError", "git", "git_env", "GIT_ENV", "git_config_env", "is_config_pair",
           "DISARMED"]

_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_OBJECT_DIRECTORY",
         "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE")

# What decides git's configuration, so what it ignores: the daemon runs git with the asker's
# (each name, None when the asker has it unset, and the GIT_CONFIG_KEY_<n>/VALUE_<n> pairs).
GIT_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
           "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")


def git_config_env(environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """The asker's variables that decide git's configuration (see GIT_ENV)."""
    source = os.environ if environ is None else environ
    found: dict[str, str | None] = {name: source.get(name) for name in GIT_ENV}
    # The names alone are looked at (a copy of the environment decodes every value too).
    found.update((name, source[name]) for name in list(source)
                 if name.startswith("GIT_CONFIG_") and is_config_pair(name))
    return found


def is_config_pair(name: str) -> bool:
    """Whether `name` is one of git's GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n>."""
    head, _, number = name.rpartition("_")
    return head in ("GIT_CONFIG_KEY", "GIT_CONFIG_VALUE") and number.isdigit()


# Configuration that would make git run a program the repository chose, as git runs it for cos.
DISARMED: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"), ("core.hooksPath", os.devnull),
    ("log.showSignature", "false"))
# The subcommands that would run an external diff or a text conversion: passed
# `--no-ext-diff --no-textconv` right after their name.
_DIFFING = ("diff", "log", "show")
_FILTER_KEYS = ("clean", "smudge", "process")


class GitError(CosError):
    """git failed on the user's repository."""

    exit_code = 1


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    # An allow list naming no protocol: no transport at all (protocol.<name>.allow in a
    # repository's configuration cannot widen it).
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_LITERAL_PATHSPECS="1", LC_ALL="C",
               GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL="")
    return env


def _with(env: dict[str, str | None] | None,
          settings: tuple[tuple[str, str], ...] = DISARMED) -> dict[str, str]:
    """git's environment: `git_env()`, then `env`, then `settings` as configuration pairs after
    those the caller's environment gives (the later pair wins)."""
    merged: dict[str, str | None] = {**git_env(), **(env or {})}
    found = {name: value for name, value in merged.items() if value is not None}
    count = found.get("GIT_CONFIG_COUNT", "")
    start = int(count) if count.isascii() and count.isdigit() else 0
    for at, (key, value) in enumerate(settings, start):
        found[f"GIT_CONFIG_KEY_{at}"] = key
        found[f"GIT_CONFIG_VALUE_{at}"] = value
    found["GIT_CONFIG_COUNT"] = str(start + len(settings))
    return found


def _filters_off(repo: str, env: dict[str, str | None] | None) -> tuple[tuple[str, str], ...]:
    """Settings that turn off every filter driver the configuration of the repository at
    `repo` knows, its own or the user's (reading configuration runs nothing)."""
    out = git(repo, "config", "-z", "--name-only", "--get-regexp", r"^filter\.", check=False,
              env=env)
    names = {key.decode("utf-8", "surrogateescape")[len("filter."):].rpartition(".")[0]
             for key in out.split(b"\0") if key.startswith(b"filter.")}
    return tuple((f"filter.{name}.{key}", "") for name in sorted(names)
                 for key in _FILTER_KEYS) + tuple(
        (f"filter.{name}.required", "false") for name in sorted(names))


def _no_diff_programs(args: tuple[str, ...]) -> tuple[str, ...]:
    """`args` with `--no-ext-diff --no-textconv` after a diffing subcommand's name."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 2 if args[at] in ("-c", "-C") else 1
    if at < len(args) and args[at] in _DIFFING:
        return (*args[:at + 1], "--no-ext-diff", "--no-textconv", *args[at + 1:])
    return args


def git(repo: str, *args: str, stdin: bytes | None = None, check: bool = True,
        env: dict[str, str | None] | None = None, nested: bool = False) -> bytes:
    """The standard output of `git -C repo ARGS`, fed `stdin` when given; `env` adds to (or
    replaces in, or with None removes from) the environment git runs with. `nested`: the
    repository is nested in the project, not the user's own: its filter drivers are turned
    off too (what is off for every repository: see the module's docstring).

    Raises:
        GitError: git is missing, or exits non-zero when `check` (its first error line in the
            message).
    """
    settings = DISARMED + _filters_off(repo, env) if nested else DISARMED
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if stdin is not None else (-1, -1)
    actions: list[tuple[object, ...]] = [
        (os.POSIX_SPAWN_DUP2, in_r, 0) if stdin is not None
        else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2),
        (os.POSIX_SPAWN_CLOSE, out_r), (os.POSIX_SPAWN_CLOSE, err_r)]
    if stdin is not None:
        actions.append((os.POSIX_SPAWN_CLOSE, in_w))
    try:
        pid = os.posix_spawnp("git", ["git", "-C", repo, *_no_diff_programs(args)],
                              _with(env, settings), file_actions=actions)
    except OSError as exc:
        for fd in (out_r, out_w, err_r, err_w, in_r, in_w):
            if fd >= 0:
                os.close(fd)
        raise GitError(f"cannot run git: {exc.strerror or exc}") from None
    os.close(out_w)
    os.close(err_w)
    writer = None
    if stdin is not None:
        os.close(in_r)
        writer = _feed(in_w, stdin)
    with os.fdopen(out_r, "rb") as out:
        data = out.read()
    with os.fdopen(err_r, "rb") as err:
        error = err.read(4096)
    if writer is not None:
        writer.join()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and check:
        line = error.decode("utf-8", "replace").strip().splitlines()
        command = next((a for a in args if not a.startswith("-") and "=" not in a), "")
        raise GitError(f"git {command} failed in {repo}: "
                       f"{line[0] if line else f'exit {code}'}")
    return data


def _feed(fd: int, data: bytes) -> _Writer:
    """Write `data` to `fd` and close it, from a thread: git may fill its output pipe before
    it has read all of its input."""
    import threading

    def write() -> None:
        try:
            durable.write_all(fd, data)
        except OSError:
            pass  # git exited early; its status says why
        finally:
            os.close(fd)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread
