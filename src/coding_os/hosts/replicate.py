"""Replication of a project's session files to the shared storage (DESIGN.md §8).

What is pushed, per session, as streams of raw lines (`Storage.add_replica_lines`):
- "transcript": each cos-native transcript, `<state_dir>/<agent>/transcripts/<sid>.jsonl`;
- "events": each engine events log, `<state_dir>/<agent>/events/<sid>.jsonl` (runtime/events.py);
- "native": each Claude Code transcript, Codex rollout or Gemini CLI session file this host's
  importer found on its own disk and whose project is this one (`index.native_files`, which
  lists a session's main file only), under its session's index id;
- "subagent:<file>": each subagent file of such a Claude Code or Gemini CLI session, under the
  same id: `<file>` is its path relative to the folder of the session's file. Claude Code:
  `<native>/subagents/agent-<id>.jsonl` (2.1.x) or `agent-<id>.jsonl` beside the session,
  whose first line names it (2.0.x); the 2.1.x `agent-<id>.meta.json` is not replicated (a
  JSON object Claude Code rewrites, not a file of lines). Gemini CLI:
  `<native>/<subagent id>.jsonl`, `<native>` the session id of the main file's metadata line
  (adapters/gemini/sessions.py `subagent_files`).

What is pushed is found from this host's own state only, never from a path a row of the index
names: on a shared database any host may have written any row (DESIGN.md §8, §11). A file is
read only when it is a regular one, opened without following a final symlink and without
blocking; a FIFO or a device in its place is reported `unreadable`.

A line is the file's bytes up to its newline, exactly, whatever they hold; seq is the line number
from 1. A torn last line (no newline yet) is not pushed until it is complete. Each source starts
from the lines the storage already holds, so a run killed at any point resumes where it stopped
and a second run pushes nothing. Lines go in order, in batches, one transaction per batch.

Cheap when nothing changed: `<state_dir>/.replicate-state.json` keeps, per source, the file's
size, mtime and inode, the database pushed to (`Storage.location`) and the byte offset and line
count pushed; a file unchanged since it was pushed to this database is not opened and the storage
not asked. A changed file resumes after the lines the storage holds: the last
stored line must be the file's line of that number — read where the mark says it starts, or,
when the marks and the storage disagree (a run killed between a batch and the save, a lost state
file), found by counting lines from the start. A file that shrank below what was pushed, or
whose line no longer matches (rewritten), is removed from the storage (`remove_replica`) and
pushed again from line 1. (A rewrite that keeps that one line as it was, changing only earlier
ones, is not noticed: Claude Code and Codex append to their files, and so does cos.)

A session id whose lines another host already pushed is refused by the storage: the report lists
it in `refused`, and nothing of the other host's lines changes. It is listed once per change of
the file: a local copy left as it was (one materialised here from the other host's lines, see
hosts/materialize.py) is counted as unchanged from then on, neither read nor reported again.

A session resumed here from another host's lines (hosts/materialize.py) is moved to this
host (`Storage.move_session`) and its files adopted (`adopt`): the mark says the file's first N
lines are the N stored ones, their paths mapped to this checkout (the mark keeps a digest of the
stored last line and of the file's), so replication goes on at line N+1 instead of taking the
mapped copy for a rewrite. Lines of one replica may then hold the roots of several hosts.

Where it runs: `cos sync` (api.sync_sessions), after each index refresh when the storage is
shared (PostgreSQL): every `cos sessions`, `cos resume`, `cos import` that finds a change; and in
the background replicator the agents' hooks start (hosts/replicator.py), so a host's lines
reach the database with no further command. Runs at once (a command beside the replicator) are
safe: lines are stored by seq once, whoever pushes them. On SQLite (one host's own database)
`cos sync` replicates nothing and says so: there is no other host to read the lines.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, BinaryIO

from coding_os import durable
from coding_os.errors import StateIOError
from coding_os.hosts.identity import project_key, this_host
from coding_os.state.identity import is_session_id
from coding_os.state.tiers import RESERVED_DIRS, Tiers
from coding_os.storage.base import ReplicaSource, Storage, StorageError

__all__ = ["STATE_FILE", "BATCH_LINES", "BATCH_BYTES", "SUBAGENT", "SyncReport", "Source",
           "project_sources", "replicate", "sync", "replicate_source", "adopt"]

STATE_FILE = ".replicate-state.json"
BATCH_LINES = 2000
BATCH_BYTES = 4 << 20
_READ_BYTES = 1 << 20
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass
class Source:
    """One file of a session to replicate."""

    session: str
    stream: str  # "transcript", "events", "native" or "subagent:<file>"
    agent: str
    path: str


@dataclass
class SyncReport:
    """What one replication run pushed."""

    host: str = ""
    shared: bool = True
    sources: int = 0
    unchanged: int = 0
    lines: int = 0  # lines pushed (new in the storage)
    bytes: int = 0
    batches: int = 0
    restarted: list[str] = field(default_factory=list)  # "<stream>:<session>" started over
    refused: list[list[str]] = field(default_factory=list)  # [session, stream, why]
    unreadable: list[list[str]] = field(default_factory=list)  # [path, why]
    torn: list[str] = field(default_factory=list)  # files whose last line is not complete yet
    pushed: dict[str, int] = field(default_factory=dict)  # "<stream>:<session>" -> lines
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return asdict(self)


def _session_files(tiers: Tiers, folder_name: str) -> Iterator[tuple[str, str, str]]:
    """(agent, session, path) of every `<agent>/<folder_name>/<sid>.jsonl` of the state dir."""
    try:
        agents = sorted(os.listdir(tiers.state_dir))
    except OSError:
        return
    for agent in agents:
        if agent.startswith(".") or agent in RESERVED_DIRS:
            continue
        folder = os.path.join(tiers.state_dir, agent, folder_name)
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            session = name[:-len(".jsonl")]
            if name.endswith(".jsonl") and is_session_id(session):
                yield agent, session, os.path.join(folder, name)


def project_sources(tiers: Tiers, root: str | None) -> list[Source]:
    """Every file of the project to replicate, found from this host's own state only: its cos
    transcripts and events logs, and the Claude Code / Codex / Gemini CLI files its importer
    found on its own disk (`index.native_files`) whose project is `root`, with their subagents'
    files. Never a path an index row names: on a shared database any host may have written
    it."""
    from coding_os.sessions.index import native_files

    found = [Source(session, "transcript", agent, path)
             for agent, session, path in _session_files(tiers, "transcripts")]
    found += [Source(session, "events", agent, path)
              for agent, session, path in _session_files(tiers, "events")]
    if root is not None:
        from coding_os.adapters.claude.transcripts import subagent_files
        from coding_os.adapters.gemini.sessions import subagent_files as gemini_subagent_files

        siblings: dict[str, dict[str, list[str]]] = {}
        for path, (session, agent, project) in sorted(native_files(tiers).items()):
            if session is None or project != root:
                continue
            found.append(Source(session, "native", agent, path))
            if agent == "claude":
                found += [Source(session, SUBAGENT + name, agent, sub)
                          for name, sub in subagent_files(path, siblings)]
            elif agent == "gemini":
                found += [Source(session, SUBAGENT + name, agent, sub)
                          for name, sub in gemini_subagent_files(path)]
    return found


SUBAGENT = "subagent:"  # the stream of a subagent transcript: SUBAGENT + its name


def _load_marks(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_marks(path: str, marks: dict[str, dict[str, Any]]) -> None:
    durable.atomic_write(path, json.dumps(marks, separators=(",", ":"),
                                          ensure_ascii=False).encode("utf-8"), sync=False)


def replicate(storage: Storage, tiers: Tiers, root: str | None = None,
              host: str | None = None, sources: list[Source] | None = None) -> SyncReport:
    """Push the new lines of every file of the project (`project_sources`, or `sources`).

    Raises:
        StorageError: the storage cannot be read or written (what was pushed before stays).
        StateIOError: the marks cannot be saved.
        InvalidInput: COS_HOST is not a valid host name.
    """
    host = host or this_host()
    report = SyncReport(host=host, shared=storage.shared)
    files = sources if sources is not None else project_sources(tiers, root)
    keys: list[str | None] = []

    def key() -> str | None:  # git is asked only when some file has lines to push
        if not keys:
            keys.append(project_key(root) if root is not None else None)
        return keys[0]

    marks_path = os.path.join(tiers.state_dir, STATE_FILE)
    marks = _load_marks(marks_path)
    before = json.dumps(marks, sort_keys=True)
    try:
        for source in files:
            report.sources += 1
            replicate_source(storage, source, host, key, root, marks, report)
    finally:
        if json.dumps(marks, sort_keys=True) != before:
            try:
                durable.ensure_dir(tiers.state_dir)
                _save_marks(marks_path, marks)
            except StateIOError:
                pass  # the marks only save work: the storage holds the truth
    return report


def sync(storage: Storage, tiers: Tiers, root: str | None, host: str) -> SyncReport:
    """`cos sync`: push the new lines of the project's session files to a shared `storage`
    (as `replicate`); on this host's own database (SQLite) nothing is pushed, and the report
    says why.

    Raises:
        StorageError, StateIOError: as `replicate`.
    """
    if not storage.shared:
        return SyncReport(host=host, shared=False,
                          message="the database is this host's SQLite: nothing to replicate to "
                                  "(set COS_DATABASE_URL to a shared PostgreSQL)")
    return replicate(storage, tiers, root, host=host)


def replicate_source(storage: Storage, source: Source, host: str,
                     key: Callable[[], str | None], root: str | None,
                     marks: dict[str, dict[str, Any]], report: SyncReport) -> None:
    """Push the new complete lines of one file, moving its mark in `marks` (`key` gives the
    project's identity, asked only when there is something to push).

    Raises:
        StorageError: the storage cannot be read or written (other than a refusal, which is
            reported).
    """
    name = f"{source.stream}:{source.session}"
    try:
        st = os.stat(source.path)
    except OSError as exc:
        report.unreadable.append([source.path, exc.strerror or type(exc).__name__])
        return
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device is never opened: it would block
        report.unreadable.append([source.path, "not a regular file"])
        return
    mark = marks.get(name)
    stat_now = [st.st_size, st.st_mtime_ns, st.st_ino]
    if isinstance(mark, dict) and mark.get("path") == source.path and \
            mark.get("stat") == stat_now and mark.get("host") == host and \
            mark.get("storage") == storage.location:
        report.unchanged += 1
        if mark.get("torn"):
            report.torn.append(source.path)
        return
    stored = storage.replica_source(source.session, source.stream)
    if stored is not None and stored.host != host:
        _refused(source, host, storage, stat_now, marks, report,
                 f"session {source.session} is replicated from host {stored.host}")
        return
    done = stored.lines if stored is not None else 0
    replica = ReplicaSource(session=source.session, stream=source.stream, host=host,
                            agent=source.agent, path=source.path, project_key=key(), root=root)
    try:
        f = _open_regular(source.path)
    except OSError as exc:
        report.unreadable.append([source.path, exc.strerror or type(exc).__name__])
        return
    with f:
        resume = _resume_offset(storage, source, f, st.st_ino, st.st_size, mark, done)
        if resume is None:  # rewritten or shrunk: start over
            storage.remove_replica(source.session, source.stream)
            report.restarted.append(name)
            done, resume = 0, (0, 0)
        try:
            torn = _push_lines(storage, replica, f, *resume, done, report, marks, name,
                               stat_now)
        except StorageError as exc:
            if "is replicated from host" not in str(exc):
                raise
            _refused(source, host, storage, stat_now, marks, report, str(exc))
            return
    if torn:
        report.torn.append(source.path)


def _open_regular(path: str) -> BinaryIO:
    """The regular file at `path`, opened to read without following a final symlink and
    without blocking (a FIFO put in its place never stalls the run).

    Raises:
        OSError: it cannot be opened, or it is not a regular file (a symlink, a FIFO, a device).
    """
    import errno

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _O_NOFOLLOW | _O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _refused(source: Source, host: str, storage: Storage, stat_now: list[int],
             marks: dict[str, dict[str, Any]], report: SyncReport, why: str) -> None:
    """Report a file whose session another host replicates, and mark it: while it stays as it
    is (e.g. a copy materialised here from that host's lines) it is not reported again."""
    report.refused.append([source.session, source.stream, why])
    marks[f"{source.stream}:{source.session}"] = {
        "path": source.path, "host": host, "storage": storage.location, "stat": stat_now,
        "refused": why}


def _resume_offset(storage: Storage, source: Source, f: Any, inode: int, size: int,
                   mark: object, done: int) -> tuple[int, int] | None:
    """The byte offset after the `done` lines already stored and where the last of them starts,
    the file positioned there; None when the file no longer holds them (shrunk or rewritten):
    the last stored line must be the file's line `done`, found through the mark or by counting
    lines from the start."""
    if done == 0:
        return 0, 0
    last_stored = storage.replica_lines(source.session, source.stream, after=done - 1, limit=1)
    if not last_stored:
        return None
    stored = last_stored[0][1]
    if isinstance(mark, dict) and mark.get("path") == source.path and \
            mark.get("lines") == done and mark.get("inode") == inode and \
            isinstance(mark.get("offset"), int) and isinstance(mark.get("last"), int) and \
            0 <= mark["last"] < mark["offset"] <= size:
        f.seek(mark["last"])
        if _same_line(mark, stored, f.read(mark["offset"] - mark["last"])):
            return int(mark["offset"]), int(mark["last"])
        f.seek(0)
    offset, count, last_start = 0, 0, 0
    pending = b""
    while count < done:
        chunk = f.read(_READ_BYTES)
        if not chunk:
            return None
        pending += chunk
        start = 0
        while count < done:
            end = pending.find(b"\n", start)
            if end < 0:
                break
            last_start = offset + start
            count += 1
            start = end + 1
        offset += start
        pending = pending[start:]
    f.seek(last_start)
    if not _same_line(mark, stored, f.read(offset - last_start)):
        return None
    return offset, last_start


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _same_line(mark: object, stored: bytes, local: bytes) -> bool:
    """Whether the file's line `local` (with its newline) is the stored line `stored`: the same
    bytes, or the pair a materialised copy recorded (its paths mapped, see `adopt`)."""
    if local == stored + b"\n":
        return True
    mapped = mark.get("mapped") if isinstance(mark, dict) else None
    return isinstance(mapped, list) and mapped == [_digest(stored), _digest(local)]


def adopt(storage: Storage, tiers: Tiers, source: Source, host: str, lines: int, offset: int,
          last: int) -> None:
    """Record that the file of `source` holds, as its first `lines` lines (`offset` bytes, the
    last line starting at `last`), the `lines` stored lines of its session's stream, their
    paths possibly mapped (a copy materialised from the replica): replication goes on at line
    `lines` + 1, its mark saved in the state dir. Nothing is recorded for a file that is not
    there or no longer starts as said.

    Raises:
        StorageError: the storage cannot be read.
    """
    name = f"{source.stream}:{source.session}"
    stored = storage.replica_lines(source.session, source.stream, after=lines - 1, limit=1) \
        if lines > 0 else []
    try:
        with _open_regular(source.path) as f:
            st = os.fstat(f.fileno())
            f.seek(last)
            local = f.read(offset - last)
    except OSError:
        return
    if lines > 0 and (not stored or stored[0][0] != lines or not local.endswith(b"\n")):
        return
    mark: dict[str, Any] = {
        "path": source.path, "host": host, "storage": storage.location, "inode": st.st_ino,
        "offset": offset, "last": last, "lines": lines,
        "stat": [st.st_size, st.st_mtime_ns, st.st_ino] if st.st_size == offset else None,
        "torn": False}
    if stored and local != stored[0][1] + b"\n":
        mark["mapped"] = [_digest(stored[0][1]), _digest(local)]
    marks_path = os.path.join(tiers.state_dir, STATE_FILE)
    marks = _load_marks(marks_path)
    marks[name] = mark
    try:
        durable.ensure_dir(tiers.state_dir)
        _save_marks(marks_path, marks)
    except StateIOError:
        pass  # the marks only save work


def _push_lines(storage: Storage, replica: ReplicaSource, f: Any, offset: int, last: int,
                done: int, report: SyncReport, marks: dict[str, dict[str, Any]], name: str,
                stat_now: list[int]) -> bool:
    """Push the complete lines from `offset` on (`last`: where the last line stored starts),
    numbered after `done`, batch by batch; True when a torn last line was left for later."""
    f.seek(offset)
    batch: list[tuple[int, bytes]] = []
    batch_bytes = 0
    pending = b""
    base = offset  # the file offset of pending[0]
    seq = done
    old = marks.get(name)
    mapped = old.get("mapped") if isinstance(old, dict) and old.get("lines") == done else None

    def flush() -> None:
        nonlocal batch, batch_bytes
        if batch:
            added = storage.add_replica_lines(replica, batch)
            report.lines += added
            report.bytes += batch_bytes
            report.batches += 1
            report.pushed[name] = report.pushed.get(name, 0) + added
        marks[name] = {"path": replica.path, "host": replica.host,
                       "storage": storage.location, "inode": stat_now[2],
                       "offset": offset, "last": last, "lines": seq, "stat": None}
        if seq == done and mapped is not None:  # the last line is still the mapped copy's
            marks[name]["mapped"] = mapped
        batch, batch_bytes = [], 0

    while True:
        chunk = f.read(_READ_BYTES)
        if not chunk:
            break
        pending += chunk
        start = 0
        while True:
            end = pending.find(b"\n", start)
            if end < 0:
                break
            seq += 1
            last = base + start
            line = pending[start:end]
            batch.append((seq, line))
            batch_bytes += len(line) + 1
            start = end + 1
            if len(batch) >= BATCH_LINES or batch_bytes >= BATCH_BYTES:
                offset += batch_bytes
                flush()
        base += start
        pending = pending[start:]
    offset += batch_bytes
    flush()
    torn = bool(pending)
    # The file as read: unchanged next time means nothing to read (a torn tail stays torn).
    end = offset + len(pending)
    marks[name]["stat"] = stat_now if end == stat_now[0] else None
    marks[name]["torn"] = torn
    return torn
