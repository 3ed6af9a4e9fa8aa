"""Sessions of the agents' own logs (Claude Code, Codex), normalised, and their incremental import.

Both importers (`coding_os.adapters.claude.transcripts`, `coding_os.adapters.codex.rollouts`)
read JSON-lines files that their tool keeps appending to. Each file is parsed once into a partial
aggregate (a plain JSON object the importer defines), kept in an `ImportState` together with the
file's size, mtime, inode and the byte offset just past its last whole line. The next scan stats
the file: unchanged, it is not opened; grown, it is read from that offset only (after checking
that the bytes before the offset are still the ones parsed); replaced or truncated, it is parsed
again from the start. Sessions are then assembled from the aggregates in memory.

An aggregate has a small `head` (what the importer needs to tell which session a file belongs to
and to count sessions) beside its whole: a kept import state holds the heads with the stat
records and the whole aggregates apart (`AggregateStore`), read back only for the files whose
sessions are assembled again. An aggregate that cannot be read back raises `AggregateLost`: the
state is then rebuilt by reading the logs again.

A line that is not JSON, not UTF-8 or not an object is counted and skipped; a last line without
its newline (a writer caught mid-append) is left unparsed and reported, and is read once it is
whole. Nothing here raises on a bad file: an unreadable path is reported in the `ScanReport`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from coding_os import durable, frozen, jsonbulk, jsonwire
from coding_os.errors import CosError

__all__ = [
    "AGENTS",
    "first_session_id",
    "STATE_VERSION",
    "TokenTotals",
    "TurnUsage",
    "NativeSubagent",
    "NativeSession",
    "new_native_session",
    "FileRecord",
    "AggregateLost",
    "AggregateStore",
    "StoredAggregate",
    "ImportState",
    "ScanReport",
    "FileAggregate",
    "LineCounts",
    "count",
    "refresh_file",
    "list_dir",
    "normalise_timestamp",
    "clip",
]

AGENTS = ("claude", "codex")
# 2: heads kept apart from the whole aggregates (an older state is read again from the logs).
# 3: a head counts its file's lines of an unknown type (`unknown`) beside the unusable ones.
STATE_VERSION = 3
# Bytes before the resume offset that must be unchanged for an append to be trusted.
_TAIL_BYTES = 64
# First and last prompts are previews: long pastes are cut to this many characters.
PROMPT_PREVIEW_CHARS = 2000


@dataclass(frozen=True)
class TokenTotals:
    """Token use, normalised across providers.

    `input` counts every prompt token, cache reads and writes included (`cached` and
    `cache_write` are parts of it); `output` includes reasoning (`reasoning` is part of it).
    """

    input: int = 0
    cached: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        """Prompt and output tokens together."""
        return self.input + self.output

    def __add__(self, other: TokenTotals) -> TokenTotals:
        return TokenTotals(
            self.input + other.input,
            self.cached + other.cached,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.reasoning + other.reasoning,
        )

    def to_dict(self) -> dict[str, int]:
        """The totals as JSON, `total` included."""
        return {**asdict(self), "total": self.total}


@dataclass(frozen=True)
class TurnUsage:
    """Token use of one turn of a conversation (a prompt and what answered it): its `prompt`,
    its `tokens`, the `models` that answered (in order of first use) and its `cost` in US
    dollars from adapters/prices.py — None when a model that used tokens has no price there,
    or a message was billed at a rate the table does not know (Claude's fast mode)."""

    prompt: str
    tokens: TokenTotals
    models: tuple[str, ...] = ()
    cost: float | None = 0.0


@dataclass(frozen=True)
class NativeSubagent:
    """A subagent's transcript: linked to its parent session, never a session of its own.

    `layout` says where it was found: `inline` (Claude 1.0.x `isSidechain` entries in the parent's
    file; `agent_id` is the uuid of the chain's first entry), `sibling` (Claude 2.0.x
    `agent-<id>.jsonl` beside the session), `nested` (Claude 2.1.x
    `<session>/subagents/agent-<id>.jsonl`) or `thread` (a Codex rollout spawned by another).
    """

    agent: str
    agent_id: str
    parent: str | None
    layout: str
    path: str
    agent_type: str | None = None
    description: str | None = None
    first_prompt: str | None = None
    entries: int = 0
    user_messages: int = 0
    assistant_messages: int = 0
    tokens: TokenTotals = TokenTotals()
    created: str | None = None
    last_active: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The subagent as JSON."""
        data = asdict(self)
        data["tokens"] = self.tokens.to_dict()
        return data


@dataclass(frozen=True)
class NativeSession:
    """One session of an agent's own log, in the words coding-os uses for every session.

    Its counts are those of the live conversation (what the agent would send the model next):
    `branches` is how many other histories lie beside it (a Claude Code resume-at or rewind, a
    Codex revert), and `tree_warnings` say where its history is broken (a Claude `parentUuid`
    pointing nowhere, a Codex rollout continuing one that is not found).
    """

    agent: str
    native_id: str
    path: str
    paths: tuple[str, ...] = ()
    cwd: str | None = None
    project: str | None = None
    git_branch: str | None = None
    git_commit: str | None = None
    git_repository: str | None = None
    cli_version: str | None = None
    cli_versions: tuple[str, ...] = ()
    model: str | None = None
    title: str | None = None
    title_source: str | None = None
    first_prompt: str | None = None
    last_prompt: str | None = None
    user_messages: int = 0
    assistant_messages: int = 0
    tokens: TokenTotals = TokenTotals()
    created: str | None = None
    last_active: str | None = None
    forked_from: str | None = None
    continues: str | None = None
    continued_by: tuple[str, ...] = ()
    copied_entries: int = 0
    compactions: int = 0
    subagents: tuple[NativeSubagent, ...] = ()
    pr_links: tuple[str, ...] = ()
    entry_counts: Mapping[str, int] = field(default_factory=dict)
    unknown_types: Mapping[str, int] = field(default_factory=dict)
    malformed_lines: int = 0
    torn_tail: bool = False
    branches: int = 0
    tree_warnings: tuple[str, ...] = ()

    @property
    def tokens_with_subagents(self) -> TokenTotals:
        """The session's tokens plus those of its subagents."""
        total = self.tokens
        for subagent in self.subagents:
            total = total + subagent.tokens
        return total

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON."""
        data = asdict(self)
        data["tokens"] = self.tokens.to_dict()
        data["subagents"] = [s.to_dict() for s in self.subagents]
        data["entry_counts"] = dict(self.entry_counts)
        data["unknown_types"] = dict(self.unknown_types)
        for key in ("paths", "cli_versions", "continued_by", "pr_links", "tree_warnings"):
            data[key] = list(data[key])
        return data


# An import makes one of every session: without the frozen constructor's call per field.
new_native_session = frozen.maker(NativeSession)


FIRST_LINE_MAX = 1 << 20  # bytes read of a log's first line to find its session


def first_session_id(path: str) -> str | None:
    """The `sessionId` of the first line of the JSON-lines log at `path` (a Claude Code 2.0.x
    subagent transcript names its session there, a Gemini CLI session file its own id), or None.
    The file is opened as another program's log (`durable.open_log`): a symlink, a FIFO or any
    other file that is not a regular one gives None, and nothing blocks."""
    try:
        fd, _ = durable.open_log(path, "session log")
    except CosError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            first = f.readline(FIRST_LINE_MAX)
    except OSError:
        return None
    entry = jsonwire.loads_object(first)
    owner = entry.get("sessionId") if entry is not None else None
    return owner if isinstance(owner, str) else None


class AggregateLost(Exception):
    """A kept aggregate cannot be read back (its store is gone, cut short or changed): the
    import state must be rebuilt from the logs."""


class AggregateStore(Protocol):
    """Where a kept import state's whole aggregates are (coding_os.sessions.importstate)."""

    def read(self, path: str, offset: int, length: int, check: int) -> dict[str, Any]:
        """The aggregate of the file `path` kept at `offset` (`length` bytes, checksum `check`).

        Raises:
            AggregateLost: it cannot be read back as it was written.
        """


@dataclass(frozen=True)
class StoredAggregate:
    """Where a record's whole aggregate is kept: the store and its place there."""

    store: AggregateStore
    offset: int
    length: int
    check: int

    def read(self, path: str) -> dict[str, Any]:
        """The aggregate, read back (a new object each time).

        Raises:
            AggregateLost: it cannot be read back.
        """
        return self.store.read(path, self.offset, self.length, self.check)


class FileRecord:
    """What the last scan learned from one file, and where to resume reading it.

    `head` is the small part of the aggregate the importer needs without the rest (which session
    the file belongs to, its counts); `aggregate` is the whole, read from its store the first
    time it is asked for when the record was loaded from a kept state (`stored`).
    """

    __slots__ = ("path", "agent", "kind", "size", "mtime_ns", "inode", "offset", "tail", "head",
                 "stored", "_aggregate")

    def __init__(self, path: str, agent: str, kind: str, size: int, mtime_ns: int, inode: int,
                 offset: int, tail: str, aggregate: Mapping[str, Any] | None = None, *,
                 head: Mapping[str, Any] | None = None,
                 stored: StoredAggregate | None = None) -> None:
        if aggregate is None and stored is None:
            raise ValueError("a file record needs its aggregate or where it is kept")
        self.path = path
        self.agent = agent
        self.kind = kind
        self.size = size
        self.mtime_ns = mtime_ns
        self.inode = inode
        self.offset = offset
        self.tail = tail
        head = head if head is not None else aggregate
        assert head is not None
        self.head: Mapping[str, Any] = head
        self.stored = stored
        self._aggregate = aggregate

    def __repr__(self) -> str:
        return (f"FileRecord({self.path!r}, {self.agent!r}, {self.kind!r}, size={self.size}, "
                f"offset={self.offset})")

    @property
    def aggregate(self) -> Mapping[str, Any]:
        """The whole aggregate, read from its store once.

        Raises:
            AggregateLost: it was kept and cannot be read back.
        """
        if self._aggregate is None:
            assert self.stored is not None
            self._aggregate = self.stored.read(self.path)
        return self._aggregate

    @property
    def loaded(self) -> bool:
        """The whole aggregate is in memory (read from the file, or from its store already)."""
        return self._aggregate is not None

    def private_aggregate(self) -> dict[str, Any]:
        """A copy of the whole aggregate that the caller may change.

        Raises:
            AggregateLost: it was kept and cannot be read back.
        """
        if self._aggregate is None and self.stored is not None:
            return self.stored.read(self.path)  # a new object: no copy needed
        copy: dict[str, Any] = json.loads(json.dumps(self.aggregate))
        return copy

    @property
    def torn_tail(self) -> bool:
        """The file ended in bytes without a newline when last read."""
        return self.size > self.offset

    def unchanged(self, st: os.stat_result) -> bool:
        """The file still has the size, mtime and inode it had when read."""
        return (
            st.st_size == self.size
            and st.st_mtime_ns == self.mtime_ns
            and st.st_ino == self.inode
        )

    def stat_dict(self) -> dict[str, Any]:
        """The record without its whole aggregate, as JSON: the stats and the head."""
        return {
            "agent": self.agent,
            "kind": self.kind,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "inode": self.inode,
            "offset": self.offset,
            "tail": self.tail,
            "head": self.head,
        }

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON, its whole aggregate included.

        Raises:
            AggregateLost: its aggregate was kept and cannot be read back.
        """
        return {**self.stat_dict(), "aggregate": self.aggregate}

    @classmethod
    def from_dict(cls, path: str, data: Mapping[str, Any],
                  stored: StoredAggregate | None = None) -> FileRecord:
        """A record read back from `to_dict`, or from `stat_dict` with where its aggregate is
        kept (`stored`).

        Raises:
            KeyError, TypeError, ValueError: `data` is not a record.
        """
        head = data["head"]
        aggregate = data.get("aggregate") if stored is None else None
        if not isinstance(head, dict) or (stored is None and not isinstance(aggregate, dict)):
            raise TypeError("head or aggregate is not an object")
        return cls(
            path=path,
            agent=str(data["agent"]),
            kind=str(data["kind"]),
            size=int(data["size"]),
            mtime_ns=int(data["mtime_ns"]),
            inode=int(data["inode"]),
            offset=int(data["offset"]),
            tail=str(data["tail"]),
            aggregate=aggregate,
            head=head,
            stored=stored,
        )


@dataclass
class ScanReport:
    """What one scan did: for incrementality figures, and for what it could not read.

    `sessions`, `subagents` and `orphans` count what the files hold, whether assembled this
    time or not, and `session_paths` are the files the sessions are listed under
    (`NativeSession.path`); `orphan_subagents` are the subagents without a parent that were
    assembled (all of them, unless the scan assembled only what changed); `vanished` the native
    ids of the sessions the previous state held and the files no longer do.
    """

    agent: str
    root: str
    files_seen: int = 0
    files_unchanged: int = 0
    files_opened: int = 0
    bytes_read: int = 0
    malformed_lines: int = 0
    sessions: int = 0
    subagents: int = 0
    orphans: int = 0
    torn_files: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    empty_files: list[str] = field(default_factory=list)
    orphan_subagents: list[NativeSubagent] = field(default_factory=list)
    session_paths: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    # The files with lines the importer could not read (not a JSON object, or a record of a
    # kind it does not know), each with how many (an importer that reads every file each
    # time fills it: Gemini CLI's).
    unread_lines: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        data = asdict(self)
        data["unreadable"] = [list(item) for item in self.unreadable]
        data["orphan_subagents"] = [s.to_dict() for s in self.orphan_subagents]
        return data


@dataclass
class ImportState:
    """Per-file import state of every native log read so far (both agents), JSON-serialisable.

    `links` is what an importer keeps about its files together rather than one by one, by agent
    (JSON); `report` describes the scan that produced this state and is not serialised.
    """

    files: dict[str, FileRecord] = field(default_factory=dict)
    links: dict[str, Any] = field(default_factory=dict)
    report: ScanReport | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON, every whole aggregate included.

        Raises:
            AggregateLost: an aggregate was kept and cannot be read back.
        """
        return {
            "version": STATE_VERSION,
            "files": {path: self.files[path].to_dict() for path in sorted(self.files)},
            "links": self.links,
        }

    @classmethod
    def from_dict(cls, data: object,
                  stored: Callable[[str, Mapping[str, Any]], StoredAggregate | None] | None = None
                  ) -> ImportState:
        """The state read back from `to_dict`; anything unreadable starts afresh (a full import).

        With `stored`, the records are stat records (`FileRecord.stat_dict`) and `stored(path,
        record)` says where each one's aggregate is kept (None: it is not, and the file is
        parsed again).
        """
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            return cls()
        files: dict[str, FileRecord] = {}
        raw_files = data.get("files")
        if not isinstance(raw_files, dict):
            return cls()
        for path, raw in raw_files.items():
            try:
                where = stored(str(path), raw) if stored is not None else None
                if stored is not None and where is None:
                    continue
                files[str(path)] = FileRecord.from_dict(str(path), raw, where)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue  # that file is simply parsed again
        links = data.get("links")
        return cls(files=files, links=links if isinstance(links, dict) else {})

    def dumps(self) -> str:
        """The state as a JSON document."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str | bytes) -> ImportState:
        """The state parsed from `dumps`; a corrupt document gives an empty state."""
        try:
            return cls.from_dict(json.loads(text))
        except ValueError:
            return cls()

    def records(self, agent: str) -> dict[str, FileRecord]:
        """The file records of one agent, by path."""
        return {path: rec for path, rec in self.files.items() if rec.agent == agent}


def count(table: dict[str, int], key: str) -> None:
    """Add one to `table[key]`."""
    table[key] = table.get(key, 0) + 1


class LineCounts:
    """What both importers' aggregates share: a JSON-able `data` dict counting lines, entry
    types and unusable lines (keys `lines`, `types`, `malformed`)."""

    data: dict[str, Any]

    def dump(self) -> dict[str, Any]:
        """The aggregate as JSON."""
        return self.data

    def malformed(self, reason: str) -> None:
        """Count one unusable line."""
        count(self.data["malformed"], reason)

    def count_line(self, entry: dict[str, Any]) -> str:
        """Count one parsed line and return its `type` (`<missing>` when it has none)."""
        self.data["lines"] += 1
        kind = entry.get("type")
        if not isinstance(kind, str):
            kind = "<missing>"
        count(self.data["types"], kind)
        return kind


class FileAggregate(Protocol):
    """The partial summary of one file that an importer builds line by line."""

    def feed(self, entry: dict[str, Any]) -> None:
        """Take one parsed line."""

    def malformed(self, reason: str) -> None:
        """Count one line that could not be used (`invalid_utf8`, `not_json`, `not_object`)."""

    def dump(self) -> dict[str, Any]:
        """The aggregate as JSON, from which the importer can resume."""

    def head(self) -> dict[str, Any]:
        """The small part of the dumped aggregate the importer needs without the rest (JSON)."""


def list_dir(path: str) -> list[tuple[str, bool]]:
    """The names in `path` with whether each is a directory; empty when `path` cannot be listed.

    The importers discover files only through this function, so a test can change the order.
    """
    try:
        with os.scandir(path) as entries:
            found = []
            for entry in entries:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                found.append((entry.name, is_dir))
            return found
    except OSError:
        return []


_loads = jsonbulk.loads


def _fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def refresh_file(
    path: str,
    st: os.stat_result,
    previous: FileRecord | None,
    agent: str,
    kind: str,
    start: Callable[[dict[str, Any] | None], FileAggregate],
    report: ScanReport,
) -> FileRecord | None:
    """Bring one file's record up to date, reading no more of it than it changed.

    `start(None)` makes an empty aggregate, `start(data)` resumes from a dumped one (a private
    copy). Returns `previous` itself when the file is unchanged, the new record after reading,
    or `previous` (possibly None) when the file cannot be read, which is added to the report.
    Only a file that changed has its kept aggregate read (to resume from it).

    Raises:
        AggregateLost: the previous record's aggregate cannot be read back.
    """
    report.files_seen += 1
    if previous is not None and previous.kind == kind and previous.unchanged(st):
        report.files_unchanged += 1
        return previous
    try:
        handle = open(path, "rb")
    except OSError as exc:
        report.unreadable.append((path, exc.strerror or type(exc).__name__))
        return previous
    with handle:
        report.files_opened += 1
        try:
            opened = os.fstat(handle.fileno())
            offset, aggregate = _resume_point(handle, opened, previous, kind, start)
            handle.seek(offset)
            position = offset
            end = -1
            feed = aggregate.feed
            # The loop of every line of every log: kept to the parser and the aggregate's feed.
            for raw in handle:
                if raw[-1] != 10:  # no newline: a torn last line, left unparsed
                    end = position + len(raw)
                    break
                position += len(raw)
                body = raw.strip()
                if not body:
                    continue
                try:
                    entry = _loads(body)
                except UnicodeDecodeError:
                    aggregate.malformed("invalid_utf8")
                    continue
                except ValueError:  # not JSON, or nested deeper than jsonwire.MAX_DEPTH
                    aggregate.malformed("not_json")
                    continue
                if entry.__class__ is dict:
                    feed(entry)
                else:
                    aggregate.malformed("not_object")
            if end < 0:
                end = position
            report.bytes_read += end - offset
            tail = b""
            if position:
                handle.seek(max(0, position - _TAIL_BYTES))
                tail = handle.read(min(position, _TAIL_BYTES))
        except OSError as exc:
            report.unreadable.append((path, exc.strerror or type(exc).__name__))
            return previous
    return FileRecord(
        path=path,
        agent=agent,
        kind=kind,
        # Where reading stopped, torn bytes included: with the mtime taken before reading, a
        # write during the read shows up as a change at the next scan.
        size=end,
        mtime_ns=opened.st_mtime_ns,
        inode=opened.st_ino,
        offset=position,
        tail=_fingerprint(tail),
        aggregate=aggregate.dump(),
        head=aggregate.head(),
    )


def _resume_point(
    handle: Any,
    opened: os.stat_result,
    previous: FileRecord | None,
    kind: str,
    start: Callable[[dict[str, Any] | None], FileAggregate],
) -> tuple[int, FileAggregate]:
    """Where to start reading, and the aggregate to continue: the old one if only appended to.

    Raises:
        AggregateLost: the previous record's aggregate cannot be read back.
    """
    if (
        previous is not None
        and previous.kind == kind
        and previous.inode == opened.st_ino
        and previous.offset > 0
        and opened.st_size >= previous.offset
    ):
        handle.seek(max(0, previous.offset - _TAIL_BYTES))
        before = handle.read(min(previous.offset, _TAIL_BYTES))
        if _fingerprint(before) == previous.tail:
            # A private copy: the previous state stays as it was.
            return previous.offset, start(previous.private_aggregate())
    return 0, start(None)


def normalise_timestamp(value: object) -> str | None:
    """An ISO-8601 timestamp as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`, or None when it is not one.

    The normal form sorts as text in time order, so aggregates compare strings.
    """
    if not isinstance(value, str):
        return None
    if len(value) == 24 and value[10] == "T" and value[-1] == "Z" and value[19] == ".":
        return value  # already normal, the common case: no parsing on the hot path
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    parsed = parsed.astimezone(timezone.utc)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.") + f"{parsed.microsecond // 1000:03d}Z"


def clip(text: str) -> str:
    """A prompt cut to its preview length."""
    return text if len(text) <= PROMPT_PREVIEW_CHARS else text[:PROMPT_PREVIEW_CHARS]
