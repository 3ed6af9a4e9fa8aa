"""Checkpoints and rewind (DESIGN.md §5): snapshots of the working tree taken before each prompt's
edits and before any tool call that may write, and the rewind of code and conversation to any of
them, itself undoable.

`store` holds the content-addressed objects, `snapshot` takes and compares snapshots, `points` the
checkpoint records, `rewind` the journaled restore, `fingerprint` the stat check that spares a
small unchanged tree a `git status`. `take` takes checkpoints (the hook path: kept light) and
`core` lists, rewinds and keeps them; their functions are reachable from this package, loaded
when first used.
"""

from __future__ import annotations

__all__ = [
    "MODES",
    "DEFAULT_CAP_BYTES",
    "Settings",
    "checkpoints_dir",
    "create",
    "listing",
    "preview",
    "rewind_code",
    "undo",
    "last_rewind",
    "verify",
    "usage",
    "collect",
    "recover_pending",
]

TYPE_CHECKING = False  # the modules load when first used: the hook imports only take.py
if TYPE_CHECKING:
    from coding_os.checkpoints.core import (
        collect,
        last_rewind,
        listing,
        preview,
        rewind_code,
        undo,
        usage,
        verify,
    )
    from coding_os.checkpoints.take import (
        DEFAULT_CAP_BYTES,
        MODES,
        Settings,
        checkpoints_dir,
        create,
        recover_pending,
    )

_TAKE = ("MODES", "DEFAULT_CAP_BYTES", "Settings", "checkpoints_dir", "create", "recover_pending")


def __getattr__(name: str) -> object:
    if name in _TAKE:
        from coding_os.checkpoints import take

        return getattr(take, name)
    if name in __all__:
        from coding_os.checkpoints import core

        return getattr(core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
