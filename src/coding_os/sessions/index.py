"""The session index (DESIGN.md §4.2): one list of every session, built from their logs.

Four sources feed it: cos-native transcripts (`<state_dir>/<agent>/transcripts/*.jsonl`),
Claude Code transcripts, Codex rollouts and Gemini CLI sessions (the importers of
`coding_os.adapters`; a Gemini file is read whole, and again only when it changed: the session
read from each is kept in `<state_dir>/.import-state.gemini.jsonl`; a Gemini row of this host
whose session is no longer found is removed). `refresh`
reads only what changed since the last time: the importers' `ImportState` and the size, mtime and
inode of each cos transcript are kept in `<state_dir>/.import-state.json`, the importers'
aggregates apart from it (coding_os.sessions.importstate; written after the index, so a crash in
between only makes the next refresh redo some work). Only the sessions a change touched are
assembled again and written, and a native session whose files are all gone from this host's logs
loses its row, so a refresh leaves the rows a rebuild would. A native session the hooks linked
to a cos session id (the `sessions` table) is filed under that id. Subagents and sidechains are
never rows. The index can always be rebuilt from the logs: `rebuild` empties it and refreshes
everything; an empty index (a deleted database) is refilled from the kept import state without
reading the logs again.

Several hosts (DESIGN.md §8): every row the importer writes carries `host` (state.hosts.this_host),
and the importer only ever writes, replaces or removes rows of its own host (and rows without a
host, from before hosts were recorded): on a shared PostgreSQL, one host's refresh or rebuild
leaves the other hosts' rows alone. On a database of one host (SQLite) every row is this host's:
rows under an earlier name (COS_HOST set or changed, a new hostname) are renamed by the next
refresh (`Storage.rehost_index`). A session id another host already indexed is not replaced;
the report lists it in `foreign_sessions` and says so in `warnings`. The project's root on this
host is registered (state.hosts.register_project) by the first refresh into a database, and again
by a full one (`rebuild`) or one into an index empty of this host's rows; the import state keeps
which host, root and database it was registered for, so other refreshes do not run git.

What this host replicates (hosts/replicate.py) is found here, from its own disk: the refresh
keeps in `<state_dir>/.native-files.json` (`native_files`) every Claude Code transcript and Codex
rollout its importers found under the agents' log dirs, each with the index id of its session
(None when another host owns that id), its agent and its project. A row of the index, which
another host may have written on a shared database, never names a file to push.

Nothing here fails on a bad log: unknown entry types, malformed lines, torn tails and unreadable
files are counted in the `RefreshReport`. The texts a row copies from a log (title, first and last
prompt) have their secrets redacted (redact.py), unless the project says `redact: false`.
"""

from __future__ import annotations

import gc
import json
import operator
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from coding_os.adapters.native import FileRecord, NativeSession, ScanReport, clip
from coding_os import durable, redact
from coding_os.errors import CosError
from coding_os.hosts.identity import register_project, this_host
from coding_os.state.identity import is_session_id
from coding_os.state.tiers import RESERVED_DIRS, Tiers
from coding_os.sessions.importstate import STATE_FILE, KeptState
from coding_os.storage.base import INDEX_COLUMNS, IndexRow, SessionRecord, Storage, storable_text

__all__ = [
    "STATE_FILE",
    "NATIVE_FILES",
    "KINDS",
    "RefreshReport",
    "refresh",
    "rebuild",
    "native_row",
    "cos_row",
    "cos_transcripts",
    "project_root",
    "native_files",
    "UNREADABLE_LINES",
    "unreadable_lines",
]

NATIVE_FILES = ".native-files.json"
UNREADABLE_LINES = ".unreadable-lines.json"
"""The lines of the agents' logs the last refresh could not read (not a JSON object, or a record
of a kind the importer does not know), by agent and file, for `cos doctor`."""
KINDS = ("cos", "claude", "codex", "gemini")
TITLE_PREVIEW_CHARS = 120
# Problems of a cos transcript that mean a line could not be used.
_MALFORMED = ("invalid_utf8", "not_json", "invalid_entry", "unsupported_version")

Progress = Callable[[str], None]


@dataclass
class RefreshReport:
    """What one refresh of the index read and changed."""

    full: bool = False
    files_seen: int = 0
    files_unchanged: int = 0
    files_read: int = 0
    bytes_read: int = 0
    sessions: int = 0  # sessions the logs hold (subagents and sidechains not counted)
    sessions_added: int = 0
    sessions_updated: int = 0
    sessions_removed: int = 0
    subagents: int = 0
    unknown_types: dict[str, int] = field(default_factory=dict)
    malformed_lines: int = 0
    torn_files: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    orphan_subagents: int = 0
    # Kept aggregates read back (of files that changed, and of the sessions assembled again).
    aggregates_loaded: int = 0
    host: str = ""
    # Session ids another host indexed first: their rows are kept, this host's not written.
    foreign_sessions: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        data = asdict(self)
        data["unreadable"] = [list(item) for item in self.unreadable]
        data["foreign_sessions"] = [list(item) for item in self.foreign_sessions]
        return data

    def _add_scan(self, scan: ScanReport | None) -> None:
        if scan is None:
            return
        self.files_seen += scan.files_seen
        self.files_unchanged += scan.files_unchanged
        self.files_read += scan.files_opened
        self.bytes_read += scan.bytes_read
        self.malformed_lines += scan.malformed_lines
        self.torn_files.extend(scan.torn_files)
        self.unreadable.extend(scan.unreadable)
        self.sessions += scan.sessions
        self.subagents += scan.subagents
        self.orphan_subagents += scan.orphans


def project_root(tiers: Tiers) -> str | None:
    """The project a state dir belongs to: the directory holding `.coding-os`, else None."""
    from coding_os.state.root import STATE_DIR_NAME

    folder, name = os.path.split(tiers.state_dir.rstrip("/"))
    return folder if name == STATE_DIR_NAME and folder else None


def refresh(storage: Storage, tiers: Tiers, claude_dir: str | None = None,
            codex_dir: str | None = None, full: bool = False,
            progress: Progress | None = None, host: str | None = None,
            gemini_dir: str | None = None) -> RefreshReport:
    """Bring the index up to date with the logs, reading only files that changed (all, if `full`).

    `claude_dir`, `codex_dir` and `gemini_dir` default as the importers' do (adapters.LOG_DIRS:
    `CLAUDE_CONFIG_DIR` or `~/.claude`; `CODEX_HOME` or `~/.codex`; `$GEMINI_CLI_HOME/.gemini`
    or `~/.gemini`). `host` defaults to this host (COS_HOST).

    Raises:
        StorageError: the index cannot be read or written.
        StateIOError: the import state cannot be saved.
        InvalidInput: COS_HOST is not a valid host name.
    """
    from coding_os.adapters.native import AggregateLost
    from coding_os.sessions import importstate

    kept = importstate.KeptState() if full else importstate.load(tiers.state_dir)
    # What an import reads and keeps (parsed lines, sessions, rows) holds no reference cycle:
    # the cyclic collector, which would walk all of it again and again as it grows, is off
    # until the refresh is done (as it was, if something else had turned it off).
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            report = _refresh(storage, tiers, kept, claude_dir, codex_dir, full, progress, host,
                              gemini_dir)
        except AggregateLost as exc:
            # What the kept state vouched for is not there (a pack cut short or deleted):
            # every log is read again, and the state written anew.
            kept.close()
            kept = importstate.KeptState(kept.extras)
            report = _refresh(storage, tiers, kept, claude_dir, codex_dir, full, progress, host,
                              gemini_dir)
            report.warnings.append(f"the import state could not be read back ({exc}): every "
                                   "log was read again")
        report.aggregates_loaded = len(kept.read_back)
        return report
    finally:
        kept.close()
        if collecting:
            gc.enable()


def _refresh(storage: Storage, tiers: Tiers, loaded: KeptState, claude_dir: str | None,
             codex_dir: str | None, full: bool, progress: Progress | None,
             host: str | None, gemini_dir: str | None) -> RefreshReport:
    """`refresh` from the import state `loaded`.

    Raises:
        StorageError, StateIOError, InvalidInput: as `refresh`.
        AggregateLost: an aggregate `loaded` vouches for cannot be read back.
    """
    from coding_os.adapters.claude.transcripts import scan_claude
    from coding_os.adapters.codex.rollouts import scan_codex
    from coding_os.adapters.gemini import native as gemini_native
    from coding_os.sessions.database import gemini_dir as default_gemini_dir

    from coding_os.sessions import freshness, importstate

    say = progress or (lambda message: None)
    host = host or this_host()
    report = RefreshReport(full=full, host=host)
    # Taken before anything is read: a log that changes during this import makes it stale.
    gemini_dir = gemini_dir or default_gemini_dir(os.environ)
    mark = (freshness.fingerprint(tiers, claude_dir, codex_dir, gemini_dir)
            if claude_dir is not None and codex_dir is not None else None)
    document = loaded.extras
    state = loaded.state
    before = dict(state.files)
    if not storage.shared and document.get("host") != host:
        # One host's database: rows under another name are this host's, indexed before it was
        # renamed (COS_HOST set or changed, a new hostname); they become this name's.
        storage.rehost_index(host)
    empty_before = not storage.index_rows(limit=1, hosts=[host], local_host=host)
    everything = full or empty_before
    natives_path = os.path.join(tiers.state_dir, NATIVE_FILES)
    found_before = {} if everything else native_files(tiers)

    # Only the sessions a change touched are assembled (their aggregates read back) and
    # written, and those whose file is not among the files found yet; into an empty index,
    # all of them.
    def unknown(path: str) -> bool:
        return path not in found_before

    say("scanning Claude Code transcripts")
    claude, state = scan_claude(claude_dir, state, changed_only=not everything, also=unknown)
    claude_scan = state.report
    say("scanning Codex rollouts")
    codex, state = scan_codex(codex_dir, state, changed_only=not everything, also=unknown)
    scans = [scan for scan in (claude_scan, state.report) if scan is not None]
    say("reading Gemini CLI sessions")
    redacting = redact.configured(tiers.state_dir)
    # The Gemini files read before (whatever the index holds). A full import reads every file
    # and leaves what is kept as it is: each file it vouches for, by its key, is still so.
    kept_gemini = None if full else importstate.load_gemini(tiers.state_dir, redacting)
    gemini, gemini_scan, gemini_files = gemini_native.scan(
        gemini_dir, kept_gemini.files if kept_gemini is not None else None)
    for scan in (*scans, gemini_scan):
        report._add_scan(scan)
    changed = {path for path, record in state.files.items() if before.get(path) is not record}
    changed.update(path for path in before if path not in state.files)

    rows: list[IndexRow] = []
    project_of: dict[str, tuple[str | None, str | None]] = {}
    # native file -> [index id, agent, project]; kept for the sessions not assembled again
    own: dict[str, list[str | None]] = {
        path: list(found_before[path]) for scan in scans
        for path in scan.session_paths if path in found_before}
    natives = (*claude, *codex, *gemini)
    linked_to = _linked_sessions(storage, natives)
    # This host's Gemini rows as the index holds them (none, in a database of one host that was
    # empty: a rebuild emptied it). Every Gemini session is assembled (its links span files);
    # one whose row would be the same is not written again.
    gemini_rows = {} if empty_before and not storage.shared else {
        row.id: row for row in storage.index_rows(kind=gemini_native.AGENT, hosts=[host],
                                                  local_host=host)}
    for native in natives:
        for name, count in native.unknown_types.items():
            report.unknown_types[name] = report.unknown_types.get(name, 0) + count
        linked = linked_to(native.agent, native.native_id)
        native_index_row = native_row(native, linked.id if linked else None,
                                      linked.status if linked else None, project_of, redacting)
        own[native.path] = [native_index_row.id, native_index_row.agent,
                            native_index_row.project]
        indexed = gemini_rows.get(native_index_row.id) if gemini_rows else None
        if indexed is None or indexed.host != host or \
                _written(indexed) != _written(native_index_row):
            rows.append(native_index_row)

    say("reading cos transcripts")
    previous_cos = document.get("cos_transcripts")
    previous_cos = previous_cos if isinstance(previous_cos, dict) else {}
    cos_records: dict[str, list[int]] = {}
    removed: list[str] = []
    for path in cos_transcripts(tiers):
        report.files_seen += 1
        try:
            st = os.stat(path)
        except OSError as exc:
            report.unreadable.append((path, exc.strerror or type(exc).__name__))
            continue
        # [size, mtime_ns, inode, 1 when it is a listed session]
        record = [st.st_size, st.st_mtime_ns, st.st_ino, 0]
        cos_records[path] = record
        known = previous_cos.get(path)
        if not everything and isinstance(known, list) and known[:3] == record[:3]:
            report.files_unchanged += 1
            record[3] = 1 if known[3:] == [1] else 0
            report.sessions += record[3]
            continue
        report.files_read += 1
        report.bytes_read += st.st_size
        row, problems = cos_row(path, redacting)
        report.malformed_lines += sum(1 for kind in problems if kind in _MALFORMED)
        if "torn_tail" in problems:
            report.torn_files.append(path)
        if row is None:
            if problems == ["unreadable"]:
                report.unreadable.append((path, "cannot be read"))
                del cos_records[path]
            else:  # a sidechain, or no valid session_meta: never listed
                removed.append(os.path.basename(path)[:-len(".jsonl")])
            continue
        report.sessions += 1
        record[3] = 1
        rows.append(row)
    for path in previous_cos:
        if path not in cos_records and str(path).endswith(".jsonl"):
            removed.append(os.path.basename(str(path))[:-len(".jsonl")])

    for row in rows:
        row.host = host
    owners = storage.index_hosts([row.id for row in rows] + removed)
    foreign = {sid: owner for sid, owner in owners.items() if owner not in (None, host)}
    if foreign:
        rows = [row for row in rows if row.id not in foreign]
        for entry in own.values():
            if entry[0] in foreign:
                entry[0] = None  # another host's session: its lines are not this host's to push
        for sid in sorted(foreign):
            report.foreign_sessions.append((sid, foreign[sid]))
        kept = [sid for sid in sorted(foreign) if sid not in removed]
        if kept:
            report.warnings.append(
                f"{len(kept)} session id(s) already indexed by another host were kept as that "
                f"host's, not replaced by this host's ({host}): "
                + ", ".join(f"{sid} (host {foreign[sid]})" for sid in kept[:5])
                + (" …" if len(kept) > 5 else ""))
    say(f"writing {len(rows)} index rows")
    added = storage.upsert_index_rows(rows)
    report.sessions_added = added
    report.sessions_updated = len(rows) - added
    for session in removed:
        if session in foreign:
            continue
        if is_session_id(session) and storage.remove_index_row(session):
            report.sessions_removed += 1
    found_gemini = {native.native_id for native in gemini}
    for row in gemini_rows.values():
        if row.native_id not in found_gemini and row.id not in foreign \
                and storage.remove_index_row(row.id):
            report.sessions_removed += 1  # a Gemini session whose files are gone
    for scan in scans:  # native sessions whose files are all gone from this host's logs
        for native_id in scan.vanished:
            row = storage.index_row(native_id)
            if row is not None and row.kind == scan.agent and row.native_id == native_id \
                    and (row.host == host or (row.host is None and not storage.shared)) \
                    and storage.remove_index_row(row.id):
                report.sessions_removed += 1
    root = project_root(tiers)
    # Registered once per host, root and database (git is asked then, not on every refresh),
    # and again by a full import or one into an index empty of this host's rows.
    registration = [host, root, storage.location]
    registered = document.get("registered")
    if root is not None and (everything or registered != registration):
        try:
            register_project(storage, root, host)
            registered = registration
        except CosError as exc:  # git cannot be run: the index itself is fine
            report.warnings.append(f"the project's identity could not be read: {exc}")

    redacted = document.get("redacted") is True  # every aggregate kept is redacted already
    if registered != document.get("registered") or document.get("host") != host or \
            not (document and not changed and cos_records == previous_cos
                 and state.links == loaded.state.links) or (redacting and not redacted):
        extras: dict[str, Any] = {"host": host, "cos_transcripts": cos_records}
        if registered is not None:
            extras["registered"] = registered
        if redacting:  # the importers keep each file's first and last prompt and command
            extras["redacted"] = True
        # The aggregates read this time are redacted as they are kept; those read before were
        # redacted then, unless redaction was turned on since (then all of them are, again).
        importstate.save(tiers.state_dir, state, extras, loaded,
                         _redacted if redacting else None, again=redacting and not redacted)
    if own != {path: list(entry) for path, entry in found_before.items()}:
        data = json.dumps(own, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        # A rebuild starts from nothing and mostly finds what the file holds: kept as it is.
        if durable.read_small(natives_path, len(data) + 1) != data:
            durable.ensure_dir(tiers.state_dir)
            durable.atomic_write(natives_path, data)
    if kept_gemini is not None:
        importstate.save_gemini(tiers.state_dir, gemini_files, kept_gemini, redacting)
    _save_unreadable(tiers, {**_unread_lines(state.files.values()),
                             "gemini": gemini_scan.unread_lines})
    if mark is not None:
        freshness.save(tiers, mark)
    return report


# What an upsert writes of a row (not its name, which only `set_name` writes, nor its host).
_written = operator.attrgetter(*(name for name in INDEX_COLUMNS if name not in ("name", "host")))


_BULK_LOOKUP = 64
"""More native sessions than this to file: the hooks' sessions of their agents are read in one
query per agent instead of one each."""


def _linked_sessions(storage: Storage, natives: Sequence[NativeSession]
                     ) -> Callable[[str, str], SessionRecord | None]:
    """What `storage.session_by_native` answers for the sessions of `natives` (the cos session
    the hooks linked to a native one: the latest active)."""
    if len(natives) <= _BULK_LOOKUP:
        return storage.session_by_native
    by_agent: dict[str, dict[str, SessionRecord]] = {}

    def linked(agent: str, native_id: str) -> SessionRecord | None:
        known = by_agent.get(agent)
        if known is None:
            known = by_agent[agent] = {}
            for record in storage.sessions(agent):  # the latest active first
                if record.native_id is not None:
                    known.setdefault(record.native_id, record)
        key = storable_text(native_id)  # as the table keeps it
        return None if key is None else known.get(key)

    return linked


def _unread_lines(records: Iterable[FileRecord]) -> dict[str, dict[str, int]]:
    """Per agent, the Claude Code and Codex files with lines their importer could not read
    (not a JSON object) or whose record type it does not know, each with how many: what the
    files' heads count (`malformed`, `unknown`), of every file, read this time or before."""
    found: dict[str, dict[str, int]] = {}
    for record in records:
        unread = 0
        for counts in (record.head.get("malformed"), record.head.get("unknown")):
            if isinstance(counts, dict):
                unread += sum(n for n in counts.values() if isinstance(n, int))
        if unread:
            found.setdefault(record.agent, {})[record.path] = unread
    return found


def _save_unreadable(tiers: Tiers, found: dict[str, dict[str, int]]) -> None:
    """Keep what `unreadable_lines` reads (the file only when it changes; none when empty)."""
    path = os.path.join(tiers.state_dir, UNREADABLE_LINES)
    kept = {agent: files for agent, files in found.items() if files}
    if not kept:
        if os.path.lexists(path):
            os.unlink(path)
        return
    data = json.dumps(kept, ensure_ascii=False, sort_keys=True).encode("utf-8")
    if durable.read_small(path, 16 << 20) != data:
        durable.ensure_dir(tiers.state_dir)
        durable.atomic_write(path, data)


def unreadable_lines(tiers: Tiers) -> dict[str, dict[str, int]]:
    """The lines of each agent's logs the last refresh could not read (a line that is not a
    JSON object, or too long, or a record of a kind its importer does not know: a format this
    cos does not know yet), by file; their sessions are listed from the lines that could be
    read."""
    data = _load(os.path.join(tiers.state_dir, UNREADABLE_LINES))
    found: dict[str, dict[str, int]] = {}
    for agent, files in data.items():
        if isinstance(files, dict):
            counts = {str(path): count for path, count in files.items()
                      if isinstance(count, int) and not isinstance(count, bool) and count > 0}
            if counts:
                found[str(agent)] = counts
    return found


def _redacted(record: FileRecord) -> tuple[Any, Any]:
    """A kept record's aggregate and head with the secrets of their texts redacted, as its
    importer says where its texts are."""
    from coding_os.adapters.claude.transcripts import redacted_aggregate as claude
    from coding_os.adapters.codex.rollouts import redacted_aggregate as codex

    redacted = {"claude": claude, "codex": codex}.get(record.agent)
    aggregate = (redacted(record.kind, record.aggregate) if redacted is not None
                 else redact.redact_value(record.aggregate))
    return aggregate, redact.redact_value(record.head)


def native_files(tiers: Tiers) -> dict[str, tuple[str | None, str, str | None]]:
    """The Claude Code, Codex and Gemini CLI session files (of a Gemini session, its main file,
    not its subagents') the last refresh of this state dir found on this host's own disk, each
    with the index id of its session (None: another host's), its agent and its project (the
    checkout its cwd is in); empty before the first refresh."""
    data = _load(os.path.join(tiers.state_dir, NATIVE_FILES))
    found: dict[str, tuple[str | None, str, str | None]] = {}
    for path, entry in data.items():
        if isinstance(entry, list) and len(entry) == 3 and \
                isinstance(entry[0], (str, type(None))) and isinstance(entry[1], str) and \
                isinstance(entry[2], (str, type(None))):
            found[path] = (entry[0], entry[1], entry[2])
    return found


def rebuild(storage: Storage, tiers: Tiers, claude_dir: str | None = None,
            codex_dir: str | None = None, progress: Progress | None = None,
            host: str | None = None, gemini_dir: str | None = None) -> RefreshReport:
    """Empty this host's part of the index (its rows, and those without a host unless the
    database is shared; other hosts' rows stay) and build it again from every log, read in
    full.

    Raises:
        StorageError, StateIOError, InvalidInput: as `refresh`.
    """
    from coding_os.sessions import freshness

    host = host or this_host()
    (progress or (lambda message: None))("clearing the index")
    freshness.forget(tiers)  # a rebuild killed half way must not look up to date
    # On a shared database a row without a host (indexed before hosts were recorded) may be
    # another host's: it stays, and becomes this host's if this rebuild writes its id again.
    # A database of one host (SQLite) holds only this host's rows, whatever name they carry.
    if storage.shared:
        storage.clear_index(host=host, keep_unowned=True)
    else:
        storage.clear_index()
    return refresh(storage, tiers, claude_dir, codex_dir, full=True, progress=progress,
                   host=host, gemini_dir=gemini_dir)


def _load(path: str) -> dict[str, Any]:
    """The saved import state document; anything unreadable gives an empty one (a full import)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def native_row(native: NativeSession, cos_id: str | None = None, status: str | None = None,
               project_cache: dict[str, tuple[str | None, str | None]] | None = None,
               redacting: bool = True) -> IndexRow:
    """The index row of a Claude Code, Codex or Gemini CLI session (`cos_id`: the cos session the hooks
    linked to it, which becomes the row's id), its texts redacted unless `redacting` is false."""
    project, worktree = _checkout(native.cwd, project_cache)
    first, last = _private(native.first_prompt, redacting), _private(native.last_prompt, redacting)
    return IndexRow(
        id=cos_id or native.native_id,
        native_id=native.native_id,
        agent=native.agent,
        kind=native.agent,
        title=_private(native.title, redacting) or _preview(first),
        project=project,
        worktree=worktree,
        cwd=native.cwd,
        branch=native.git_branch,
        created=native.created,
        last_active=native.last_active or native.created or "",
        messages=native.user_messages + native.assistant_messages,
        tokens=native.tokens_with_subagents.total,
        forked_from=native.forked_from or native.continues,
        parent=None,
        status=status,
        source_path=native.path,
        first_prompt=_prompt(first),
        last_prompt=_prompt(last),
    )


def _private(text: str | None, redacting: bool) -> str | None:
    """`text` with its secrets redacted (when `redacting`), before a cut could halve one."""
    return redact.redact(text) if text and redacting else text


def cos_row(path: str, redacting: bool = True) -> tuple[IndexRow | None, list[str]]:
    """The index row of a cos-native transcript and the kinds of problems its read met (its
    texts redacted unless `redacting` is false).

    None for a sidechain (`parent` set) or a transcript without a valid session_meta; the
    problems are `["unreadable"]` when the file could not be read at all.
    """
    from coding_os.errors import CosError
    from coding_os.sessions import transcript

    try:
        read = transcript.read(path)
    except CosError:
        return None, ["unreadable"]
    problems = read.report.kinds()
    meta = read.meta
    if meta is None or meta.get("parent"):
        return None, problems
    title = meta.get("title")
    first_prompt = None
    tokens = 0
    status = "open"
    for entry in read.entries:
        kind = entry["type"]
        if kind == "title":
            title = entry["title"]
        elif kind == "user" and first_prompt is None:
            first_prompt = entry["text"]
        elif kind == "assistant":
            usage = entry.get("usage")
            if isinstance(usage, dict):
                tokens += sum(v for k, v in usage.items()
                              if k in ("input", "output") and isinstance(v, int)
                              and not isinstance(v, bool))
        elif kind == "event" and entry["name"] == "close":
            status = "closed"
    visible = read.visible()
    # The last prompt of the conversation as it stands: a rewound one is not its last.
    last_prompt = next((e["text"] for e in reversed(visible) if e["type"] == "user"), None)
    worktree = meta.get("worktree") or meta.get("project")
    title, first_prompt = _private(title, redacting), _private(first_prompt, redacting)
    last_prompt = _private(last_prompt, redacting)
    return IndexRow(
        id=meta["session"],
        native_id=meta.get("native_id"),
        agent=meta["agent"],
        kind="cos",
        title=title or _preview(first_prompt),
        project=meta.get("project"),
        worktree=meta.get("worktree"),
        cwd=worktree,
        branch=meta.get("branch"),
        created=meta["ts"],
        last_active=read.entries[-1]["ts"],
        messages=sum(1 for e in visible if e["type"] in ("user", "assistant")),
        tokens=tokens,
        forked_from=meta.get("forked_from"),
        parent=None,
        status=status,
        source_path=path,
        first_prompt=_prompt(first_prompt),
        last_prompt=_prompt(last_prompt),
    ), problems


def cos_transcripts(tiers: Tiers) -> list[str]:
    """Every cos-native transcript under the state dir: `<agent>/transcripts/*.jsonl`."""
    found = []
    for agent in _names(tiers.state_dir):
        if agent.startswith(".") or agent in RESERVED_DIRS:
            continue
        folder = os.path.join(tiers.state_dir, agent, "transcripts")
        for name in _names(folder):
            if name.endswith(".jsonl") and not name.startswith("."):
                found.append(os.path.join(folder, name))
    return sorted(found)


def _names(folder: str) -> Iterable[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return ()


def _preview(text: str | None) -> str | None:
    """The first line of a prompt, cut short: a title for a session that has none."""
    if not text:
        return None
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:TITLE_PREVIEW_CHARS] or None


def _prompt(text: str | None) -> str | None:
    """A prompt as the index keeps it: cut to its preview length, storable as UTF-8."""
    return None if text is None else storable_text(clip(text))


def _checkout(cwd: str | None, cache: Mapping[str, tuple[str | None, str | None]] | None
              ) -> tuple[str | None, str | None]:
    """(project, worktree) of a session's cwd: the main repository and the checkout holding it.

    A cwd outside any git checkout (or gone from this machine) is its own project and worktree.
    """
    if not cwd:
        return None, None
    if cache is not None and cwd in cache:
        return cache[cwd]
    from coding_os.git.repo import checkout_root
    from coding_os.state.root import linked_worktree_main

    worktree = checkout_root(cwd) if os.path.isabs(cwd) else None
    if worktree is None:
        result: tuple[str | None, str | None] = (cwd, cwd)
    else:
        linked = linked_worktree_main(worktree, {})
        result = (linked[1], linked[0]) if linked else (worktree, worktree)
    if isinstance(cache, dict):
        cache[cwd] = result
    return result
