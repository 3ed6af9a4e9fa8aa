"""The panel lifecycle driven by hook events (DESIGN.md §3.6).

`handle()` takes one hook event and its payload, and does what that event means for the calling
panel: mint or keep the session id, presence, heartbeat, `.active-session`, the hooks-log line,
observations, orphan recovery at startup, the recovery card at compaction. It is the library
behind `cos hook`; the interface only reads stdin and writes stdout.

Hot path: tool-call events touch files only (heartbeat, log, spool) — except a panel's first
event after its directory was lost, which looks its native id up in the index. The database is
otherwise opened only by the events that happen once per session or per turn (SessionStart, Stop,
SessionEnd), never under the panel lock, with a 2 s lock wait; a database failure is logged
(`db_error`) and does not fail the hook: the observations wait in the spool.
"""

from __future__ import annotations

import fcntl
import os
import time

from coding_os import clock
from coding_os.state import hookslog
from coding_os.adapters import FILE_TOOLS, HOOK_EVENTS, PATCH_TOOLS, adapter, patch_files
from coding_os.errors import CosError, InvalidInput
from coding_os import durable
from coding_os.state import presence
from coding_os.state.caller import Caller, read_panel_session
from coding_os.state.identity import mint_session_id
from coding_os.state.statefile import check_state
from coding_os.state.tiers import spec_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from coding_os.storage.base import Storage

__all__ = ["HookResult", "handle", "SESSION_SOURCES", "validate_payload"]

SESSION_SOURCES = ("startup", "resume", "clear", "compact", "fork")
# Payload fields read as strings. Only `session_id` (identity) must be one; another type in
# the others is logged (`bad_fields`) and the field ignored: clients drift, hooks must not fail.
_STRING_FIELDS = ("session_id", "hook_event_name", "source", "cwd", "transcript_path",
                  "tool_name", "prompt", "reason", "trigger", "agent_id", "agent_type")
_EXCERPT = 2000
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


def _valid_event(event: str) -> str:
    if not event or len(event) > 64 or not event.isascii() or not event.isalnum():
        raise InvalidInput(f"invalid hook event name {event[:80]!r}")
    return event


class _Context:
    """Everything one hook fire knows about its caller."""

    __slots__ = ("env", "caller", "tiers", "root", "agent", "panel", "panel_dir", "native",
                 "event", "payload", "now", "ts", "log", "storage", "storage_failed", "ingested",
                 "_config")

    def __init__(self, event: str, payload: dict[str, object], env: Mapping[str, str],
                 cwd: str | None, now: float | None) -> None:
        native = payload.get("session_id")
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
        if self.storage is not None:
            self.storage.close()


def handle(event: str, payload: dict[str, object], env: Mapping[str, str] | None = None,
           cwd: str | None = None, now: float | None = None) -> HookResult:
    """Carry out hook `event` with `payload` for the calling panel.

    Raises:
        InvalidInput: the event name or the payload is malformed.
        Misroute: state would land in the global hub or through a symlink; nothing written.
        StateIOError: the state directory cannot be written (read-only, full).
    """
    env = os.environ if env is None else env
    _valid_event(event)
    validate_payload(payload)
    ctx = _Context(event, payload, env, cwd, now)
    try:
        return _handle(ctx)
    finally:
        ctx.close()


def _handle(ctx: _Context) -> HookResult:
    payload = ctx.payload
    durable.ensure_dir(ctx.panel_dir)
    start: _Start | None = None
    with PanelLock(ctx.panel_dir):  # file work only: no database while other hooks wait
        current = read_panel_session(ctx.panel_dir)
        if ctx.event == "SessionStart":
            start = _session_start(ctx, current)
            session = start.session
        elif current is None:
            session = _adopt(ctx)
        else:
            session = current[0]
            presence.beat(ctx.panel_dir, session)
    task = _trusted_value(ctx, ".task-current", session)
    log: dict[str, object] = {
        "ts": ctx.ts, "agent": ctx.agent, "panel": ctx.panel, "session": session,
        "task": task, "event": ctx.event,
    }
    if ctx.native:
        log["native"] = ctx.native  # the native id is a lookup key too (`hooks-log --session`)
    if ctx.caller.panel_source != "payload":
        log["panel_source"] = ctx.caller.panel_source
    payload_event = payload.get("hook_event_name")
    if isinstance(payload_event, str) and payload_event != ctx.event:
        log["payload_event"] = payload_event
    bad = [key for key in _STRING_FIELDS
           if payload.get(key) is not None and not isinstance(payload.get(key), str)]
    if bad:
        log["bad_fields"] = ",".join(bad)  # newer or odd clients: ignored, never fatal
    observation = _observe(ctx, log)
    if observation is not None:
        observation.update(session=session, agent=ctx.agent, panel=ctx.panel, ts=ctx.ts,
                           event=ctx.event)
        from coding_os.state import observations  # not for a PreToolUse: it spools nothing

        observations.spool(ctx.tiers.observations_spool, observation)
    output: dict[str, object] | None = None
    if ctx.event == "PreToolUse":
        blocked, warning = _gate(ctx, session, log)
        if blocked is not None:  # a policy gate refused the call: nothing to checkpoint
            log.update(ctx.log)
            hookslog.append(ctx.tiers.hooks_log, log)
            return blocked
        output = _attribute_mcp_call(ctx, session, log)
        if warning:
            output = _with_gate_warning(output, warning)
    if ctx.event in _CHECKPOINT_EVENTS:
        _checkpoint(ctx, session, log)
    if start is not None:
        context = _after_session_start(ctx, start)
        if context:
            output = {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": context}}
    elif ctx.event == "Stop":
        storage = ctx.open_storage()
        if storage is not None:
            _record_activity(ctx, storage, session, status=None)
            _retry_pending_orphan(ctx, session)
    elif ctx.event == "SessionEnd":
        _session_end(ctx, session)
        _retry_pending_orphan(ctx, session)
    log.update(ctx.log)
    hookslog.append(ctx.tiers.hooks_log, log)
    return HookResult(output, session)


class _Start:
    """What SessionStart decided under the panel lock, and the database work left for after."""

    __slots__ = ("session", "source", "context", "previous", "record", "known")

    def __init__(self, session: str, source: str, context: str,
                 previous: tuple[str, str | None] | None, record: dict[str, object],
                 known: dict[str, object] | None) -> None:
        self.session = session
        self.source = source
        self.context = context
        self.previous = previous  # the panel's session before, when this one replaced it
        self.record = record
        self.known = known


def _session_start(ctx: _Context, current: tuple[str, str | None] | None) -> _Start:
    """SessionStart by source, under the panel lock: decide and commit the panel's session.

    The new binding is committed first (presence, then the session-id file) and only then are
    the volatile markers cleared, so a failure (a full disk) leaves the panel on its old session
    or wholly on the new one, never between. Summarising the previous session and indexing the
    new one happen after the lock is released (`_after_session_start`).
    """
    raw_source = ctx.payload.get("source")
    source = raw_source if isinstance(raw_source, str) and raw_source else "startup"
    ctx.log["source"] = source
    context = ""
    fields: dict[str, object] = {}
    previous = current[0] if current else None
    starts_fresh = source in ("startup", "clear") or source not in SESSION_SOURCES
    if source == "compact" and previous:
        session = previous
        context = _recovery_card(ctx, session)
        ctx.log["kept"] = "1"
    elif source == "resume":
        session = _resume_target(ctx, current)
        if session == previous:
            ctx.log["kept"] = "1"
    else:
        if starts_fresh and previous:
            # Remembered with the new binding, so a summary that cannot be written now (no
            # database, a full disk after the commit) is retried by a later event.
            fields["pending_orphan"] = previous
        if source == "clear":
            cleared_from = previous or _previous_of_host(ctx)
            if cleared_from:
                fields["cleared_from"] = cleared_from
        if source == "fork":
            fields["forked_from"] = _fork_source(ctx, previous)
        session = _mint(ctx)
    record, known = _bind_session(ctx, session, source=source, fields=fields)
    if starts_fresh:
        _clear_volatile(ctx.panel_dir)
    replaced = current if starts_fresh and current is not None and previous != session else None
    return _Start(session, source, context, replaced, record, known)


def _after_session_start(ctx: _Context, start: _Start) -> str:
    """Database work of SessionStart, after the panel lock: orphan recovery and the index.
    Returns the additional context for the agent."""
    context = start.context
    if start.previous is not None:
        reason = "clear" if start.source == "clear" else "orphan"
        card, done = _recover_orphan(ctx, start.previous, reason)
        context = card or context
        if done:
            presence.write_presence(ctx.tiers, ctx.agent, start.session, {"pending_orphan": None})
    if start.source == "startup":
        _recover_dead_hosts(ctx, start.session)
    storage = ctx.open_storage()
    if storage is not None:
        _index_session(ctx, storage, start.session, start.record, start.known)
    note = _mcp_note(ctx)
    return f"{context}\n{note}" if context and note else context or note or ""


def _mcp_note(ctx: _Context) -> str | None:
    """One line for the card when cos's MCP server is registered but cannot be reached."""
    from coding_os.adapters.mcp import registered_server, unreachable_reason
    from coding_os.git.repo import checkout_root

    checkout = checkout_root(ctx.caller.cwd) or ctx.root
    entry = registered_server(ctx.agent, checkout)
    reason = unreachable_reason(entry) if entry is not None else None
    if reason is None:
        return None
    ctx.log["mcp_unreachable"] = reason
    return (f"[coding-os] The cos MCP server is not reachable: {reason}. Sessions, state and "
            "checkpoints still work; the `cos` command (cos tasks, cos search) does what its "
            "tools do.")


def _adopt(ctx: _Context) -> str:
    """A hook on a panel without a session (hooks installed mid-session, a missed SessionStart,
    a panel reaped by `cos gc`): rebind the cos session that owns the native id, else mint."""
    session = _session_of_native(ctx, ingest=False)
    ctx.log["adopted"] = "1"
    if session is None:
        session = _mint(ctx)
    _bind_session(ctx, session, source="adopt", fields={})
    return session


def _mint(ctx: _Context) -> str:
    """A new session id, reserved by creating its presence file exclusively: two panels of one
    agent starting in the same second never share an id (the suffix is only 16 random bits)."""
    directory = os.path.join(ctx.tiers.agent_dir(ctx.agent), "sessions")
    durable.ensure_dir(directory)
    while True:
        session = mint_session_id(ctx.agent, ctx.now)
        try:
            os.close(os.open(ctx.tiers.presence_path(ctx.agent, session),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, durable.FILE_MODE))
            return session
        except FileExistsError:
            continue
        except OSError as exc:
            raise durable.io_error(directory, exc) from None


def _bind_session(ctx: _Context, session: str, source: str,
                  fields: dict[str, object]) -> tuple[dict[str, object], dict[str, object] | None]:
    """Make `session` the panel's session: presence, the session-id file (the commit point),
    then heartbeat and the agent's active session. Returns the presence record and the one
    that existed before (None for a new session).

    Raises:
        StateIOError: a write failed; before the commit point nothing is left changed.
    """
    from coding_os.state.statefile import write_state

    known = presence.read_presence(ctx.tiers, ctx.agent, session)
    record: dict[str, object] = {
        "panel": ctx.panel,
        "native_id": ctx.native,
        "status": "active",
        "project": ctx.root,
        "cwd": _string(ctx.payload.get("cwd")) or os.getcwd(),
        "transcript_path": _string(ctx.payload.get("transcript_path")),
        "last_source": source,
        **fields,
    }
    host_pid = _host_pid(ctx)
    if host_pid:
        record["host_pid"] = host_pid
        record["host_ns"] = _host_namespace()
    if known is None:
        record["started"] = ctx.ts
        record["source"] = source
    try:
        presence.write_presence(ctx.tiers, ctx.agent, session, record)
        write_state(os.path.join(ctx.panel_dir, "session-id"), session, ctx.native or "-")
    except BaseException:
        if known is None:  # the session was never bound: take its presence back
            try:
                os.unlink(ctx.tiers.presence_path(ctx.agent, session))
            except OSError:
                pass  # best effort; an unbound presence file names no panel's session
        raise
    presence.beat(ctx.panel_dir, session, new_session=True)
    presence.set_active_session(ctx.tiers, ctx.agent, session, ctx.panel)
    return record, known


def _index_session(ctx: _Context, storage: Storage, session: str, record: dict[str, object],
                   known: dict[str, object] | None) -> None:
    from coding_os.storage.base import SessionRecord, StorageError

    started = (known or record).get("started")
    try:
        storage.upsert_session(SessionRecord(
            id=session, agent=ctx.agent, panel=ctx.panel, native_id=ctx.native,
            project=ctx.root, cwd=_string(record.get("cwd")),
            source=_string((known or record).get("source")),
            forked_from=_string(record.get("forked_from") or (known or {}).get("forked_from")),
            cleared_from=_string(record.get("cleared_from") or (known or {}).get("cleared_from")),
            started=started if isinstance(started, str) else ctx.ts,
            last_active=ctx.ts, status="active",
        ))
    except StorageError as exc:
        ctx.db_failed(exc)


def _host_pid(ctx: _Context) -> str | None:
    """The agent process's pid as its adapter reports it to hooks (stable across /clear)."""
    spec = adapter(ctx.agent)
    return ctx.env.get(spec.host_pid_env) if spec and spec.host_pid_env else None


def _host_namespace() -> str | None:
    """This boot of this machine and this pid namespace: where a recorded pid means something."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def _previous_of_host(ctx: _Context) -> str | None:
    """The session the same agent process ran last: where a /clear came from when the panel
    id changed with it (Claude Code gives the cleared conversation a new session id)."""
    host_pid = _host_pid(ctx)
    if not host_pid:
        return None
    sessions_dir = os.path.join(ctx.tiers.agent_dir(ctx.agent), "sessions")
    try:
        names = os.listdir(sessions_dir)
    except OSError:
        return None
    best: tuple[str, str] | None = None
    for name in names:
        if not name.endswith(".json"):
            continue
        record = presence.read_presence(ctx.tiers, ctx.agent, name[:-5])
        if record and record.get("host_pid") == host_pid:
            updated = str(record.get("updated") or "")
            if best is None or updated > best[0]:
                best = (updated, name[:-5])
    return best[1] if best else None


def _resume_target(ctx: _Context, current: tuple[str, str | None] | None) -> str:
    """The cos session owning the resumed native id; a new one linked to it when none does."""
    if current and ctx.native and current[1] == ctx.native:
        return current[0]
    found = _session_of_native(ctx, ingest=False)  # under the panel lock: a read, no spool
    if found is not None:
        ctx.log["resumed"] = found
        return found
    ctx.log["linked"] = "1"
    return _mint(ctx)


def _session_of_native(ctx: _Context, ingest: bool) -> str | None:
    """The cos session the index links to this payload's native id, if any."""
    if not ctx.native:
        return None
    storage = ctx.open_storage(ingest=ingest)
    if storage is None:
        return None
    from coding_os.storage.base import StorageError

    try:
        found = storage.session_by_native(ctx.agent, ctx.native)
    except StorageError as exc:
        ctx.db_failed(exc)
        return None
    return found.id if found is not None else None


def _fork_source(ctx: _Context, previous: str | None) -> str | None:
    """The cos session a fork came from: the payload's parent native id, else the panel's."""
    for key in ("forked_from_session_id", "parent_session_id", "source_session_id"):
        parent = ctx.payload.get(key)
        if isinstance(parent, str) and parent:
            storage = ctx.open_storage(ingest=False)
            if storage is not None:
                from coding_os.storage.base import StorageError

                try:
                    found = storage.session_by_native(ctx.agent, parent)
                except StorageError:
                    found = None
                if found is not None:
                    return found.id
    # A fork gets a new native id (so a new panel): the same agent process ran the source.
    return previous or _previous_of_host(ctx)


def _recover_orphan(ctx: _Context, current: tuple[str, str | None], reason: str,
                    panel: str | None = None) -> tuple[str, bool]:
    """Summarise a previous session (the panel's, by default) if it never got a summary.

    Returns the card saying so (for a panel's own orphan) and whether the session now has a
    summary. Never summarises from a spool that could not be moved into the database first:
    a summary is written once, so it must not miss observations.
    """
    previous, native = current
    storage = ctx.open_storage()
    if storage is None:
        return "", False
    from coding_os.state.summary import summarise
    from coding_os.storage.base import StorageError

    try:
        summary, new = summarise(storage, previous, ctx.agent, panel or ctx.panel, reason,
                                 native_id=native)
        if new:
            storage.touch_session(previous, summary.ended or ctx.ts, status="orphaned"
                                  if reason == "orphan" else "ended")
    except StorageError as exc:
        ctx.db_failed(exc)
        return "", False
    if not new:
        return "", True
    presence.write_presence(ctx.tiers, ctx.agent, previous,
                            {"status": "orphaned" if reason == "orphan" else "ended"})
    recovered = ctx.log.get("recovered")
    ctx.log["recovered"] = f"{recovered},{previous}" if recovered else previous
    if reason != "orphan" or panel is not None:
        return "", True
    files = ", ".join(summary.files[:10]) or "none"
    failed = f" ({summary.errors} failed)" if summary.errors else ""
    last = f' Last prompt: "{_excerpt(summary.last_prompt or "", 200)}".' if summary.last_prompt else ""
    return (f"[coding-os] The previous session of this panel ({previous}) ended without a "
            f"SessionEnd; its summary was recovered: {summary.prompts} prompts, "
            f"{summary.tool_calls} tool calls{failed}; files written: {files}.{last}"), True


def _retry_pending_orphan(ctx: _Context, session: str) -> None:
    """Summarise the orphan this session's SessionStart could not (see `_session_start`)."""
    record = presence.read_presence(ctx.tiers, ctx.agent, session) or {}
    pending = record.get("pending_orphan")
    if not isinstance(pending, str):
        return
    previous = presence.read_presence(ctx.tiers, ctx.agent, pending) or {}
    native = previous.get("native_id")
    _, done = _recover_orphan(ctx, (pending, native if isinstance(native, str) else None),
                              "orphan", panel=_string(previous.get("panel")) or ctx.panel)
    if done:
        presence.write_presence(ctx.tiers, ctx.agent, session, {"pending_orphan": None})


def _recover_dead_hosts(ctx: _Context, session: str) -> None:
    """Summarise this agent's sessions still marked active whose agent process is gone.

    A new `claude` gets a new native id, so a new panel: the panel rule above never sees the
    session an earlier, killed process left behind. Its presence names the process (`host_pid`,
    from the adapter's variable); a pid that no longer exists means the session is over.
    """
    spec = adapter(ctx.agent)
    if spec is None or spec.host_pid_env is None:
        return
    sessions_dir = os.path.join(ctx.tiers.agent_dir(ctx.agent), "sessions")
    host_ns = _host_namespace()
    try:
        names = os.listdir(sessions_dir)
    except OSError:
        return
    for name in names:
        other = name[:-5]
        if not name.endswith(".json") or other == session:
            continue
        record = presence.read_presence(ctx.tiers, ctx.agent, other)
        if not record or record.get("status") != "active" or not record.get("host_pid"):
            continue
        if record.get("host_ns") != host_ns:
            continue  # another machine, container or pid namespace: its pids mean nothing here
        try:
            os.kill(int(str(record["host_pid"])), 0)
            continue  # still running (or the pid was reused: then leave it alone)
        except ProcessLookupError:
            pass
        except (PermissionError, ValueError):
            continue
        panel = record.get("panel")
        native = record.get("native_id")
        _recover_orphan(ctx, (other, native if isinstance(native, str) else None), "orphan",
                        panel=panel if isinstance(panel, str) else None)
        if ctx.storage_failed:
            return  # one wait for the database is enough


def _session_end(ctx: _Context, session: str) -> None:
    storage = ctx.open_storage()
    reason = _string(ctx.payload.get("reason")) or "other"
    ctx.log["reason"] = reason
    if storage is not None:
        from coding_os.state.summary import summarise
        from coding_os.storage.base import StorageError

        try:
            _record_activity(ctx, storage, session, status="ended")
            summarise(storage, session, ctx.agent, ctx.panel, f"end:{reason}",
                      native_id=ctx.native)
        except StorageError as exc:
            ctx.db_failed(exc)
    presence.write_presence(ctx.tiers, ctx.agent, session, {"status": "ended", "ended": ctx.ts,
                                                            "end_reason": reason})


def _record_activity(ctx: _Context, storage: Storage, session: str, status: str | None) -> None:
    """Move the session's last activity forward; index it first if it was adopted."""
    from coding_os.storage.base import SessionRecord, StorageError

    try:
        if storage.session(session) is None:
            known = presence.read_presence(ctx.tiers, ctx.agent, session) or {}
            started = known.get("started")
            storage.upsert_session(SessionRecord(
                id=session, agent=ctx.agent, panel=ctx.panel, native_id=ctx.native,
                project=ctx.root, cwd=_string(known.get("cwd")),
                source=_string(known.get("source")) or "adopt",
                started=started if isinstance(started, str) else ctx.ts,
                last_active=ctx.ts, status=status or "active",
            ))
        else:
            storage.touch_session(session, ctx.ts, status=status)
    except StorageError as exc:
        ctx.db_failed(exc)


def _observe(ctx: _Context, log: dict[str, object]) -> dict[str, object] | None:
    """Fill the event's log fields; return the observation to spool, or None for none."""
    payload = ctx.payload
    event = ctx.event
    if event == "UserPromptSubmit":
        prompt = _string(payload.get("prompt")) or ""
        log["prompt_chars"] = len(prompt)
        return {"text": _excerpt(prompt, _EXCERPT),
                "data": {"prompt_id": _string(payload.get("prompt_id"))}}
    if event in ("PreToolUse", "PostToolUse"):
        tool = _string(payload.get("tool_name"))
        summary, paths = _tool_input_summary(tool, payload.get("tool_input"))
        log["tool"] = tool
        log["input"] = summary
        log["subagent"] = _string(payload.get("agent_id"))
        if event == "PreToolUse":
            return None
        ok = _tool_ok(payload.get("tool_response"))
        if not ok:
            log["ok"] = "false"
        return {"tool": tool, "text": summary,
                "data": {"paths": paths, "ok": ok,
                         "tool_use_id": _string(payload.get("tool_use_id"))}}
    if event == "Stop":
        message = _string(payload.get("last_assistant_message")) or ""
        return {"text": _excerpt(message, _EXCERPT)}
    if event in ("SubagentStart", "SubagentStop"):
        agent_id = _string(payload.get("agent_id"))
        agent_type = _string(payload.get("agent_type"))
        log["agent_id"] = agent_id
        log["agent_type"] = agent_type
        return {"data": {"agent_id": agent_id, "agent_type": agent_type}}
    if event == "PreCompact":
        log["trigger"] = _string(payload.get("trigger"))
        return {"data": {"trigger": _string(payload.get("trigger"))}}
    if event == "SessionStart":
        return {"data": {"source": log.get("source") or ctx.log.get("source")}}
    if event == "SessionEnd":
        return {"data": {"reason": _string(payload.get("reason"))}}
    if event not in HOOK_EVENTS:
        log["unknown_event"] = "1"
    return None


def _gate(ctx: _Context, session: str,
          log: dict[str, object]) -> tuple[HookResult | None, str | None]:
    """The policy gates' verdict on a tool call: a blocking result (or None to go on), and a
    warning for the agent when a gate could not check. Without a `gates:` section this costs
    a cached config read and imports nothing."""
    try:
        config = ctx.config()
    except InvalidInput as exc:
        # Whether gates are configured is unknown: fail open, and say so when it looks so.
        ctx.log["config_error"] = str(exc)
        if _config_mentions_gates(ctx.root):
            log["gates"] = "failed-open"
            return None, (f"coding-os gates could not be read ({exc}); this call was allowed "
                          f"unchecked. Fix .coding-os.yaml")
        return None, None
    section = config.get("gates")
    if section is None:
        return None, None
    from coding_os.state import gates

    verdict = gates.check(ctx, session, section, config, log)
    return verdict.blocked, verdict.warning


def _config_mentions_gates(root: str) -> bool:
    from coding_os.config import CONFIG_FILE

    try:
        with open(os.path.join(root, CONFIG_FILE), encoding="utf-8", errors="replace") as f:
            return "gates" in f.read(1 << 20)
    except OSError:
        return False


def _with_gate_warning(output: dict[str, object] | None, warning: str) -> dict[str, object]:
    """`output` with a gate's warning added as context the model reads (both clients show a
    PreToolUse `additionalContext` to the model) and as a message to the user."""
    merged = dict(output or {})
    specific = merged.get("hookSpecificOutput")
    specific = dict(specific) if isinstance(specific, dict) else {"hookEventName": "PreToolUse"}
    specific["additionalContext"] = warning
    merged["hookSpecificOutput"] = specific
    merged["systemMessage"] = warning
    return merged


def _attribute_mcp_call(ctx: _Context, session: str,
                        log: dict[str, object]) -> dict[str, object] | None:
    """For a call of one of cos's MCP tools, the PreToolUse output that adds the calling
    session as `agent_session` to its input (one MCP server serves many panels and cannot
    tell them apart itself); None for any other tool."""
    tool = _string(ctx.payload.get("tool_name"))
    if not tool or not (tool.startswith("mcp__") or "." in tool):
        return None  # no MCP tool: decided without importing anything
    from coding_os.adapters.mcp import MCP_SERVER_NAME

    # cos's tools as Claude Code names them (`mcp__<server>__<tool>`) and as Codex may.
    if not tool.startswith((f"mcp__{MCP_SERVER_NAME}__", f"{MCP_SERVER_NAME}.")):
        return None
    tool_input = ctx.payload.get("tool_input")
    updated = dict(tool_input) if isinstance(tool_input, dict) else {}
    updated["agent_session"] = session
    log["mcp_session"] = session
    # Codex applies updatedInput only with an allow decision (and Claude Code skips its own
    # prompt for the call then); cos's tools read local state or write the brain. A deny or
    # ask rule of the user's still wins over a hook's allow.
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                   "updatedInput": updated}}


# Automatic checkpoints (DESIGN.md §5): before a prompt's edits, before a tool call that may
# write, and at a turn's end (what changes after it, until the next checkpoint of the session,
# changed outside the session).
_CHECKPOINT_EVENTS = {"UserPromptSubmit": "prompt", "PreToolUse": "tool", "Stop": "turn-end"}


def _checkpoint(ctx: _Context, session: str, log: dict[str, object]) -> None:
    """Take the event's automatic checkpoint; a failure is logged, never fatal (fail open)."""
    from coding_os.adapters import WRITE_TOOLS

    payload = ctx.payload
    tool = _string(payload.get("tool_name"))
    if ctx.event == "PreToolUse" and tool not in WRITE_TOOLS:
        return
    try:
        config = ctx.config()
        section = config.get("checkpoints")
        if isinstance(section, dict) and section.get("auto") is False:
            return
        from coding_os.checkpoints.settings import Settings
        from coding_os.checkpoints.take import create
        from coding_os.git.repo import checkout_root
        from coding_os.state.root import checkout_dir

        settings = Settings(config)
        cwd = ctx.caller.cwd
        checkout = checkout_dir(ctx.caller.resolution, cwd,
                                ctx.env.get("HOME") or os.path.expanduser("~"))
        root = checkout_root(checkout) or os.path.realpath(checkout)
        paths = None
        if settings.mode == "tracked":
            if ctx.event != "PreToolUse" or tool not in (*FILE_TOOLS, *PATCH_TOOLS):
                return  # tracked covers what the edit tools name, before they write
            _, named = _tool_input_summary(tool, payload.get("tool_input"))
            inside = root.rstrip(os.sep) + os.sep
            paths = [p for p in (os.path.realpath(os.path.join(cwd, n)) for n in named)
                     if p.startswith(inside)]
            if not paths:
                return
        trigger = _CHECKPOINT_EVENTS[ctx.event]
        record = create(ctx.tiers, root, session=session, agent=ctx.agent, mode=settings.mode,
                        paths=paths, trigger=f"tool:{tool}" if trigger == "tool" else trigger,
                        prompt=_string(payload.get("prompt")), settings=settings)
    except (CosError, OSError, ValueError) as exc:
        log["checkpoint_error"] = " ".join(str(exc).split())[:300]
        return
    log["checkpoint"] = record["id"]
    if record.get("reused"):
        log["checkpoint_reused"] = "1"  # nothing changed since this session's latest one
    if record.get("pruned"):
        log["checkpoints_pruned"] = str(len(record["pruned"]))  # type: ignore[arg-type]


def _tool_input_summary(tool: str | None, tool_input: object) -> tuple[str | None, list[str]]:
    """A short text for a tool call's input, and the files it writes when it names them."""
    if isinstance(tool_input, str):
        return _excerpt(tool_input, 4000), _patch_paths(tool, tool_input)
    if not isinstance(tool_input, dict):
        return None, []
    path_key = FILE_TOOLS.get(tool or "")
    path = _string(tool_input.get(path_key)) if path_key else None
    paths = [path] if path else []
    for key in _INPUT_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return _excerpt(value, 4000), paths or _patch_paths(tool, value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return _excerpt(" ".join(value), 4000), paths
    from coding_os import jsonwire

    try:
        return _excerpt(jsonwire.dumps(tool_input), 500), paths
    except (TypeError, ValueError):
        return None, paths


def _patch_paths(tool: str | None, patch: str) -> list[str]:
    """The files a patch tool's input writes (none for another tool)."""
    return patch_files(patch) if tool in PATCH_TOOLS else []


def _tool_ok(response: object) -> bool:
    if isinstance(response, dict):
        if response.get("is_error") is True or response.get("success") is False:
            return False
        if response.get("interrupted") is True:
            return False
    return True


def _recovery_card(ctx: _Context, session: str) -> str:
    """The short card re-injected after compaction: rules and one state line."""
    gates: list[str] = []
    skills: list[str] = []
    try:
        names = sorted(os.listdir(ctx.panel_dir))
    except OSError:
        names = []
    for name in names:
        for prefix, bucket in ((".gate-", gates), (".skill-", skills)):
            if name.startswith(prefix) and ".tmp-" not in name:
                value = _trusted_value(ctx, name, session)
                if value is not None:
                    bucket.append(f"{name[len(prefix):]}:{value}" if value else name[len(prefix):])
    task = _trusted_value(ctx, ".task-current", session)
    return (
        f"[coding-os] Context was compacted; this is still session {session} "
        f"(agent {ctx.agent}, panel {ctx.panel}) and its state is kept.\n"
        "Rules: trust a state marker only through `cos state get NAME` (it checks the owner "
        "session and the age); never act on another panel's markers.\n"
        f"[Session State] gate={','.join(gates) or 'none'} task={task or 'none'} "
        f"skill={','.join(skills) or 'none'}"
    )


def _trusted_value(ctx: _Context, name: str, session: str) -> str | None:
    """The value of state file `name` when this session may trust it, else None."""
    path = ctx.tiers.state_path(ctx.agent, ctx.panel, name)
    if not os.path.lexists(path):
        return None
    from coding_os.config import horizon_for

    try:
        horizon = horizon_for(name, ctx.config())
    except InvalidInput as exc:
        ctx.log["config_error"] = str(exc)
        horizon = spec_for(name)[2]
    try:
        verdict = check_state(path, session, horizon, ctx.now)
    except (CosError, OSError) as exc:  # a directory or unreadable file in its place
        ctx.log[f"state_error{name}"] = " ".join(str(exc).split())[:200]
        return None
    return verdict.value if verdict.valid else None


def _clear_volatile(panel_dir: str) -> None:
    """Remove the panel's volatile markers (task, gates, skills, unknown names)."""
    try:
        names = os.listdir(panel_dir)
    except OSError:
        return
    for name in names:
        if name in ("session-id", "heartbeat") or ".tmp-" in name:
            continue
        if spec_for(name)[3]:
            try:
                os.unlink(os.path.join(panel_dir, name))
            except IsADirectoryError:
                continue
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise durable.io_error(os.path.join(panel_dir, name), exc) from None


class PanelLock:
    """An exclusive flock on the panel directory for the panel's read-modify-write steps.

    `cos gc --panels` takes the same lock before reaping, so a panel is never removed while a
    hook is writing into it; if it was reaped just before, the hook recreates it.
    """

    def __init__(self, panel_dir: str) -> None:
        self.panel_dir = panel_dir
        self.fd = -1

    def __enter__(self) -> PanelLock:
        for _ in range(5):
            try:
                fd = os.open(self.panel_dir, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                durable.ensure_dir(self.panel_dir)
                continue
            except OSError as exc:
                raise durable.io_error(self.panel_dir, exc) from None
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(self.panel_dir).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return self
            os.close(fd)  # reaped while we waited: take the new directory's lock
            durable.ensure_dir(self.panel_dir)
        raise durable.io_error(self.panel_dir, OSError(0, "panel directory keeps disappearing"))

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
