"""The records of a Gemini CLI session file, replayed into its live conversation.

Gemini CLI (0.39 and later) appends one JSON object a line to `session-*.jsonl`, and reads the file
back by replaying every line in order (`loadConversationRecord` in its `chatRecordingService`,
checked with 0.61.0). A record is, tested in this order:

- `{"$rewindTo": "<message id>"}`: that message and every later one leave the conversation (when
  no message has that id, every message does);
- a message (a string `id`): put in the conversation by its id; a message seen before keeps its
  place and takes the new value (Gemini writes a message again as it grows: its tokens, its tool
  calls and their results);
- `{"$set": {…}}`: metadata fields set; a `messages` list in it replaces the whole conversation
  (after a resume, a rewind or `/chat resume`);
- metadata (string `sessionId` and `projectHash`): merged into the metadata; a `messages` list in
  it is put in as messages are, without clearing (a session written by the 0.38 `.json` format
  and converted on resume starts so). A file may hold more than one such record: a resumed
  session can append a fresh metadata line of its own.

Anything else is counted and kept, never an error. The replay knows nothing of files or of what
a message means: `coding_os.adapters.gemini.sessions` reads both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DETAIL_FIELDS", "Replay", "record_kind", "replay"]

Record = Mapping[str, Any]
DETAIL_FIELDS = ("tokens", "model", "toolCalls", "thoughts")
"""What a model response records about itself and a rewrite of the conversation may leave out:
0.61 puts a resumed or rewound conversation back with `$set` messages of `id`, `timestamp`,
`type` and `content` alone."""


def record_kind(record: Record) -> str:
    """What a session file's record is: `rewind`, `message`, `set`, `metadata` or `other`
    (the first that fits, in Gemini CLI's order)."""
    if isinstance(record.get("$rewindTo"), str):
        return "rewind"
    if isinstance(record.get("id"), str):
        return "message"
    if isinstance(record.get("$set"), dict):
        return "set"
    if isinstance(record.get("sessionId"), str) and isinstance(record.get("projectHash"), str):
        return "metadata"
    return "other"


@dataclass
class Replay:
    """The state of a session file after the records fed so far.

    `messages` is the live conversation by message id, in order; `metadata` the merged metadata
    (without `messages`); `first_metadata` the first metadata record as written (a later one
    comes from a resume, and its `startTime` is not the session's). `rewound` counts the
    messages `$rewindTo` records took out, `replaced` those a `$set` of `messages` dropped;
    `others` keeps the records that are none of the known kinds. `details` holds, per message
    id ever recorded, the last non-empty value of each of DETAIL_FIELDS.
    """

    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    first_metadata: dict[str, Any] | None = None
    counts: dict[str, int] = field(default_factory=lambda: {
        "rewind": 0, "message": 0, "set": 0, "metadata": 0, "other": 0})
    rewound: int = 0
    replaced: int = 0
    others: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)

    def feed(self, record: dict[str, Any]) -> str:
        """Apply one record; its kind (see `record_kind`)."""
        # The loop of every line of every session: `record_kind` inlined, messages first.
        message_id = record.get("id")
        if "$rewindTo" in record and isinstance(record["$rewindTo"], str):
            kind = "rewind"
            self._rewind(record["$rewindTo"])
        elif isinstance(message_id, str):
            kind = "message"
            self.messages[message_id] = record
            if "tokens" in record or "model" in record or "toolCalls" in record \
                    or "thoughts" in record:
                self._note(record)
        elif "$set" in record and isinstance(record["$set"], dict):
            kind = "set"
            changes = record["$set"]
            if "messages" not in changes:  # most often `lastUpdated` alone
                self.metadata.update(changes)
            else:
                if isinstance(changes["messages"], list):
                    before = set(self.messages)
                    self.messages = {}
                    self._put(changes["messages"])
                    self.replaced += len(before - set(self.messages))
                self._merge(changes)
        else:
            kind = record_kind(record)
            if kind == "metadata":
                if self.first_metadata is None:
                    self.first_metadata = {k: v for k, v in record.items() if k != "messages"}
                self._merge(record)
                if isinstance(record.get("messages"), list):
                    self._put(record["messages"])
            else:
                self.others.append(record)
        self.counts[kind] += 1
        return kind

    def set_last_updated(self, stamp: str) -> None:
        """Apply `{"$set": {"lastUpdated": stamp}}`, the record Gemini CLI writes after every
        message (`feed` of it, without the record)."""
        self.metadata["lastUpdated"] = stamp
        self.counts["set"] += 1

    def load(self, document: dict[str, Any]) -> None:
        """Take a whole session of the format before 0.39 (`session-*.json`: the metadata with
        a `messages` array), as Gemini CLI reads it when its lines do not replay."""
        self.counts["metadata"] += 1
        if self.first_metadata is None:
            self.first_metadata = {k: v for k, v in document.items() if k != "messages"}
        self._merge(document)
        messages = document.get("messages")
        if isinstance(messages, list):
            self.counts["message"] += len(messages)
            self._put(messages)

    def _rewind(self, message_id: str) -> None:
        ids = list(self.messages)
        cut = ids.index(message_id) if message_id in self.messages else 0
        for gone in ids[cut:]:
            del self.messages[gone]
        self.rewound += len(ids) - cut

    def live(self) -> list[dict[str, Any]]:
        """The live messages in order, each with the DETAIL_FIELDS a rewrite left out filled
        from the last version of the same message that recorded them."""
        filled = []
        details = self.details
        for message_id, message in self.messages.items():
            known = details.get(message_id)
            if known is None:
                filled.append(message)
                continue
            for name in known:
                if not message.get(name):  # left out: a copy with what was recorded
                    message = {**message, **{name: value for name, value in known.items()
                                             if not message.get(name)}}
                    break
            filled.append(message)
        return filled

    def _put(self, messages: Iterable[Any]) -> None:
        for message in messages:
            if isinstance(message, dict):
                message_id = message.get("id")
                if isinstance(message_id, str):
                    self.messages[message_id] = message
                    # A rewrite of the conversation mostly holds none of DETAIL_FIELDS.
                    if "tokens" in message or "model" in message or "toolCalls" in message \
                            or "thoughts" in message:
                        self._note(message)

    def _note(self, message: Mapping[str, Any]) -> None:
        known = None
        for name in DETAIL_FIELDS:
            value = message.get(name)
            if value:
                if known is None:
                    known = self.details.get(message["id"])
                    if known is None:
                        known = self.details[message["id"]] = {}
                known[name] = value

    def _merge(self, fields: Mapping[str, Any]) -> None:
        # The metadata never holds `messages`: the fields merged, and that one taken out again.
        self.metadata.update(fields)
        self.metadata.pop("messages", None)


def replay(records: Iterable[dict[str, Any]]) -> Replay:
    """The state after every record of `records`, in order."""
    state = Replay()
    for record in records:
        state.feed(record)
    return state
