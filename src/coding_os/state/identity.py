"""Who is calling: agent, panel and session ids (DESIGN.md §3.3).

Runs on the hook path: no `re`, no hashlib unless an id has to be hashed.
"""

from __future__ import annotations

import os
import time

from coding_os.adapters import ADAPTERS, PANEL_ENV_VARS, adapter
from coding_os.errors import InvalidId
from coding_os.state.tiers import PANEL_ID_MAX, RESERVED_DIRS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "detect_agent",
    "validate_agent",
    "panel_identity",
    "sanitize_panel_id",
    "mint_session_id",
    "is_session_id",
    "agent_of_session",
    "validate_session_id",
    "is_path_like",
    "PANEL_SOURCES",
    "FALLBACK_AGENT",
]

FALLBACK_AGENT = "shell"
PANEL_SOURCES = ("env", "payload", "adapter_env", "ppid")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_AGENT_CHARS = _LOWER | frozenset("0123456789_-")
_PANEL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX = frozenset("0123456789abcdef")
_DIGITS = frozenset("0123456789")



def validate_agent(name: str) -> str:
    """Return `name` if it is a valid agent name (`[a-z][a-z0-9_-]{0,31}`, e.g. `claude-sdk`).

    Raises:
        InvalidId: it is not.
    """
    if (not name or len(name) > 32 or name[0] not in _LOWER
            or not set(name) <= _AGENT_CHARS or name in RESERVED_DIRS):
        raise InvalidId(f"invalid agent name {name[:80]!r}: expected [a-z][a-z0-9_-]{{0,31}}")
    return name


def detect_agent(env: Mapping[str, str], agent_marker_path: str | None = None) -> str:
    """COS_AGENT, then the runtime's own markers, then `.coding-os/.agent`, then "shell".

    Raises:
        InvalidId: COS_AGENT or the marker file names an invalid agent.
    """
    explicit = env.get("COS_AGENT")
    if explicit:
        return validate_agent(explicit)
    running = [spec.name for spec in ADAPTERS
               if any(env.get(marker) for marker in spec.runtime_markers)]
    if len(running) > 1:
        # An agent started from another one's shell inherits both sets of variables; guessing
        # would write one agent's state as the other's (fail closed on identity).
        raise InvalidId(f"the variables of {' and '.join(running)} are both set (one agent "
                        "running inside another?); set COS_AGENT to say which is calling")
    if running:
        return running[0]
    if agent_marker_path:
        try:
            with open(agent_marker_path, encoding="utf-8") as f:
                name = f.read(64).strip()
        except OSError:
            name = ""
        if name:
            return validate_agent(name)
    return FALLBACK_AGENT


def panel_identity(env: Mapping[str, str], payload_session: object = None,
                   agent: str | None = None) -> tuple[str, str]:
    """(panel id, source): COS_PANEL_ID, the payload's session_id, the session variables of the
    calling agent's adapter (all adapters' when the agent is unknown), then the parent pid."""
    explicit = env.get("COS_PANEL_ID")
    if explicit:
        return sanitize_panel_id(explicit), "env"
    if isinstance(payload_session, str) and payload_session:
        return sanitize_panel_id(payload_session), "payload"
    spec = adapter(agent) if agent else None
    for var in spec.session_env if spec else PANEL_ENV_VARS:
        value = env.get(var)
        if value:
            return sanitize_panel_id(value), "adapter_env"
    return _ppid_panel(), "ppid"


def sanitize_panel_id(raw: str) -> str:
    """Make `raw` a safe directory name matching `[A-Za-z0-9._-]{1,64}`.

    Ids already in that shape (UUIDs, the usual case) are kept as they are. Any other id gets
    its bad characters replaced and a hash of the original appended, so two different raw ids
    never share a directory and nothing like `..` or a NUL can reach the file system.
    """
    if (0 < len(raw) <= PANEL_ID_MAX and set(raw) <= _PANEL_CHARS
            and raw[0] != "." and raw[0] != "-"):
        return raw
    import hashlib

    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    cleaned = "".join(c if c in _PANEL_CHARS else "_" for c in raw[:48]).lstrip(".-")
    return f"{cleaned}-{digest}" if cleaned else f"p-{digest}"


def _ppid_panel() -> str:
    from coding_os.digest import sha256_hex

    ppid = os.getppid()
    started = ""
    try:  # the start time makes the id survive pid reuse (bytes: no codec module to load)
        with open(f"/proc/{ppid}/stat", "rb") as f:
            started = f.read().decode("ascii", "replace").rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        pass
    return "ppid-" + sha256_hex(f"{ppid}:{started}".encode())[:8]


def mint_session_id(agent: str, now: float | None = None) -> str:
    """A new session id `ses-<agent>-YYYYMMDD-HHMMSS-<4 hex>` (UTC, random suffix)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"ses-{agent}-{stamp}-{os.urandom(2).hex()}"


def is_session_id(value: object) -> bool:
    """Whether `value` matches `^ses-[a-z][a-z0-9_-]{0,31}-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$`."""
    if not isinstance(value, str) or not value.startswith("ses-") or len(value) > 4 + 32 + 21:
        return False
    head, _, suffix = value.rpartition("-")
    head, _, clock = head.rpartition("-")
    head, _, date = head.rpartition("-")
    agent = head[4:]
    return (len(suffix) == 4 and set(suffix) <= _HEX
            and len(clock) == 6 and set(clock) <= _DIGITS
            and len(date) == 8 and set(date) <= _DIGITS
            and 0 < len(agent) <= 32 and agent[0] in _LOWER and set(agent) <= _AGENT_CHARS)


def agent_of_session(value: object) -> str | None:
    """The agent a session id names (`ses-<agent>-…`), or None when `value` is not one."""
    return str(value)[4:].rsplit("-", 3)[0] if is_session_id(value) else None


def validate_session_id(value: str) -> str:
    """Return `value` if it is a cos session id.

    Raises:
        InvalidId: it is not.
    """
    if not is_session_id(value):
        raise InvalidId(f"invalid session id {value[:80]!r}: expected ses-<agent>-YYYYMMDD-HHMMSS-xxxx")
    return value


def is_path_like(text: str) -> bool:
    """True when a name or key could be read as a path that leaves where it is used: a `\\`
    anywhere, a leading `/`, or a `..` segment (`..`, `../x`, `a/../b`, `a/..`). A `/` inside a
    name (`CI/CD`) is not path-like."""
    return ("\\" in text or text.lstrip().startswith("/")
            or any(part.strip() == ".." for part in text.split("/")))
