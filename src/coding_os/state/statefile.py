"""Ownership-proven state files (DESIGN.md §3.4).

A state file is one line, `<session-id> <value>`. A reader trusts the value only when the owner
is the caller's session, the file is younger than its horizon, and it sits in the caller's own
agent/panel directory (the path is derived from the caller's identity, never taken from input,
and a symlink there is not followed). Writes are atomic.
"""

from __future__ import annotations

import os
import time

from coding_os.errors import InvalidInput, NotFound, NotTrusted
from coding_os import durable
from coding_os.state.identity import is_session_id
from coding_os.state.tiers import PANEL_ID_MAX, RESERVED_NAMES, horizon_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from coding_os.state.caller import Caller

__all__ = [
    "StateCheck",
    "format_state",
    "parse_state",
    "write_state",
    "check_state",
    "validate_name",
    "validate_settable",
    "check_for",
    "set_for",
    "trusted",
    "REASONS",
]

# Why a value is not trusted. `malformed`: the file is not `<session-id> <value>`.
REASONS = ("no_file", "malformed", "session_mismatch", "stale")
MAX_VALUE = 64 * 1024
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class StateCheck:
    """The verdict on one state file for one caller."""

    __slots__ = ("valid", "reason", "owner", "age_s", "path", "value")

    def __init__(self, valid: bool, reason: str | None, owner: str | None,
                 age_s: float | None, path: str, value: str | None) -> None:
        self.valid = valid
        self.reason = reason
        self.owner = owner
        self.age_s = age_s
        self.path = path
        self.value = value

    def as_dict(self) -> dict[str, object]:
        return {"valid": self.valid, "reason": self.reason, "owner": self.owner,
                "age_s": self.age_s, "path": self.path, "value": self.value}


def validate_name(name: str) -> str:
    """Return `name` if it can name a state file (`[A-Za-z0-9._-]{1,64}`, not `.` or `..`).

    Raises:
        InvalidInput: it cannot.
    """
    if (not name or len(name) > PANEL_ID_MAX or not set(name) <= _NAME_CHARS
            or set(name) == {"."}):
        raise InvalidInput(f"invalid state file name {name[:80]!r}: expected [A-Za-z0-9._-]{{1,64}}")
    return name


def format_state(session: str, value: str) -> bytes:
    """The bytes of a state file.

    Raises:
        InvalidInput: the session id is not one, or the value is not one line of text.
    """
    if not is_session_id(session):
        raise InvalidInput(f"invalid owner session id {session[:80]!r}")
    if "\n" in value or "\r" in value or "\x00" in value:
        raise InvalidInput("a state value must be one line without NUL")
    try:
        data = f"{session} {value}\n".encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise InvalidInput("a state value must be text that UTF-8 can encode") from None
    if len(data) - len(session) - 2 > MAX_VALUE:
        raise InvalidInput(f"a state value is at most {MAX_VALUE} bytes")
    return data


def parse_state(data: bytes) -> tuple[str, str] | None:
    """(owner, value) from a state file's bytes, or None when they are not a state file."""
    text = data.decode("utf-8", "surrogateescape")
    if not text.endswith("\n"):
        return None  # cut short: written by something else, or read past the size limit
    text = text[:-1]
    owner, sep, value = text.partition(" ")
    if not sep or "\n" in value or not is_session_id(owner):
        return None
    return owner, value


def write_state(path: str, session: str, value: str) -> None:
    """Atomically write `value` owned by `session` to `path`, creating its directory.

    Raises:
        InvalidInput: bad session id or value.
        StateIOError: the directory or file cannot be written.
    """
    data = format_state(session, value)
    durable.ensure_dir(os.path.dirname(path))
    durable.atomic_write(path, data)


def check_state(path: str, caller_session: str | None, horizon_s: float | None,
                now: float | None = None) -> StateCheck:
    """Whether the caller may trust the state file at `path`, and why not.

    Raises:
        StateIOError: the file exists but cannot be read.
    """
    found = durable.read_small_stat(path, MAX_VALUE + 128)
    if found is None:
        return StateCheck(False, "no_file", None, None, path, None)
    data, mtime = found  # bytes and age from the same open file
    age = max(0.0, (time.time() if now is None else now) - mtime)
    age = round(age, 3)
    parsed = parse_state(data)
    if parsed is None:
        return StateCheck(False, "malformed", None, age, path, None)
    owner, value = parsed
    if caller_session is None or owner != caller_session:
        return StateCheck(False, "session_mismatch", owner, age, path, value)
    if horizon_s is not None and age > horizon_s:
        return StateCheck(False, "stale", owner, age, path, value)
    return StateCheck(True, None, owner, age, path, value)


def validate_settable(name: str) -> str:
    """Return `name` if a caller may write a state file of that name (`cos state set`).

    Raises:
        InvalidInput: a bad name, or one coding-os writes itself (RESERVED_NAMES).
    """
    validate_name(name)
    if name in RESERVED_NAMES:
        raise InvalidInput(f"{name} is written by coding-os itself")
    return name


def check_for(caller: Caller, name: str, session: str | None,
              config: Mapping[str, object]) -> StateCheck:
    """`check_state` of the caller's state file `name` for `session`, with the horizon
    `config` (`.coding-os.yaml`) gives that name.

    Raises:
        InvalidInput: a bad horizon in `config`.
        StateIOError: the file exists but cannot be read.
    """
    path = caller.tiers.state_path(caller.agent, caller.panel, name)
    return check_state(path, session, horizon_for(name, config))


def set_for(caller: Caller, name: str, value: str) -> str:
    """Write the caller's state file `name`, owned by its panel's session; its path.

    Raises:
        NotFound: the caller's panel has no session yet (no SessionStart seen).
        InvalidInput: a value that is not one line.
        StateIOError: the file cannot be written.
    """
    session = caller.session()
    if session is None:
        raise NotFound(f"panel {caller.panel} of {caller.agent} has no session yet "
                       "(no SessionStart seen); nothing written")
    path = caller.tiers.state_path(caller.agent, caller.panel, name)
    write_state(path, session, value)
    return path


def trusted(verdict: StateCheck, name: str) -> str:
    """The value of state file `name` when `verdict` trusts it.

    Raises:
        NotTrusted: absent, malformed, another session's, or stale (`reason` says which).
    """
    if not verdict.valid:
        assert verdict.reason is not None
        raise NotTrusted(f"{name}: {verdict.reason}", verdict.reason)
    assert verdict.value is not None
    return verdict.value
