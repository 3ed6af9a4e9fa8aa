"""`Project`: the one context every function of `coding_os.api` works in — a caller's
environment and working directory, and what follows from them: the caller (state dir, agent,
panel), the tiers, the project's configuration, this host's name, where Claude Code and Codex
keep their logs, the checkout; and the project's storage and session index, opened for a piece
of work.

Nothing is resolved when a `Project` is made: each part is worked out the first time it is
asked for, then kept, so a function that never needs the caller never resolves it, and one
that checks its input first refuses bad input before anything is looked at.
"""

from __future__ import annotations

import os

from coding_os.state.caller import Caller

# Only what every `cos` command needs is imported here (benchmarks/resume_continue.py); the
# rest is imported by the method that uses it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    from coding_os.sessions.index import Progress, RefreshReport
    from coding_os.state.root import Resolution
    from coding_os.state.tiers import Tiers
    from coding_os.storage.base import Storage

    _T = TypeVar("_T")

__all__ = ["Project"]


class Project:
    """The caller of one call into `coding_os.api`, and its project.

    `env` (default: `os.environ`, read when used) and `cwd` (default: the current directory)
    stand for the caller; `create`, `foreign_ok` and `native` are `Caller`'s (whether its state
    dir is made, whether a foreign one is only reported, the native session id of a hook
    payload).
    """

    __slots__ = ("env", "cwd", "_create", "_foreign_ok", "_native", "_caller", "_config",
                 "_host", "_native_dirs", "_checkout")

    def __init__(self, env: Mapping[str, str] | None = None, cwd: str | None = None, *,
                 create: bool = True, foreign_ok: bool = False,
                 native: str | None = None) -> None:
        self.env = env
        self.cwd = cwd
        self._create = create
        self._foreign_ok = foreign_ok
        self._native = native
        self._caller: Caller | None = None
        self._config: dict[str, Any] | None = None
        self._host: str | None = None
        self._native_dirs: tuple[str, str] | None = None
        self._checkout: str | None = None

    @property
    def environ(self) -> Mapping[str, str]:
        """The caller's environment: `env`, else this process's."""
        return os.environ if self.env is None else self.env

    @property
    def caller(self) -> Caller:
        """The caller, resolved on first use (see `Caller`).

        Raises:
            Misroute, ForeignState, InvalidId, StateIOError: as `Caller`.
        """
        if self._caller is None:
            self._caller = Caller(self.env, self.cwd, self._native, create=self._create,
                                  foreign_ok=self._foreign_ok)
        return self._caller

    @property
    def tiers(self) -> Tiers:
        """The caller's tiers (its state dir)."""
        return self.caller.tiers

    @property
    def resolution(self) -> Resolution:
        """How the caller's state dir was found (DESIGN.md §3.1)."""
        return self.caller.resolution

    @property
    def root(self) -> str:
        """The project's root."""
        return self.caller.resolution.project_root

    @property
    def config(self) -> dict[str, Any]:
        """The project's `.coding-os.yaml`, read once.

        Raises:
            InvalidInput: it cannot be parsed.
        """
        if self._config is None:
            from coding_os.config import load_config

            self._config = load_config(self.root)
        return self._config

    @property
    def host(self) -> str:
        """This host's name (COS_HOST, else the machine's).

        Raises:
            InvalidInput: COS_HOST is not a valid host name.
        """
        if self._host is None:
            from coding_os.hosts.identity import this_host

            self._host = this_host(self.environ)
        return self._host

    @property
    def native_dirs(self) -> tuple[str, str]:
        """Where Claude Code and Codex keep their logs for this caller."""
        if self._native_dirs is None:
            from coding_os.sessions.database import native_dirs

            self._native_dirs = native_dirs(self.environ)
        return self._native_dirs

    @property
    def home(self) -> str:
        """The caller's home directory."""
        return self.environ.get("HOME") or os.path.expanduser("~")

    @property
    def checkout(self) -> str:
        """The checkout (or linked worktree) the caller works in: the default scope of a
        session listing, and the tree its checkpoints cover."""
        if self._checkout is None:
            from coding_os.state.root import checkout_dir

            self._checkout = checkout_dir(self.resolution, self.caller.cwd, self.home)
        return self._checkout

    @property
    def redacting(self) -> bool:
        """Whether the project redacts what it shows and stores."""
        from coding_os import redact

        return redact.configured(self.tiers.state_dir)

    @property
    def period_days(self) -> float:
        """The retention period, `cleanup_period_days`.

        Raises:
            InvalidInput: it is not a number of days, or below 1.
        """
        from coding_os.sessions.retention import cleanup_period_days

        return cleanup_period_days(self.config, self.environ)

    def storage(self) -> Storage:
        """The project's storage (a context manager), the observations spool moved into it.

        Raises:
            StorageError: the database cannot be used.
        """
        from coding_os.state import observations
        from coding_os.storage import open_storage

        storage = open_storage(self.tiers.database, env=self.env)
        observations.ingest(storage, self.tiers.observations_spool)
        return storage

    def index(self, work: Callable[[Storage], _T]) -> _T:
        """Run `work` on the session index (sessions/database.py: a corrupt SQLite file is set
        aside and rebuilt, never fatal).

        Raises:
            StorageError: the database cannot be used.
        """
        from coding_os.sessions.database import with_index

        return with_index(self.tiers, self.environ, work)

    def repairs(self, work: Callable[[Storage], _T]) -> tuple[_T, list[str]]:
        """`index`, and what it repaired in the SQLite file."""
        from coding_os.sessions.database import with_repairs

        return with_repairs(self.tiers, self.environ, work)

    def refresh(self, storage: Storage, claude_dir: str | None = None,
                codex_dir: str | None = None, *, full: bool = False,
                progress: Progress | None = None, push: bool = True) -> RefreshReport:
        """Import what changed in the logs into the index of `storage`; on a shared storage,
        also push (unless not `push`) the new lines of the project's session files for the
        other hosts (what it refused is in the report's warnings).

        Raises:
            StorageError, StateIOError: as `sessions.index.refresh`.
        """
        from coding_os.sessions import index

        from coding_os.sessions.database import gemini_dir

        claude, codex = self.native_dirs
        report = index.refresh(storage, self.tiers, claude_dir or claude, codex_dir or codex,
                               full=full, progress=progress,
                               gemini_dir=gemini_dir(self.environ))
        if push and storage.shared:
            self.push(storage, report)
        return report

    def push(self, storage: Storage, report: RefreshReport) -> None:
        """Replicate the new lines of the project's session files to shared `storage`, the
        refusals added to `report`'s warnings."""
        from coding_os.hosts import replicate

        pushed = replicate.replicate(storage, self.tiers, self.root, host=report.host)
        report.warnings.extend(f"not replicated: session {session} ({stream}): {why}"
                               for session, stream, why in pushed.refused)

    def lookup_refresh(self, storage: Storage) -> RefreshReport | None:
        """`refresh` before a lookup; None, without loading the importers, when a walk of the
        logs finds them as the last import left them (sessions/freshness.py)."""
        from coding_os.sessions import freshness
        from coding_os.sessions.database import gemini_dir

        claude, codex = self.native_dirs
        if freshness.unchanged(self.tiers, claude, codex, gemini_dir(self.environ)) \
                and storage.index_rows(limit=1):
            return None
        return self.refresh(storage)

    def refresher(self, storage: Storage) -> Callable[[], RefreshReport | None]:
        """`lookup_refresh` of `storage`, for a lookup that imports on a miss."""
        return lambda: self.lookup_refresh(storage)
