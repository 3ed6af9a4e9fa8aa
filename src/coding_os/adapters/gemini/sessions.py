"""Gemini CLI's own session files, read as native sessions (DESIGN.md §9).

Layout under the Gemini dir (`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`; checked with 0.61.0)::

    projects.json                              {"projects": {"<project path>": "<slug>"}}
    tmp/<slug>/.project_root                   the project path again (the slug's owner)
    tmp/<slug>/chats/session-<time>-<id8>.jsonl          a session (0.39 and later)
    tmp/<slug>/chats/session-<time>-<id8>.json           a session before 0.39: one document
    tmp/<slug>/chats/<session id>/<subagent id>.jsonl    the session's subagents

`<time>` is `YYYY-MM-DDTHH-MM`, or the epoch in milliseconds for a session imported with
`--session-file`; older versions named the project folder by the sha256 of its path (the
`projectHash` of every session) instead of a slug.

A `.jsonl` file is a metadata line (`sessionId`, `projectHash`, `startTime`, `lastUpdated`,
`kind`: `main` or `subagent`, a subagent's `directories`), then records replayed in order
(`coding_os.adapters.gemini.records`): messages upserted by `id` (what a message holds:
`coding_os.adapters.gemini.messages`), `{"$set": …}` and `{"$rewindTo": id}`. A `$set` of
`summary` (written into the previous session by a later start of the CLI, or a subagent's
result) is the session's title; without one, the first prompt is (never the injected
`<session_context>`). A `.json` file (before 0.39) is one object: the metadata with a
`messages` array; 0.61 resumes it into a `.jsonl` beside it.

Counts are those of the live conversation (what Gemini CLI would resume): prompts are user
messages with typed text (not the injected context, not a `/command`, not tool responses),
assistant messages are `gemini` messages, tool calls are their `toolCalls`. Lines that are not
JSON objects are counted, never an error; fields and message types this module does not read are
counted and kept. One session may have several files (a `.json` and the `.jsonl` it was resumed
into; an empty file a resume or an import starts beside the real one): the one with the most
of the conversation is the session's, the others are listed in `paths`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coding_os import durable, frozen, jsonbulk, jsonwire
from coding_os.adapters import is_native_id, log_dir
from coding_os.adapters.gemini.messages import (
    KNOWN_MESSAGE_TYPES,
    NOTICE_TYPES,
    GeminiEntry,
    GeminiTokens,
    add_tokens,
    conversation_entries,
    message_parts,
    message_tokens,
    response_counts,
    user_kind,
)
from coding_os.adapters.gemini.records import Replay
from coding_os.adapters.native import first_session_id
from coding_os.errors import CosError, NotFound, StateIOError

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_LINE_BYTES",
    "GeminiConversation",
    "FileKey",
    "GeminiScan",
    "GeminiSession",
    "KnownFile",
    "default_gemini_dir",
    "file_key",
    "is_subagent_name",
    "read_conversation",
    "read_projects",
    "read_session",
    "scan_gemini",
    "subagent_files",
]

KNOWN_MESSAGE_FIELDS = frozenset({"id", "timestamp", "type", "content", "displayContent",
                                  "thoughts", "tokens", "model", "toolCalls"})
KNOWN_METADATA_FIELDS = frozenset({"sessionId", "projectHash", "startTime", "lastUpdated", "kind",
                                   "directories", "summary", "memoryScratchpad"})
MAX_LINE_BYTES = 64 << 20
"""A longer line of a `.jsonl` session (one message, or a whole conversation in a `$set`) is
counted as unreadable and skipped, never held in memory."""
MAX_JSON_BYTES = 64 << 20
"""A larger `.json` session (before 0.39) is reported, not read."""
MAX_REGISTRY_BYTES = 4 << 20
PREVIEW_CHARS = 2000
TITLE_CHARS = 200
_READ_CHUNK = 1 << 20
_WHOLE_READ = 8 << 20  # a file this small is read at once (less than MAX_LINE_BYTES)
_IMPORTED = "Imported session from "
_SESSION_NAME = re.compile(r"^session-.+-[0-9A-Za-z_-]{1,8}\.jsonl?$")
_PROJECT_HASH = re.compile(r"^[0-9a-f]{64}$")
_RESERVED_DIRS = frozenset({"chats", "logs", "tool-outputs"})
# The record Gemini CLI writes after every message (a third of a session's lines), as it writes
# it; with a time of these characters alone it is read without the JSON parser.
_LAST_UPDATED = b'{"$set":{"lastUpdated":"'
_LAST_UPDATED_END = b'"}}'
_STAMP_BYTES = b"0123456789-:.+TZ"


@dataclass(frozen=True)
class GeminiSession:
    """One Gemini CLI session (or subagent) in the words coding-os uses for every session.

    See the module docstring for what is counted. `metadata` is the session's merged metadata
    as Gemini wrote it (unknown fields kept); `unknown_fields` counts the metadata and message
    fields this module does not read (`metadata:<name>`, `message:<name>`), `unknown_types` the
    message types it does not know; `malformed_lines` counts the lines that held no JSON object,
    by reason (`not_json`, `not_object`, `too_long`); `torn_tail` says the last line was cut off.
    `tokens` is the spend of the live conversation's model responses (a fork's: not of those it
    copied), `recorded_tokens` that of every response the file recorded (rewound ones too).
    `imported_from` is the file a `--session-file` import names, `forked_from` the session of
    that file when a scan found it. `delegations` are the (agent id, agent name) of the
    subagents the session ran. `live_ids` and `message_tokens` (the live messages' ids, and
    the model responses' tokens by id of a session imported from another file, `imported_from`)
    are kept for those links, and `bytes_read` (the bytes read
    of its files, `paths`) for a scan's report; the three are left out of `to_dict`.
    `git_branch` is always None: Gemini CLI 0.61 records no branch.
    """

    native_id: str
    path: str
    paths: tuple[str, ...] = ()
    format: str = "jsonl"
    kind: str | None = None
    parent: str | None = None
    agent_name: str | None = None
    project: str | None = None
    project_hash: str | None = None
    cwd: str | None = None
    directories: tuple[str, ...] = ()
    started: str | None = None
    last_active: str | None = None
    title: str | None = None
    title_source: str | None = None
    summary: str | None = None
    first_prompt: str | None = None
    last_prompt: str | None = None
    messages: int = 0
    user_messages: int = 0
    assistant_messages: int = 0
    tool_calls: int = 0
    thoughts: int = 0
    context_messages: int = 0
    tool_result_messages: int = 0
    notices: int = 0
    tokens: GeminiTokens = GeminiTokens()
    recorded_tokens: GeminiTokens = GeminiTokens()
    model: str | None = None
    models: tuple[str, ...] = ()
    git_branch: str | None = None
    imported_from: str | None = None
    forked_from: str | None = None
    copied_messages: int = 0
    rewinds: int = 0
    rewound_messages: int = 0
    delegations: tuple[tuple[str, str], ...] = ()
    subagents: tuple[GeminiSession, ...] = ()
    message_types: Mapping[str, int] = field(default_factory=dict)
    unknown_types: Mapping[str, int] = field(default_factory=dict)
    unknown_fields: Mapping[str, int] = field(default_factory=dict)
    record_counts: Mapping[str, int] = field(default_factory=dict)
    malformed_lines: Mapping[str, int] = field(default_factory=dict)
    torn_tail: bool = False
    warnings: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    live_ids: tuple[str, ...] = ()
    message_tokens: Mapping[str, GeminiTokens] = field(default_factory=dict)
    bytes_read: int = 0

    @property
    def unreadable_lines(self) -> int:
        """Lines that held no JSON object, whatever the reason."""
        return sum(self.malformed_lines.values())

    @property
    def tokens_with_subagents(self) -> GeminiTokens:
        """The session's tokens plus those of its subagents."""
        total = self.tokens
        for subagent in self.subagents:
            total = total + subagent.tokens
        return total

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON (without the per-message ids and tokens it keeps for links)."""
        data: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            if item.name in ("live_ids", "message_tokens", "bytes_read"):
                continue
            value = getattr(self, item.name)
            if isinstance(value, GeminiTokens):
                value = value.to_dict()
            elif item.name == "subagents":
                value = [subagent.to_dict() for subagent in value]
            elif item.name == "delegations":
                value = [list(pair) for pair in value]
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            data[item.name] = value
        return data


# A scan makes a session of every file: without the frozen constructor's call per field.
_new_session = frozen.maker(GeminiSession)


@dataclass(frozen=True)
class GeminiConversation:
    """A session with its live conversation: `entries` in order; `messages` as written (with
    what a later rewrite of the same message left out filled in from its earlier versions, see
    `Replay.live`); and the records that are none of Gemini's known kinds (`other_records`)."""

    session: GeminiSession
    entries: tuple[GeminiEntry, ...]
    messages: tuple[Mapping[str, Any], ...]
    other_records: tuple[Mapping[str, Any], ...] = ()


FileKey = tuple[int, int, int, int, int]
"""What says a file is the one read before, unchanged: its size, mtime and ctime (ns), inode
and device (`file_key`). Gemini CLI appends to a session file; a file rewritten in place has
another mtime and ctime, one replaced another inode."""


def file_key(info: os.stat_result) -> FileKey:
    """The `FileKey` of a file's status."""
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


@dataclass(frozen=True)
class KnownFile:
    """A session or subagent file as a scan read it: its key when it was opened (before the
    read, so any later change gives another), where it was found (the project of its folder,
    the session whose subagent it is) and the session read from it, before `scan_gemini`
    merged it with the session's other files and linked it to others."""

    key: FileKey
    project: str | None
    parent: str | None
    session: GeminiSession


@dataclass
class GeminiScan:
    """Every session found under a Gemini dir: main sessions newest first (their subagents
    attached), subagents whose parent was not found (`orphans`), and one line per file or
    folder that could not be read (`problems`). `files` holds each `.jsonl` file found and
    readable, as read or (`unchanged` of them) as known from an earlier scan: what the next
    scan is given as `known`. `bytes_read` counts the bytes of the files read this time."""

    root: str
    sessions: list[GeminiSession] = field(default_factory=list)
    orphans: list[GeminiSession] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    files: dict[str, KnownFile] = field(default_factory=dict)
    unchanged: int = 0
    bytes_read: int = 0


# -- where Gemini CLI keeps its sessions ---------------------------------------------------------


def default_gemini_dir(environ: Mapping[str, str] | None = None) -> str:
    """The Gemini dir: `$GEMINI_CLI_HOME/.gemini` (the CLI's own override of the home
    directory), else `~/.gemini` (adapters.LOG_DIRS)."""
    return log_dir("gemini", os.environ if environ is None else environ)


def _read_small_json(path: str, limit: int) -> object:
    """The JSON document of a small regular file; None when there is none or it is no JSON.

    Raises:
        CosError: it is not a regular file or is larger than `limit`.
        OSError: it cannot be read.
    """
    data = durable.read_regular(path, limit)
    if data is None:
        return None
    try:
        return jsonwire.loads(data)
    except ValueError:
        return None


def read_projects(gemini_dir: str, problems: list[str] | None = None) -> dict[str, str]:
    """The project path of each slug folder under `<gemini dir>/tmp`: from `projects.json`,
    else the folder's `.project_root`; a folder named by a project's sha256 (older versions)
    maps to the registered project with that hash. A file that cannot be read is reported in
    `problems`, never raised."""
    problems = [] if problems is None else problems
    slugs: dict[str, str] = {}
    registry_path = os.path.join(gemini_dir, "projects.json")
    try:
        registry = _read_small_json(registry_path, MAX_REGISTRY_BYTES)
    except (CosError, OSError) as exc:
        problems.append(f"{registry_path}: {_reason(exc)}")
        registry = None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    if isinstance(projects, dict):
        for path, slug in projects.items():
            if isinstance(path, str) and isinstance(slug, str) and _plain_name(slug):
                slugs.setdefault(slug, path)
    hashes = {hashlib.sha256(path.encode("utf-8")).hexdigest(): path for path in slugs.values()}
    for name, is_dir in _entries(os.path.join(gemini_dir, "tmp"), problems):
        if not is_dir or name in slugs:
            continue
        if _PROJECT_HASH.match(name) and name in hashes:
            slugs[name] = hashes[name]
            continue
        marker = os.path.join(gemini_dir, "tmp", name, ".project_root")
        try:
            data = durable.read_regular(marker, 64 << 10)
        except (CosError, OSError) as exc:
            problems.append(f"{marker}: {_reason(exc)}")
            continue
        if data:
            try:
                slugs[name] = data.decode("utf-8").strip()
            except UnicodeDecodeError:
                problems.append(f"{marker}: not UTF-8")
    return slugs


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def _entries(folder: str, problems: list[str]) -> list[tuple[str, bool]]:
    """The names in `folder` and whether each is a directory (a symlink is neither followed
    nor listed); an absent folder is empty."""
    try:
        with os.scandir(folder) as found:
            listed = []
            for entry in found:
                try:
                    if entry.is_symlink():
                        continue
                    listed.append((entry.name, entry.is_dir(follow_symlinks=False)))
                except OSError:
                    continue
            return sorted(listed)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        problems.append(f"{folder}: {_reason(exc)}")
        return []


# -- reading one file ----------------------------------------------------------------------------


@dataclass
class _Read:
    """What reading a file's lines found besides its records."""

    malformed: dict[str, int] = field(default_factory=dict)
    torn_tail: bool = False
    imported_from: str | None = None
    size: int = 0  # bytes read
    key: FileKey | None = None  # of a `.jsonl` file, when it was opened

    def bad(self, reason: str) -> None:
        self.malformed[reason] = self.malformed.get(reason, 0) + 1


def _lines(fd: int, size: int, read: _Read) -> Iterator[bytes]:
    """The lines of the first `size` bytes of `fd` without their newline, read in chunks (a
    file too large to read at once); a line longer than MAX_LINE_BYTES is counted and skipped.
    A last line without its newline is yielded when it holds a JSON object, else reported as a
    torn tail (a write cut off)."""
    pending = bytearray()
    skipping = False
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(_READ_CHUNK, size - offset), offset)
        if not chunk:
            break
        offset += len(chunk)
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping:
                if len(pending) + len(piece) > MAX_LINE_BYTES:
                    pending.clear()
                    skipping = True
                else:
                    pending += piece
            if end < 0:
                break
            start = end + 1
            if skipping:
                read.bad("too_long")
                skipping = False
            else:
                yield bytes(pending)
                pending.clear()
    if skipping:
        read.bad("too_long")
    elif pending.strip():
        line = bytes(pending)
        if jsonbulk.loads_object(line) is None:
            read.torn_tail = True  # cut off mid-append: reported, not counted as malformed
        else:
            yield line


def _feed(lines: Iterable[bytes], read: _Read, state: Replay) -> None:
    """`state` fed the records of `lines` (read as UTF-8); a line that holds no JSON object is
    counted in `read` (blank lines are skipped). The loop of every line of every session a scan
    reads."""
    loads = jsonbulk.loads
    feed = state.feed
    set_last_updated = state.set_last_updated
    start, stop = len(_LAST_UPDATED), -len(_LAST_UPDATED_END)
    for line in lines:
        if line.startswith(_LAST_UPDATED) and line.endswith(_LAST_UPDATED_END) \
                and len(line) >= start - stop and not (at := line[start:stop]).strip(_STAMP_BYTES):
            # What the parser would make of it (a string of these characters has no escape).
            set_last_updated(at.decode("ascii"))
            continue
        try:
            value = loads(line)
        except ValueError:
            # Blank as bytes are (ASCII whitespace): a line of other spaces is no record.
            if line.strip():
                read.bad("not_json")
            continue
        if not isinstance(value, dict):
            read.bad("not_object")
            continue
        if read.imported_from is None and value.get("type") == "info":
            _note_import(value, read)
        feed(value)


def _whole(fd: int, size: int) -> bytes:
    """The first `size` bytes of `fd` (fewer if it is shorter now)."""
    chunks = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay_lines(fd: int, size: int, read: _Read, state: Replay) -> None:
    """`state` fed the records of the first `size` bytes of `fd` (see `_lines`).

    Raises:
        OSError: the file cannot be read.
    """
    if size > min(_WHOLE_READ, MAX_LINE_BYTES):
        _feed(_lines(fd, size, read), read, state)
        return
    # Most sessions: one read, split in C, each line decoded and parsed once.
    *whole, tail = _whole(fd, size).split(b"\n")
    _feed(whole, read, state)
    if tail.strip():
        record = jsonbulk.loads_object(tail)
        if record is None:
            read.torn_tail = True  # cut off mid-append: reported, not counted as malformed
        else:
            _note_import(record, read)
            state.feed(record)


def _note_import(record: Mapping[str, Any], read: _Read) -> None:
    """Remember the file a `--session-file` import names (its first, `info`, message: a later
    `$set` of the messages drops it from the live conversation)."""
    if read.imported_from is None and record.get("type") == "info":
        content = record.get("content")
        if isinstance(content, str) and content.startswith(_IMPORTED):
            read.imported_from = content[len(_IMPORTED):].strip() or None


def _replay_file(path: str) -> tuple[Replay, _Read, str]:
    """The replay of a session file, what its reading found, and its format.

    Raises:
        NotFound: there is no file at `path`.
        InvalidInput: it is not a regular file, or a `.json` larger than MAX_JSON_BYTES.
        StateIOError: it cannot be read (or, `.jsonl`, is not a regular file).
    """
    read = _Read()
    state = Replay()
    if path.endswith(".json"):
        try:
            data = durable.read_regular(path, MAX_JSON_BYTES)
        except OSError as exc:
            raise StateIOError(f"cannot read Gemini session {path}: {_reason(exc)}") from None
        if data is None:
            raise NotFound(f"no Gemini session at {path}")
        read.size = len(data)
        document = jsonbulk.loads_object(data)
        if document is not None and isinstance(document.get("sessionId"), str):
            _note_import_messages(document.get("messages"), read)
            state.load(document)
            return state, read, "json"
        # Not the one document of the old format: read it as lines, as Gemini CLI does first.
        _feed(data.splitlines(), read, state)
        return state, read, "json"
    fd, info = durable.open_log(path, "Gemini session")  # Gemini CLI takes no lock
    read.size = size = info.st_size
    read.key = file_key(info)
    try:
        _replay_lines(fd, size, read, state)
    except OSError as exc:
        raise StateIOError(f"cannot read Gemini session {path}: {_reason(exc)}") from None
    finally:
        os.close(fd)
    return state, read, "jsonl"


def _note_import_messages(messages: object, read: _Read) -> None:
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                _note_import(message, read)


# -- a session -----------------------------------------------------------------------------------


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit]


def _native_id(path: str, metadata: Mapping[str, Any]) -> tuple[str, list[str]]:
    session_id = _string(metadata.get("sessionId"))
    if session_id:
        return session_id, []
    return os.path.splitext(os.path.basename(path))[0], [f"{path}: no sessionId in the file"]


def _session_of(path: str, state: Replay, read: _Read, file_format: str,
                project: str | None, parent: str | None, with_entries: bool = False
                ) -> tuple[GeminiSession, list[dict[str, Any]], list[GeminiEntry]]:
    """The session of a replayed file, its live messages, and (`with_entries`, else none)
    its conversation entries."""
    metadata = state.metadata
    first = state.first_metadata or {}
    native_id, warnings = _native_id(path, metadata)
    messages = state.live()
    types: dict[str, int] = {}
    unknown_fields: dict[str, int] = {}
    if not KNOWN_METADATA_FIELDS.issuperset(metadata):
        for name in metadata:
            if name not in KNOWN_METADATA_FIELDS:
                unknown_fields[f"metadata:{name}"] = 1
    prompts: list[str] = []
    contexts = tool_results = responses = notices = 0
    totals = [0] * 6  # GeminiTokens' fields, in order
    counted: set[str] = set()  # the live responses whose tokens are in `totals`
    models: list[str] = []
    stamps: list[str] = []
    tool_calls = thoughts = 0
    delegations: list[tuple[str, str]] = []
    known_fields = KNOWN_MESSAGE_FIELDS
    for message in messages:
        kind = message.get("type")
        if kind.__class__ is not str:
            kind = str(kind)
        types[kind] = types.get(kind, 0) + 1
        if not known_fields.issuperset(message):
            for name in message.keys() - known_fields:
                unknown_fields[f"message:{name}"] = unknown_fields.get(f"message:{name}", 0) + 1
        stamp = message.get("timestamp")
        if isinstance(stamp, str):
            stamps.append(stamp)
        if kind == "user":
            what, text = user_kind(message_parts(message.get("content")))
            if what == "prompt":
                prompts.append(text)
            elif what == "tool_result":
                tool_results += 1
            elif what == "context":
                contexts += 1
        elif kind == "gemini":
            responses += 1
            if add_tokens(totals, message.get("tokens")):
                counted.add(message["id"])
            model = message.get("model")
            if isinstance(model, str) and model and not (models and models[-1] == model):
                if model in models:
                    models.remove(model)
                models.append(model)
            calls, thought_count, ran = response_counts(message)
            tool_calls += calls
            thoughts += thought_count
            if ran:
                delegations.extend(ran)
        elif kind in NOTICE_TYPES:
            notices += 1
    tokens = GeminiTokens(*totals)
    # A live response's last recorded tokens are those counted above; the others are read.
    earlier = False
    for message_id, details in state.details.items():
        if message_id not in counted and add_tokens(totals, details.get("tokens")):
            earlier = True
    recorded = GeminiTokens(*totals) if earlier else tokens
    # The tokens of each response, for a session imported from another (see `_link_forks`).
    tokens_by_id: dict[str, GeminiTokens] = {}
    if read.imported_from is not None:
        for message in messages:
            spent = message_tokens(message.get("tokens")) \
                if message.get("type") == "gemini" else None
            if spent is not None:
                tokens_by_id[str(message["id"])] = spent
    entries = conversation_entries(messages) if with_entries else []
    summary = _string(metadata.get("summary"))
    first_prompt = prompts[0] if prompts else None
    title, source = None, None
    if summary and summary.strip():
        title, source = _one_line(summary, TITLE_CHARS), "summary"
    elif first_prompt:
        title, source = _one_line(first_prompt, TITLE_CHARS), "first_prompt"
    directories = metadata.get("directories")
    directories = tuple(d for d in directories if isinstance(d, str)) \
        if isinstance(directories, list) else ()
    started = _string(first.get("startTime")) or _string(metadata.get("startTime")) \
        or (min(stamps) if stamps else None)
    ends = [s for s in (_string(metadata.get("lastUpdated")), *stamps) if s]
    session = _new_session(
        native_id=native_id,
        path=path,
        paths=(path,),
        format=file_format,
        kind=_string(metadata.get("kind")),
        parent=parent,
        project=project,
        project_hash=_string(metadata.get("projectHash")),
        cwd=project or (directories[0] if directories else None),
        directories=directories,
        started=started,
        last_active=max(ends) if ends else started,
        title=title,
        title_source=source,
        summary=summary,
        first_prompt=_preview(first_prompt),
        last_prompt=_preview(prompts[-1] if prompts else None),
        messages=len(messages),
        user_messages=len(prompts),
        assistant_messages=responses,
        tool_calls=tool_calls,
        thoughts=thoughts,
        context_messages=contexts,
        tool_result_messages=tool_results,
        notices=notices,
        tokens=tokens,
        recorded_tokens=recorded,
        model=models[-1] if models else None,
        models=tuple(models),
        imported_from=read.imported_from,
        rewinds=state.counts["rewind"],
        rewound_messages=state.rewound,
        delegations=tuple(delegations),
        message_types=dict(sorted(types.items())),
        unknown_types={} if KNOWN_MESSAGE_TYPES.issuperset(types) else
        {k: v for k, v in sorted(types.items()) if k not in KNOWN_MESSAGE_TYPES},
        unknown_fields=dict(sorted(unknown_fields.items())),
        record_counts=dict(state.counts),
        malformed_lines=dict(sorted(read.malformed.items())),
        torn_tail=read.torn_tail,
        warnings=tuple(warnings),
        metadata=metadata,  # the replay's own, not shared
        live_ids=tuple(state.messages),
        message_tokens=tokens_by_id,
        bytes_read=read.size,
    )
    return session, messages, entries


def _preview(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS]


def read_session(path: str | os.PathLike[str], *, project: str | None = None,
                 parent: str | None = None) -> GeminiSession:
    """The session in one Gemini CLI session file (`.jsonl`, or `.json` before 0.39).

    `project` is the project path its folder belongs to (see `read_projects`), `parent` the
    session a subagent's folder is named after. Bad lines are counted, never raised.

    Raises:
        NotFound: there is no file at `path`.
        InvalidInput: it is not a regular file (a symlink, a FIFO), or a `.json` larger than
            MAX_JSON_BYTES.
        StateIOError: it cannot be read.
    """
    path = os.path.abspath(os.fspath(path))
    state, read, file_format = _replay_file(path)
    return _session_of(path, state, read, file_format, project, parent)[0]


def read_conversation(path: str | os.PathLike[str], *, project: str | None = None,
                      parent: str | None = None) -> GeminiConversation:
    """A session file's session and its live conversation as ordered entries.

    Raises:
        NotFound: there is no file at `path`.
        InvalidInput: it is not a regular file, or a `.json` larger than MAX_JSON_BYTES.
        StateIOError: it cannot be read.
    """
    path = os.path.abspath(os.fspath(path))
    state, read, file_format = _replay_file(path)
    session, messages, entries = _session_of(path, state, read, file_format, project, parent,
                                             with_entries=True)
    return GeminiConversation(session=session, entries=tuple(entries),
                              messages=tuple(messages), other_records=tuple(state.others))


# -- every session under a Gemini dir ------------------------------------------------------------


def _session_files(gemini_dir: str, problems: list[str]
                   ) -> Iterator[tuple[str, str | None, str | None]]:
    """(path, project, parent) of every session and subagent file under `<dir>/tmp`."""
    projects = read_projects(gemini_dir, problems)
    tmp = os.path.join(gemini_dir, "tmp")
    for slug, is_dir in _entries(tmp, problems):
        if not is_dir:
            continue
        chats = os.path.join(tmp, slug, "chats")
        project = projects.get(slug)
        # Names listed are of one part: joined by a separator (os.path.join, per file, costs).
        for name, sub_dir in _entries(chats, problems):
            if sub_dir:
                if name.lower() in _RESERVED_DIRS:
                    continue
                folder = chats + os.sep + name
                for agent_file, agent_dir in _entries(folder, problems):
                    if not agent_dir and agent_file.endswith((".jsonl", ".json")):
                        yield folder + os.sep + agent_file, project, name
            elif _SESSION_NAME.match(name):
                yield chats + os.sep + name, project, None


def is_subagent_name(native: str, relative: str) -> bool:
    """Whether `relative` names a subagent file of session `native` as Gemini CLI lays it out,
    relative to the folder of the session's file: `<native>/<subagent id>.jsonl`."""
    parent, sep, name = relative.partition("/")
    return bool(sep) and parent == native and is_native_id(native) and \
        name.endswith(".jsonl") and is_native_id(name[:-len(".jsonl")])


def subagent_files(path: str) -> list[tuple[str, str]]:
    """The subagent files of the Gemini session whose `.jsonl` file is `path`, as (name
    relative to the folder of `path`, path), sorted: each regular `<subagent id>.jsonl` of
    `<session id>/` beside it, the session id that of the file's metadata line. A file that
    is not a `.jsonl` session (one of before 0.39), a symlink, or a name Gemini CLI does not
    give, is left out."""
    if not path.endswith(".jsonl"):
        return []
    native = first_session_id(path)
    if not is_native_id(native):
        return []
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), native)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):  # a symlink is not followed
            return []
    except OSError:
        return []
    found = []
    for name, is_dir in _entries(folder, []):
        relative = f"{native}/{name}"
        if not is_dir and is_subagent_name(native, relative):
            found.append((relative, os.path.join(folder, name)))
    return found


# A scan replaces a field of a third of the sessions: without running the constructor again.
_replaced = frozen.replacer(GeminiSession)


def _fullness(session: GeminiSession) -> tuple[int, int, str, str]:
    """Which of a session's files is the session's: the one with the most of the
    conversation, then a `.jsonl` over a `.json`, then the latest."""
    return (session.user_messages + session.assistant_messages, session.messages,
            "1" if session.format == "jsonl" else "0", session.last_active or "")


def _merge_files(found: list[GeminiSession]) -> list[GeminiSession]:
    """One session per native id (and parent): the fullest file, every path listed."""
    by_id: dict[tuple[str | None, str], list[GeminiSession]] = {}
    for session in found:
        by_id.setdefault((session.parent, session.native_id), []).append(session)
    merged = []
    for files in by_id.values():
        best = files[0]
        if len(files) > 1:
            files.sort(key=_fullness, reverse=True)
            best = _replaced(files[0], paths=tuple(s.path for s in files),
                             bytes_read=sum(s.bytes_read for s in files))
        merged.append(best)
    return merged


def _fork_source(session: GeminiSession, sessions: list[GeminiSession]) -> GeminiSession | None:
    """The session of the file `session` was imported from: the one with that path, else (the
    Gemini dir was moved or copied from another host) the one with a file of that name whose
    messages the import copied."""
    if not session.imported_from:
        return None
    name = os.path.basename(session.imported_from)
    own = set(session.live_ids)
    named = [other for other in sessions if other.native_id != session.native_id
             and any(os.path.basename(path) == name for path in other.paths)]
    for other in named:
        if session.imported_from in other.paths:
            return other
    for other in named:
        if own.intersection(other.live_ids):
            return other
    return None


def _link_forks(sessions: list[GeminiSession]) -> list[GeminiSession]:
    """Each imported session linked to the session it was imported from (see `_fork_source`):
    the copied messages keep their ids, and their tokens are the source's spend, not the
    fork's."""
    linked = []
    for session in sessions:
        source = _fork_source(session, sessions)
        if source is not None:
            copied = [i for i in session.live_ids if i in set(source.live_ids)]
            spent = GeminiTokens()
            for message_id in copied:
                spent = spent + session.message_tokens.get(message_id, GeminiTokens())
            session = _replaced(session, forked_from=source.native_id,
                                copied_messages=len(copied), tokens=session.tokens - spent,
                                recorded_tokens=session.recorded_tokens - spent)
        linked.append(session)
    return linked


def scan_gemini(gemini_dir: str | os.PathLike[str] | None = None,
                known: Mapping[str, KnownFile] | None = None) -> GeminiScan:
    """Every Gemini CLI session under `gemini_dir` (default: `default_gemini_dir()`), with its
    subagents; nothing here raises on a bad file or folder: it is reported in `problems`.

    `known` is an earlier scan's `files`: a file found at the same path and place (project,
    parent) with the same key is not read again, its session is the one known. Every file is
    read when `known` is None (or empty)."""
    root = os.path.abspath(os.fspath(gemini_dir)) if gemini_dir is not None \
        else default_gemini_dir()
    scan = GeminiScan(root=root)
    found: list[GeminiSession] = []
    for path, project, parent in _session_files(root, scan.problems):
        before = known.get(path) if known else None
        if before is not None and before.project == project and before.parent == parent:
            try:
                info = os.lstat(path)
            except OSError:
                info = None
            if info is not None and stat.S_ISREG(info.st_mode) and file_key(info) == before.key:
                found.append(before.session)
                scan.files[path] = before
                scan.unchanged += 1
                continue
        try:
            state, read, file_format = _replay_file(path)  # `path` is absolute
            session = _session_of(path, state, read, file_format, project, parent)[0]
        except CosError as exc:
            scan.problems.append(str(exc))
            continue
        found.append(session)
        scan.bytes_read += read.size
        if read.key is not None:
            scan.files[path] = KnownFile(read.key, project, parent, session)
    found = _merge_files(found)
    mains = [s for s in found if s.parent is None and s.kind != "subagent"]
    agents = [s for s in found if s.parent is not None or s.kind == "subagent"]
    mains = _link_forks(mains)
    names = {agent_id: name for main in mains for agent_id, name in main.delegations}
    by_parent: dict[str, list[GeminiSession]] = {}
    for agent in agents:
        agent = _replaced(agent, agent_name=names.get(agent.native_id))
        by_parent.setdefault(agent.parent or "", []).append(agent)
    for main in mains:
        own = sorted(by_parent.pop(main.native_id, []), key=lambda s: s.started or "")
        scan.sessions.append(_replaced(main, subagents=tuple(own)) if own else main)
    scan.orphans = [agent for agents_of in by_parent.values() for agent in agents_of]
    scan.sessions.sort(key=lambda s: (s.last_active or "", s.native_id), reverse=True)
    return scan

