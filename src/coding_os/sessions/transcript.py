"""Transcript format v1 (DESIGN.md §4.1, §4.4): one session, one append-only JSON-lines file.

Every line is one entry: `{"v":1,"seq":N,"ts":"…Z","type":T, …the fields of T}`. Line 0 is the
`session_meta`; `seq` is dense and strictly increasing per file.

The file is a numbered log (`coding_os.log`, which events logs share): this module says what
its lines hold and which are valid.

Writer. An append holds an exclusive `flock` on the transcript itself while it reads the last
seq from the tail (never the whole file), sets aside a torn last line, writes the new line and,
when the durability mode asks, fsyncs — so appenders in any number of processes get unique,
dense seqs. A torn last line (a writer killed mid-append) is moved to `<sid>.jsonl.torn` by the
next writer, which continues after the last whole line: nothing is silently dropped. New files
(create, fork) are written beside the target and linked into place, so a transcript never exists
half made.

Reader. Takes a shared lock only long enough to note the file's length, so it sees whole appends
only, then reads without blocking writers. It skips — and reports in a `ReadReport` — a torn
last line, invalid UTF-8, lines that are not JSON or not v1 entries, blank lines, seq gaps and
seqs out of order. `tail` reads backwards from the end and parses only what it returns.
`visible` applies `rewind` entries: later entries are hidden from the conversation, never deleted;
`iter_visible` gives the same, reading only as far as its caller takes it when no rewind can
hide what it has read.

Lines are written with `jsonwire` (compact, ASCII-only JSON): the standard `json` module is not
on this path, and any Python string, lone surrogates included, reads back identical.
"""

from __future__ import annotations

import fcntl
import itertools
import os

from coding_os import durable, jsonwire, log
from coding_os.clock import utc_now
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os.log import (
    BLANK_LINE,
    DEFAULT_DURABILITY,
    DURABILITY_MODES,
    NOT_JSON,
    Problem,
    check_durability,
)
from coding_os.log import is_seq as _is_count
from coding_os.state.identity import (
    agent_of_session,
    is_path_like,
    is_session_id,
    mint_session_id,
    validate_agent,
    validate_session_id,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
    from typing import Any, BinaryIO, TypeAlias

    from coding_os.state.tiers import Tiers

    Entry: TypeAlias = dict[str, Any]

__all__ = [
    "FORMAT_VERSION",
    "ENTRY_TYPES",
    "ENTRY_FIELDS",
    "OPTIONAL_FIELDS",
    "HEAD_FIELDS",
    "DURABILITY_MODES",
    "check_durability",
    "DEFAULT_DURABILITY",
    "TITLE_MAX",
    "Appended",
    "Forked",
    "Problem",
    "ReadReport",
    "Resume",
    "Transcript",
    "transcript_path",
    "session_agent",
    "entry_problem",
    "validate_title",
    "create",
    "append",
    "set_title",
    "mark_compact",
    "close",
    "fork",
    "iter_entries",
    "iter_visible",
    "read",
    "read_meta",
    "tail",
    "last_seq",
    "visible",
]

FORMAT_VERSION = 1
HEAD_FIELDS = ("v", "seq", "ts", "type")

# The fields each entry type must carry, and what each holds:
#   string, count (an int >= 0), seq (an int >= 0 naming an entry), bool, json (any JSON value),
#   object, session (a cos session id), agent (an agent name); a trailing "?" also allows null.
# Any other field is allowed and kept (readers of v1 ignore what they do not know).
ENTRY_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "session_meta": (
        ("session", "session"), ("agent", "agent"), ("native_id", "string?"),
        ("project", "string?"), ("worktree", "string?"), ("branch", "string?"),
        ("title", "string?"), ("forked_from", "session?"), ("fork_point", "seq?"),
        ("parent", "string?"), ("seed_ref", "string?"),
    ),
    "user": (("turn", "count"), ("text", "string")),
    "assistant": (("turn", "count"), ("text", "string")),
    "tool_call": (("turn", "count"), ("tool", "string"), ("input", "json"),
                  ("call_id", "string")),
    "tool_result": (("turn", "count"), ("call_id", "string"), ("ok", "bool"),
                    ("output", "json")),
    "checkpoint": (("turn", "count"), ("checkpoint", "string")),
    "title": (("title", "string"),),
    "compact": (("text", "string"), ("from_seq", "seq"), ("to_seq", "seq")),
    "summary": (("text", "string"), ("from_seq", "seq"), ("to_seq", "seq")),
    "rewind": (("to_seq", "seq"),),
    "fork": (("forked_from", "session"), ("fork_point", "seq")),
    "clear": (),
    "bookmark": (("response_id", "string"),),
    "event": (("name", "string"),),
}
# Fields a type may carry, checked when present.
OPTIONAL_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "assistant": (("usage", "object?"),),
}
ENTRY_TYPES = tuple(ENTRY_FIELDS)
# Written only by `create` and `fork`, never appended.
_OPENING_TYPES = ("session_meta", "fork")
# Fields holding the seq of another entry of the same file: a fork renumbers them.
_RANGE_TYPES = ("compact", "summary")

# Entries that end a turn: fsynced in the "turn" mode (and `close`, always, unless "none").
_TURN_ENDS = ("assistant",)
CLOSE_EVENT = "close"
TITLE_MAX = 200

# Problem kinds a ReadReport lists: the log's (log.TORN_TAIL, BLANK_LINE, NOT_JSON, SEQ_GAP,
# SEQ_ORDER) and these.
INVALID_UTF8 = "invalid_utf8"
INVALID_ENTRY = "invalid_entry"
UNSUPPORTED_VERSION = "unsupported_version"
MISSING_META = "missing_meta"

_DIGITS = frozenset("0123456789")


# ---------------------------------------------------------------------------------------------
# Ids, paths and validation


def session_agent(session: str) -> str:
    """The agent part of a session id (`ses-<agent>-YYYYMMDD-HHMMSS-xxxx`).

    Raises:
        InvalidId: `session` is not a session id, or names an agent that cannot be a directory.
    """
    validate_session_id(session)
    return validate_agent(str(agent_of_session(session)))


def transcript_path(tiers: Tiers, session: str) -> str:
    """Where the transcript of `session` lives: `<state_dir>/<agent>/transcripts/<sid>.jsonl`.

    Raises:
        InvalidId: `session` is not a valid session id.
    """
    return tiers.transcript_path(session_agent(session), session)


def validate_title(title: object) -> str:
    """Return `title` if it can be a session's title or name.

    One line of 1 to TITLE_MAX characters, no control characters, not blank, not itself a
    session id (`cos resume X` tries ids first), and never path-like (`is_path_like`: no `\\`,
    no leading `/`, no `..` segment); a `/` inside it (`CI/CD`) is fine.

    Raises:
        InvalidInput: it cannot.
    """
    if not isinstance(title, str):
        raise InvalidInput(f"a title must be a string, not {type(title).__name__}")
    shown = repr(title[:80])
    if not title.strip():
        raise InvalidInput("a title cannot be empty")
    if len(title) > TITLE_MAX:
        raise InvalidInput(f"title {shown}… is longer than {TITLE_MAX} characters")
    if any(c < " " or "\x7f" <= c <= "\x9f" or c in "\u2028\u2029" for c in title):
        raise InvalidInput(f"title {shown} contains a control character (one line, printable)")
    if is_path_like(title):
        raise InvalidInput(f"title {shown} could be read as a path (a `\\`, a leading `/` or "
                           "a `..` segment)")
    if is_session_id(title):
        raise InvalidInput(f"title {shown} would be read as a session id")
    return title


def _is_ts(value: object) -> bool:
    """ISO-8601 UTC with milliseconds: 2026-11-29T16:20:00.123Z."""
    if not isinstance(value, str) or len(value) != 24:
        return False
    digits = value[0:4] + value[5:7] + value[8:10] + value[11:13] + value[14:16] + value[17:19]
    return (set(digits + value[20:23]) <= _DIGITS and value[4] == value[7] == "-"
            and value[10] == "T" and value[13] == value[16] == ":" and value[19] == "."
            and value[23] == "Z")


def _kind_problem(kind: str, value: object) -> str | None:
    if kind.endswith("?"):
        if value is None:
            return None
        kind = kind[:-1]
    if kind == "json":
        return None
    if kind == "string":
        ok = isinstance(value, str)
    elif kind in ("count", "seq"):
        ok = _is_count(value)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "object":
        ok = isinstance(value, dict)
    elif kind == "session":
        ok = is_session_id(value)
    else:  # agent
        ok = isinstance(value, str)
        if ok:
            try:
                validate_agent(str(value))
            except InvalidInput:
                ok = False
    return None if ok else f"must be {_KIND_NAMES[kind]}"


_KIND_NAMES = {
    "string": "a string", "count": "an integer >= 0", "seq": "a seq (an integer >= 0)",
    "bool": "true or false", "object": "an object", "session": "a session id",
    "agent": "an agent name",
}


def _fields_problem(entry_type: str, fields: Mapping[str, object]) -> str | None:
    """What is wrong with the fields of an entry of `entry_type`, or None."""
    required = ENTRY_FIELDS.get(entry_type)
    if required is None:
        return f"unknown entry type {str(entry_type)[:40]!r}"
    for name, kind in required:
        if name not in fields:
            return f"{entry_type}: missing field {name!r}"
        problem = _kind_problem(kind, fields[name])
        if problem:
            return f"{entry_type}: {name} {problem}"
    for name, kind in OPTIONAL_FIELDS.get(entry_type, ()):
        if name in fields:
            problem = _kind_problem(kind, fields[name])
            if problem:
                return f"{entry_type}: {name} {problem}"
    return None


def _range_problem(entry_type: str, fields: Mapping[str, Any], seq: int) -> str | None:
    """Seqs an entry names must be earlier entries of the same file."""
    if entry_type in _RANGE_TYPES:
        if not fields["from_seq"] <= fields["to_seq"] < seq:
            return (f"{entry_type}: needs from_seq <= to_seq < its own seq {seq} "
                    f"(got {fields['from_seq']}..{fields['to_seq']})")
    elif entry_type == "rewind":
        if not fields["to_seq"] < seq:
            return f"rewind: to_seq {fields['to_seq']} is not before its own seq {seq}"
    elif entry_type == "session_meta" and seq != 0:
        return f"session_meta must be seq 0, not {seq}"
    return None


def entry_problem(entry: object) -> str | None:
    """What keeps `entry` from being a valid v1 entry, or None when it is one."""
    if not isinstance(entry, dict):
        return f"a line must be a JSON object, not {type(entry).__name__}"
    version = entry.get("v")
    if type(version) is not int or version != FORMAT_VERSION:
        return f"unsupported format version {str(version)[:20]!r}"
    if not _is_count(entry.get("seq")):
        return "seq must be an integer >= 0"
    if not _is_ts(entry.get("ts")):
        return "ts must be an ISO-8601 UTC time with milliseconds (2026-11-29T16:20:00.123Z)"
    entry_type = entry.get("type")
    if not isinstance(entry_type, str):
        return "type must be a string"
    return (_fields_problem(entry_type, entry)
            or _range_problem(entry_type, entry, entry["seq"]))


# ---------------------------------------------------------------------------------------------
# Results


class Appended:
    """One entry written: its seq, the entry as stored, and the torn bytes set aside first."""

    __slots__ = ("path", "seq", "entry", "torn_bytes")

    def __init__(self, path: str, seq: int, entry: Entry, torn_bytes: int) -> None:
        self.path = path
        self.seq = seq
        self.entry = entry
        # Length of a torn last line moved to `<path>.torn` before this append (0: none).
        self.torn_bytes = torn_bytes

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "seq": self.seq, "entry": self.entry,
                "torn_bytes": self.torn_bytes}


class ReadReport:
    """What a read of one transcript saw: lines, entries, seq range and every problem."""

    __slots__ = ("path", "complete", "size", "lines", "entries", "first_seq", "last_seq",
                 "problems", "resume", "resumed")

    def __init__(self, path: str) -> None:
        self.path = path
        self.complete = False  # the whole file was read (False for a tail read that stopped)
        self.size = 0  # bytes the read covered (the file's length when it began)
        self.lines = 0
        self.entries = 0
        self.first_seq: int | None = None
        self.last_seq: int | None = None
        self.problems: list[Problem] = []
        # iter_visible: where a later read can continue after the last entry it yielded (None
        # once rewinds made it read the rest whole), and whether it began at a given Resume.
        self.resume: Resume | None = None
        self.resumed = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def kinds(self) -> list[str]:
        """The kinds of the problems, in file order."""
        return [p.kind for p in self.problems]

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "complete": self.complete, "size": self.size,
                "lines": self.lines, "entries": self.entries, "first_seq": self.first_seq,
                "last_seq": self.last_seq, "problems": [p.as_dict() for p in self.problems]}


class Resume:
    """Where a read of a transcript's visible conversation can continue (`iter_visible`): after
    the entry of seq `seq`, whose line ends at byte `offset` of the file `identity` names (its
    device, inode and first bytes)."""

    __slots__ = ("identity", "offset", "seq")

    def __init__(self, identity: tuple[int, int, bytes], offset: int, seq: int) -> None:
        self.identity = identity
        self.offset = offset
        self.seq = seq


class Transcript:
    """Entries read from one transcript (in seq order) and the report of the read."""

    __slots__ = ("entries", "report")

    def __init__(self, entries: list[Entry], report: ReadReport) -> None:
        self.entries = entries
        self.report = report

    @property
    def meta(self) -> Entry | None:
        """The session_meta entry, when the read reached a valid one."""
        if self.entries and self.entries[0]["type"] == "session_meta":
            return self.entries[0]
        return None

    def visible(self, up_to: int | None = None) -> list[Entry]:
        """The conversation as it stands after rewinds (see `visible`)."""
        return visible(self.entries, up_to)


class Forked:
    """A fork made: the new session, where it came from, and how the source read."""

    __slots__ = ("session", "path", "forked_from", "fork_point", "copied", "source_report")

    def __init__(self, session: str, path: str, forked_from: str, fork_point: int,
                 copied: int, source_report: ReadReport) -> None:
        self.session = session
        self.path = path
        self.forked_from = forked_from
        self.fork_point = fork_point
        self.copied = copied  # entries copied from the source (after its session_meta)
        self.source_report = source_report

    def as_dict(self) -> dict[str, object]:
        return {"session": self.session, "path": self.path, "forked_from": self.forked_from,
                "fork_point": self.fork_point, "copied": self.copied,
                "source_problems": [p.as_dict() for p in self.source_report.problems]}


# ---------------------------------------------------------------------------------------------
# Writing


def _encode_fields(entry_type: str, fields: Mapping[str, object]) -> str:
    """The fields as the tail of a JSON object (`,"a":1,"b":2}`), validated.

    Raises:
        InvalidInput: unknown type, a missing or mistyped field, a writer-owned field, or a
            value JSON cannot hold.
    """
    if not isinstance(fields, dict):
        fields = dict(fields)
    for name in HEAD_FIELDS:
        if name in fields:
            raise InvalidInput(f"{entry_type}: field {name!r} is set by the writer")
    problem = _fields_problem(entry_type, fields)
    if problem:
        raise InvalidInput(problem)
    try:
        body = jsonwire.dumps(fields)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{entry_type}: a field is not JSON: {exc}") from None
    return "}" if body == "{}" else "," + body[1:]


def _line(seq: int, ts: str, entry_type: str, tail: str) -> bytes:
    # The head is always first and in this order, so a writer finds a line's seq in its prefix.
    return f'{{"v":1,"seq":{seq},"ts":"{ts}","type":"{entry_type}"{tail}\n'.encode("ascii")


def _entry(seq: int, ts: str, entry_type: str, fields: Mapping[str, object]) -> Entry:
    return {"v": FORMAT_VERSION, "seq": seq, "ts": ts, "type": entry_type, **fields}


def create(tiers: Tiers, agent: str, *, session: str | None = None,
           native_id: str | None = None, project: str | None = None,
           worktree: str | None = None, branch: str | None = None, title: str | None = None,
           parent: str | None = None, seed_ref: str | None = None,
           durability: str = DEFAULT_DURABILITY) -> str:
    """Start a transcript holding only its session_meta; returns the session id.

    `session` names an id minted elsewhere (a panel's); otherwise a new one is minted and
    reserved by the transcript itself.

    Raises:
        InvalidId: a bad agent or session id.
        InvalidInput: a bad title or durability, or `session` already has a transcript.
        StateIOError: the transcript cannot be written.
    """
    validate_agent(agent)
    if session is not None and session_agent(session) != agent:
        raise InvalidInput(f"session {session} does not belong to agent {agent}")
    if title is not None:
        validate_title(title)
    check_durability(durability)
    fields: dict[str, object] = {
        "agent": agent, "native_id": native_id, "project": project, "worktree": worktree,
        "branch": branch, "title": title, "forked_from": None, "fork_point": None,
        "parent": parent, "seed_ref": seed_ref,
    }
    sync = durability != "none"

    def lines(new: str) -> list[bytes]:
        return [_line(0, utc_now(), "session_meta",
                      _encode_fields("session_meta", {"session": new, **fields}))]

    if session is not None:
        try:
            log.publish(transcript_path(tiers, session), lines(session), sync)
        except FileExistsError:
            raise InvalidInput(f"session {session} already has a transcript") from None
        return session
    return _publish_new(tiers, agent, lines, sync)


def _publish_new(tiers: Tiers, agent: str, lines: Callable[[str], Iterable[bytes]],
                 sync: bool) -> str:
    """Mint an id no presence file or transcript holds yet and publish its transcript."""
    for _ in range(1000):
        session = mint_session_id(agent)
        if os.path.lexists(tiers.presence_path(agent, session)):
            continue  # reserved by a panel (hooks.sessions mints through presence files)
        try:
            log.publish(transcript_path(tiers, session), lines(session), sync)
        except FileExistsError:
            continue
        return session
    raise StateIOError(f"cannot mint a free session id for {agent} in {tiers.state_dir}")


def append(tiers: Tiers, session: str, entry_type: str,
           fields: Mapping[str, object] | None = None, *,
           durability: str = DEFAULT_DURABILITY) -> Appended:
    """Append one entry of `entry_type` to the transcript of `session`.

    The durability mode decides the fsync: "event" after every entry, "turn" after entries that
    end a turn (assistant), "none" never.

    Raises:
        InvalidId: a bad session id.
        InvalidInput: unknown or opening type (session_meta, fork), a missing or mistyped
            field, a seq reference that is not an earlier entry, a bad durability.
        NotFound: the session has no transcript.
        StateIOError: the append failed (the file keeps exactly its previous entries), or the
            transcript holds no readable entry to continue from.
    """
    path = transcript_path(tiers, session)
    check_durability(durability)
    if entry_type in _OPENING_TYPES:
        raise InvalidInput(f"{entry_type} entries are written by create and fork only")
    tail = _encode_fields(entry_type, fields or {})
    sync = durability == "event" or (durability == "turn" and entry_type in _TURN_ENDS)
    return _append(path, entry_type, dict(fields or {}), tail, sync)


def set_title(tiers: Tiers, session: str, title: str, *,
              durability: str = DEFAULT_DURABILITY) -> Appended:
    """Rename the session: append a `title` entry (the latest one is the session's title).

    Raises:
        InvalidInput: a bad title. And as `append`.
    """
    return append(tiers, session, "title", {"title": validate_title(title)},
                  durability=durability)


def mark_compact(tiers: Tiers, session: str, text: str, from_seq: int, to_seq: int, *,
                 durability: str = DEFAULT_DURABILITY) -> Appended:
    """Append a `compact` entry: `text` stands for entries from_seq..to_seq (kept in the file).

    Raises:
        InvalidInput: a range that is not of earlier entries. And as `append`.
    """
    return append(tiers, session, "compact",
                  {"text": text, "from_seq": from_seq, "to_seq": to_seq}, durability=durability)


def close(tiers: Tiers, session: str, *, durability: str = DEFAULT_DURABILITY) -> Appended:
    """Record that the session ended (an `event` named "close") and fsync unless "none".

    Raises:
        As `append`.
    """
    path = transcript_path(tiers, session)
    check_durability(durability)
    fields: dict[str, object] = {"name": CLOSE_EVENT}
    return _append(path, "event", fields, _encode_fields("event", fields),
                   durability != "none")


def _append(path: str, entry_type: str, fields: dict[str, object], tail: str,
            sync: bool) -> Appended:
    fd = log.open_append(path, create=False, what="transcript")
    try:
        # Seq allocation and the write happen under one exclusive lock: concurrent appenders
        # queue here, each sees the line the previous one wrote.
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            seq, whole_size = log.continue_from(fd, size, entry_problem, None)
        except OSError as exc:
            raise durable.io_error(path, exc) from None
        if seq is None:
            raise StateIOError(f"{path} holds no readable entry to continue from; "
                               "nothing appended")
        problem = _range_problem(entry_type, fields, seq)
        if problem:
            raise InvalidInput(problem)
        ts = utc_now()
        record = _line(seq, ts, entry_type, tail)
        torn = log.cut_torn(path, fd, whole_size, size) if whole_size < size else 0
        log.write_line(path, fd, record, whole_size, sync)
    finally:
        os.close(fd)  # closing releases the lock
    return Appended(path, seq, _entry(seq, ts, entry_type, fields), torn)


# ---------------------------------------------------------------------------------------------
# Fork


def fork(tiers: Tiers, source: str, at_seq: int | None = None, name: str | None = None, *,
         durability: str = DEFAULT_DURABILITY) -> Forked:
    """Fork `source` at `at_seq` (default: its last entry) into a new session; returns it.

    The new transcript holds its session_meta (forked_from, fork_point), a `fork` entry, then a
    copy of the source's conversation as it stood at `at_seq` (rewinds applied, the source's
    own session_meta and fork entries left out), renumbered densely; then a `title` entry when
    `name` is given. The source is not touched. Permissions are not part of a transcript, so
    none are carried over.

    Raises:
        InvalidId: `source` is not a valid session id.
        InvalidInput: a bad `at_seq`, name or durability; `at_seq` past the source's end; the
            source is a sidechain of a fork (forks are one level deep); it has no session_meta.
        NotFound: the source has no transcript.
        StateIOError: the new transcript cannot be written.
    """
    source_path = transcript_path(tiers, source)
    if at_seq is not None and not _is_count(at_seq):
        raise InvalidInput(f"fork point must be a seq (an integer >= 0), not {at_seq!r}")
    if name is not None:
        validate_title(name)
    check_durability(durability)
    source_read = read(source_path)
    meta = source_read.meta
    last = source_read.report.last_seq
    if meta is None or last is None:
        raise InvalidInput(f"{source}: its transcript has no readable session_meta; "
                           "cannot fork it")
    _refuse_sidechain_of_fork(tiers, source, meta)
    point = last if at_seq is None else at_seq
    if point > last:
        raise InvalidInput(f"cannot fork {source} at seq {point}: it ends at seq {last}")
    # The source's opening entries and close markers describe the source, not the conversation.
    kept = [e for e in visible(source_read.entries, point)
            if e["type"] not in _OPENING_TYPES
            and not (e["type"] == "event" and e["name"] == CLOSE_EVENT)]
    agent = session_agent(source)
    source_meta: Entry = meta

    def lines(new: str) -> Iterator[bytes]:
        ts = utc_now()
        yield _line(0, ts, "session_meta", _encode_fields("session_meta", {
            "session": new, "agent": agent, "native_id": None,
            "project": source_meta.get("project"), "worktree": source_meta.get("worktree"),
            "branch": source_meta.get("branch"),
            "title": source_meta.get("title"), "forked_from": source, "fork_point": point,
            "parent": None, "seed_ref": source_meta.get("seed_ref")}))
        yield _line(1, ts, "fork", _encode_fields("fork", {"forked_from": source,
                                                           "fork_point": point}))
        yield from _renumbered(kept, first=2)
        if name is not None:
            yield _line(len(kept) + 2, ts, "title", _encode_fields("title", {"title": name}))

    new = _publish_new(tiers, agent, lines, durability != "none")
    return Forked(new, transcript_path(tiers, new), source, point, len(kept), source_read.report)


def _renumbered(entries: list[Entry], first: int) -> Iterator[bytes]:
    """Copies of `entries` numbered from `first`, their seq references mapped to the copies."""
    from bisect import bisect_left, bisect_right

    old_seqs = [0]  # the source's session_meta stands where the copy's does
    new_seqs = [0]
    seq = first
    for entry in entries:
        fields = {k: v for k, v in entry.items() if k not in HEAD_FIELDS}
        if entry["type"] in _RANGE_TYPES:
            # The range covers the copied entries inside it; when none of it was copied (all
            # rewound away), it points at the entry just before where it was.
            high = bisect_right(old_seqs, fields["to_seq"]) - 1
            low = min(bisect_left(old_seqs, fields["from_seq"]), high)
            fields["from_seq"], fields["to_seq"] = new_seqs[low], new_seqs[high]
        yield _line(seq, entry["ts"], entry["type"], _encode_fields(entry["type"], fields))
        old_seqs.append(entry["seq"])
        new_seqs.append(seq)
        seq += 1


def _refuse_sidechain_of_fork(tiers: Tiers, source: str, meta: Entry) -> None:
    parent = meta.get("parent")
    if parent is None:
        return
    forked = meta.get("forked_from") is not None
    if not forked and is_session_id(parent):
        try:
            parent_meta = read_meta(transcript_path(tiers, parent))
        except (NotFound, InvalidInput):
            parent_meta = None
        forked = parent_meta is not None and parent_meta.get("forked_from") is not None
    if forked:
        raise InvalidInput(f"{source} is a sidechain of a fork ({parent}); forks are one "
                           "level deep, so it cannot be forked")


# ---------------------------------------------------------------------------------------------
# Reading


def _parse_line(line: bytes, offset: int, number: int | None,
                report: ReadReport) -> Entry | None:
    """The entry on one whole line, or None with the reason added to `report`."""
    def skip(kind: str, detail: str) -> None:
        report.problems.append(Problem(kind, offset, number, len(line), detail))

    if not line.strip():
        skip(BLANK_LINE, "an empty line")
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        skip(INVALID_UTF8, f"invalid UTF-8 at byte {offset + exc.start}: {line[:60]!r}")
        return None
    try:
        entry = jsonwire.loads(text)
    except ValueError as exc:
        skip(NOT_JSON, f"not JSON ({str(exc)[:80]}): {text[:60]!r}")
        return None
    problem = entry_problem(entry)
    if problem:
        version = entry.get("v") if isinstance(entry, dict) else None
        unsupported = isinstance(version, int) and version != FORMAT_VERSION
        skip(UNSUPPORTED_VERSION if unsupported else INVALID_ENTRY, problem)
        return None
    assert isinstance(entry, dict)
    return entry


def _in_order(entry: Entry, offset: int, number: int | None, length: int,
              report: ReadReport, from_start: bool) -> bool:
    """Check `entry`'s seq against the previous one; False when it must be skipped.

    `from_start`: the read began at the file's first line, so the first entry must be the
    session_meta.
    """
    seq = entry["seq"]
    previous = report.last_seq
    if previous is None:
        if from_start and (entry["type"] != "session_meta" or seq != 0):
            report.problems.append(Problem(
                MISSING_META, offset, number, length,
                f"the first entry is {entry['type']} seq {seq}, not session_meta seq 0"))
        report.first_seq = seq
    elif not log.check_seq(seq, previous, offset, number, length, report.problems, "entry"):
        return False
    report.last_seq = seq
    report.entries += 1
    return True


def iter_entries(path: str, report: ReadReport | None = None) -> Iterator[Entry]:
    """The valid entries of the transcript at `path`, in order, filling `report` as it goes.

    A generator: errors are raised by its first step.

    Raises:
        NotFound: no transcript at `path`.
        StateIOError: it cannot be read.
    """
    report = ReadReport(path) if report is None else report
    fd, size = durable.open_snapshot(path, "transcript")
    report.size = size
    with os.fdopen(fd, "rb") as f:
        for entry, _ in _entries(f, size, report):
            yield entry


def _entries(f: BinaryIO, size: int, report: ReadReport, offset: int = 0
             ) -> Iterator[tuple[Entry, int]]:
    """The valid entries in the first `size` bytes of `f`, read from byte `offset` (the start
    of a line; from the file's start, the first entry must be the session_meta), each with the
    offset its line ends at."""
    f.seek(offset)
    first = offset
    while offset < size:
        raw = f.readline(size - offset)
        if not raw:
            break
        report.lines += 1
        start, offset = offset, offset + len(raw)
        if not raw.endswith(b"\n"):
            report.problems.append(log.torn_tail(start, report.lines, len(raw)))
            break
        line = raw[:-1]
        entry = _parse_line(line, start, report.lines, report)
        if entry is not None and _in_order(entry, start, report.lines, len(line), report,
                                           from_start=not first):
            yield entry, offset
    report.complete = True


def iter_visible(path: str, report: ReadReport | None = None, resume: Resume | None = None
                 ) -> Generator[Entry, None, None]:
    """The conversation of the transcript at `path` after rewinds — what `visible` makes of
    every entry — read only as far as the caller takes it, when it can be; with `resume` (a
    `report.resume` of an earlier read), only what follows that point.

    A rewind to seq k hides only entries after k, so the entries up to the lowest `to_seq` of
    the file's rewinds (all of them, when it has none) are yielded as they are read, and
    `report.resume` says after each where a later read can continue; past that point the rest
    of the file is read and `visible` applied (`report.resume` is then None). The rewinds are
    found by a scan of the file's bytes for the JSON string `"rewind"` (no line is parsed
    unless it holds one; a `type` spelled with `\\u` escapes is not found); the scan is
    remembered in this process for the file (its device, inode and first bytes), so a later
    read of a file that grew scans only what was appended.

    A `resume` is taken (`report.resumed`) only while it still holds: the same file, and no
    rewind appended since that may hide what it follows; otherwise the read begins at the
    file's start. The report covers the lines read.

    Raises:
        NotFound: no transcript at `path`.
        StateIOError: it cannot be read.
    """
    report = ReadReport(path) if report is None else report
    fd, size = durable.open_snapshot(path, "transcript")
    report.size = size
    with os.fdopen(fd, "rb") as f:
        identity, floor = _rewind_floor(path, fd, size)
        start = 0
        if resume is not None and resume.identity == identity and resume.offset <= size \
                and (floor is None or resume.seq <= floor):
            start, report.last_seq, report.resumed = resume.offset, resume.seq, True
        entries = _entries(f, size, report, start)
        for entry, end in entries:
            if floor is not None and entry["seq"] > floor:
                # Rewinds hide nothing up to `floor`: what was yielded stays, whatever follows.
                report.resume = None
                yield from visible(itertools.chain((entry,), (e for e, _ in entries)))
                return
            report.resume = Resume(identity, end, entry["seq"])
            yield entry


_REWIND_TOKEN = b'"rewind"'
_SCAN_CHUNK = 1 << 20
_HEAD_BYTES = 256
_SCANS_KEPT = 64
# path -> (st_dev, st_ino, the first _HEAD_BYTES, bytes scanned (whole lines), lowest to_seq)
_scans: dict[str, tuple[int, int, bytes, int, int | None]] = {}


def _rewind_floor(path: str, fd: int, size: int
                  ) -> tuple[tuple[int, int, bytes], int | None]:
    """The file's identity (device, inode, first bytes), and the lowest `to_seq` of the rewind
    entries among the whole lines of the first `size` bytes of `fd` (None: there is none). Any
    line holding the bytes `"rewind"` that parses as a rewind counts, even one the reader would
    skip: a floor too low only costs a whole read.
    """
    info = os.fstat(fd)
    head = os.pread(fd, min(size, _HEAD_BYTES), 0)
    pos, floor = 0, None
    known = _scans.get(path)
    # A transcript only grows (a torn tail, past its last whole line, can be cut), so the
    # lines scanned before are still there unless the file was replaced.
    if known is not None and known[:3] == (info.st_dev, info.st_ino, head) \
            and known[3] <= size:
        pos, floor = known[3], known[4]
    chunk = _SCAN_CHUNK
    while pos < size:
        want = min(chunk, size - pos)
        block = os.pread(fd, want, pos)
        cut = block.rfind(b"\n") + 1
        if not cut:
            if len(block) < want or pos + want >= size:
                break  # a torn tail, not scanned until it is whole
            chunk *= 2  # a line longer than the chunk
            continue
        hit = block.find(_REWIND_TOKEN, 0, cut)
        while hit >= 0:
            start = block.rfind(b"\n", 0, hit) + 1
            end = block.find(b"\n", hit, cut)
            to_seq = _rewind_to(block[start:end])
            if to_seq is not None:
                floor = to_seq if floor is None else min(floor, to_seq)
            hit = block.find(_REWIND_TOKEN, end, cut)
        pos += cut
        chunk = _SCAN_CHUNK
    if len(_scans) >= _SCANS_KEPT and path not in _scans:
        _scans.pop(next(iter(list(_scans))), None)  # the oldest; threads may race for it
    _scans[path] = (info.st_dev, info.st_ino, head, pos, floor)
    return (info.st_dev, info.st_ino, head), floor


def _rewind_to(line: bytes) -> int | None:
    """The seq a line's rewind goes back to (-1 when it names none), or None: not a rewind."""
    entry = jsonwire.loads_object(line)
    if entry is None or entry.get("type") != "rewind":
        return None
    to_seq = entry.get("to_seq")
    return to_seq if _is_count(to_seq) else -1


def read(path: str) -> Transcript:
    """Every valid entry of the transcript at `path`, with the report of what was skipped.

    Raises:
        NotFound: no transcript at `path`.
        StateIOError: it cannot be read.
    """
    report = ReadReport(path)
    return Transcript(list(iter_entries(path, report)), report)


def native_sessions(tiers: Tiers, agent: str) -> dict[str, str]:
    """The cos-native sessions of `agent` that store a runtime's own session, by its id
    (`session_meta.native_id`): the oldest transcript naming it, forks left out (a fork copies
    its source's native id but is a session of its own)."""
    folder = os.path.join(tiers.agent_dir(agent), "transcripts")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return {}
    found: dict[str, str] = {}
    for name in names:
        if not name.endswith(".jsonl") or name.startswith("."):
            continue
        try:
            meta = read_meta(os.path.join(folder, name))
        except (NotFound, StateIOError):
            continue
        if meta and isinstance(meta.get("native_id"), str) and meta.get("forked_from") is None:
            found.setdefault(meta["native_id"], str(meta["session"]))
    return found


def read_meta(path: str) -> Entry | None:
    """The session_meta of the transcript at `path` (its first line), or None when invalid.

    Raises:
        NotFound: no transcript at `path`.
        StateIOError: it cannot be read.
    """
    fd, size = durable.open_snapshot(path, "transcript")
    with os.fdopen(fd, "rb") as f:
        raw = f.readline(size)
    if not raw.endswith(b"\n"):
        return None
    entry = _parse_line(raw[:-1], 0, 1, ReadReport(path))
    return entry if entry is not None and entry["type"] == "session_meta" else None


def tail(path: str, n: int) -> Transcript:
    """The last `n` valid entries, read backwards from the end: the cost follows `n` and the
    size of those lines, not the size of the file. The report covers the lines read.

    Raises:
        InvalidInput: a negative `n`.
        NotFound: no transcript at `path`.
        StateIOError: it cannot be read.
    """
    if not _is_count(n):
        raise InvalidInput(f"the number of entries must be an integer >= 0, not {n!r}")
    report = ReadReport(path)
    found: list[tuple[Entry, int, int]] = []  # (entry, offset, length), last first
    skipped = ReadReport(path)  # problems met on the way back, last first
    fd, size = durable.open_snapshot(path, "transcript")
    report.size = size
    try:
        report.complete = True
        for offset, line, whole in log.reverse_lines(fd, size, "transcript"):
            if len(found) >= n:
                report.complete = False
                break
            report.lines += 1
            if not whole:
                skipped.problems.append(log.torn_tail(offset, None, len(line)))
                continue
            entry = _parse_line(line, offset, None, skipped)
            if entry is not None:
                found.append((entry, offset, len(line)))
    finally:
        os.close(fd)
    # Seq checks in file order, interleaved with the other problems by offset.
    ordered = ReadReport(path)
    ordered.problems = skipped.problems[::-1]
    entries = []
    for entry, offset, length in reversed(found):
        if _in_order(entry, offset, None, length, ordered, from_start=report.complete):
            entries.append(entry)
    report.problems = sorted(ordered.problems, key=lambda p: p.offset)
    report.entries, report.first_seq, report.last_seq = (
        ordered.entries, ordered.first_seq, ordered.last_seq)
    return Transcript(entries, report)


def last_seq(path: str) -> int | None:
    """The seq of the last valid entry (None when there is none), read from the tail.

    Raises:
        NotFound: no transcript at `path`.
        StateIOError: it cannot be read.
    """
    return tail(path, 1).report.last_seq


def visible(entries: Iterable[Entry], up_to: int | None = None) -> list[Entry]:
    """The conversation after rewinds, as it stood at seq `up_to` (default: the end).

    A `rewind` to seq k hides every earlier-listed entry after k (the entries stay in the file)
    and is itself left out; entries after the rewind are visible again.
    """
    kept: list[Entry] = []
    for entry in entries:
        if up_to is not None and entry["seq"] > up_to:
            break
        if entry["type"] == "rewind":
            to_seq = entry["to_seq"]
            while kept and kept[-1]["seq"] > to_seq:
                kept.pop()
            continue
        kept.append(entry)
    return kept
