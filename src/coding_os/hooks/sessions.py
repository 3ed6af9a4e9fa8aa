"""The panel lifecycle of DESIGN.md §3.6 as the hooks drive it: SessionStart by its source (mint,
keep, resume, clear, fork), the binding of a panel to its session, adoption of a panel without
one, the recovery card at compaction, orphans summarised at the next start, Stop and SessionEnd.

The panel's files are decided under the panel lock (`session_start`, `adopt`); the database work
(the index, orphan summaries) runs after it is released, with the hook's short lock wait: a
database failure is logged and never fails the hook.
"""

from __future__ import annotations

import os
import sys

from coding_os import durable
from coding_os.adapters import adapter
from coding_os.hooks.context import HookContext, excerpt, string
from coding_os.state import presence
from coding_os.state.identity import mint_session_id
from coding_os.state.tiers import spec_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.storage.base import Storage

__all__ = ["SESSION_SOURCES", "Start", "session_start", "after_session_start", "adopt",
           "record_activity", "retry_pending_orphan", "session_end", "replicate_soon"]

SESSION_SOURCES = ("startup", "resume", "clear", "compact", "fork")


class Start:
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


def session_start(ctx: HookContext, current: tuple[str, str | None] | None) -> Start:
    """SessionStart by source, under the panel lock: decide and commit the panel's session.

    The new binding is committed first (presence, then the session-id file) and only then are
    the volatile markers cleared, so a failure (a full disk) leaves the panel on its old session
    or wholly on the new one, never between. Summarising the previous session and indexing the
    new one happen after the lock is released (`after_session_start`).
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
        # A native session cos's engine started, or a rewind handed over (sessions/
        # conversation.py), has its id filed before the agent's first hook: the hooks bind that
        # cos session (it knows where it was forked from) rather than make a second one.
        engine_made = _session_of_native(ctx, ingest=False, made_by=("engine", "rewind")) \
            if source in ("startup", "fork") else None
        if engine_made is not None:
            ctx.log["linked"] = engine_made
        elif source == "fork":
            fields["forked_from"] = _fork_source(ctx, previous)
        session = engine_made or _mint(ctx)
    record, known = _bind_session(ctx, session, source=source, fields=fields)
    if starts_fresh:
        _clear_volatile(ctx.panel_dir)
    replaced = current if starts_fresh and current is not None and previous != session else None
    return Start(session, source, context, replaced, record, known)


def after_session_start(ctx: HookContext, start: Start) -> str:
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


def _mcp_note(ctx: HookContext) -> str | None:
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


def adopt(ctx: HookContext) -> str:
    """A hook on a panel without a session (hooks installed mid-session, a missed SessionStart,
    a panel reaped by `cos gc`): rebind the cos session that owns the native id, else mint."""
    session = _session_of_native(ctx, ingest=False)
    ctx.log["adopted"] = "1"
    if session is None:
        session = _mint(ctx)
    _bind_session(ctx, session, source="adopt", fields={})
    return session


def _mint(ctx: HookContext) -> str:
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


def _bind_session(ctx: HookContext, session: str, source: str,
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
        "cwd": string(ctx.payload.get("cwd")) or os.getcwd(),
        "transcript_path": string(ctx.payload.get("transcript_path")),
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


def _index_session(ctx: HookContext, storage: Storage, session: str, record: dict[str, object],
                   known: dict[str, object] | None) -> None:
    from coding_os.storage.base import SessionRecord, StorageError

    started = (known or record).get("started")
    try:
        storage.upsert_session(SessionRecord(
            id=session, agent=ctx.agent, panel=ctx.panel, native_id=ctx.native,
            project=ctx.root, cwd=string(record.get("cwd")),
            source=string((known or record).get("source")),
            forked_from=string(record.get("forked_from") or (known or {}).get("forked_from")),
            cleared_from=string(record.get("cleared_from") or (known or {}).get("cleared_from")),
            started=started if isinstance(started, str) else ctx.ts,
            last_active=ctx.ts, status="active",
        ))
    except StorageError as exc:
        ctx.db_failed(exc)


def _host_pid(ctx: HookContext) -> str | None:
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


def _previous_of_host(ctx: HookContext) -> str | None:
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


def _resume_target(ctx: HookContext, current: tuple[str, str | None] | None) -> str:
    """The cos session owning the resumed native id; a new one linked to it when none does."""
    if current and ctx.native and current[1] == ctx.native:
        return current[0]
    found = _session_of_native(ctx, ingest=False)  # under the panel lock: a read, no spool
    if found is not None:
        ctx.log["resumed"] = found
        return found
    ctx.log["linked"] = "1"
    return _mint(ctx)


def _session_of_native(ctx: HookContext, ingest: bool,
                       made_by: tuple[str, ...] | None = None) -> str | None:
    """The cos session the index links to this payload's native id, if any (and only one
    whose row was made by one of `made_by`, when given)."""
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
    if found is None or (made_by is not None and found.source not in made_by):
        return None
    return found.id


def _fork_source(ctx: HookContext, previous: str | None) -> str | None:
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


def _recover_orphan(ctx: HookContext, current: tuple[str, str | None], reason: str,
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
    from coding_os.state.summary import summarize
    from coding_os.storage.base import StorageError

    try:
        summary, new = summarize(storage, previous, ctx.agent, panel or ctx.panel, reason,
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
    last = f' Last prompt: "{excerpt(summary.last_prompt or "", 200)}".' if summary.last_prompt else ""
    return (f"[coding-os] The previous session of this panel ({previous}) ended without a "
            f"SessionEnd; its summary was recovered: {summary.prompts} prompts, "
            f"{summary.tool_calls} tool calls{failed}; files written: {files}.{last}"), True


def retry_pending_orphan(ctx: HookContext, session: str) -> None:
    """Summarise the orphan this session's SessionStart could not (see `session_start`)."""
    record = presence.read_presence(ctx.tiers, ctx.agent, session) or {}
    pending = record.get("pending_orphan")
    if not isinstance(pending, str):
        return
    previous = presence.read_presence(ctx.tiers, ctx.agent, pending) or {}
    native = previous.get("native_id")
    _, done = _recover_orphan(ctx, (pending, native if isinstance(native, str) else None),
                              "orphan", panel=string(previous.get("panel")) or ctx.panel)
    if done:
        presence.write_presence(ctx.tiers, ctx.agent, session, {"pending_orphan": None})


def _recover_dead_hosts(ctx: HookContext, session: str) -> None:
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


def session_end(ctx: HookContext, session: str) -> None:
    storage = ctx.open_storage()
    reason = string(ctx.payload.get("reason")) or "other"
    ctx.log["reason"] = reason
    if storage is not None:
        from coding_os.state.summary import summarize
        from coding_os.storage.base import StorageError

        try:
            record_activity(ctx, storage, session, status="ended")
            summarize(storage, session, ctx.agent, ctx.panel, f"end:{reason}",
                      native_id=ctx.native)
        except StorageError as exc:
            ctx.db_failed(exc)
    presence.write_presence(ctx.tiers, ctx.agent, session, {"status": "ended", "ended": ctx.ts,
                                                            "end_reason": reason})


def record_activity(ctx: HookContext, storage: Storage, session: str, status: str | None) -> None:
    """Move the session's last activity forward; index it first if it was adopted."""
    from coding_os.storage.base import SessionRecord, StorageError

    try:
        if storage.session(session) is None:
            known = presence.read_presence(ctx.tiers, ctx.agent, session) or {}
            started = known.get("started")
            storage.upsert_session(SessionRecord(
                id=session, agent=ctx.agent, panel=ctx.panel, native_id=ctx.native,
                project=ctx.root, cwd=string(known.get("cwd")),
                source=string(known.get("source")) or "adopt",
                started=started if isinstance(started, str) else ctx.ts,
                last_active=ctx.ts, status=status or "active",
            ))
        else:
            storage.touch_session(session, ctx.ts, status=status)
    except StorageError as exc:
        ctx.db_failed(exc)


def _recovery_card(ctx: HookContext, session: str) -> str:
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
                value = ctx.trusted_value(name, session)
                if value is not None:
                    bucket.append(f"{name[len(prefix):]}:{value}" if value else name[len(prefix):])
    task = ctx.trusted_value(".task-current", session)
    return (
        f"[coding-os] Context was compacted; this is still session {session} "
        f"(agent {ctx.agent}, panel {ctx.panel}) and its state is kept.\n"
        "Rules: trust a state marker only through `cos state get NAME` (it checks the owner "
        "session and the age); never act on another panel's markers.\n"
        f"[Session State] gate={','.join(gates) or 'none'} task={task or 'none'} "
        f"skill={','.join(skills) or 'none'}"
    )


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


# The background replicator's program: the interpreter isolated (-I: neither the checkout nor
# PYTHON* variables on its path) and given this process's own import path.
_REPLICATOR = ("import sys; sys.path[:] = {path!r}; "
               "from coding_os.hosts.replicator import main; raise SystemExit(main())")


def replicate_soon(ctx: HookContext) -> None:
    """On a shared PostgreSQL, hand what the agent wrote over to the project's background
    replicator (hosts/replicator.py): a request appended to its request file and, when none
    holds its lock, a detached replicator started. Never waits for it, imports nothing for it;
    a failure is logged (`replicator_error`), never raised. Does nothing on SQLite."""
    url = ctx.env.get("COS_DATABASE_URL") or ""
    if not url.startswith(("postgresql://", "postgres://")) or not ctx.root:
        return
    import fcntl

    tiers = ctx.tiers
    try:
        fd = durable.open_private(tiers.replication_requests, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)
        fd = durable.open_private(tiers.replication_lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a replicator runs: it looks at the requests before it stops
        finally:
            os.close(fd)  # a lock taken here goes with it
        if not sys.executable:
            raise OSError("no Python interpreter to start the replicator with")
        path = [p for p in sys.path if os.path.isabs(p)]
        devnull = os.devnull
        # Started through a shell that puts it in the background and ends at once: the
        # replicator is nobody's child (no zombie in a process that calls hooks in-process,
        # nothing left for the hook to wait for) and the hook waits for the shell alone.
        starter = os.posix_spawn("/bin/sh", [
            "/bin/sh", "-c", '"$@" &', "sh", sys.executable, "-I", "-S", "-c",
            _REPLICATOR.format(path=path), ctx.root], dict(ctx.env), setsid=True,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                          (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                          (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0)])
        os.waitpid(starter, 0)
        ctx.log["replicator"] = "started"
    except OSError as exc:
        ctx.log["replicator_error"] = exc.strerror or str(exc)
