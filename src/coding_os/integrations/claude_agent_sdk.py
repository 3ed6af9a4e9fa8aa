"""cos as the session store of the Claude Agent SDK (DESIGN.md §8): `CosSessionStore`.

The SDK mirrors every line of a session's transcript to a `SessionStore` and loads it back to
resume, fork and list. `CosSessionStore` keeps each SDK key — `(project_key, session_id)` and
each `subpath` under it — as a cos-native session of agent `claude-sdk`, its transcript cos's
own (§4.1): so it is listed by `cos sessions`, exported, searched and forked like any session.

Each SDK record is kept verbatim in the `item` field of one transcript entry: a `user` or
`assistant` entry (with the message's text) when the record is a user prompt or an assistant
reply with text, else an `event` named `sdk_item`. `load` returns the `item`s in order. A
subpath key (a subagent's transcript) is a sidechain: its `parent` is the main key's session, so
it is not listed as a session of its own.

On disk, beside the transcripts: `<state_dir>/claude-sdk/sdk-store/<project>/<session>/` (each a
hash of the SDK's string) holds `main.json` and `sub-<hash>.json` (which cos session a key is:
`{"session", "project_key", "session_id", "subpath"}`), `summary.json` (the SDK's summary of the
main key, kept as `fold_session_summary` makes it) and `.lock`. Every write to a session's keys —
the appends, the summary, a delete — holds an exclusive `flock` on that `.lock`, so several
processes may append to one session: each batch lands whole and in one piece, and the summary
follows the entries in the order they were written. In one process, calls run one at a time in
the order they were made (one worker thread per store), off the event loop.

Several hosts (DESIGN.md §8), when the storage is a shared PostgreSQL (`COS_DATABASE_URL`): each
append pushes the session's new transcript lines to it (coding_os.hosts.replicate), and the
first append of a session also writes its index row, with this host (COS_HOST). On another host
a main key this host holds no session for is looked up there: `load` gives back the records of
the session another host stored under that SDK session id in a checkout of the same repository
(its replicated transcript), and `list_sessions` / `list_session_summaries` of the project key
of this checkout (`project_key_for_directory` of its root) list those sessions too. The first
append to such a key here starts this host's own session of it, seeded with the other host's
records: the conversation goes on here, and the other host's session stays as it was. Subpath
keys come along: on a shared storage a main key's transcript names each of its subpaths (an
`event` named `sdk_subkey`, with `subpath` and `sidechain`, its cos session), so `list_subkeys`
and `load` of a subpath find them on another host too. On SQLite (one host) nothing of this
happens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import os

from coding_os import durable, jsonwire, redact
from coding_os.errors import InvalidInput, NotFound, StateIOError
from coding_os.sessions import transcript
from coding_os.state.caller import Caller
from coding_os.state.identity import mint_session_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    from coding_os.storage.base import Storage
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )

    _T = TypeVar("_T")

__all__ = ["CosSessionStore", "AGENT", "ITEM_EVENT"]

AGENT = "claude-sdk"
ITEM_EVENT = "sdk_item"  # the `event` name of an SDK record that is not a message with text
SUBKEY_EVENT = "sdk_subkey"  # in a main key's transcript, on a shared storage: a subpath of it
_STORE_DIR = "sdk-store"
_MAIN = "main.json"
_SUMMARY = "summary.json"
_LOCK = ".lock"
_KEY_FILE_MAX = 1 << 16
_SUMMARY_MAX = 1 << 24


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class CosSessionStore:
    """The Claude Agent SDK's `SessionStore` over the cos sessions of the project at `project`
    (a directory: its state dir is found as every cos command finds it; default the current
    directory). `env` is the environment cos reads (`COS_*`, `HOME`; default `os.environ`).

    Pass it as `ClaudeAgentOptions(session_store=CosSessionStore(...))`.
    """

    def __init__(self, project: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        """Find the project's state dir (made and registered when it does not exist yet).

        Raises:
            CosError: the state dir cannot be used (foreign, unwritable; see `Caller`).
        """
        cwd = os.path.abspath(os.fspath(project)) if project is not None else os.getcwd()
        if not os.path.isdir(cwd):
            raise InvalidInput(f"no project directory at {cwd}")
        caller = Caller(env, cwd=cwd)
        self.env = dict(os.environ if env is None else env)
        self.tiers = caller.tiers
        self.project_root = caller.resolution.project_root
        self.worktree = caller.resolution.worktree or self.project_root
        self.root = os.path.join(self.tiers.agent_dir(AGENT), _STORE_DIR)
        # Per cos session: (the transcript's size, the current turn, the uuids it holds) as this
        # store left it; read again when the size says another writer appended meanwhile.
        self._seen: dict[str, tuple[int, int, set[str]]] = {}
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None
        url = self.env.get("COS_DATABASE_URL") or ""
        self._shared = url.startswith(("postgresql://", "postgres://"))
        self._storage: Storage | None = None  # the shared storage, opened on first use
        self._host: str | None = None
        self._indexed: set[str] = set()  # sessions whose index row this store saw written

    # -- the SessionStore protocol ------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Store `entries` after what `key` holds, in order; an entry whose `uuid` the session
        already holds is skipped (the SDK retries a failed batch).

        Raises:
            InvalidInput: a malformed key, or an entry that is not a JSON object (nothing of
                the batch is stored).
            StateIOError: the transcript cannot be written.
        """
        if entries:
            await self._run(self._append, key, list(entries))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every record stored under `key`, in order; None when nothing was."""
        return await self._run(self._load, key)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The main keys stored under `project_key`, with the mtime (epoch ms) of each one's
        transcript."""
        return await self._run(self._list_sessions, project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's summary of each main key under `project_key`, as its appends folded it."""
        return await self._run(self._list_summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Delete the transcript of `key`; a main key takes its subpaths with it."""
        await self._run(self._delete, key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a main key."""
        return await self._run(self._list_subkeys, key)

    # -- in the worker --------------------------------------------------------------------------

    async def _run(self, work: Callable[..., _T], *args: Any) -> _T:
        if self._worker is None:
            self._worker = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="cos-claude-sdk-store")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(work, *args))

    def _append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        subpath = _subpath(key)
        for record in entries:  # checked whole before anything is written
            _check_record(record)
        folder = self._session_dir(key)
        durable.ensure_dir(folder)
        with durable.exclusive_lock(os.path.join(folder, _LOCK)):
            session = self._session_for(folder, key, subpath)
            path = transcript.transcript_path(self.tiers, session)
            turn, uuids = self._state(session, path)
            for record in entries:
                uuid = record.get("uuid")
                if isinstance(uuid, str):
                    if uuid in uuids:
                        continue
                    uuids.add(uuid)
                entry_type, fields, turn = _as_entry(dict(record), turn)
                transcript.append(self.tiers, session, entry_type, fields, durability="none")
            _fsync(path)  # the batch is durable once append returns
            self._seen[session] = (_size(path), turn, uuids)
            if subpath is None:
                self._fold_summary(folder, key, entries, path)
            if self._shared:
                self._replicate(session, path)

    def _load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        info = _read_key(self._key_file(key))
        if info is None:
            remote = self._remote_session(key) if self._shared else None
            return None if remote is None else self._remote_items(remote)
        try:
            entries = transcript.iter_entries(transcript.transcript_path(self.tiers,
                                                                         info["session"]))
            return [entry["item"] for entry in entries if "item" in entry]
        except NotFound:
            return None

    def _list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        found: list[SessionStoreListEntry] = []
        for folder in _subdirs(os.path.join(self.root, _hashed(project_key))):
            info = _read_key(os.path.join(folder, _MAIN))
            if info is None or info.get("project_key") != project_key:
                continue
            mtime = _mtime_ms(transcript.transcript_path(self.tiers, info["session"]))
            if mtime is not None:
                found.append({"session_id": info["session_id"], "mtime": mtime})
        if self._shared and self._lists_remote(project_key):
            here = {entry["session_id"] for entry in found}
            for _, session_id, mtime in self._remote_rows():
                if session_id not in here:
                    here.add(session_id)
                    found.append({"session_id": session_id, "mtime": mtime})
        return found

    def _list_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        found: list[SessionSummaryEntry] = []
        for folder in _subdirs(os.path.join(self.root, _hashed(project_key))):
            info = _read_key(os.path.join(folder, _MAIN))
            if info is None or info.get("project_key") != project_key:
                continue
            summary = _read_json(os.path.join(folder, _SUMMARY), _SUMMARY_MAX)
            if summary is not None and _mtime_ms(
                    transcript.transcript_path(self.tiers, info["session"])) is not None:
                found.append(summary)  # type: ignore[arg-type]
        if self._shared and self._lists_remote(project_key):
            from claude_agent_sdk import fold_session_summary

            here = {summary["session_id"] for summary in found}
            for session, session_id, mtime in self._remote_rows():
                if session_id in here:
                    continue
                here.add(session_id)
                main: SessionKey = {"project_key": project_key, "session_id": session_id}
                folded = fold_session_summary(None, main, self._remote_items(session))
                folded["mtime"] = mtime
                found.append(folded)
        return found

    def _delete(self, key: SessionKey) -> None:
        folder = self._session_dir(key)
        if not os.path.isdir(folder):
            return
        subpath = _subpath(key)
        with durable.exclusive_lock(os.path.join(folder, _LOCK)):
            if subpath is None:
                names = [n for n in _names(folder) if n.startswith("sub-")] + [_MAIN]
                durable.unlink_quietly(os.path.join(folder, _SUMMARY))
            else:
                names = [os.path.basename(self._key_file(key))]
            for name in names:
                key_file = os.path.join(folder, name)
                info = _read_key(key_file)
                if info is not None:
                    self._seen.pop(info["session"], None)
                    durable.unlink_quietly(
                        transcript.transcript_path(self.tiers, info["session"]))
                    if self._shared:  # gone for the other hosts too
                        storage = self._shared_storage()
                        storage.remove_replica(info["session"], "transcript")
                        storage.remove_index_row(info["session"])
                durable.unlink_quietly(key_file)

    def _list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        folder = self._session_dir(key)
        found: list[str] = []
        if self._shared:
            remote = self._remote({"project_key": _text(key, "project_key"),
                                   "session_id": _text(key, "session_id")})
            if remote is not None:
                found += self._remote_subkeys(remote)
        for name in _names(folder):
            if name.startswith("sub-") and name.endswith(".json"):
                info = _read_key(os.path.join(folder, name))
                if (info is not None and isinstance(info.get("subpath"), str)
                        and os.path.exists(transcript.transcript_path(self.tiers,
                                                                      info["session"]))):
                    found.append(info["subpath"])
        return sorted(set(found))

    # -- keys, sessions, summaries --------------------------------------------------------------

    def _session_dir(self, key: Mapping[str, Any]) -> str:
        return os.path.join(self.root, _hashed(_text(key, "project_key")),
                            _hashed(_text(key, "session_id")))

    def _key_file(self, key: SessionKey) -> str:
        subpath = _subpath(key)
        name = _MAIN if subpath is None else f"sub-{_hashed(subpath)}.json"
        return os.path.join(self._session_dir(key), name)

    def _session_for(self, folder: str, key: SessionKey, subpath: str | None) -> str:
        """The cos session of `key`, its transcript made when it has none (under the lock)."""
        key_file = self._key_file(key)
        info = _read_key(key_file)
        claimed = str(info["session"]) if info is not None else None
        if claimed is not None and os.path.exists(
                transcript.transcript_path(self.tiers, claimed)):
            return claimed
        parent = None if subpath is None else self._main_session(folder, key)
        meta: dict[str, Any] = {
            "native_id": key["session_id"], "project": self.project_root,
            "worktree": self.worktree, "parent": parent}
        # A key another host holds a session of: this host's session starts with its records
        # (the conversation goes on here).
        remote = self._remote_session(key) if self._shared else None
        seed = self._remote_items(remote) if remote is not None else []
        try:
            session = transcript.create(self.tiers, AGENT, session=claimed, **meta)
        except InvalidInput:  # the claimed id was taken meanwhile by another transcript
            session = transcript.create(self.tiers, AGENT, **meta)
        turn = 0
        for item in seed:
            entry_type, fields, turn = _as_entry(dict(item), turn)
            transcript.append(self.tiers, session, entry_type, fields, durability="none")
        record = {"session": session, "project_key": key["project_key"],
                  "session_id": key["session_id"], "subpath": subpath}
        durable.atomic_write(key_file, jsonwire.dumps(record).encode("ascii"))
        self._seen.pop(session, None)
        if self._shared:
            self._note_subkeys(folder)
        return session

    def _note_subkeys(self, folder: str) -> None:
        """On a shared storage, write into the main key's transcript (when it has one) an event
        `sdk_subkey` for each subpath of the key it does not name yet: `{"subpath", "sidechain"}`,
        so another host finds the subagents' transcripts of a session it reads (under the
        lock)."""
        main = _read_key(os.path.join(folder, _MAIN))
        if main is None:
            return
        path = transcript.transcript_path(self.tiers, main["session"])
        if not os.path.exists(path):
            return
        subs = {}
        for name in _names(folder):
            info = _read_key(os.path.join(folder, name)) if name.startswith("sub-") else None
            if info is not None and isinstance(info.get("subpath"), str):
                subs[info["subpath"]] = info["session"]
        if not subs:
            return
        noted = {entry.get("subpath") for entry in transcript.iter_entries(path)
                 if entry["type"] == "event" and entry.get("name") == SUBKEY_EVENT}
        for subpath, sidechain in sorted(subs.items()):
            if subpath not in noted:
                transcript.append(self.tiers, main["session"], "event",
                                  {"name": SUBKEY_EVENT, "subpath": subpath,
                                   "sidechain": sidechain}, durability="none")
                self._seen.pop(main["session"], None)
        self._replicate(main["session"], path)

    def _main_session(self, folder: str, key: SessionKey) -> str:
        """The session id of the main key (claimed, without a transcript, when it has none)."""
        main = os.path.join(folder, _MAIN)
        info = _read_key(main)
        if info is not None:
            return str(info["session"])
        session = mint_session_id(AGENT)
        record = {"session": session, "project_key": key["project_key"],
                  "session_id": key["session_id"], "subpath": None}
        durable.atomic_write(main, jsonwire.dumps(record).encode("ascii"))
        return session

    def _state(self, session: str, path: str) -> tuple[int, set[str]]:
        """(current turn, uuids held) of `session`: as this store left it, unless another
        writer appended since (then read from its transcript, as the first time)."""
        seen = self._seen.get(session)
        if seen is not None and seen[0] == _size(path):
            return seen[1], seen[2]
        turn, uuids = 0, set()
        for entry in transcript.iter_entries(path):
            if entry["type"] == "user":
                turn = max(turn, entry["turn"])
            item = entry.get("item")
            if isinstance(item, dict) and isinstance(item.get("uuid"), str):
                uuids.add(item["uuid"])
        return turn, uuids

    # -- several hosts (a shared storage) -------------------------------------------------------

    def _shared_storage(self) -> Storage:
        if self._storage is None:
            from coding_os.hosts.identity import this_host
            from coding_os.storage import open_storage

            self._host = this_host(self.env)
            self._storage = open_storage(self.tiers.database, env=self.env)
        return self._storage

    def close(self) -> None:
        """Close the connection to the shared storage, if one was opened (the next call opens
        it again); a store dropped without it closes it when collected."""
        storage, self._storage = getattr(self, "_storage", None), None
        if storage is not None:
            storage.close()

    def __del__(self) -> None:
        self.close()

    def _replicate(self, session: str, path: str) -> None:
        """Push the session's new transcript lines to the shared storage; its first append also
        writes its index row and this checkout's root (so other hosts find it by its SDK
        session id, and `cos sessions --all-hosts` there lists it)."""
        from coding_os.sessions import index
        from coding_os.hosts import replicate
        from coding_os.hosts.identity import register_project

        storage = self._shared_storage()
        if session not in self._indexed and storage.replica_source(session,
                                                                   "transcript") is None:
            register_project(storage, self.project_root, self._host)
            row, _ = index.cos_row(path, redact.configured(self.tiers.state_dir))
            if row is not None:
                row.host = self._host
                storage.upsert_index_rows([row])
        self._indexed.add(session)
        report = replicate.replicate(storage, self.tiers, self.project_root, self._host,
                                     sources=[replicate.Source(session, "transcript", AGENT,
                                                               path)])
        for _, _, why in report.refused:
            raise StateIOError(f"session {session} was not replicated: {why}")

    def _remote_rows(self, session_id: str | None = None) -> list[tuple[str, str, int]]:
        """(cos session, SDK session id, mtime in epoch ms of its last replicated line) of each
        session of agent claude-sdk another host stored in a checkout of this repository (of
        `session_id` only, when given), the most recently active first; main keys only
        (sidechains have no index row)."""
        from coding_os.hosts.identity import project_keys

        storage = self._shared_storage()
        keys = set(project_keys(self.project_root))
        found = []
        for row in storage.index_rows(agent=AGENT, search=session_id):
            if (row.host in (None, self._host) or not row.native_id or row.parent
                    or session_id not in (None, row.native_id)):
                continue
            source = storage.replica_source(row.id, "transcript")
            if source is not None and source.project_key in keys:
                found.append((row.id, row.native_id, _iso_ms(source.updated)))
        found.sort(key=lambda found: -found[2])
        return found

    def _remote(self, key: SessionKey) -> str | None:
        """The cos session another host stored under `key`'s SDK session id in a checkout of
        this repository (the most recently active), or None."""
        found = self._remote_rows(key["session_id"])
        return found[0][0] if found else None

    def _remote_session(self, key: SessionKey) -> str | None:
        """The cos session another host stored `key` as (a main key, or a subpath of it), or
        None."""
        main = self._remote(key)
        subpath = _subpath(key)
        if main is None or subpath is None:
            return main
        return self._remote_subkeys(main).get(subpath)

    def _remote_subkeys(self, main: str) -> dict[str, str]:
        """subpath -> cos session of the subpaths another host's main session names."""
        found = {}
        for _, line in self._shared_storage().replica_lines(main, "transcript"):
            entry = jsonwire.loads_object(line)
            if (entry is not None and entry.get("type") == "event"
                    and entry.get("name") == SUBKEY_EVENT
                    and isinstance(entry.get("subpath"), str)
                    and isinstance(entry.get("sidechain"), str)):
                found[entry["subpath"]] = entry["sidechain"]
        return found

    def _remote_items(self, session: str) -> list[SessionStoreEntry]:
        """The SDK records of another host's session, from its replicated transcript lines."""
        items = []
        for _, line in self._shared_storage().replica_lines(session, "transcript"):
            entry = jsonwire.loads_object(line)
            if entry is not None and "item" in entry:
                items.append(entry["item"])
        return items

    def _lists_remote(self, project_key: str) -> bool:
        """Whether `project_key` is the SDK's key of this checkout (its root or worktree):
        the other hosts' sessions of the repository are listed under it."""
        from claude_agent_sdk import project_key_for_directory

        return project_key in {project_key_for_directory(self.project_root),
                               project_key_for_directory(self.worktree)}

    def _fold_summary(self, folder: str, key: SessionKey, entries: list[SessionStoreEntry],
                      path: str) -> None:
        from claude_agent_sdk import fold_session_summary

        main: SessionKey = {"project_key": key["project_key"], "session_id": key["session_id"]}
        summary_path = os.path.join(folder, _SUMMARY)
        previous = _read_json(summary_path, _SUMMARY_MAX)
        if previous is None:  # the first batch, or a summary lost: fold all the session holds
            entries = self._load(main) or entries
        folded = fold_session_summary(previous, main, entries)  # type: ignore[arg-type]
        # Stamped with the transcript's own mtime: the clock list_sessions reports.
        folded["mtime"] = _mtime_ms(path) or 0
        durable.atomic_write(summary_path, jsonwire.dumps(folded).encode("ascii"), sync=False)


def _check_record(record: object) -> None:
    """Refuse a record that is not a JSON object (nothing of its batch is stored).

    Raises:
        InvalidInput: it is not.
    """
    problem = jsonwire.object_problem(record)
    if problem is not None:
        raise InvalidInput(f"a session store entry {problem}; nothing of the batch was stored")


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _as_entry(record: dict[str, Any], turn: int) -> tuple[str, dict[str, Any], int]:
    """(entry type, fields, turn after it) of the transcript entry holding an SDK record."""
    kind = record.get("type")
    if kind in ("user", "assistant") and not record.get("isMeta") \
            and not record.get("isCompactSummary"):
        message = record.get("message")
        text = _text_of(message)
        if text:
            if kind == "user":
                turn += 1
                return "user", {"turn": turn, "text": text, "item": record}, turn
            fields: dict[str, Any] = {"turn": turn, "text": text, "item": record}
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                counts = {name: usage.get(f"{name}_tokens") for name in ("input", "output")}
                if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                       for v in counts.values()):
                    fields["usage"] = counts
            return "assistant", fields, turn
    return "event", {"name": ITEM_EVENT, "item": record}, turn


def _text_of(message: object) -> str:
    """The text of a message (`content` a string, or its text blocks joined)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block["text"] for block in content
                         if isinstance(block, dict) and block.get("type") == "text"
                         and isinstance(block.get("text"), str) and block["text"])
    return ""


def _text(key: Mapping[str, Any], name: str) -> str:
    value = key.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"a session key needs a non-empty string {name}, not {value!r}")
    return value


def _subpath(key: Mapping[str, Any]) -> str | None:
    _text(key, "project_key")
    _text(key, "session_id")
    if "subpath" not in key:
        return None
    return _text(key, "subpath")


def _read_json(path: str, limit: int) -> dict[str, Any] | None:
    data = durable.read_small(path, limit)
    return None if data is None else jsonwire.loads_object(data)


def _read_key(path: str) -> dict[str, Any] | None:
    info = _read_json(path, _KEY_FILE_MAX)
    if info is None or not isinstance(info.get("session"), str):
        return None
    return info


def _iso_ms(when: str) -> int:
    """Epoch ms of an ISO-8601 UTC time (`...Z`); 0 when it is not one."""
    import datetime

    try:
        moment = datetime.datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(moment.timestamp() * 1000)


def _mtime_ms(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return None


def _fsync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise durable.io_error(path, exc) from None


def _names(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _subdirs(folder: str) -> list[str]:
    return [os.path.join(folder, n) for n in _names(folder)
            if os.path.isdir(os.path.join(folder, n))]



