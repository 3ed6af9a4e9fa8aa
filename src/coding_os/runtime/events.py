"""The events log of a session (DESIGN.md §6, §7): `<agent>/events/<sid>.jsonl`, append only.

Each line is one event in the envelope of the protocol, with the format version and the time:

    {"v":1,"seq":1,"ts":"2026-11-29T16:20:00.123Z","session":"ses-…","id":null,
     "msg":{"type":"agent_message","text":"…"}}

`id` is the client submission the event answers (null when none), `msg` the event: its `type` (one
of runtime/wire.py's) and that type's fields. `seq` starts at 1 and is dense and strictly
increasing per session, so a client that has seen nothing resumes with `last_seq` 0.

The file is a numbered log (`coding_os.log`, which transcripts share): this module says what
its lines hold and which are valid.

Writer. `EventLog` keeps the file open; each `append` takes an exclusive `flock` on it, notices
lines another process wrote since (the file grew), numbers the event after the last line, writes
it with one write and, as the durability mode asks, fsyncs — then returns. Writers in any number of
processes get unique, dense seqs and never interleave a line. Opening, and an append that finds
the file changed, read the last seq from the tail only. A torn last line (a writer killed
mid-append) is copied to `<sid>.jsonl.torn` and cut off before the next line is written: nothing
is silently dropped.

Reader. `replay` (and `read_since`) give the events with seq > K. Seqs being dense and ordered,
it bisects over byte offsets to the first line after K and reads on from there: catch-up costs
the events missed, not the whole log. It notes the file's length under a shared lock (so it sees
whole appends only), never yields a torn last line, and reports it with any line it skips.
"""

from __future__ import annotations

import fcntl
import os
import threading

from coding_os import durable, jsonwire, log
from coding_os.clock import utc_now
from coding_os.errors import Conflict, InvalidInput, NotFound, StateIOError
from coding_os.log import (
    BLANK_LINE,
    DEFAULT_DURABILITY,
    DURABILITY_MODES,
    NOT_JSON,
    SEQ_GAP,
    SEQ_ORDER,
    TORN_TAIL,
    Problem,
    check_durability,
    prefix_seq,
)
from coding_os.runtime.wire import FORMAT_VERSION, TASK_ENDS, EventType, event_problem
from coding_os.sessions.transcript import session_agent
from coding_os.state.identity import is_session_id, validate_session_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import TracebackType
    from typing import Any, BinaryIO, TypeAlias

    from coding_os.state.tiers import Tiers

    Event: TypeAlias = dict[str, Any]

__all__ = [
    "FORMAT_VERSION",
    "FIRST_SEQ",
    "DURABILITY_MODES",
    "DEFAULT_DURABILITY",
    "TORN_TAIL",
    "BLANK_LINE",
    "NOT_JSON",
    "INVALID_EVENT",
    "SEQ_GAP",
    "SEQ_ORDER",
    "EventLog",
    "Problem",
    "ReplayReport",
    "Replayed",
    "events_path",
    "lease_path",
    "Lease",
    "take_lease",
    "replay",
    "read_since",
    "last_seq",
]

FIRST_SEQ = 1

# The events of §7, their fields and their checks are runtime/wire.py's (`event_problem`);
# fields beside a type's are kept (readers ignore what they do not know).

# Durability, as the transcript's (DURABILITY_MODES): "event" fsyncs after every event, "turn"
# after the events that end a task (wire.TASK_ENDS), "none" never. In every mode the line is in
# the file (the page cache) when `append` returns, so it outlives the process that wrote it; the
# mode decides what outlives the machine.

# Problem kinds a ReplayReport lists: the transcript's (torn tail, blank line, not JSON, seq gap
# and order) and this one.
INVALID_EVENT = "invalid_event"

_HEAD = 40  # enough bytes of a line for its prefix and seq


def events_path(tiers: Tiers, session: str) -> str:
    """Where the events log of `session` lives: `<state_dir>/<agent>/events/<sid>.jsonl`.

    Raises:
        InvalidId: `session` is not a valid session id.
    """
    return tiers.events_path(session_agent(session), session)


def lease_path(tiers: Tiers, session: str) -> str:
    """The lock file of the process serving `session`, beside its events log: `<sid>.lock`.

    Raises:
        InvalidId: `session` is not a valid session id.
    """
    return events_path(tiers, session).removesuffix(".jsonl") + ".lock"


class Lease:
    """The right to serve one session (drive its backend, write its events): an exclusive
    `flock` on its lock file, held by one open file of one process until `release`, or until
    the process ends (the kernel drops the lock of a killed process at once)."""

    __slots__ = ("path", "session", "_fd")

    def __init__(self, path: str, session: str, fd: int) -> None:
        self.path = path
        self.session = session
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Give the session up (idempotent); the lock file stays, empty of meaning."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # closing the only descriptor of the open file drops its lock


def take_lease(tiers: Tiers, session: str) -> Lease:
    """Take the lease of `session` for this process: only the holder serves it. The lock file
    (0600, created when missing) gets this process's pid, for the message of the next one.
    Reading a session's log (replay, the source of a fork, export) takes none.

    Raises:
        InvalidId: not a session id.
        Conflict: another process holds it ("being served by another process (pid N)").
        StateIOError: the lock file cannot be made or opened (a symlink, not a regular file).
    """
    path = lease_path(tiers, session)
    durable.ensure_dir(os.path.dirname(path))
    try:
        fd = durable.open_regular(path, os.O_RDWR | os.O_CREAT)
    except FileNotFoundError as exc:  # its directory went away meanwhile
        raise durable.io_error(path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise Conflict(f"session {session} is being served by another process{pid}") \
                from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except OSError as exc:
        os.close(fd)
        raise durable.io_error(path, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return Lease(path, session, fd)


# ---------------------------------------------------------------------------------------------
# Validation and encoding


def _event_problem(event: object) -> str | None:
    """What keeps `event` (a parsed line) from being a stored event, or None."""
    if not isinstance(event, dict):
        return f"a line must be a JSON object, not {type(event).__name__}"
    if event.get("v") != FORMAT_VERSION or type(event.get("v")) is not int:
        return f"unsupported format version {str(event.get('v'))[:20]!r}"
    seq = event.get("seq")
    if not (isinstance(seq, int) and not isinstance(seq, bool) and seq >= FIRST_SEQ):
        return f"seq must be an integer >= {FIRST_SEQ}"
    if not isinstance(event.get("ts"), str):
        return "ts must be a string"
    if not is_session_id(event.get("session")):
        return "session must be a session id"
    if event.get("id") is not None and not isinstance(event.get("id"), str):
        return "id must be a string or null"
    return event_problem(event.get("msg"))


def _encode_msg(event_type: str, fields: Mapping[str, object] | None) -> tuple[str, Event]:
    """The event's `msg` as JSON, and as a dict, validated.

    Raises:
        InvalidInput: fields that are not a mapping, unknown type, `type` among the fields, a
            missing or mistyped field, or a value JSON cannot hold.
    """
    try:
        fields = dict(fields or {})
    except (TypeError, ValueError):
        raise InvalidInput(f"{str(event_type)[:40]}: the fields must be a mapping, not "
                           f"{type(fields).__name__}") from None
    if "type" in fields:
        raise InvalidInput(f"{str(event_type)[:40]}: field 'type' is the event type, "
                           "not a field")
    msg: Event = {"type": event_type, **fields}
    problem = event_problem(msg)
    if problem:
        raise InvalidInput(problem)
    try:
        text = jsonwire.dumps(msg)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{event_type}: a field is not JSON: {exc}") from None
    return text, msg


def _line(seq: int, ts: str, session: str, reply_to: str | None, msg: str) -> bytes:
    # The head is always first and in this order: a reader finds a line's seq in its prefix.
    reply = "null" if reply_to is None else jsonwire.dumps(reply_to)
    return (f'{{"v":1,"seq":{seq},"ts":"{ts}","session":"{session}","id":{reply},'
            f'"msg":{msg}}}\n').encode("ascii")


# ---------------------------------------------------------------------------------------------
# Writing


class EventLog:
    """The events log of one session, open for appending. Not for use after `close`.

    One object may be shared by the threads of a process; any number of processes may each
    hold their own on the same session.
    """

    __slots__ = ("path", "session", "durability", "torn_bytes", "_fd", "_size", "_next",
                 "_unsynced", "_mutex")

    def __init__(self, path: str, session: str, *,
                 durability: str = DEFAULT_DURABILITY) -> None:
        """Open (or create) the log at `path` for `session` and find where it continues.

        Raises:
            InvalidId: `session` is not a session id.
            InvalidInput: a bad durability.
            StateIOError: the log cannot be created, opened or repaired; it is a symlink or not
                a regular file.
        """
        validate_session_id(session)
        check_durability(durability)
        self.path = path
        self.session = session
        self.durability = durability
        self.torn_bytes = 0  # bytes of torn lines this log moved to `<path>.torn`
        self._size = -1  # length of the file after this log's last look at it
        self._next = FIRST_SEQ
        self._unsynced = False
        self._mutex = threading.Lock()
        durable.ensure_dir(os.path.dirname(path))
        self._fd = log.open_append(path, create=True, what="events log")
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                self._settle()
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        except OSError as exc:
            os.close(self._fd)
            raise durable.io_error(path, exc) from None
        except BaseException:
            os.close(self._fd)
            raise

    @classmethod
    def open(cls, tiers: Tiers, session: str, *,
             durability: str = DEFAULT_DURABILITY) -> EventLog:
        """The events log of `session` in `tiers`, open for appending (created when missing).

        Raises:
            As `EventLog`.
        """
        return cls(events_path(tiers, session), session, durability=durability)

    @property
    def last_seq(self) -> int:
        """The seq of the last event in the log as this writer last saw it (0: none yet)."""
        return self._next - 1

    def _settle(self) -> None:
        """Under the exclusive lock: when the file changed since this log last looked (another
        writer, a crash), find the next seq from its tail and set a torn last line aside."""
        size = os.fstat(self._fd).st_size
        if size == self._size:
            return
        found, whole = log.continue_from(self._fd, size, _event_problem, FIRST_SEQ)
        assert found is not None
        self._next = found
        if whole < size:
            # Kept whole in the log until it is safe aside.
            self.torn_bytes += log.cut_torn(self.path, self._fd, whole, size)
        self._size = whole

    def append(self, event_type: EventType, fields: Mapping[str, object] | None = None, *,
               reply_to: str | None = None) -> Event:
        """Number `event_type` with `fields` as the next event, write it, and return it as
        stored: `{"v", "seq", "ts", "session", "id", "msg": {"type", …fields}}`.

        When it returns, the line is in the file (and on disk, as the durability mode says):
        only then may the event be sent to a client. `reply_to` is the submission it answers.

        Raises:
            InvalidInput: fields that are not a mapping, unknown type, a missing or mistyped
                field, a value JSON cannot hold, a `reply_to` that is not a string.
            StateIOError: the write failed (the log keeps exactly its previous events), or the
                log was closed.
        """
        if reply_to is not None and not isinstance(reply_to, str):
            raise InvalidInput(f"reply_to must be a string, not {type(reply_to).__name__}")
        text, msg = _encode_msg(event_type, fields)
        sync = self.durability == "event" or (self.durability == "turn"
                                              and event_type in TASK_ENDS)
        with self._mutex:
            if self._fd < 0:
                raise StateIOError(f"the events log {self.path} is closed")
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                try:
                    self._settle()
                except OSError as exc:
                    raise durable.io_error(self.path, exc) from None
                seq, ts = self._next, utc_now()
                record = _line(seq, ts, self.session, reply_to, text)
                # Never leaves half an event (or one not known durable) behind.
                log.write_line(self.path, self._fd, record, self._size, sync)
                self._size += len(record)
                self._next = seq + 1
                self._unsynced = not sync
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return {"v": FORMAT_VERSION, "seq": seq, "ts": ts, "session": self.session,
                "id": reply_to, "msg": msg}

    def sync(self) -> None:
        """Flush every event written so far to disk.

        Raises:
            StateIOError: the flush failed, or the log was closed.
        """
        with self._mutex:
            if self._fd < 0:
                raise StateIOError(f"the events log {self.path} is closed")
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise durable.io_error(self.path, exc) from None
            self._unsynced = False

    def close(self) -> None:
        """Flush what is not yet on disk (unless the mode is "none") and close the file.

        Raises:
            StateIOError: the flush failed (the file is closed all the same).
        """
        with self._mutex:
            if self._fd < 0:
                return
            fd, self._fd = self._fd, -1
            try:
                if self._unsynced and self.durability != "none":
                    os.fsync(fd)
            except OSError as exc:
                raise durable.io_error(self.path, exc) from None
            finally:
                os.close(fd)

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Reading


class ReplayReport:
    """What one replay saw: where it began reading, the events it gave, and every problem."""

    __slots__ = ("path", "after_seq", "size", "start", "lines", "events", "last_seq",
                 "problems")

    def __init__(self, path: str, after_seq: int) -> None:
        self.path = path
        self.after_seq = after_seq
        self.size = 0  # the file's length when the replay began
        self.start = 0  # the byte offset it read on from
        self.lines = 0  # lines read from there
        self.events = 0  # events given
        self.last_seq: int | None = None  # of the last event given
        self.problems: list[Problem] = []

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def torn(self) -> Problem | None:
        """The torn last line the replay left out, if the file ended in one."""
        for problem in self.problems:
            if problem.kind == TORN_TAIL:
                return problem
        return None

    def kinds(self) -> list[str]:
        """The kinds of the problems, in file order."""
        return [p.kind for p in self.problems]

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "after_seq": self.after_seq, "size": self.size,
                "start": self.start, "lines": self.lines, "events": self.events,
                "last_seq": self.last_seq, "problems": [p.as_dict() for p in self.problems]}


class Replayed:
    """The events a replay gave, in seq order, and its report."""

    __slots__ = ("events", "report")

    def __init__(self, events: list[Event], report: ReplayReport) -> None:
        self.events = events
        self.report = report


def replay(path: str, after_seq: int = 0,
           report: ReplayReport | None = None) -> Iterator[Event]:
    """The events of the log at `path` with seq > `after_seq`, in order, filling `report` as it
    goes. The file is opened (and its length noted) at the call; the cost of the iteration
    follows the events after `after_seq`, not the length of the log.

    Raises:
        InvalidInput: `after_seq` is not an integer >= 0.
        NotFound: no log at `path`.
        StateIOError: it cannot be read.
    """
    if not log.is_seq(after_seq):
        raise InvalidInput(f"last_seq must be an integer >= 0, not {str(after_seq)[:40]!r}")
    report = ReplayReport(path, after_seq) if report is None else report
    fd, size = durable.open_snapshot(path, "events log")
    handle = os.fdopen(fd, "rb")
    try:
        fd = handle.fileno()
        whole = log.torn_start(fd, size)
        start = log.first_after(fd, whole, after_seq) if after_seq >= FIRST_SEQ else 0
    except BaseException:
        handle.close()
        raise
    report.size, report.start = size, start
    if whole < size:
        report.problems.append(log.torn_tail(whole, None, size - whole))
    return _events(handle, start, whole, report)


def _events(handle: BinaryIO, offset: int, end: int, report: ReplayReport) -> Iterator[Event]:
    """The events of the whole lines in [offset, end) with seq > report.after_seq."""
    after = report.after_seq
    try:
        with handle:
            handle.seek(offset)
            while offset < end:
                raw = handle.readline(end - offset)
                if not raw:
                    break
                report.lines += 1
                start, offset = offset, offset + len(raw)
                line = raw[:-1]
                if report.last_seq is None:
                    seq = prefix_seq(line[:_HEAD])
                    if seq is not None and seq <= after:
                        continue  # before the replay's start: not parsed
                event = _parse(line, start, report)
                if event is None or (report.last_seq is None and event["seq"] <= after):
                    continue
                if _in_order(event, start, len(line), report):
                    yield event
    finally:
        report.problems.sort(key=lambda problem: problem.offset)


def _parse(line: bytes, offset: int, report: ReplayReport) -> Event | None:
    """The event on one whole line, or None with the reason added to `report`."""
    def skip(kind: str, detail: str) -> None:
        report.problems.append(Problem(kind, offset, None, len(line), detail))

    if not line.strip():
        skip(BLANK_LINE, "an empty line")
        return None
    try:
        event = jsonwire.loads(line)
    except ValueError as exc:  # UnicodeDecodeError is one
        skip(NOT_JSON, f"not JSON ({str(exc)[:80]}): {line[:60]!r}")
        return None
    problem = _event_problem(event)
    if problem:
        skip(INVALID_EVENT, problem)
        return None
    assert isinstance(event, dict)
    return event


def _in_order(event: Event, offset: int, length: int, report: ReplayReport) -> bool:
    """Check `event`'s seq against the previous one given; False when it must be skipped."""
    seq = event["seq"]
    previous = report.after_seq if report.last_seq is None else report.last_seq
    if not log.check_seq(seq, previous, offset, None, length, report.problems, "event"):
        return False
    report.last_seq = seq
    report.events += 1
    return True


def read_since(path: str, after_seq: int = 0) -> Replayed:
    """Every event with seq > `after_seq` of the log at `path`, with the report of the read.

    Raises:
        As `replay`.
    """
    report = ReplayReport(path, after_seq)
    return Replayed(list(replay(path, after_seq, report)), report)


def last_seq(path: str) -> int:
    """The seq the log at `path` has reached (0 when it holds no event), read from its tail.

    Raises:
        NotFound: no log at `path`.
        StateIOError: it cannot be read.
    """
    fd, size = durable.open_snapshot(path, "events log")
    handle = os.fdopen(fd, "rb")
    with handle:
        found = log.continue_from(handle.fileno(), size, _event_problem, FIRST_SEQ)[0]
        assert found is not None
        return found - 1
