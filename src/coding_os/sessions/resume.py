"""Resuming and forking a session (DESIGN.md §4.3, §4.4): finding it, the restore report, and
the command that hands over to its agent.

A session is found by exact id (cos or native), as the most recent one of this worktree
(`--continue`), by exact user-set name, or by a pull request its log links to. A lookup that misses
the index imports what changed (native logs and cos transcripts) and then reads the cos
transcript directly before it says "not found"; the report names the path that found it and what
was repaired. Sessions of another worktree of the same repository resume there (with a note);
sessions of another project are refused with the command to run instead (`CrossProject`).

Claude Code, Codex and Gemini CLI sessions hand over to their own CLI (`claude --resume <id>`,
`codex resume <id>`, `gemini --resume <id>`; for a fork `claude --resume <id> --fork-session`,
`codex fork <id>`; Gemini CLI forks no session from its command line) in the session's directory.
A cos-native session has no external agent to hand over to.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field

from coding_os.adapters import is_native_id
from coding_os.errors import Ambiguous, CosError, CrossProject, InvalidId, NotFound
from coding_os.state.identity import is_path_like, is_session_id
from coding_os.storage.base import IndexRow, Storage

TYPE_CHECKING = False  # typing is not imported at run time: see benchmarks/resume_continue.py
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NoReturn

    from coding_os.sessions.index import RefreshReport
    from coding_os.state.caller import Caller
    from coding_os.state.tiers import Tiers

__all__ = [
    "FOUND_BY",
    "pending_rewind_report",
    "Handover",
    "ResumeScope",
    "Found",
    "RestoreReport",
    "ForkReport",
    "validate_key",
    "pr_number",
    "find_for_resume",
    "find_by_id",
    "by_short_id",
    "place",
    "restored",
    "resume_handover",
    "fork_handover",
    "restore_report",
    "hand_over",
    "check_request",
    "scope_of",
    "resume",
    "fork",
]

# How a session was found: the index as it stood; a cos transcript read from disk (the import's
# scan of changed transcripts, or the transcript at its path); an import of the agents' logs.
FOUND_BY = ("index", "direct_scan", "native_import", "rewind")
_AGENT_NAMES = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}
# A pull request as a number, `#number`, or a URL ending in /pull/<n> (GitHub) or
# /merge_requests/<n> (GitLab).
_PR_URL = re.compile(r"/(?:pull|pulls|merge_requests)/([0-9]+)(?:[/?#].*)?$")


@dataclass
class Handover:
    """The agent command that continues the session, and the directory it must run in."""

    argv: list[str]
    cwd: str

    def command(self) -> str:
        """The handover as one shell line: `cd <cwd> && <argv>`."""
        return f"cd {shlex.quote(self.cwd)} && {shlex.join(self.argv)}"


@dataclass
class ResumeScope:
    """Where the caller stands: its checkout, its repository's directories, its own sessions."""

    here: str  # the checkout (or linked worktree) the caller works in
    repo: list[str]  # the repository's main checkout, its project root and linked worktrees
    current: set[str] = field(default_factory=set)  # the caller's own session ids, cos and native


@dataclass
class Found:
    """A session found for resuming, how it was found, and what the lookup repaired."""

    row: IndexRow
    path: str  # one of FOUND_BY
    rebuilt: list[str] = field(default_factory=list)


@dataclass
class RestoreReport:
    """What `cos resume` found, restored and rebuilt, and the command that hands over.

    `handover` is None for a session without an external agent; `handover_note` says why. A
    session another host wrote names that `host`, and `materialized` lists the files written
    here from its replica (coding_os.hosts.materialize): each `{"path", "stream", "lines",
    "action"}`; `moved_from` names that host when the session moved here with its resume (this
    host owns it and replicates its new lines from then on).
    """

    path: str
    session: dict[str, Any]
    restored: dict[str, Any]
    rebuilt: list[str]
    relocation: str | None
    cwd: str
    handover: Handover | None
    handover_note: str | None = None
    host: str | None = None  # another host that wrote the session (None: this host's)
    materialized: list[dict[str, Any]] = field(default_factory=list)  # files written from it
    moved_from: str | None = None  # that host, when this one took the session over

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (`handover`: `{"argv", "cwd", "command"}` or null)."""
        data = asdict(self)
        data["handover"] = None if self.handover is None else {
            **asdict(self.handover), "command": self.handover.command()}
        return data


@dataclass
class ForkReport:
    """What `cos fork` did (cos-native) or the command that forks in the session's own agent."""

    path: str
    source: dict[str, Any]
    session: str | None  # the new cos session id (cos-native; None on a dry run or a handover)
    transcript: str | None
    fork_point: int | None
    copied: int | None
    relocation: str | None
    cwd: str
    handover: Handover | None
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON (`handover` as in `RestoreReport.to_dict`)."""
        data = asdict(self)
        data["handover"] = None if self.handover is None else {
            **asdict(self.handover), "command": self.handover.command()}
        return data


def validate_key(key: str) -> str:
    """A session id, native id or name as typed: refused before any lookup when it could name a
    path or hide a character.

    A `/` inside a key is allowed (a name such as `CI/CD`; no id has one).

    Raises:
        InvalidId: empty, longer than 200 characters, `.`, path-like (`is_path_like`: a `\\`,
            a leading `/`, a `..` segment), a control character (NUL included).
    """
    if (not key or len(key) > 200 or key.strip() == "." or is_path_like(key)
            or any(ord(c) < 32 or ord(c) == 127 for c in key)):
        raise InvalidId(f"not a session id or name: {key!r}")
    return key


def pr_number(pr: str) -> str:
    """The number of a pull request given as `123`, `#123` or its URL.

    Raises:
        InvalidInput: none of those.
    """
    from coding_os.errors import InvalidInput

    text = pr.strip()
    if text.startswith("#"):
        text = text[1:]
    if text.isascii() and text.isdigit() and len(text) <= 12:
        return str(int(text))
    match = _PR_URL.search(text) if len(text) <= 2000 else None
    if match is None:
        raise InvalidInput(f"not a pull request number or URL: {pr!r}")
    return str(int(match.group(1)))


def _under(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def _where(row: IndexRow) -> str | None:
    return row.cwd or row.worktree or row.project


def place(row: IndexRow, scope: ResumeScope, verb: str = "resume") -> tuple[str, str | None]:
    """Where the session must run (its directory) and a relocation note when that is not the
    caller's checkout.

    Raises:
        CrossProject: the session ran in another project; the message is the command to run
            there: `cd <dir> && cos <verb> <id>`.
    """
    where = _where(row)
    if where is None:
        return scope.here, (f"the session does not say where it ran; {verb} in {scope.here}")
    # A row's paths are data (on a shared database, any host's): `<root>/../x` is not in root.
    where = os.path.normpath(where)
    project = os.path.normpath(row.project) if row.project else None
    here = _under(where, [scope.here])
    checkout = here or _under(where, scope.repo)
    ours = project is not None and project in scope.repo
    if not (checkout or ours):
        raise CrossProject(f"cd {shlex.quote(where)} && cos {verb} {shlex.quote(row.id)}")
    if not checkout or not os.path.isdir(where):
        # Never run outside this repository's checkouts: its project's root, or here.
        home = project if ours and project is not None and os.path.isdir(project) \
            else scope.here
        why = "is gone" if not os.path.isdir(where) else "is not in a checkout of this repository"
        return home, f"the session's directory {where} {why}: {verb} in {home}"
    if here:
        return where, None
    return where, (f"the session ran in {row.worktree or where}, another worktree of this "
                   f"repository: {verb} there, not in {scope.here}")


def _row_by_transcript(storage: Storage, tiers: Tiers, key: str) -> IndexRow | None:
    """The row of a cos transcript read straight from disk (by id, else by its meta's native
    id), written into the index; None for a sidechain or when no transcript has `key`."""
    from coding_os.sessions import index, transcript

    paths: list[str] = []
    if is_session_id(key):
        paths.append(transcript.transcript_path(tiers, key))
    else:
        for path in index.cos_transcripts(tiers):
            try:
                meta = transcript.read_meta(path)
            except CosError:
                continue
            if meta is not None and meta.get("native_id") == key:
                paths.append(path)
    for path in paths:
        if not os.path.isfile(path):
            continue
        row, _ = index.cos_row(path)
        if row is not None:
            storage.upsert_index_rows([row])
            return row
    return None


def _row_elsewhere(tiers: Tiers, key: str) -> IndexRow | None:
    """The row of the cos transcript `key` names in another of this user's state dirs (another
    project's, state/registry.py), read and not indexed here: by its whole id (its path looked
    up), as a table shows it or a start of it (coding_os.state.shortid, every transcript
    listed). Found so that its project is named (`place`), as a Claude Code or Codex session
    of another project is.

    Raises:
        Ambiguous: the ids of several such transcripts match a short key; the message lists
            them.
    """
    from coding_os.sessions import index, transcript
    from coding_os.state.registry import state_dirs
    from coding_os.state.root import hub_dir
    from coding_os.state.shortid import pick
    from coding_os.state.tiers import Tiers

    here = os.path.realpath(tiers.state_dir)
    others = [Tiers(state_dir) for state_dir in state_dirs(hub_dir())
              if os.path.realpath(state_dir) != here]
    paths: dict[str, str] = {}
    if is_session_id(key):
        agent = transcript.session_agent(key)
        paths = {key: path for other in others
                 if os.path.isfile(path := other.transcript_path(agent, key))}
    else:
        for other in others:
            for path in index.cos_transcripts(other):
                paths.setdefault(os.path.basename(path).removesuffix(".jsonl"), path)
    chosen = pick(key, [(session, None) for session in paths], "session")
    if chosen is None:
        return None
    row, _ = index.cos_row(paths[chosen])
    return row


def _import_note(report: RefreshReport | None) -> str | None:
    if report is None:  # the logs were as the last import left them
        return None
    changed = report.sessions_added + report.sessions_updated + report.sessions_removed
    if not changed:
        return None
    return (f"index: {report.sessions_added} added, {report.sessions_updated} updated, "
            f"{report.sessions_removed} removed by an import of what changed")


class _Refresher:
    """Imports what changed at most once per lookup, remembering what it repaired."""

    def __init__(self, refresh: Callable[[], RefreshReport | None]) -> None:
        self._refresh = refresh
        self.done = False
        self.notes: list[str] = []

    def __call__(self) -> None:
        if self.done:
            return
        self.done = True
        note = _import_note(self._refresh())
        if note:
            self.notes.append(note)


def _find_by_id(storage: Storage, tiers: Tiers, key: str, refresher: _Refresher) -> Found | None:
    """The session whose cos id or native id is `key`: the index (after an import of what
    changed, so its counts are current), else the session that import added, else the cos
    transcript read directly (which repairs the index). None when none has it."""
    row = storage.index_row(key)
    if row is not None:
        refresher()  # its counts brought up to date: a stat of each log when nothing changed
        if refresher.notes:
            row = storage.index_row(key) or row
        return Found(row, "index", list(refresher.notes))
    refresher()
    row = storage.index_row(key)
    if row is not None:
        return Found(row, "direct_scan" if row.kind == "cos" else "native_import",
                     list(refresher.notes))
    row = _row_by_transcript(storage, tiers, key)
    if row is not None:
        return Found(row, "direct_scan",
                     [*refresher.notes, f"index: the row of {row.id} repaired from its transcript"])
    row = by_short_id(storage, key)
    if row is not None:
        return Found(row, "index", list(refresher.notes))
    row = _row_elsewhere(tiers, key)
    return None if row is None else Found(row, "direct_scan", list(refresher.notes))


def by_short_id(storage: Storage, key: str) -> IndexRow | None:
    """The indexed session `key` names as a table shows its id, or as a start of its id or of
    its agent's own id (coding_os.state.shortid), or None.

    Raises:
        Ambiguous: several sessions match; the message lists them.
    """
    from coding_os.state.shortid import pick

    rows = {row.id: row for row in storage.index_rows(search=key)}
    chosen = pick(key, [(row.id, row.native_id) for row in rows.values()], "session")
    return None if chosen is None else rows[chosen]


def find_by_id(storage: Storage, tiers: Tiers, key: str,
               refresh: Callable[[], RefreshReport | None]) -> Found | None:
    """The session whose cos id or native id is `key`, found as `cos resume ID` finds it: the
    index, else an import of what changed (`refresh`, run at most once), else the cos transcript
    read directly. `Found.path` says which, `Found.rebuilt` what the index gained; None when no
    session has `key`."""
    return _find_by_id(storage, tiers, key, _Refresher(refresh))


def _by_name(storage: Storage, name: str, scope: ResumeScope) -> IndexRow | None:
    """The one session with the user-set name `name`, preferring this repository's.

    Raises:
        Ambiguous: several sessions have it (their ids in the message).
    """
    named = [row for row in storage.index_rows(search=name) if row.name == name]
    if not named:
        return None
    ours = [row for row in named
            if (_where(row) is not None and _under(str(_where(row)), scope.repo))
            or (row.project is not None and row.project in scope.repo)]
    candidates = ours or named
    if len(candidates) == 1:
        return candidates[0]
    listed = ", ".join(row.id for row in candidates)
    raise Ambiguous(f"{len(candidates)} sessions are named {name!r}: {listed}; "
                    "resume one by its id")


def _latest(storage: Storage, scope: ResumeScope) -> IndexRow | None:
    """The most recently active session of the caller's checkout that is not the caller's own."""
    limit = len(scope.current) + 1  # the caller's own sessions are at most this many rows
    for row in storage.index_rows(cwd_under=[scope.here], limit=limit):
        if row.id in scope.current or (row.native_id or "") in scope.current:
            continue
        if row.parent is None:
            return row
    return None


def _pr_sessions(storage: Storage, tiers: Tiers, claude_dir: str | None,
                 number: str) -> list[IndexRow]:
    """Sessions whose Claude Code log links the pull request `number` (`pr-link` entries).

    The index keeps no PR column, so this asks the Claude importer, whose kept aggregates make an
    unchanged log cost a stat and the read of its aggregate. Codex logs and cos transcripts
    record no PR links.
    """
    from coding_os.adapters.claude.transcripts import scan_claude
    from coding_os.adapters.native import AggregateLost
    from coding_os.sessions import importstate

    with importstate.load(tiers.state_dir) as kept:
        try:
            natives, _ = scan_claude(claude_dir, kept.state)
        except AggregateLost:  # the kept state is not whole: the logs are read again
            natives, _ = scan_claude(claude_dir)
    rows = []
    for native in natives:
        numbers = {_link_number(link) for link in native.pr_links}
        if number in numbers:
            row = storage.index_row(native.native_id)
            if row is not None:
                rows.append(row)
    return sorted(rows, key=lambda r: (r.last_active, r.id), reverse=True)


def _link_number(link: str) -> str | None:
    from coding_os.errors import InvalidInput

    try:
        return pr_number(link)
    except InvalidInput:
        return None


def find_for_resume(storage: Storage, tiers: Tiers, scope: ResumeScope,
                    refresh: Callable[[], RefreshReport | None], *, key: str | None = None,
                    latest: bool = False, pr: str | None = None,
                    claude_dir: str | None = None) -> Found:
    """The session to resume: by exact id or name (`key`), the latest of this checkout
    (`latest`), or the one that links pull request `pr`. Exactly one of them must be given.

    An id wins over a name; a key with whitespace can only be a name. The caller checks where
    the session may run with `place`.

    Raises:
        InvalidId: `key` is malformed (checked before any lookup).
        InvalidInput: not exactly one of key, latest, pr; a malformed pull request.
        NotFound: nothing matches, even after importing what changed and scanning transcripts.
        Ambiguous: several sessions have the name, or link the pull request.
    """
    from coding_os.errors import InvalidInput

    if sum((key is not None, latest, pr is not None)) != 1:
        raise InvalidInput("give one of: a session id or name, --continue, --from-pr")
    refresher = _Refresher(refresh)
    if key is not None:
        validate_key(key)
        if not any(c.isspace() for c in key):
            found = _find_by_id(storage, tiers, key, refresher)
            if found is not None:
                return found
        refresher()
        row = _by_name(storage, key, scope)
        if row is None:
            raise NotFound(f"no session {key}")
        return Found(row, "index", list(refresher.notes))
    if latest:
        refresher()
        row = _latest(storage, scope)
        if row is None:
            raise NotFound(f"no session to continue in {scope.here}")
        return Found(row, "index", list(refresher.notes))
    assert pr is not None
    number = pr_number(pr)
    refresher()
    rows = _pr_sessions(storage, tiers, claude_dir, number)
    ours = [row for row in rows if _where(row) is not None and _under(str(_where(row)),
                                                                        scope.repo)]
    candidates = ours or rows
    if not candidates:
        raise NotFound(f"no session links pull request {number}")
    if len(candidates) > 1:
        raise Ambiguous(f"{len(candidates)} sessions link pull request {number}: "
                        f"{', '.join(r.id for r in candidates)}; resume one by its id")
    return Found(candidates[0], "native_import", list(refresher.notes))


def _count_types(path: str, types: Sequence[str], block: int = 1 << 20) -> dict[str, int]:
    """How many entries of each type a cos transcript holds, counted on the raw bytes.

    Every line starts with the same head (`{"v":1,"seq":…,"ts":"…","type":"…"`), so `","type":"X"`
    after the timestamp is the entry's type; a JSON string cannot hold that unescaped. A
    transcript is append-only, so the counts are kept beside it (`<transcript>.counts`, keyed by
    inode and size) and only the bytes appended since are searched: resuming a long session
    costs what it added, not its length. A file that shrank (a torn tail set aside) or was
    replaced is counted again from the start.
    """
    from coding_os import jsonwire
    from coding_os import durable

    needles = {t: f'Z","type":"{t}"'.encode("ascii") for t in types}
    counts = dict.fromkeys(types, 0)
    cache_path = path + ".counts"
    try:
        st = os.stat(path)
    except OSError:
        return counts
    start = 0
    cached = durable.read_small(cache_path, 4096)
    if cached:
        try:
            record = jsonwire.loads(cached.decode("ascii", "replace"))
        except ValueError:
            record = None
        if (isinstance(record, dict) and record.get("inode") == st.st_ino
                and isinstance(record.get("size"), int) and 0 <= record["size"] <= st.st_size
                and isinstance(record.get("counts"), dict)
                and all(isinstance(record["counts"].get(t), int) for t in types)
                and record.get("tail") == _tail_hex(path, record["size"])):
            start = record["size"]
            counts = {t: record["counts"][t] for t in types}
    end = st.st_size
    keep = max(len(n) for n in needles.values()) - 1
    carry = b""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            while f.tell() < end:
                chunk = f.read(min(block, end - f.tell()))
                if not chunk:
                    break
                data = carry + chunk
                for name, needle in needles.items():
                    counts[name] += data.count(needle)
                carry = data[-keep:]
                for name, needle in needles.items():  # a match inside the carry counts once
                    counts[name] -= carry.count(needle)
    except OSError:
        return counts
    if start != end:
        try:
            durable.atomic_write(cache_path, jsonwire.dumps(
                {"inode": st.st_ino, "size": end, "tail": _tail_hex(path, end),
                 "counts": counts}).encode("ascii"), sync=False)
        except CosError:
            pass  # a cache: the counts are right either way, the next resume counts again
    return counts


def _tail_hex(path: str, size: int) -> str | None:
    """The 32 bytes before `size`: the counted prefix is still the file's own (a tail set aside
    and written over keeps the size but not these bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, size - 32))
            return f.read(min(32, size)).hex()
    except OSError:
        return None


def restored(row: IndexRow, tiers: Tiers) -> dict[str, Any]:
    """What resuming restores: a cos transcript's entries, compacts and summaries (read from its
    tail and by a byte count, never a full parse), or a native session's messages."""
    base: dict[str, Any] = {"messages": row.messages, "tokens": row.tokens,
                            "worktree": row.worktree, "branch": row.branch,
                            "status": row.status}
    if row.kind != "cos":
        return {"kind": "native_log", "log": row.source_path, **base}
    from coding_os.sessions import transcript

    # Read only in this state dir: a row (any host's, on a shared database) names no file here.
    path = row.source_path
    if not path or os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.normpath(path)))) != os.path.normpath(tiers.state_dir):
        try:
            path = transcript.transcript_path(tiers, row.id)
        except CosError:
            return {"kind": "transcript", "transcript": None, "entries": 0, "compacts": 0,
                    "summaries": 0, **base}
    try:
        last = transcript.last_seq(path)
    except CosError:
        last = None
    counts = _count_types(path, ("compact", "summary"))
    return {"kind": "transcript", "transcript": path,
            "entries": 0 if last is None else last + 1,
            "compacts": counts["compact"], "summaries": counts["summary"], **base}


def resume_handover(row: IndexRow, cwd: str) -> tuple[Handover | None, str | None]:
    """The agent command that resumes `row` in `cwd`, or None and why there is none (also for
    a native id that is not one: nothing a row says becomes an option of the agent)."""
    native = row.native_id or row.id
    if row.kind in _AGENT_NAMES and not is_native_id(native):
        return None, f"{native[:80]!r} is not a {_AGENT_NAMES[row.kind]} session id"
    if row.kind == "claude":
        return Handover(["claude", "--resume", native], cwd), None
    if row.kind == "codex":
        return Handover(["codex", "resume", native], cwd), None
    if row.kind == "gemini":
        return Handover(["gemini", "--resume", native], cwd), None
    return None, (f"{row.id} is a cos-native session: there is no external agent to hand over "
                  "to; its transcript is the restored context")


def fork_handover(row: IndexRow, cwd: str) -> Handover | None:
    """The agent command that forks a Claude Code or Codex session (None for cos-native, and
    for a native id that is not one)."""
    native = row.native_id or row.id
    if row.kind in ("claude", "codex") and not is_native_id(native):
        return None
    if row.kind == "claude":
        return Handover(["claude", "--resume", native, "--fork-session"], cwd)
    if row.kind == "codex":
        return Handover(["codex", "fork", native], cwd)
    return None


def restore_report(found: Found, scope: ResumeScope, tiers: Tiers,
                   rebuilt: Sequence[str] = ()) -> RestoreReport:
    """The restore report of a found session (`rebuilt`: repairs made before the lookup).

    Raises:
        CrossProject: the session belongs to another project (see `place`).
    """
    from coding_os.sessions.conversation import pending_handover

    cwd, relocation = place(found.row, scope)
    pending = pending_handover(tiers, found.row.id)  # a rewind's handover the agent has not run
    handover: Handover | None
    note: str | None
    if pending is not None:
        handover, note = Handover(pending["argv"], pending["cwd"]), None
    else:
        handover, note = resume_handover(found.row, cwd)
    return RestoreReport(path=found.path, session=asdict(found.row),
                         restored=restored(found.row, tiers),
                         rebuilt=[*rebuilt, *found.rebuilt], relocation=relocation, cwd=cwd,
                         handover=handover, handover_note=note)


def pending_rewind_report(storage: Storage, tiers: Tiers, session: str) -> RestoreReport | None:
    """The restore report of a session a conversation rewind made and whose agent has not run
    its handover yet (so no log of it exists to find): the handover itself; None for any other
    session."""
    from coding_os.sessions.conversation import pending_handover

    pending = pending_handover(tiers, session)
    if pending is None:
        return None
    record = storage.session(session)
    row = {"id": session, "agent": record.agent if record else None,
           "native_id": record.native_id if record else None,
           "project": record.project if record else None, "cwd": pending["cwd"]}
    return RestoreReport(path="rewind", session=row, restored={}, rebuilt=[], relocation=None,
                         cwd=str(pending["cwd"]),
                         handover=Handover(pending["argv"], pending["cwd"]),
                         handover_note="the conversation rewound by cos rewind: its agent "
                                       "has not run it yet")


def hand_over(handover: Handover, announce: Callable[[], None] | None = None) -> NoReturn:
    """Replace this process with the agent: chdir to the session's directory, then exec
    (`announce` runs once the agent and the directory are known to be there).

    Raises:
        NotFound: the agent is not on PATH, or the directory cannot be entered.
        CosError: the exec itself failed.
    """
    import shutil

    program = handover.argv[0]
    if shutil.which(program) is None:
        raise NotFound(f"{program} is not on PATH; to continue, run: {handover.command()}")
    import sys

    try:
        os.chdir(handover.cwd)
    except OSError as exc:
        raise NotFound(f"cannot enter {handover.cwd}: {exc.strerror}") from None
    if announce is not None:
        announce()
    sys.stdout.flush()  # what was printed must not die with this process image
    sys.stderr.flush()
    try:
        os.execvp(program, handover.argv)
    except OSError as exc:
        raise CosError(f"cannot start {program}: {exc.strerror}") from None


def check_request(key: str | None = None, pr: str | None = None, name: str | None = None
                  ) -> None:
    """Refuse a resume or fork request's bad input before any lookup: the key, the pull
    request, the name of a fork.

    Raises:
        InvalidId: a malformed key. InvalidInput: a malformed pull request or name.
    """
    if key is not None:
        validate_key(key)
    if pr is not None:
        pr_number(pr)
    if name is not None:
        from coding_os.sessions.transcript import validate_title

        validate_title(name)


def scope_of(caller: Caller, env: Mapping[str, str], here: str, repo: list[str]
             ) -> ResumeScope:
    """The caller's scope: its checkout `here`, its repository's directories `repo`, and its
    own sessions (its panel's, the agents' session variables of `env`, the hook payload's),
    which `--continue` leaves out."""
    from coding_os.adapters import PANEL_ENV_VARS
    from coding_os.state.caller import read_panel_session

    current: set[str] = set()
    panel = read_panel_session(caller.panel_dir)
    if panel is not None:
        current.update(value for value in panel if value)
    current.update(env[var] for var in PANEL_ENV_VARS if env.get(var))
    if caller.native:
        current.add(caller.native)
    return ResumeScope(here=here, repo=repo, current=current)


def resume(storage: Storage, tiers: Tiers, scope: ResumeScope,
           refresh: Callable[[], RefreshReport | None], *, key: str | None = None,
           latest: bool = False, pr: str | None = None, claude_dir: str | None = None,
           elsewhere: Callable[[Found], RestoreReport | None] | None = None) -> RestoreReport:
    """The restore report of the session to resume (found as `find_for_resume` finds it); a
    session a conversation rewind made, whose log its handover has not made yet, is found by
    its pending handover. On a shared storage, `elsewhere` gives the report of a session
    another host wrote (None for this host's: hosts/remote.py materialises it).

    Raises:
        InvalidId, InvalidInput, NotFound, Ambiguous, CrossProject: as `find_for_resume` and
            `restore_report`; as `elsewhere`.
    """
    try:
        found = find_for_resume(storage, tiers, scope, refresh, key=key, latest=latest, pr=pr,
                                claude_dir=claude_dir)
    except NotFound:
        # A session a conversation rewind made has no log until its handover runs.
        pending = pending_rewind_report(storage, tiers, key) if key is not None else None
        if pending is None:
            raise
        return pending
    report = elsewhere(found) if elsewhere is not None and storage.shared else None
    return report if report is not None else restore_report(found, scope, tiers)


def fork(storage: Storage, tiers: Tiers, scope: ResumeScope,
         refresh: Callable[[], RefreshReport | None], key: str, at_seq: int | None = None,
         name: str | None = None, *, dry_run: bool = False) -> ForkReport:
    """Fork the session `key` names (an id or name): a cos-native one into a new transcript
    (unless `dry_run`), which the index learns at once (`refresh`); a Claude Code or Codex one
    gets the handover to its own fork (`claude --resume <id> --fork-session`, `codex fork
    <id>`), not executed here.

    Raises:
        InvalidInput: a bad seq or name; `at_seq`/`name` for a Claude Code or Codex session;
            a sidechain of a fork; a Gemini CLI session (it has no fork).
        NotFound, Ambiguous, CrossProject: as `find_for_resume` and `place`.
        StateIOError: the new transcript cannot be written.
    """
    from coding_os.errors import InvalidInput
    from coding_os.sessions import transcript

    found = find_for_resume(storage, tiers, scope, refresh, key=key)
    row = found.row
    if row.kind == "gemini":
        raise InvalidInput(f"{row.id} is a Gemini CLI session, and Gemini CLI has no fork on "
                           f"its command line: `cos resume {row.id}` continues it")
    where, relocation = place(row, scope, verb="fork")
    handover = fork_handover(row, where)
    report = ForkReport(path=found.path, source=asdict(row), session=None, transcript=None,
                        fork_point=at_seq, copied=None, relocation=relocation, cwd=where,
                        handover=handover, dry_run=dry_run)
    if handover is not None:
        if at_seq is not None or name is not None:
            raise InvalidInput(f"{row.id} is a {row.kind} session: --at and --name apply to "
                               "cos-native sessions (name the fork with `cos sessions "
                               "rename` once it appears)")
        return report
    if dry_run:
        return report
    forked = transcript.fork(tiers, row.id, at_seq, name)
    refresh()
    if name is not None:
        storage.set_name(forked.session, name)
    report.session, report.transcript = forked.session, forked.path
    report.fork_point, report.copied = forked.fork_point, forked.copied
    return report
