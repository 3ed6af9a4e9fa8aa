"""LangGraph's checkpoint saver over cos sessions (DESIGN.md §8): `CosCheckpointSaver`.

Each LangGraph thread is one cos-native session of agent `langgraph`, its transcript the store:
the session_meta's `native_id` is the thread id (a fork of the session in cos gets none, so it is
never taken for the thread). What the saver keeps is appended as `event` entries, the payloads
serialized with the saver's `serde` (`[type, base64 of the bytes]`):

- `langgraph.checkpoint`: `ns`, `checkpoint_id`, `parent_id`, `checkpoint` (without its channel
  values), `metadata`, `blobs` (`[[channel, version, value], …]`, the values of the channels
  this checkpoint gave a new version; `null` for a channel that has none);
- `langgraph.writes`: `ns`, `checkpoint_id`, `task_id`, `task_path`, `writes`
  (`[[channel, index, value], …]`);
- `langgraph.drop`: `checkpoints` (`[[ns, checkpoint_id], …]`) are no longer the thread's, nor
  their writes (`delete_for_runs`);
- `langgraph.delete`: the thread was deleted — what came before it is no longer the thread's
  (it stays in the file, as everything a transcript holds does).

The text of the human and AI messages a checkpoint's channels hold is also written as `user` and
`assistant` entries (once per message id), so `cos export` and search show the conversation.
Appends go through `transcript.append` (locked, durable): several processes may write one thread.
Reads replay the transcript's visible entries (a `cos rewind` of the session rewinds the thread),
parsing only what was appended since the saver's last read.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from coding_os import durable
from coding_os.errors import InvalidInput
from coding_os.sessions import transcript
from coding_os.state.caller import Caller

__all__ = ["AGENT", "CosCheckpointSaver"]

AGENT = "langgraph"
CHECKPOINT = "langgraph.checkpoint"
WRITES = "langgraph.writes"
DELETE = "langgraph.delete"
DROP = "langgraph.drop"

_Typed = tuple[str, bytes]
_Packed = list[str]  # [type, base64 of the bytes]: a serialized value as the transcript holds it
_Write = tuple[str, str, _Packed, str]  # task id, channel, value, task path


def _pack(typed: _Typed) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def _unpack(packed: Any) -> _Typed:
    return str(packed[0]), base64.b64decode(packed[1])


class _Thread:
    """One thread as its transcript stands: checkpoints, channel values and pending writes."""

    __slots__ = ("checkpoints", "blobs", "writes", "messages", "turn")

    def __init__(self) -> None:
        # ns -> checkpoint id -> (checkpoint, metadata, parent id)
        self.checkpoints: dict[str, dict[str, tuple[_Packed, _Packed, str | None]]] = {}
        # (ns, channel, version) -> value, or None: the channel was emptied at that version
        self.blobs: dict[tuple[str, str, Any], _Packed | None] = {}
        # (ns, checkpoint id) -> (task id, index) -> write
        self.writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = {}
        self.messages: set[str] = set()  # ids of the messages written as user/assistant
        self.turn = 0

    def copy(self) -> _Thread:
        """A copy that `apply` can change without changing this one."""
        other = _Thread()
        other.checkpoints = {ns: dict(stored) for ns, stored in self.checkpoints.items()}
        other.blobs = dict(self.blobs)
        other.writes = {key: dict(stored) for key, stored in self.writes.items()}
        other.messages = set(self.messages)
        other.turn = self.turn
        return other

    def apply(self, entry: dict[str, Any]) -> None:
        kind = entry["type"]
        if kind in ("user", "assistant"):
            if isinstance(entry.get("message_id"), str):
                self.messages.add(entry["message_id"])
            if kind == "user":
                self.turn += 1
            return
        if kind != "event":
            return
        name = entry["name"]
        if name == CHECKPOINT:
            ns = entry["ns"]
            for channel, version, value in entry["blobs"]:
                self.blobs[(ns, channel, version)] = value
            self.checkpoints.setdefault(ns, {})[entry["checkpoint_id"]] = (
                entry["checkpoint"], entry["metadata"], entry["parent_id"])
        elif name == WRITES:
            stored = self.writes.setdefault((entry["ns"], entry["checkpoint_id"]), {})
            task_id, task_path = entry["task_id"], entry["task_path"]
            for channel, index, value in entry["writes"]:
                key = (task_id, index)
                if index >= 0 and key in stored:
                    continue  # a regular write is kept as first written; special ones replace
                stored[key] = (task_id, channel, value, task_path)
        elif name == DROP:
            for ns, checkpoint_id in entry["checkpoints"]:
                self.checkpoints.get(ns, {}).pop(checkpoint_id, None)
                self.writes.pop((ns, checkpoint_id), None)
        elif name == DELETE:
            self.checkpoints.clear()
            self.blobs.clear()
            self.writes.clear()


class CosCheckpointSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing each thread as a cos session of agent `langgraph`.

    `project` is the project directory (default: the current one); its cos state dir holds the
    transcripts, so the threads are listed by `cos sessions` there. `durability` is the
    transcript's mode for these appends ("event": every checkpoint is fsynced).
    """

    def __init__(self, project: str | os.PathLike[str] | None = None, *,
                 serde: SerializerProtocol | None = None, durability: str = "event") -> None:
        """Raises:
            InvalidInput: a bad durability, or `project` is not a directory.
            ForeignState, Misroute, StateIOError: the project's state dir cannot be used.
        """
        super().__init__(serde=serde)
        transcript.check_durability(durability)
        self.project = os.path.abspath(os.fspath(project) if project is not None else ".")
        if not os.path.isdir(self.project):
            raise InvalidInput(f"project {self.project} is not a directory")
        self.tiers = Caller(cwd=self.project).tiers
        self.durability = durability
        self._sessions: dict[str, str] = {}  # thread id -> session id
        self._read_cache: dict[str, tuple[_Thread, transcript.Resume]] = {}
        self._lock = threading.Lock()

    # -- threads and their sessions --------------------------------------------------------

    def _scan(self) -> dict[str, str]:
        """thread id -> session id, from the session_meta of every `langgraph` transcript."""
        found = transcript.native_sessions(self.tiers, AGENT)
        self._sessions.update(found)
        return found

    def session_of(self, thread_id: str) -> str | None:
        """The cos session id holding `thread_id`, or None when the thread was never stored."""
        session = self._sessions.get(thread_id)
        if session is not None and os.path.exists(transcript.transcript_path(self.tiers, session)):
            return session
        self._sessions.pop(thread_id, None)
        return self._scan().get(thread_id)

    def _session_for_write(self, thread_id: str) -> str:
        """The session of `thread_id`, made (under a lock, once across processes) if missing."""
        session = self.session_of(thread_id)
        if session is not None:
            return session
        lock_path = os.path.join(self.tiers.agent_dir(AGENT), ".threads.lock")
        durable.ensure_dir(os.path.dirname(lock_path))
        with durable.exclusive_lock(lock_path):
            session = self._scan().get(thread_id)
            if session is None:
                session = transcript.create(
                    self.tiers, AGENT, native_id=thread_id, project=self.project,
                    title=_title(thread_id), durability=self.durability)
                self._sessions[thread_id] = session
        return session

    def _read(self, session: str) -> _Thread:
        """The thread as the transcript of `session` stands now. What was read before is kept
        (per session, with where the read stopped): a later read parses only what was appended,
        unless a rewind or a replaced file makes it start over. The thread returned is never
        changed afterwards (an update works on a copy), so callers in other threads may use it.
        """
        path = transcript.transcript_path(self.tiers, session)
        with self._lock:
            known = self._read_cache.get(session)
        report = transcript.ReadReport(path)
        entries = list(transcript.iter_visible(
            path, report, resume=known[1] if known is not None else None))
        if known is not None and report.resumed:
            if not entries:
                return known[0]
            thread = known[0].copy()
        else:
            thread = _Thread()
        for entry in entries:
            thread.apply(entry)
        with self._lock:
            if report.resume is not None:
                self._read_cache[session] = (thread, report.resume)
            else:
                self._read_cache.pop(session, None)
        return thread

    def _append(self, session: str, name: str, fields: dict[str, object]) -> None:
        transcript.append(self.tiers, session, "event", {"name": name, **fields},
                          durability=self.durability)

    # -- BaseCheckpointSaver ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (its `checkpoint_id`, else the thread's latest).

        Raises:
            InvalidInput: `config` has no `thread_id`.
        """
        thread_id = _thread_id(config)
        ns = config["configurable"].get("checkpoint_ns", "")
        session = self.session_of(thread_id)
        if session is None:
            return None
        thread = self._read(session)
        stored = thread.checkpoints.get(ns, {})
        checkpoint_id = get_checkpoint_id(config) or max(stored, default=None)
        if checkpoint_id is None or checkpoint_id not in stored:
            return None
        return self._tuple(thread, thread_id, ns, checkpoint_id)

    def _tuple(self, thread: _Thread, thread_id: str, ns: str,
               checkpoint_id: str, metadata: CheckpointMetadata | None = None) -> CheckpointTuple:
        checkpoint_typed, metadata_typed, parent_id = thread.checkpoints[ns][checkpoint_id]
        checkpoint: Checkpoint = self.serde.loads_typed(_unpack(checkpoint_typed))
        values: dict[str, Any] = {}
        for channel, version in checkpoint["channel_versions"].items():
            blob = thread.blobs.get((ns, channel, version))
            if blob is not None and blob[0] != "empty":
                values[channel] = self.serde.loads_typed(_unpack(blob))
        stored = thread.writes.get((ns, checkpoint_id), {})
        writes = [write for key, write in sorted(
            stored.items(), key=lambda item: writes_sort_key(item[1][3], *item[0]))]
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": checkpoint_id}},
            checkpoint={**checkpoint, "channel_values": values},
            metadata=(metadata if metadata is not None
                      else self.serde.loads_typed(_unpack(metadata_typed))),
            pending_writes=[(task_id, channel, self.serde.loads_typed(_unpack(value)))
                            for task_id, channel, value, _ in writes],
            parent_config=({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                             "checkpoint_id": parent_id}}
                           if parent_id else None),
        )

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Checkpoints, newest first per thread and namespace: of the thread (and namespace,
        and checkpoint id) `config` names, or of every thread when it is None; only those before
        `before`'s checkpoint id and whose metadata hold every pair of `filter`; at most
        `limit`.

        Raises:
            InvalidInput: `config` has no `thread_id`.
        """
        if config is not None:
            thread_id = _thread_id(config)
            session = self.session_of(thread_id)
            threads = [] if session is None else [(thread_id, session)]
            only_ns = config["configurable"].get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            threads = sorted(self._scan().items())
            only_ns = only_id = None
        before_id = get_checkpoint_id(before) if before else None
        for thread_id, session in threads:
            thread = self._read(session)
            for ns, stored in thread.checkpoints.items():
                if only_ns is not None and ns != only_ns:
                    continue
                for checkpoint_id in sorted(stored, reverse=True):
                    if only_id and checkpoint_id != only_id:
                        continue
                    if before_id and checkpoint_id >= before_id:
                        continue
                    metadata: CheckpointMetadata = self.serde.loads_typed(
                        _unpack(stored[checkpoint_id][1]))
                    if filter and not all(metadata.get(key) == value
                                          for key, value in filter.items()):
                        continue
                    if limit is not None:
                        if limit <= 0:
                            return
                        limit -= 1
                    yield self._tuple(thread, thread_id, ns, checkpoint_id, metadata)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Store `checkpoint` with its metadata and the values of the channels in
        `new_versions`; returns the config naming it.

        Raises:
            InvalidInput: `config` has no `thread_id`.
            StateIOError: the transcript cannot be written.
        """
        thread_id = _thread_id(config)
        ns = config["configurable"].get("checkpoint_ns", "")
        session = self._session_for_write(thread_id)
        stored: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = stored.pop("channel_values", {})
        blobs = [[channel, version,
                  _pack(self.serde.dumps_typed(values[channel])) if channel in values else None]
                 for channel, version in new_versions.items()]
        self._append(session, CHECKPOINT, {
            "ns": ns, "checkpoint_id": checkpoint["id"],
            "parent_id": config["configurable"].get("checkpoint_id"),
            "checkpoint": _pack(self.serde.dumps_typed(stored)),
            "metadata": _pack(self.serde.dumps_typed(get_checkpoint_metadata(config, metadata))),
            "blobs": blobs,
        })
        self._record_messages(session, [values[c] for c in new_versions if c in values])
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store the writes of task `task_id` against the checkpoint `config` names.

        Raises:
            InvalidInput: `config` has no `thread_id` or `checkpoint_id`.
            StateIOError: the transcript cannot be written.
        """
        thread_id = _thread_id(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise InvalidInput("put_writes needs a config with a checkpoint_id")
        session = self._session_for_write(thread_id)
        self._append(session, WRITES, {
            "ns": config["configurable"].get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint_id, "task_id": task_id, "task_path": task_path,
            "writes": [[channel, WRITES_IDX_MAP.get(channel, index),
                        _pack(self.serde.dumps_typed(value))]
                       for index, (channel, value) in enumerate(writes)],
        })

    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint and write of `thread_id` (a `langgraph.delete` entry: the
        transcript keeps what came before, the saver no longer returns it).

        Raises:
            StateIOError: the transcript cannot be written.
        """
        session = self.session_of(thread_id)
        if session is not None:
            self._append(session, DELETE, {})

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of `source_thread_id` (and the user and assistant
        entries of its messages) to `target_thread_id`, after what the target holds.

        Raises:
            StateIOError: the target's transcript cannot be written.
        """
        source = self.session_of(source_thread_id)
        if source is None:
            return
        kept: list[dict[str, Any]] = []
        for entry in transcript.iter_entries(transcript.transcript_path(self.tiers, source)):
            if entry["type"] == "event" and entry["name"] == DELETE:
                kept.clear()
            elif (entry["type"] in ("user", "assistant")
                  or (entry["type"] == "event" and entry["name"] in (CHECKPOINT, WRITES))):
                kept.append(entry)
        if not kept:
            return
        target = self._session_for_write(target_thread_id)
        for entry in kept:
            fields = {k: v for k, v in entry.items() if k not in transcript.HEAD_FIELDS}
            transcript.append(self.tiers, target, entry["type"], fields,
                              durability=self.durability)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Forget the checkpoints (and their writes) whose metadata's `run_id` is one of
        `run_ids`, in every thread (a `langgraph.drop` entry in each thread that had some).

        Raises:
            StateIOError: a transcript cannot be written.
        """
        wanted = set(run_ids)
        if not wanted:
            return
        for session in sorted(set(self._scan().values())):
            thread = self._read(session)
            dropped = [[ns, checkpoint_id]
                       for ns, stored in sorted(thread.checkpoints.items())
                       for checkpoint_id, (_, metadata, _) in sorted(stored.items())
                       if self.serde.loads_typed(_unpack(metadata)).get("run_id") in wanted]
            if dropped:
                self._append(session, DROP, {"checkpoints": dropped})

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The version after `current`: increasing strings, as LangGraph's own savers use."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`get_tuple`, run in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        """`list`, run in a worker thread."""
        found = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)])
        for item in found:
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """`put`, run in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """`put_writes`, run in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """`delete_thread`, run in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """`copy_thread`, run in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """`delete_for_runs`, run in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    # -- the conversation, for export and search --------------------------------------------

    def _record_messages(self, session: str, values: Sequence[Any]) -> None:
        """Append the human and AI messages among `values` not yet written as user/assistant."""
        messages = [m for value in values for m in (value if isinstance(value, list) else [value])
                    if getattr(m, "type", None) in ("human", "ai")
                    and isinstance(getattr(m, "content", None), str) and m.content
                    and isinstance(getattr(m, "id", None), str)]
        if not messages:
            return
        thread = self._read(session)
        for message in messages:
            if message.id in thread.messages:
                continue
            thread.messages.add(message.id)
            if message.type == "human":
                thread.turn += 1
            transcript.append(self.tiers, session, "user" if message.type == "human" else
                              "assistant", {"turn": thread.turn, "text": message.content,
                                            "message_id": message.id},
                              durability=self.durability)


def _thread_id(config: RunnableConfig) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidInput("a LangGraph config needs configurable.thread_id")
    return str(thread_id)


def _title(thread_id: str) -> str | None:
    try:
        return transcript.validate_title(f"LangGraph thread {thread_id}")
    except InvalidInput:
        return None
