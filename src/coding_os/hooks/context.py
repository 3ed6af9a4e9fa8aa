"""What one hook fire knows (`HookContext`), what it answers (`HookResult`), and the readers of
a hook payload every handler shares: its checks, its string fields, a tool call's input.

Hot path: the standard library and the state modules only (see benchmarks/hook_latency.py).
"""

from __future__ import annotations

import os
import time

from coding_os import clock
from coding_os.adapters import FILE_TOOLS, PATCH_TOOLS, patch_files
from coding_os.errors import CosError, InvalidInput
from coding_os.state.caller import Caller
from coding_os.state.statefile import check_state
from coding_os.state.tiers import spec_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from coding_os.storage.base import Storage

__all__ = ["HookResult", "HookContext", "HOOK_DB_WAIT_S", "validate_payload", "valid_event",
           "string", "excerpt", "tool_input_summary", "tool_ok"]

# How long a hook waits for another process's database lock before it gives up (the data is
# safe in the spool; the next event stores it).
HOOK_DB_WAIT_S = 2.0


_INPUT_KEYS = ("command", "cmd", "file_path", "notebook_path", "path", "pattern", "url", "query",
               "description")


class HookResult:
    """What `cos hook` prints (JSON on stdout, or nothing), says on stderr and exits with."""

    __slots__ = ("output", "exit_code", "session", "message")

    def __init__(self, output: dict[str, object] | None, session: str | None,
                 exit_code: int = 0, message: str | None = None) -> None:
        self.output = output
        self.exit_code = exit_code  # 2 only when a policy gate blocks
        self.session = session
        self.message = message  # the block reason, for stderr


def validate_payload(payload: object) -> dict[str, object]:
    """Check the shape of a hook payload: a JSON object whose session_id, if any, is a string
    that can be stored faithfully.

    Raises:
        InvalidInput: it is not.
    """
    if not isinstance(payload, dict):
        raise InvalidInput(f"hook payload must be a JSON object, got {type(payload).__name__}")
    native = payload.get("session_id")
    if native is not None and not isinstance(native, str):
        raise InvalidInput(f"hook payload field session_id must be a string, "
                           f"got {type(native).__name__}")
    if isinstance(native, str):
        # The native id is stored as it is (session-id file, presence, index): fail closed on
        # one that cannot be stored faithfully rather than record a mangled identity.
        if len(native) > 1024 or "\x00" in native or "\n" in native or "\r" in native:
            raise InvalidInput("hook payload field session_id is not a storable id "
                               "(NUL, newline, or over 1024 characters)")
        try:
            native.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput("hook payload field session_id is not valid Unicode") from None
    return payload


def valid_event(event: str) -> str:
    """`event` if it is a plausible hook event name (ASCII letters and digits, at most 64).

    Raises:
        InvalidInput: it is not.
    """
    if not event or len(event) > 64 or not event.isascii() or not event.isalnum():
        raise InvalidInput(f"invalid hook event name {event[:80]!r}")
    return event


class HookContext:
    """Everything one hook fire knows about its caller: who it is (agent, panel, session's
    native id), where its state lives, the payload, the clock, the log line being built, and
    the database and configuration, each opened once when first asked for."""

    __slots__ = ("env", "caller", "tiers", "root", "agent", "panel", "panel_dir", "native",
                 "event", "payload", "now", "ts", "log", "storage", "storage_failed", "ingested",
                 "_config")

    def __init__(self, event: str, payload: dict[str, object], env: Mapping[str, str],
                 cwd: str | None, now: float | None) -> None:
        native = payload.get("session_id")
        # The caller makes the state dir (registered) when there is none yet: a hook writes
        # wherever it resolved to.
        self.caller = Caller(env, cwd, native if isinstance(native, str) else None)
        self.env = env
        self.tiers = self.caller.tiers
        self.root = self.caller.resolution.project_root
        self.agent = self.caller.agent
        self.native = self.caller.native
        self.panel = self.caller.panel
        self.panel_dir = self.caller.panel_dir
        self.event = event
        self.payload = payload
        self.now = time.time() if now is None else now
        self.ts = clock.utc_now(self.now)
        self.log: dict[str, object] = {}
        self.storage: Storage | None = None
        self.storage_failed = False
        self.ingested = False
        self._config: dict[str, object] | InvalidInput | None = None

    def config(self) -> dict[str, Any]:
        """The project's `.coding-os.yaml`, read once per fire (the gates, the checkpoint and
        the trust horizons all ask).

        Raises:
            InvalidInput: it is not valid YAML or not a mapping (every time it is asked).
        """
        if self._config is None:
            from coding_os.config import load_config_cached

            try:
                self._config = load_config_cached(self.root, self.tiers.state_dir)
            except InvalidInput as exc:
                self._config = exc
        if isinstance(self._config, InvalidInput):
            raise self._config
        return self._config

    def open_storage(self, ingest: bool = True) -> Storage | None:
        """The database, with the spool moved into it unless `ingest` is false; None when it
        cannot be used, or once any database step of this fire failed (one failure, logged,
        ends the fire's database work: it never waits twice; the spool keeps the data)."""
        from coding_os.errors import StateIOError

        if self.storage_failed:
            return None
        if self.storage is None:
            from coding_os.storage import open_storage

            try:
                self.storage = open_storage(self.tiers.database, busy_timeout_s=HOOK_DB_WAIT_S,
                                            env=self.env)
            except StateIOError as exc:
                self.db_failed(exc)
                return None
        if ingest and not self.ingested:
            try:
                from coding_os.state import observations

                observations.ingest(self.storage, self.tiers.observations_spool)
                self.ingested = True
            except StateIOError as exc:
                self.db_failed(exc)
                return None
        return self.storage

    def db_failed(self, exc: Exception) -> None:
        """Record a database failure; no further database step runs in this fire."""
        self.storage_failed = True
        self.log["db_error"] = str(exc)

    def close(self) -> None:
        """Close the database if this fire opened it."""
        if self.storage is not None:
            self.storage.close()

    def trusted_value(self, name: str, session: str) -> str | None:
        """The value of state file `name` when this session may trust it, else None."""
        path = self.tiers.state_path(self.agent, self.panel, name)
        if not os.path.lexists(path):
            return None
        from coding_os.state.tiers import horizon_for

        try:
            horizon = horizon_for(name, self.config())
        except InvalidInput as exc:
            self.log["config_error"] = str(exc)
            horizon = spec_for(name)[2]
        try:
            verdict = check_state(path, session, horizon, self.now)
        except (CosError, OSError) as exc:  # a directory or unreadable file in its place
            self.log[f"state_error{name}"] = " ".join(str(exc).split())[:200]
            return None
        return verdict.value if verdict.valid else None


def tool_input_summary(tool: str | None, tool_input: object,
                       clean: Callable[[str], str] | None = None
                       ) -> tuple[str | None, list[str]]:
    """A short text for a tool call's input, and the files it writes when it names them;
    `clean` is applied to the text before it is cut (the hook redacts secrets with it)."""
    clean = clean or _same
    if isinstance(tool_input, str):
        return excerpt(clean(tool_input), 4000), patch_paths(tool, tool_input)
    if not isinstance(tool_input, dict):
        return None, []
    path_key = FILE_TOOLS.get(tool or "")
    path = string(tool_input.get(path_key)) if path_key else None
    paths = [path] if path else []
    for key in _INPUT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return excerpt(clean(value), 4000), paths or patch_paths(tool, value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return excerpt(clean(" ".join(value)), 4000), paths
    from coding_os import jsonwire

    try:
        return excerpt(clean(jsonwire.dumps(tool_input)), 500), paths
    except (TypeError, ValueError):
        return None, paths


def _same(text: str) -> str:
    return text


def patch_paths(tool: str | None, patch: str) -> list[str]:
    """The files a patch tool's input writes (none for another tool)."""
    return patch_files(patch) if tool in PATCH_TOOLS else []


def tool_ok(response: object) -> bool:
    """Whether a tool call's response reports success (not an error, not interrupted)."""
    if isinstance(response, dict):
        if response.get("is_error") is True or response.get("success") is False:
            return False
        if response.get("interrupted") is True:
            return False
    return True


def string(value: object) -> str | None:
    """`value` if it is a string, else None (payload fields of another type are ignored)."""
    return value if isinstance(value, str) else None


def excerpt(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, ending with "…" when it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
