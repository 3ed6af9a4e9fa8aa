"""Full-text search over what the agents did: observations, the work log, tasks and transcripts.

The database keeps one document per searchable text (`search_docs`) with a full-text index
beside it (SQLite FTS5; PostgreSQL `tsvector` with a GIN index). Observations, work-log lines
and tasks get their document in the transaction that stores them. Transcripts are canonical
files, so their messages are read into documents incrementally when a search runs
(`sync_transcripts`): each file's read position is kept in the database with its documents, in
one transaction, so a crash or two searchers at once never duplicate or lose a message. A
message's secrets are redacted before it is stored (redact.py), unless the project says
`redact: false`.

A query is words, never syntax: each whitespace-separated word must occur (its letters and
digits, as a phrase when punctuation splits it: `foo_bar` finds "foo bar"), in any case. Results
come newest first and page by document id, so the first page costs the same however many rows
match.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO
from dataclasses import dataclass

from coding_os import redact
from coding_os.errors import InvalidInput
from coding_os.state.tiers import Tiers
from coding_os.storage.base import SEARCH_KINDS, SearchDoc, SearchHit, SourceMark, Storage

__all__ = ["parse_query", "snippet", "sync_transcripts", "MAX_QUERY_CHARS", "MAX_TERMS",
           "search_page", "SearchPage", "check_request", "search_synced"]

MAX_QUERY_CHARS = 1000
MAX_TERMS = 16
MAX_PAGE = 100
SNIPPET_CHARS = 240
MESSAGE_CHARS = 8000  # a transcript message is searchable up to this length
_TAIL_BYTES = 256
_LEAF_TAIL_BYTES = 256 * 1024  # what is read before an append to find the live leaf there
_CHUNK_BYTES = 8 << 20
_WORD_PARTS = re.compile(r"[^\W_]+")
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "<permissions instructions>",
                     "# AGENTS.md instructions")


def parse_query(query: object) -> list[str]:
    """The terms of a search query: one per word, each the word's letters and digits, lower
    case, space separated.

    Raises:
        InvalidInput: not a string, too long, or without a single letter or digit.
    """
    if not isinstance(query, str):
        raise InvalidInput(f"search query must be text, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"search query longer than {MAX_QUERY_CHARS} characters")
    terms: list[str] = []
    for word in query.split():
        parts = _WORD_PARTS.findall(word.lower())
        if parts:
            term = " ".join(parts)
            if term not in terms:
                terms.append(term)
    if not terms:
        raise InvalidInput("search query needs at least one word of letters or digits")
    if len(terms) > MAX_TERMS:
        raise InvalidInput(f"search query has more than {MAX_TERMS} words")
    return terms


def snippet(text: str, terms: list[str], width: int = SNIPPET_CHARS) -> str:
    """The part of `text` around the first place a term occurs, at most `width` characters."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lower = flat.lower()
    found = [i for i in (lower.find(t.split()[0]) for t in terms) if i >= 0]
    start = max(0, min(found) - width // 4) if found else 0
    piece = flat[start:start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


@dataclass
class SearchPage:
    """One page of search results and the cursor of the next (None on the last page)."""

    hits: list[dict[str, object]]
    next_cursor: int | None

    def to_dict(self) -> dict[str, object]:
        return {"results": self.hits, "next_cursor": self.next_cursor}


def search_page(storage: Storage, query: object, kinds: list[str] | None = None,
                session: str | None = None, cursor: int | None = None,
                limit: int = 20) -> SearchPage:
    """One page of documents matching `query`, newest first.

    Raises:
        InvalidInput: a bad query, kind, cursor or limit.
        StorageError: the database cannot be read.
    """
    terms = parse_query(query)
    if kinds:
        unknown = [k for k in kinds if k not in SEARCH_KINDS]
        if unknown:
            raise InvalidInput(f"unknown search kind {unknown[0]!r}; use one of "
                               f"{', '.join(SEARCH_KINDS)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_PAGE}")
    if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int)
                               or cursor < 1):
        raise InvalidInput("cursor must be a positive whole number from a previous page")
    sessions = _session_keys(storage, session) if session else None
    hits = storage.search(terms, kinds=kinds, sessions=sessions, before=cursor, limit=limit + 1)
    more = len(hits) > limit
    hits = hits[:limit]
    cos_ids: dict[str, str] = {}
    for hit in hits:
        if hit.kind == "transcript" and hit.session and hit.session not in cos_ids:
            row = storage.index_row(hit.session)
            cos_ids[hit.session] = row.id if row is not None else hit.session
    return SearchPage([_hit(hit, terms, cos_ids) for hit in hits],
                      hits[-1].id if more and hits else None)


def check_request(query: object, cursor: object, limit: object) -> tuple[int | None, int]:
    """Refuse a search's bad input before anything is read; its cursor and page size.

    Raises:
        InvalidInput: a query without words or too long, a bad cursor or limit.
    """
    from coding_os.brain.paging import page_size, parse_cursor

    parse_query(query)
    return parse_cursor(cursor), page_size(limit, maximum=MAX_PAGE)


def search_synced(storage: Storage, tiers: Tiers, query: object, kinds: list[str] | None,
                  session: str | None, before: int | None, size: int,
                  progress: Progress | None = None) -> dict[str, object]:
    """`search_page` as JSON, once the project's transcripts are searchable as they are now
    (`sync_transcripts`; the index is expected fresh).

    Raises:
        InvalidInput: a bad kind.
        StorageError: the database cannot be used.
    """
    sync_transcripts(storage, tiers, progress)
    return search_page(storage, query, kinds, session, before, size).to_dict()


def _session_keys(storage: Storage, session: str) -> list[str]:
    """The ids a session's texts are filed under: its cos id, and the native id of the agent's
    own transcript (whichever of the two `session` is)."""
    keys = [session]
    row = storage.index_row(session)
    if row is not None:
        keys.extend(key for key in (row.id, row.native_id) if key and key not in keys)
    return keys


def _hit(hit: SearchHit, terms: list[str], cos_ids: dict[str, str]) -> dict[str, object]:
    session = cos_ids.get(hit.session, hit.session) if hit.session else None
    return {"kind": hit.kind, "ref": hit.ref, "session": session, "ts": hit.ts,
            "snippet": snippet(hit.text, terms)}


# Transcripts

Progress = Callable[[str], None]


def transcript_sources(tiers: Tiers) -> list[tuple[str, str]]:
    """(path, format) of every transcript the search reads: the main Claude Code transcripts
    and Codex rollouts the index knows (from its import state), the Gemini CLI sessions of this
    host its last refresh found, and cos's own."""
    from coding_os.sessions.index import STATE_FILE, cos_transcripts, native_files

    sources: list[tuple[str, str]] = []
    try:
        with open(os.path.join(tiers.state_dir, STATE_FILE), encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError):
        document = {}
    files = document.get("files") if isinstance(document, dict) else None
    if isinstance(files, dict):
        for path, record in files.items():
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == "session":
                sources.append((path, "claude"))
            elif kind == "rollout":
                sources.append((path, "codex"))
    sources.extend((path, "gemini") for path, (session, agent, _) in native_files(tiers).items()
                   if agent == "gemini" and session is not None)
    sources.extend((path, "cos") for path in cos_transcripts(tiers))
    return sources


def sync_transcripts(storage: Storage, tiers: Tiers, progress: Progress | None = None) -> int:
    """Read what the transcripts gained since the last sync into search documents; return how
    many documents were added. A file that cannot be read is skipped (the next sync retries).

    Raises:
        StorageError: the database cannot be used.
    """
    from coding_os.sessions.index import native_files

    say = progress or (lambda message: None)
    marks = storage.source_marks()
    added = 0
    redacting = redact.configured(tiers.state_dir)
    for path in marks:
        if not os.path.lexists(path):  # deleted, or moved to the trash: its text goes too
            storage.remove_source(path)
    sources = transcript_sources(tiers)
    # A Codex thread that gained a rollout (a revert writes a new one) may have left turns of
    # its older rollouts out of its live history: those are read again, keeping the live ones.
    threads = {_session_of(path, fmt) for path, fmt in sources
               if fmt == "codex" and path not in marks}
    live: dict[str, set[tuple[object, object]] | None] = {}
    sessions = {path: entry[0] for path, entry in native_files(tiers).items()}
    for path, fmt in sources:
        mark = marks.get(path)
        try:
            st = os.stat(path)
        except OSError:
            continue
        thread = _session_of(path, fmt) if fmt == "codex" else None
        again = thread in threads and mark is not None
        if not again and mark is not None and mark.inode == st.st_ino \
                and mark.read_to == st.st_size:
            continue
        if fmt == "gemini":
            added += _sync_gemini(storage, path, st, redacting, sessions.get(path))
            continue
        keep = None
        if thread is not None:
            if thread not in live:
                live[thread] = _codex_live(path)
            keep = live[thread]
        try:
            added += _sync_file(storage, path, fmt, st, None if again else mark, say,
                                redacting, keep, restart=again)
        except OSError:
            continue  # unreadable now: the next sync retries from the stored mark
    return added


def _sync_gemini(storage: Storage, path: str, st: os.stat_result, redacting: bool,
                 session: str | None) -> int:
    """Put the live conversation of a Gemini CLI session file in place of what was stored of
    it: Gemini writes a message again as it grows and rewrites the conversation on a resume or
    a rewind, so the file is read whole (adapters/gemini/sessions.py) whenever it changed; the
    typed prompts and the answers are searchable, each named by the file and its place."""
    from coding_os.adapters.gemini.sessions import read_conversation
    from coding_os.errors import CosError

    try:
        conversation = read_conversation(path)
    except CosError:
        return 0  # unreadable now: the next sync retries
    key = hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()
    owner = session or conversation.session.native_id
    docs = []
    for at, entry in enumerate(conversation.entries):
        text = (entry.text or "").strip() if entry.kind in ("prompt", "assistant") else ""
        if text:
            docs.append(SearchDoc("transcript", f"{key}:{at}", owner, entry.timestamp or "",
                                  (redact.redact(text) if redacting else text)[:MESSAGE_CHARS]))
    with open(path, "rb") as handle:
        handle.seek(max(0, st.st_size - _TAIL_BYTES))
        tail = handle.read(min(st.st_size, _TAIL_BYTES))
    return storage.add_source_docs(SourceMark(path, st.st_ino, st.st_size, _digest(tail)), docs,
                                   restart=True)


def _codex_live(path: str) -> set[tuple[object, object]] | None:
    """The (ordinal, timestamp) of every line of the live history of the Codex thread whose
    rollout is at `path`; None for a rollout without ordinals (older Codex: every line)."""
    from coding_os.adapters.codex.rollouts import read_history

    try:
        history = read_history(path)
    except OSError:
        return None
    keys = {(line.get("ordinal"), line.get("timestamp")) for line in history.live}
    return None if not keys or any(ordinal is None for ordinal, _ in keys) else keys


def _sync_file(storage: Storage, path: str, fmt: str, st: os.stat_result,
               mark: SourceMark | None, say: Progress, redacting: bool = True,
               codex_live: set[tuple[object, object]] | None = None,
               restart: bool = False) -> int:
    """Read one transcript from its mark (or from the start, when it was rewritten, or
    `restart`) in chunks of whole lines, each stored with the mark after it in one transaction.
    `codex_live`: the keys of a Codex thread's live lines, the only ones kept."""
    session = _session_of(path, fmt)
    added = 0
    with open(path, "rb") as handle:
        restart = restart or mark is not None and not _continues(handle, st, mark)
        start = mark.read_to if mark is not None and not restart else 0
        keep: set[str] | set[tuple[object, object]] | None = codex_live
        if fmt == "claude":  # the uuids of its live chain
            keep = _appended_live(handle, start, st.st_size) if start else None
            if keep is None:  # read whole, or the live chain left what was read: all again
                restart, start = mark is not None, 0
                keep = _live_uuids(handle, st.st_size)
        if restart and st.st_size == 0:  # emptied: nothing of it is searchable any more
            return storage.add_source_docs(SourceMark(path, st.st_ino, 0, _digest(b"")), [],
                                           restart=True)
        say(f"indexing {os.path.basename(path)} for search")
        while start < st.st_size:
            handle.seek(start)
            data = handle.read(min(_CHUNK_BYTES, st.st_size - start))
            whole = data.rfind(b"\n") + 1
            if whole == 0:
                if len(data) < _CHUNK_BYTES:
                    break  # a torn last line waits for the next sync
                whole = len(data)  # one line longer than a chunk: skipped, not searched
                docs: list[SearchDoc] = []
            else:
                docs = list(_messages(data[:whole], start, fmt, session, path, redacting,
                                      keep))
            end = start + whole
            handle.seek(max(0, end - _TAIL_BYTES))
            tail = handle.read(min(end, _TAIL_BYTES))
            added += storage.add_source_docs(SourceMark(path, st.st_ino, end, _digest(tail)),
                                             docs, restart=restart)
            restart = False
            start = end
    return added


def _entries(data: bytes) -> Iterator[dict[str, object]]:
    for raw in data.split(b"\n"):
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            yield entry


def _live_uuids(handle: BinaryIO, size: int) -> set[str]:
    """The uuids of a Claude transcript's live chain (DESIGN.md §5: transcripts are trees):
    what search holds of it; the dropped branches are not the conversation."""
    from coding_os.adapters.claude.tree import live_chain

    handle.seek(0)
    data = handle.read(size)
    data = data[: data.rfind(b"\n") + 1]  # a torn last line waits for the next sync
    return {str(entry["uuid"]) for entry in live_chain(list(_entries(data)))
            if isinstance(entry.get("uuid"), str)}


def _appended_live(handle: BinaryIO, read_to: int, size: int) -> set[str] | None:
    """The uuids of what was appended after `read_to` that is on the live chain, when the live
    chain still runs through what was read before; None when it left it (a resume at an earlier
    entry, a rewind): then the file is read again whole."""
    from coding_os.adapters.claude.leaf import entry_uuid, in_tree, is_message

    handle.seek(max(0, read_to - _LEAF_TAIL_BYTES))
    before = handle.read(read_to - max(0, read_to - _LEAF_TAIL_BYTES))
    handle.seek(read_to)
    added = handle.read(size - read_to)
    added = added[: added.rfind(b"\n") + 1]
    old = [entry for entry in _entries(before) if in_tree(entry)]
    old_leaf = next((entry_uuid(e) for e in reversed(old) if is_message(e)), None)
    # What was written after the old leaf (attachments, system lines) may carry the chain on.
    after_leaf = {entry_uuid(e) for e in old[next((i for i in range(len(old) - 1, -1, -1)
                                                   if is_message(old[i])), -1) + 1:]}
    parents: dict[str, object] = {}
    leaf = None
    for entry in _entries(added):
        uuid = entry_uuid(entry)
        if uuid is None or not in_tree(entry):
            continue
        parents[uuid] = entry.get("parentUuid") or entry.get("logicalParentUuid")
        if is_message(entry):
            leaf = uuid
    if leaf is None:
        return set()  # no message appended: nothing new is the conversation
    chain: set[str] = set()
    current: object = leaf
    while isinstance(current, str) and current in parents and current not in chain:
        chain.add(current)
        current = parents[current]
    if old_leaf is None or current == old_leaf or current in after_leaf:
        return chain
    return None


def _continues(handle: object, st: os.stat_result, mark: SourceMark | None) -> bool:
    """Whether the file is the one read before, only appended to since."""
    if mark is None or mark.inode != st.st_ino or st.st_size < mark.read_to:
        return False
    handle.seek(max(0, mark.read_to - _TAIL_BYTES))  # type: ignore[attr-defined]
    before = handle.read(min(mark.read_to, _TAIL_BYTES))  # type: ignore[attr-defined]
    return _digest(before) == mark.tail


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _session_of(path: str, fmt: str) -> str:
    stem = os.path.basename(path)[: -len(".jsonl")] if path.endswith(".jsonl") \
        else os.path.basename(path)
    if fmt == "codex":
        from coding_os.adapters.codex.rollouts import thread_of_path

        return thread_of_path(path) or stem[-36:]
    return stem


def _messages(data: bytes, offset: int, fmt: str, session: str, path: str,
              redacting: bool = True,
              keep: set[str] | set[tuple[object, object]] | None = None
              ) -> Iterator[SearchDoc]:
    """The user and assistant texts of complete lines, each a document named by its file and
    byte offset (stable across re-reads, unique in the database), its secrets redacted unless
    `redacting` is false; with `keep`, only the entries it holds: by uuid (a Claude transcript's
    live chain) or by ordinal and timestamp (a Codex thread's live history)."""
    key = hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()
    position = offset
    for raw in data.split(b"\n")[:-1] if data else []:
        at = position
        position += len(raw) + 1
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict):
            continue
        if keep is not None and (entry.get("uuid") if fmt == "claude" else (
                entry.get("ordinal"), entry.get("timestamp"))) not in keep:
            continue
        found = _text_of(entry, fmt)
        if found is None:
            continue
        ts, text = found
        text = text.strip()
        if not text or text.startswith(_CONTEXT_PREFIXES):
            continue
        if redacting:
            text = redact.redact(text)
        yield SearchDoc("transcript", f"{key}:{at}", session, ts, text[:MESSAGE_CHARS])


def _text_of(entry: dict[str, object], fmt: str) -> tuple[str, str] | None:
    ts = entry.get("timestamp") if fmt != "cos" else entry.get("ts")
    ts = ts if isinstance(ts, str) else ""
    if fmt == "cos":
        text = entry.get("text")
        return (ts, text) if entry.get("type") in ("user", "assistant") and isinstance(text, str) \
            else None
    if fmt == "claude":
        if entry.get("type") not in ("user", "assistant"):
            return None
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
    else:
        payload = entry.get("payload")
        if entry.get("type") != "response_item" or not isinstance(payload, dict) \
                or payload.get("type") != "message" \
                or payload.get("role") not in ("user", "assistant"):
            return None
        content = payload.get("content")
    if isinstance(content, str):
        return ts, content
    if isinstance(content, list):
        texts = [block["text"] for block in content
                 if isinstance(block, dict) and isinstance(block.get("text"), str)
                 and block.get("type") in ("text", "input_text", "output_text")]
        return (ts, "\n".join(texts)) if texts else None
    return None
