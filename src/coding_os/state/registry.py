"""Which state dirs are this user's own (DESIGN.md §11): a repository is data from elsewhere, and
a clone or an archive can carry a `.coding-os/` of its own.

A state dir cos makes is created 0700 with a `.gitignore` of `*` (so it is never committed) and
a random id, kept in both places: `<state dir>/.state-id` holds it, and the user's hub holds
`~/.coding-os/state-dirs/<id>` naming the state dir's physical path. A state dir is this user's
when it is a directory (not a symlink) this user owns, its id file is there and the hub's entry
for that id names this very directory, and no symlink stands among its entries or theirs (a
`git pull` can bring one into any directory git does not ignore by name). Anything else is
foreign: cos reads nothing from it, and `cos init` moves it aside.

A state dir made before state dirs were registered is adopted once, with a note, when it is
surely this user's: owned by this user, no symlink in it, nothing in it tracked by git (a
clone's state dir fails this whatever else it carries), and either mode 0700 (what cos has
always made; git cannot store a directory's mode) or left out of git by the checkout's own
`.git/info/exclude`, which `cos init` writes and no clone brings. An empty directory this user
owns (made by hand to mark a project's root) is registered silently: git never makes one, and
there is nothing in it to read.
"""

from __future__ import annotations

import os
import stat

from coding_os import durable
from coding_os.errors import CosError, ForeignState

__all__ = ["ID_FILE", "HUB_DIR", "Ownership", "check", "create", "set_aside", "registered",
           "state_dirs"]

ID_FILE = ".state-id"
HUB_DIR = "state-dirs"  # in the user's hub
_ID_CHARS = frozenset("0123456789abcdef")


class Ownership:
    """What `check` found: `absent` (no state dir yet), `own`, or `foreign` with its reason;
    `note` says what was done on the way (a state dir adopted)."""

    __slots__ = ("status", "reason", "note")

    def __init__(self, status: str, reason: str | None = None, note: str | None = None) -> None:
        self.status = status
        self.reason = reason
        self.note = note


def _hub_entry(hub: str, state_id: str) -> str:
    return os.path.join(hub, HUB_DIR, state_id)


def _read_id(state_dir: str) -> str | None:
    data = durable.read_small(os.path.join(state_dir, ID_FILE), 256)
    text = data.decode("ascii", "replace").strip() if data else ""
    return text if len(text) == 32 and set(text) <= _ID_CHARS else None


def registered(state_dir: str, hub: str) -> bool:
    """Whether the hub names `state_dir` under the id the state dir holds."""
    state_id = _read_id(state_dir)
    if state_id is None:
        return False
    data = durable.read_small(_hub_entry(hub, state_id), 8192)
    return data is not None and data.decode("utf-8", "surrogateescape").rstrip("\n") \
        == os.path.realpath(state_dir)


def state_dirs(hub: str) -> list[str]:
    """Every state dir the hub registers (and that names itself so), sorted."""
    try:
        names = os.listdir(os.path.join(hub, HUB_DIR))
    except OSError:
        return []
    found = set()
    for name in names:
        try:
            data = durable.read_small(_hub_entry(hub, name), 8192)
        except (CosError, OSError):
            continue
        state_dir = data.decode("utf-8", "surrogateescape").rstrip("\n") if data else ""
        if os.path.isabs(state_dir) and "\0" not in state_dir and registered(state_dir, hub):
            found.add(state_dir)
    return sorted(found)


def _symlink_in(state_dir: str) -> str | None:
    """A symlink among the state dir's entries or theirs (relative path), if any."""
    try:
        top = list(os.scandir(state_dir))
    except OSError:
        return None
    for entry in top:
        if entry.is_symlink():
            return entry.name
        if entry.is_dir(follow_symlinks=False):
            try:
                inner = list(os.scandir(entry.path))
            except OSError:
                continue
            for item in inner:
                if item.is_symlink():
                    return f"{entry.name}/{item.name}"
    return None


def check(state_dir: str, hub: str, project_root: str, adopt: bool = True) -> Ownership:
    """Whether `state_dir` is this user's; a state dir made before registration is adopted
    when it is surely this user's (see the module's docstring), unless not `adopt`: then it
    is reported `unregistered`, and nothing is written.

    Raises:
        StateIOError: an adopted state dir could not be registered.
    """
    try:
        st = os.lstat(state_dir)
    except FileNotFoundError:
        return Ownership("absent")
    except OSError as exc:
        return Ownership("foreign", f"it cannot be looked at ({exc.strerror or exc})")
    if stat.S_ISLNK(st.st_mode):
        return Ownership("foreign", "it is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        return Ownership("foreign", "it is not a directory")
    if st.st_uid != os.geteuid():
        return Ownership("foreign", f"it belongs to uid {st.st_uid}, not to this user")
    link = _symlink_in(state_dir)
    if link is not None:
        return Ownership("foreign", f"it holds a symlink ({link})")
    if registered(state_dir, hub):
        if stat.S_IMODE(st.st_mode) & 0o077:  # this user's, made wider since: private again
            try:
                os.chmod(state_dir, durable.DIR_MODE)
            except OSError:
                pass
        return Ownership("own")
    if _read_id(state_dir) is not None:
        return Ownership("foreign", "it was not made for this user (its id is not in "
                                    f"{os.path.join(hub, HUB_DIR)})")
    if not os.listdir(state_dir):
        # An empty directory carries nothing to read (git never makes one): this user made it,
        # to mark the project's root, or a step that failed did.
        if not adopt:
            return Ownership("unregistered", "it is empty and not registered yet")
        _register(state_dir, hub)
        return Ownership("own")
    if _tracked(state_dir, project_root):
        return Ownership("foreign", "git tracks files in it (it came with the repository)")
    if stat.S_IMODE(st.st_mode) & 0o077 and not _excluded(state_dir, project_root):
        return Ownership("foreign", "it is not registered, and others may read it (a clone's "
                                    "or an archive's)")
    if not adopt:
        return Ownership("unregistered", "it was made before state dirs were registered; the "
                                         "next cos command registers it")
    _register(state_dir, hub)
    return Ownership("own", note=f"registered the state dir {state_dir} as this user's (it was "
                                 "made before state dirs were registered)")


def _tracked(state_dir: str, project_root: str) -> bool:
    """Whether git tracks anything under `state_dir` in the checkout at `project_root`."""
    from coding_os.git.command import GitError, git
    from coding_os.git.repo import checkout_root

    top = checkout_root(project_root)
    if top is None:
        return False
    try:
        out = git(top, "ls-files", "-z", "--", os.path.relpath(state_dir, top), check=False)
    except GitError:
        return False  # no git to ask: nothing can be tracked by it
    return bool(out.strip(b"\0"))


def _excluded(state_dir: str, project_root: str) -> bool:
    """Whether the checkout's own `info/exclude` (which no clone brings) leaves the state dir
    out, as `cos init` writes it."""
    from coding_os.git.repo import checkout_root, git_dirs

    top = checkout_root(project_root)
    dirs = git_dirs(top) if top is not None else None
    if dirs is None:
        return False
    line = "/" + os.path.relpath(state_dir, top).replace(os.sep, "/") + "/"
    try:
        with open(os.path.join(dirs[1], "info", "exclude"), encoding="utf-8",
                  errors="replace") as f:
            return line in f.read(1 << 20).splitlines()
    except OSError:
        return False


def create(state_dir: str, hub: str) -> None:
    """Make `state_dir` (0700, with a `.gitignore` of `*`) and register it in the hub. A state
    dir that is already this user's is left as it is.

    Raises:
        ForeignState: something else stands at `state_dir`.
        StateIOError: it cannot be made or registered.
    """
    if os.path.isdir(state_dir) and not os.path.islink(state_dir) and registered(state_dir, hub):
        return
    parent = durable.ensure_dir(os.path.dirname(state_dir) or ".")
    # Made whole beside it and renamed into place: no process ever sees it unregistered.
    made = durable.ensure_dir(os.path.join(
        parent, f".{os.path.basename(state_dir)}.new-{os.getpid()}-{os.urandom(3).hex()}"))
    state_id = _register(made, hub, final=os.path.join(os.path.realpath(parent),
                                                       os.path.basename(state_dir)))
    try:
        os.rename(made, state_dir)
    except OSError as exc:
        durable.unlink_quietly(_hub_entry(hub, state_id))
        _remove_made(made)
        if os.path.isdir(state_dir) and registered(state_dir, hub):
            return  # another process made it meanwhile
        if isinstance(exc, (FileExistsError, IsADirectoryError)) or exc.errno == 39:
            raise ForeignState(f"{state_dir} exists and is not this user's state dir; "
                               "`cos init` moves it aside") from None
        raise durable.io_error(state_dir, exc) from None


def _remove_made(made: str) -> None:
    for name in (ID_FILE, ".gitignore"):
        durable.unlink_quietly(os.path.join(made, name))
    try:
        os.rmdir(made)
    except OSError:
        pass


def _register(state_dir: str, hub: str, final: str | None = None) -> str:
    """Give `state_dir` an id, its `.gitignore`, mode 0700, and the hub's entry naming it (or
    `final`, where it is about to be renamed); returns the id."""
    state_id = os.urandom(16).hex()
    try:
        os.chmod(state_dir, durable.DIR_MODE)
    except OSError as exc:
        raise durable.io_error(state_dir, exc) from None
    gitignore = os.path.join(state_dir, ".gitignore")
    if not os.path.lexists(gitignore):
        durable.atomic_write(gitignore, b"# made by coding-os: never committed\n*\n")
    durable.ensure_dir(os.path.join(hub, HUB_DIR))
    durable.atomic_write(_hub_entry(hub, state_id),
                         os.fsencode(final or os.path.realpath(state_dir)) + b"\n")
    durable.atomic_write(os.path.join(state_dir, ID_FILE), state_id.encode("ascii") + b"\n")
    return state_id


def set_aside(state_dir: str, now: float) -> str:
    """Move a foreign state dir out of the way, beside it: `<state dir>.foreign-<time>`, never
    deleted. Returns where it went.

    Raises:
        StateIOError: it cannot be moved.
    """
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    target = f"{state_dir}.foreign-{stamp}"
    number = 1
    while os.path.lexists(target):
        number += 1
        target = f"{state_dir}.foreign-{stamp}-{number}"
    try:
        os.rename(state_dir, target)
    except OSError as exc:
        raise durable.io_error(state_dir, exc) from None
    return target
