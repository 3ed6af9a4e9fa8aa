"""The error types of coding-os, each with the exit code the command line maps it to.

Exit codes (documented in docs/cli.md):

    0  success
    1  not found, or a state value that is not trusted
    2  bad usage or invalid input (ids, names, payloads)
    3  misroute: state would land in the global hub or through a symlink (COS_STATE_MISROUTE)
    4  elsewhere: the session belongs to another project, or lives or runs on another host
       (a repository this host lacks, a job another host runs); the message names the command
       to run there
    5  ambiguous: several matches where one was required
    6  the state directory cannot be written (read-only, full, not a directory); damage
       found (`cos checkpoints verify`, `cos doctor`)
    7  conflict: another session holds it (a task being done), or it changed meanwhile
    8  the state dir is not this user's (a clone's, an archive's, another user's; COS_STATE_FOREIGN)
    9  consent needed: a command the repository configures runs only after `cos trust`
"""

from __future__ import annotations

__all__ = [
    "CosError",
    "NotFound",
    "NotTrusted",
    "InvalidInput",
    "InvalidId",
    "Misroute",
    "CrossProject",
    "Ambiguous",
    "StateIOError",
    "Conflict",
    "ForeignState",
    "ConsentNeeded",
    "BackendError",
]


class CosError(Exception):
    """Base of every error coding-os reports to a user."""

    exit_code = 1


class NotFound(CosError):
    """The thing asked for does not exist."""

    exit_code = 1


class NotTrusted(CosError):
    """A state value exists but is not trusted by this caller (reason in `reason`)."""

    exit_code = 1

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class InvalidInput(CosError):
    """Input that cannot be used as given: a payload, a name, a value."""

    exit_code = 2


class InvalidId(InvalidInput):
    """An agent, panel or session id that fails validation."""


class Misroute(CosError):
    """State would be written somewhere it must never go; nothing was written."""

    exit_code = 3

    def __init__(self, message: str) -> None:
        super().__init__(f"COS_STATE_MISROUTE: {message}")


class CrossProject(CosError):
    """The session belongs to another project, or the session or job is on another host: the
    message is the command to run there."""

    exit_code = 4


class Ambiguous(CosError):
    """Several matches where exactly one was required."""

    exit_code = 5


class StateIOError(CosError):
    """The state directory could not be read or written (read-only, full, wrong type)."""

    exit_code = 6


class Conflict(CosError):
    """Another session holds what was asked for, or it changed meanwhile."""

    exit_code = 7


class ForeignState(CosError):
    """The state dir is not this user's own: nothing is read from it or written to it."""

    exit_code = 8

    def __init__(self, message: str) -> None:
        super().__init__(f"COS_STATE_FOREIGN: {message}")


class ConsentNeeded(CosError):
    """A command taken from the repository's configuration, which this user has not trusted."""

    exit_code = 9


class BackendError(CosError):
    """An agent's program cannot be started, or ended before it answered (DESIGN.md §6)."""

    exit_code = 1
