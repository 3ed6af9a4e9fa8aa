"""Materialising on this host a session another host wrote (DESIGN.md §8): its replicated lines
read back from the storage, its paths mapped from the other host's checkout to this one's, and
written where its agent looks for it.

- cos-native: the transcript (and the engine's events log, when replicated) into this project's
  state dir, `<agent>/transcripts/<sid>.jsonl` and `<agent>/events/<sid>.jsonl`;
- Claude Code: `<claude dir>/projects/<this cwd, munged>/<id>.jsonl`, then `claude --resume`;
  its subagent transcripts (streams `subagent:<file>`) where Claude Code writes them, `<file>`
  under that same folder (`<id>/subagents/agent-<x>.jsonl`, or `agent-<x>.jsonl` beside it);
- Codex: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl` (the relative path it had on its
  host), then `codex resume`;
- Gemini CLI: `<gemini dir>/tmp/<slug>/chats/session-<time>-<id8>.jsonl` (the name it had on its
  host), the slug that of the directory the agent will run in, registered in Gemini's
  `projects.json` (and `.project_root`) as Gemini CLI does (adapters/gemini/projects.py), then
  `gemini --resume`; its subagents' files (streams `subagent:<file>`) where Gemini CLI writes
  them, `<file>` under that same `chats` folder (`<id>/<subagent id>.jsonl`). Its lines hold no
  path field: they are written as they are. Of the session's own files only the main one is
  replicated (not the empty one a resume may start beside it).

A subagent's name is read from the storage: it is placed only when it is one its agent gives a
subagent of this session (`is_subagent_name` of adapters/claude/transcripts.py or
adapters/gemini/sessions.py: no `..`, no absolute path, no other session's folder), else the
session is refused (`InvalidId`) before anything is written.

The path fields of each line (`cwd`; for a cos transcript or events log also `project` and
`worktree`) are mapped when their value is the other host's root or under it; every other byte
of a line stays as it was, and a line that is not a JSON object (a torn tail) is kept whole. Every file is read
from the storage and checked against what is on disk before the first one is written, and each is
written atomically (temp file, fsync, rename): a storage that goes away mid-read leaves nothing
behind, a file appears whole or not at all. A local file the replica would change is refused
(`Conflict`) unless it is a prefix of the replica (it gets the rest); one the replica is a prefix
of (the session went on here) is kept.

A session that moved between hosts holds lines of each, each with its host's paths: every root
the project has on a host the storage knows (`host_roots`) is mapped to this checkout.

Another host's row is data from elsewhere (DESIGN.md §8, §11): its `project`, `worktree` and
`cwd`, once mapped, must lie in this checkout, `..` and symlinks resolved (`inside_checkout`),
or the resume is refused before anything is written; and a row's `source_path` is never read
unless it is one of this host's own files (a session with nothing replicated, indexed under an
earlier name of this host).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from coding_os.adapters import is_native_id
from coding_os.errors import Conflict, CrossProject, InvalidId, InvalidInput, NotFound
from coding_os.hosts.replicate import SUBAGENT
from coding_os.storage.base import IndexRow, ReplicaSource, Storage, StorageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.sessions.resume import Found, RestoreReport, ResumeScope
    from coding_os.state.tiers import Tiers

__all__ = [
    "BATCH",
    "MaterializedFile",
    "Materialized",
    "is_remote",
    "map_path",
    "map_lines",
    "file_action",
    "read_replica",
    "read_mapped",
    "roots_for",
    "host_roots",
    "inside_checkout",
    "materialize",
    "restore_report_elsewhere",
]

# Replicated lines read per query: a 50 MB session in a few round trips, never all in one.
BATCH = 5000
# The fields of a line holding a path of the session's host, by stream.
_PATH_KEYS = {"transcript": ("cwd", "project", "worktree"),
              "events": ("cwd", "project", "worktree"), "native": ("cwd",),
              "subagent:": ("cwd",)}
_ROLLOUT_TAIL = re.compile(
    r"(?:^|/)([0-9]{4})/([0-9]{2})/([0-9]{2})/(rollout-[A-Za-z0-9._:-]{1,200}\.jsonl)$")
_GEMINI_NAME = re.compile(r"^session-[0-9A-Za-z:-]{1,40}-([0-9A-Za-z_-]{1,8})\.jsonl$")
# The order the files of a session are written in: the events before the transcript that
# names them, a session's subagents before its main file.
_ORDER = {"events": 0, "subagent:": 0, "native": 1, "transcript": 2}


def _kind(stream: str) -> str:
    """The stream's kind: `subagent:` for every `subagent:<file>`, else the stream itself."""
    return SUBAGENT if stream.startswith(SUBAGENT) else stream


@dataclass
class MaterializedFile:
    """One file of the session on this host: where, from which stream, how many lines, and what
    was done: `written` (new), `extended` (the local file was a prefix of the replica),
    `unchanged` (already identical), `kept` (the local file goes on past the replica); on a dry
    run `would write` / `would extend`."""

    path: str
    stream: str
    lines: int
    action: str
    session: str = ""  # the replica's session (its id in the storage)
    agent: str = ""
    size: int = 0  # bytes of the replica's lines as written here
    last: int = 0  # where the last of them starts


@dataclass
class Materialized:
    """What materialising a session of another host did."""

    host: str  # the host that wrote the session
    source_root: str | None  # its project root there
    root: str  # the project root here
    moved: bool = False  # this host took the session over (Storage.move_session)
    files: list[MaterializedFile] = field(default_factory=list)


def is_remote(row: IndexRow, local_host: str) -> bool:
    """Whether `row` is another host's session (a row without a host is this host's)."""
    return row.host is not None and row.host != local_host


def map_path(value: str | None, old: str | Sequence[str] | None, new: str) -> str | None:
    """`value` with the root `old` replaced by `new` when it is `old` or under it; else as is.
    With several roots, the longest one `value` is under."""
    if value is None or not old:
        return value
    if not isinstance(old, str):
        for one in sorted(old, key=len, reverse=True):
            mapped = map_path(value, one, new)
            if mapped != value:
                return mapped
        return value
    old = old.rstrip("/") or "/"
    if value == old:
        return new
    prefix = old if old.endswith("/") else old + "/"
    if value.startswith(prefix):
        return new.rstrip("/") + "/" + value[len(prefix):]
    return value


def _json_text(value: str, ascii_only: bool) -> bytes:
    """`value` as the inside of a JSON string (no quotes), as writers of either kind spell it."""
    import json

    return json.dumps(value, ensure_ascii=ascii_only)[1:-1].encode("utf-8")


def _mapper(keys: Sequence[str], olds: Sequence[str], new: str
            ) -> tuple[list[bytes], re.Pattern[bytes], dict[bytes, bytes]]:
    spellings: dict[bytes, bytes] = {}
    for old in olds:
        spellings[_json_text(old, True)] = _json_text(new, True)
        spellings[_json_text(old, False)] = _json_text(new, False)
    key_part = b"|".join(re.escape(k.encode("ascii")) for k in keys)
    # the longest root first: a root under another one is matched whole
    old_part = b"|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
    pattern = re.compile(b'("(?:' + key_part + rb')"[ \t]*:[ \t]*")(' + old_part + b')(?=["/])')
    return list(spellings), pattern, spellings


def _whole_object(line: bytes) -> bool:
    if line[:1] == b"{" and line[-1:] == b"}":
        return True
    stripped = line.strip()
    return stripped[:1] == b"{" and stripped[-1:] == b"}"


def map_lines(lines: Sequence[bytes], keys: Sequence[str], old: str | Sequence[str] | None,
              new: str) -> bytes:
    """The file made of `lines` (each without its newline), with the string fields `keys` whose
    value is the root `old` (or one of the roots `old`: a session several hosts wrote) or under
    it moved to `new`; every other byte as it was, and a line that is not a JSON object kept
    whole. Each line ends with a newline."""
    if not lines:
        return b""
    new = new.rstrip("/") or "/"
    olds = [old] if isinstance(old, str) or old is None else list(old)
    roots = sorted({r.rstrip("/") for r in olds if r and r.rstrip("/")} - {new})
    if not roots:
        return b"\n".join([*lines, b""])  # the newline after the last line, without a copy
    spellings, pattern, table = _mapper(keys, roots, new)

    def swap(match: re.Match[bytes]) -> bytes:
        return match.group(1) + table[match.group(2)]

    kept = {i for i, line in enumerate(lines) if not _whole_object(line)}
    if not kept:  # every line a JSON object (the usual case): one pass over the whole file
        return pattern.sub(swap, b"\n".join([*lines, b""]))
    out = [line if i in kept or not any(s in line for s in spellings) else pattern.sub(swap, line)
           for i, line in enumerate(lines)]
    return b"\n".join([*out, b""])


def file_action(path: str, data: bytes) -> str:
    """What writing `data` to `path` would do: `write` (no file), `extend` (the file is a prefix
    of `data`, ending at a line's end), `unchanged` (identical) or `kept` (the file starts with
    `data`: the session went on here).

    Raises:
        Conflict: the file holds something else; the message says how to resume anyway.
        NotFound: the path is taken by something that is not a regular file.
    """
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "write"
    except OSError as exc:
        raise NotFound(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):  # a directory, a FIFO (never opened: it would block)
        raise NotFound(f"{path} is not a regular file: cannot materialise the session there")
    try:
        with open(path, "rb") as f:
            current = f.read()
    except OSError as exc:
        raise NotFound(f"cannot read {path}: {exc.strerror}") from None
    if current == data:
        return "unchanged"
    if data.startswith(current) and (not current or current.endswith(b"\n")):
        return "extend"
    if current.startswith(data):
        return "kept"
    raise Conflict(f"{path} exists and differs from the replicated session: move it aside to "
                   "resume the replica, or resume the local file with the agent itself")


def _batches(storage: Storage, source: ReplicaSource, batch: int) -> Iterator[list[bytes]]:
    """The lines of a replicated file, 1 to `source.lines`, `batch` at a time.

    Raises:
        StorageError: the storage failed or went away; a line is missing.
    """
    after = 0
    while after < source.lines:
        chunk = storage.replica_lines(source.session, source.stream, after=after,
                                      limit=min(batch, source.lines - after))
        if not chunk:
            break
        lines: list[bytes] = []
        for seq, line in chunk:
            if seq != after + 1:
                break
            lines.append(line)
            after = seq
        if lines:
            yield lines
        if len(lines) < len(chunk):
            break
    if after < source.lines:
        raise StorageError(f"the replica of {source.session} ({source.stream}) misses line "
                           f"{after + 1}")


def read_replica(storage: Storage, source: ReplicaSource, batch: int = BATCH) -> list[bytes]:
    """The lines of a replicated file, 1 to `source.lines`, read `batch` at a time.

    Raises:
        StorageError: the storage failed or went away; a line is missing.
    """
    return [line for lines in _batches(storage, source, batch) for line in lines]


def read_mapped(storage: Storage, source: ReplicaSource, old: str | Sequence[str] | None,
                new: str, batch: int = BATCH) -> tuple[bytes, int]:
    """The file a replicated file becomes here (`map_lines` of its lines, mapped from `old` to
    `new`) and its number of lines. A file of several batches is read by a helper thread while
    this one maps the batch before (the wait on the database overlaps the mapping).

    Raises:
        StorageError: the storage failed or went away; a line is missing.
    """
    keys = _PATH_KEYS[_kind(source.stream)]
    if source.lines <= batch:
        lines = read_replica(storage, source, batch)
        return map_lines(lines, keys, old, new), len(lines)
    import queue
    import threading

    handed: queue.Queue[list[bytes] | BaseException | None] = queue.Queue(maxsize=2)

    def fetch() -> None:
        try:
            for lines in _batches(storage, source, batch):
                handed.put(lines)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            handed.put(exc)
            return
        handed.put(None)

    reader = threading.Thread(target=fetch, name="cos-replica-read", daemon=True)
    reader.start()
    parts: list[bytes] = []
    count = 0
    while True:
        item = handed.get()
        if item is None:
            break
        if isinstance(item, BaseException):
            reader.join()
            raise item
        parts.append(map_lines(item, keys, old, new))
        count += len(item)
    reader.join()
    return b"".join(parts), count


def roots_for(storage: Storage, row: IndexRow, sources: Sequence[ReplicaSource], local_host: str,
              local_root: str, local_keys: Callable[[], Sequence[str]]
              ) -> tuple[str | None, str]:
    """The session's project root on its host and this host's checkout of the same repository
    (the caller's project, when the storage knows it there or `local_keys` give the
    repository's identity).

    Raises:
        CrossProject: this host has no checkout of that repository (the command to run on the
            session's host), or has it elsewhere than the caller's project (the command to run
            there).
    """
    host = str(row.host)
    key = next((s.project_key for s in sources if s.project_key), None)
    known = storage.project_hosts(key) if key else {}
    source_root = next((s.root for s in sources if s.root), None) or known.get(host)
    where = row.cwd or row.worktree or row.project or source_root or "."
    here = known.get(local_host)
    if here is not None and os.path.realpath(here) == os.path.realpath(local_root):
        return source_root, local_root
    if key is not None and key in local_keys():
        return source_root, local_root
    if key is not None and here:
        moved = map_path(where, source_root, here) or here
        raise CrossProject(f"cd {shlex.quote(moved)} && cos resume {shlex.quote(row.id)}")
    raise CrossProject(f"{row.id} is a session of host {host} in a repository this host has "
                       f"not checked out; on {host}: cd {shlex.quote(where)} && cos resume "
                       f"{shlex.quote(row.id)}")


def _rollout_relative(path: str, created: str | None, native: str) -> str:
    """The path of a rollout under `sessions/`: the one it had on its host, else one made of
    the session's day."""
    match = _ROLLOUT_TAIL.search(path.replace(os.sep, "/"))
    if match is not None and native in match.group(4):
        return "/".join(match.groups())
    day = (created or "")[:10]
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", day):
        from coding_os.clock import utc_now

        day = utc_now()[:10]
    year, month, date = day.split("-")
    return f"{year}/{month}/{date}/rollout-{day}T00-00-00-{native}.jsonl"


def _gemini_name(path: str, created: str | None, native: str) -> str:
    """The name of a Gemini session file: the one it had on its host, else one made of the
    session's start (`session-YYYY-MM-DDTHH-MM-<id8>.jsonl`, as Gemini CLI names it)."""
    name = path.replace(os.sep, "/").rsplit("/", 1)[-1]
    match = _GEMINI_NAME.match(name)
    if match is not None and match.group(1) == native[:8]:
        return name
    start = (created or "")[:16].replace(":", "-")
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}", start):
        from coding_os.clock import utc_now

        start = utc_now()[:16].replace(":", "-")
    return f"session-{start}-{native[:8]}.jsonl"


def _target(source: ReplicaSource, row: IndexRow, tiers: Tiers, cwd: str, claude_dir: str,
            codex_dir: str, gemini_dir: str) -> str:
    """Where `source` goes on this host (a Gemini session: under the slug Gemini CLI takes for
    `cwd`).

    Raises:
        InvalidId: the stored id cannot name a file.
        InvalidInput, StateIOError: Gemini's `projects.json` is not a registry, or unreadable.
    """
    if source.stream in ("transcript", "events"):
        from coding_os.sessions.transcript import session_agent

        agent = session_agent(row.id)
        if source.stream == "transcript":
            return tiers.transcript_path(agent, row.id)
        return tiers.events_path(agent, row.id)
    native = row.native_id or row.id
    if not is_native_id(native):
        raise InvalidId(f"not a session id: {native!r}")
    if row.kind == "codex" or source.agent == "codex":
        return os.path.join(codex_dir, "sessions",
                            *_rollout_relative(source.path, row.created, native).split("/"))
    # Claude Code and Gemini CLI: the folder of the session's file, its subagents' files
    # named relative to it.
    if row.kind == "gemini":
        from coding_os.adapters.gemini import projects
        from coding_os.adapters.gemini.sessions import is_subagent_name

        folder = os.path.join(gemini_dir, "tmp", projects.find_slug(gemini_dir, cwd).name,
                              "chats")
    else:
        from coding_os.adapters.claude.transcripts import is_subagent_name
        from coding_os.adapters.claude.transcripts import project_key as munge

        folder = os.path.join(claude_dir, "projects", munge(cwd))
    if not source.stream.startswith(SUBAGENT):
        return os.path.join(folder, _gemini_name(source.path, row.created, native)
                            if row.kind == "gemini" else f"{native}.jsonl")
    name = source.stream[len(SUBAGENT):]
    if not is_subagent_name(native, name):
        raise InvalidId(f"not a subagent file of session {native}: {name!r}")
    return os.path.join(folder, *name.split("/"))


def materialize(storage: Storage, row: IndexRow, sources: Sequence[ReplicaSource], *,
                source_root: str | None, root: str, cwd: str, tiers: Tiers, claude_dir: str,
                codex_dir: str, gemini_dir: str, write: bool = True, batch: int = BATCH,
                roots: Sequence[str] = ()) -> Materialized:
    """Write the replicated files of `row` (another host's session) on this host, mapped from
    `source_root` (and every root of `roots`: the project's checkouts on the hosts that wrote
    the session) to `root`; `cwd` is where its agent will run. With `write` false nothing is
    written and the actions say what would be done.

    Every file is read and checked first, then written, each atomically; a Gemini session's
    project is registered with Gemini CLI (`projects.json`) just before its file is written.

    Raises:
        NotFound: nothing of the session was replicated.
        StorageError: the storage failed or went away (nothing written).
        Conflict: a local file differs from the replica (nothing written).
        StateIOError: a file could not be written (those before it stay whole).
        InvalidInput: Gemini's `projects.json` is not a registry Gemini CLI writes (nothing
            written).
    """
    from coding_os import durable

    wanted = [s for s in sources if _kind(s.stream) in _PATH_KEYS and s.lines > 0]
    if row.kind != "cos":
        wanted = [s for s in wanted if s.stream == "native"][:1] + \
            [s for s in wanted if row.kind in ("claude", "gemini") and _kind(s.stream) == SUBAGENT]
    if not any(s.stream in ("transcript", "native") for s in wanted):
        raise NotFound(f"{row.id} is a session of host {row.host} with nothing replicated: "
                       f"run `cos sync` on {row.host}")
    planned: list[tuple[str, bytes, MaterializedFile]] = []
    for source in sorted(wanted, key=lambda s: (_ORDER[_kind(s.stream)], s.stream)):
        path = _target(source, row, tiers, cwd, claude_dir, codex_dir, gemini_dir)
        olds = [r for r in (source_root, *roots) if r]
        data, count = read_mapped(storage, source, olds, root, batch)
        action = file_action(path, data)
        last = data.rfind(b"\n", 0, len(data) - 1) + 1 if data else 0
        planned.append((path, data, MaterializedFile(path, source.stream, count, action,
                                                     source.session, source.agent, len(data),
                                                     last)))
    result = Materialized(host=str(row.host), source_root=source_root, root=root)
    if write and row.kind == "gemini" and any(done.action in ("write", "extend")
                                              for _, _, done in planned):
        planned = _register_gemini(planned, cwd, gemini_dir)
    for path, data, done in planned:
        if done.action in ("write", "extend"):
            if write:
                durable.ensure_dir(os.path.dirname(path))
                durable.atomic_write(path, data)
                done.action = "written" if done.action == "write" else "extended"
            else:
                done.action = f"would {done.action}"
        result.files.append(done)
    return result


def _register_gemini(planned: list[tuple[str, bytes, MaterializedFile]], cwd: str,
                     gemini_dir: str) -> list[tuple[str, bytes, MaterializedFile]]:
    """`planned` once the project at `cwd` is registered with Gemini CLI; should the slug
    differ from the one planned (Gemini registered the project meanwhile), its files are
    placed and checked again under that slug, each at the same path under its `chats`.

    Raises:
        InvalidInput, StateIOError: as `projects.register`.
        Conflict, NotFound: a file under the registered slug is in the way (`file_action`).
    """
    from coding_os.adapters.gemini import projects

    slug = projects.register(gemini_dir, cwd).name
    tmp = os.path.join(gemini_dir, "tmp")
    placed = []
    for path, data, done in planned:
        # <tmp>/<planned slug>/chats/<file>: <file> is the session's, or `<id>/<subagent>`
        in_chats = os.path.relpath(path, tmp).split(os.sep)[2:]
        again = os.path.join(tmp, slug, "chats", *in_chats)
        if again != path:
            done.path, done.action = again, file_action(again, data)
        placed.append((again, data, done))
    return placed


def host_roots(storage: Storage, row: IndexRow, sources: Sequence[ReplicaSource],
               source_root: str | None) -> list[str]:
    """Every root the session's lines may hold: the project's checkout on each host the storage
    knows it on, and the roots its replicated files were pushed from (a session that moved
    between hosts holds the lines of each)."""
    found = {r for r in (source_root, *(s.root for s in sources)) if r}
    for key in {s.project_key for s in sources if s.project_key}:
        found.update(storage.project_hosts(key).values())
    return sorted(found)


def _adopt(storage: Storage, tiers: Tiers, done: Materialized, local_host: str) -> None:
    """Mark the files written here as replicated up to the lines they hold (hosts/replicate:
    the next push is their line N+1, from this host)."""
    from coding_os.hosts import replicate

    for f in done.files:
        if f.lines > 0 and f.action in ("written", "extended", "unchanged", "kept"):
            replicate.adopt(storage, tiers, replicate.Source(f.session, f.stream, f.agent, f.path),
                            local_host, f.lines, f.size, f.last)


def _own_file(path: str | None, tiers: Tiers) -> bool:
    """Whether `path` is a session file this host found itself: a cos transcript of its state
    dir, or a native file its importer found on its disk (never merely what a row says)."""
    if not path or not os.path.isfile(path):
        return False
    from coding_os.sessions.index import cos_transcripts, native_files

    return path in native_files(tiers) or path in cos_transcripts(tiers)


def inside_checkout(mapped: IndexRow, row: IndexRow, root: str) -> IndexRow:
    """`mapped` (another host's `row`, its paths mapped to this checkout) with its `project`,
    `worktree` and `cwd` normalised, symlinks resolved: each must lie in the checkout `root`.

    Raises:
        InvalidInput: one of them does not (`<root>/../x`, a path the mapping left outside,
            a symlink leading out): nothing is written, no agent runs there.
    """
    real_root = os.path.realpath(root)

    def inside(name: str, value: str | None) -> str | None:
        if value is None:
            return None
        real = os.path.realpath(value) if os.path.isabs(value) else ""
        if not (real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)):
            raise InvalidInput(
                f"{row.id} is a session of host {row.host} whose {name} "
                f"{' '.join(str(getattr(row, name)).split())[:200]!r} is not inside this "
                f"checkout ({root}) once mapped: refused, nothing written")
        return real

    return replace(mapped, project=inside("project", mapped.project),
                   worktree=inside("worktree", mapped.worktree), cwd=inside("cwd", mapped.cwd))


def _mapped_row(row: IndexRow, source_root: str | Sequence[str] | None, root: str) -> IndexRow:
    return replace(row, project=map_path(row.project, source_root, root),
                   worktree=map_path(row.worktree, source_root, root),
                   cwd=map_path(row.cwd, source_root, root))


def restore_report_elsewhere(storage: Storage, found: Found, scope: ResumeScope, tiers: Tiers,
                             *, local_host: str, local_root: str,
                             local_keys: Callable[[], Sequence[str]],
                             claude_dir: str, codex_dir: str, gemini_dir: str,
                             write: bool = True, batch: int = BATCH) -> RestoreReport:
    """The restore report of another host's session, once its files are materialised here
    (`write` false: what would be written); `RestoreReport.host` names that host and
    `materialized` the files. A session with nothing replicated whose file is on this machine
    (the host was renamed; SQLite) resumes from that file, nothing written.

    Once written, the session moves here (`Storage.move_session`, a compare-and-set on its
    owner; `RestoreReport.moved_from` names the host it was taken from) and the files are
    recorded as replicated up to the lines they hold (`replicate.adopt`): this host's next sync
    pushes only what the session gains here. Another host that took it first keeps it.

    Raises:
        CrossProject: this host has no checkout of the session's repository, or the caller is
            in another project (nothing written).
        InvalidInput: a path of the session's row is not inside this checkout once mapped
            (`inside_checkout`; nothing written).
        NotFound, StorageError, Conflict, StateIOError: as `materialize`.
    """
    from coding_os.sessions import resume

    row = found.row
    sources = storage.replica_sources(row.id)
    if not sources and row.native_id and row.native_id != row.id:
        sources = storage.replica_sources(row.native_id)
    if not sources and _own_file(row.source_path, tiers):
        # Nothing replicated, but its file is one of this host's own (this host was renamed,
        # or a SQLite index that only ever had this host): resumed as this host's own.
        report = resume.restore_report(found, scope, tiers)
        report.host = row.host
        return report
    source_root, root = roots_for(storage, row, sources, local_host, local_root, local_keys)
    roots = host_roots(storage, row, sources, source_root)
    mapped = inside_checkout(_mapped_row(row, [source_root or "", *roots], root), row, root)
    cwd, relocation = resume.place(mapped, scope)
    done = materialize(storage, row, sources, source_root=source_root, root=root, cwd=cwd,
                       tiers=tiers, claude_dir=claude_dir, codex_dir=codex_dir,
                       gemini_dir=gemini_dir, write=write, batch=batch, roots=roots)
    if write and row.host is not None:
        # The marks first: a replication run here (another cos command) that sees the session
        # this host's already finds them, and never takes the mapped copy for a rewrite. Should
        # another host take it first, the marks only keep this copy from being read again.
        _adopt(storage, tiers, done, local_host)
        done.moved = storage.move_session(row.id, row.host, local_host)
    main = next((f for f in done.files if f.stream in ("transcript", "native")), None)
    if main is not None:
        mapped = replace(mapped, source_path=main.path)
    if done.moved:  # its row names this host's files and paths until the next refresh does
        storage.upsert_index_rows([replace(mapped, host=local_host)])
    report = resume.restore_report(resume.Found(mapped, found.path, list(found.rebuilt)), scope,
                                   tiers)
    report.host = done.host
    report.moved_from = done.host if done.moved else None
    report.materialized = [{"path": f.path, "stream": f.stream, "lines": f.lines,
                            "action": f.action} for f in done.files]
    if relocation and report.relocation is None:
        report.relocation = relocation
    return report
