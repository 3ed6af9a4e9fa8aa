"""A Gemini CLI session file's records replay as Gemini CLI 0.61 replays them: messages upserted
by id in place, `$set` of messages replacing the conversation, `$rewindTo` cutting it, metadata
merged; checked against a plain list model with hypothesis, in memory and through a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coding_os.adapters.gemini.records import Replay, record_kind, replay
from coding_os.adapters.gemini.sessions import read_conversation

META = {"sessionId": "s-1", "projectHash": "h" * 64, "startTime": "2026-12-06T08:00:00.000Z",
        "lastUpdated": "2026-12-06T08:00:00.000Z", "kind": "main"}


def message(message_id: str, text: str, kind: str = "user") -> dict[str, Any]:
    return {"id": message_id, "timestamp": "2026-12-06T08:00:01.000Z", "type": kind,
            "content": [{"text": text}]}


def test_a_message_written_again_keeps_its_place_and_takes_the_new_value() -> None:
    state = replay([META, message("a", "one"), message("b", "two"), message("a", "one, longer")])
    assert list(state.messages) == ["a", "b"]
    assert state.messages["a"]["content"] == [{"text": "one, longer"}]


def test_rewind_to_a_message_drops_it_and_every_later_one() -> None:
    state = replay([META, message("a", "1"), message("b", "2"), message("c", "3"),
                    {"$rewindTo": "b"}, message("d", "4")])
    assert list(state.messages) == ["a", "d"]
    assert state.rewound == 2 and state.counts["rewind"] == 1


def test_rewind_to_an_unknown_message_drops_the_whole_conversation() -> None:
    state = replay([META, message("a", "1"), {"$rewindTo": "nowhere"}])
    assert state.messages == {} and state.rewound == 1


def test_a_set_of_messages_replaces_the_conversation_and_other_fields_merge() -> None:
    state = replay([META, message("a", "1"), message("b", "2"),
                    {"$set": {"messages": [message("b", "2"), message("c", "3")],
                              "lastUpdated": "2026-12-06T09:00:00.000Z"}},
                    {"$set": {"summary": "A title"}}])
    assert list(state.messages) == ["b", "c"]
    assert state.replaced == 1
    assert state.metadata["summary"] == "A title"
    assert state.metadata["lastUpdated"] == "2026-12-06T09:00:00.000Z"
    assert "messages" not in state.metadata


def test_a_second_metadata_record_merges_but_the_first_is_kept_as_written() -> None:
    later = {**META, "startTime": "2026-12-06T08:30:00.000Z"}
    state = replay([META, message("a", "1"), later])
    assert state.metadata["startTime"] == "2026-12-06T08:30:00.000Z"
    assert state.first_metadata is not None
    assert state.first_metadata["startTime"] == META["startTime"]
    assert list(state.messages) == ["a"] and state.counts["metadata"] == 2


def test_records_are_told_apart_in_gemini_clis_order() -> None:
    assert record_kind({"$rewindTo": "a", "id": "b"}) == "rewind"
    assert record_kind({"id": "a", "$set": {}}) == "message"
    assert record_kind({"$set": {}, "sessionId": "s", "projectHash": "h"}) == "set"
    assert record_kind({"sessionId": "s", "projectHash": "h"}) == "metadata"
    assert record_kind({"sessionId": "s"}) == "other"
    assert record_kind({"id": 3}) == "other"


def test_unknown_records_are_counted_and_kept() -> None:
    state = replay([META, {"$future": {"x": 1}}, message("a", "1")])
    assert state.counts["other"] == 1
    assert state.others == [{"$future": {"x": 1}}]
    assert list(state.messages) == ["a"]


def test_what_a_rewrite_leaves_out_is_filled_from_an_earlier_version() -> None:
    full = {**message("g", "", "gemini"), "tokens": {"input": 7, "total": 9}, "model": "m",
            "toolCalls": [{"id": "c", "name": "ls"}]}
    state = replay([META, full, {"$set": {"messages": [message("g", "", "gemini")]}}])
    live = state.live()
    assert live[0]["tokens"] == {"input": 7, "total": 9}
    assert live[0]["toolCalls"] == [{"id": "c", "name": "ls"}]
    assert "tokens" not in state.messages["g"]  # the replay itself keeps what was written


def test_a_session_before_0_39_loads_as_one_document() -> None:
    state = Replay()
    state.load({**META, "messages": [message("a", "1"), message("b", "2")]})
    assert list(state.messages) == ["a", "b"]
    assert state.metadata["sessionId"] == "s-1"
    assert state.first_metadata == META


# -- against a model -----------------------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d", "e"])
TEXTS = st.text(alphabet="xyz", max_size=3)
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("message"), IDS, TEXTS),
    st.tuples(st.just("set"), st.lists(st.tuples(IDS, TEXTS), max_size=4)),
    st.tuples(st.just("rewind"), st.one_of(IDS, st.just("missing"))),
), max_size=25)


def as_records(operations: list[Any]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = [dict(META)]
    for operation in operations:
        if operation[0] == "message":
            records.append(message(operation[1], operation[2]))
        elif operation[0] == "set":
            records.append({"$set": {"messages": [message(i, t) for i, t in operation[1]]}})
        else:
            records.append({"$rewindTo": operation[1]})
    return records


def model(operations: list[Any]) -> list[tuple[str, str]]:
    """The conversation as a list of (id, text): the semantics, written the plain way."""
    conversation: list[tuple[str, str]] = []

    def upsert(into: list[tuple[str, str]], message_id: str, text: str) -> None:
        for index, (known, _) in enumerate(into):
            if known == message_id:
                into[index] = (message_id, text)
                return
        into.append((message_id, text))

    for operation in operations:
        if operation[0] == "message":
            upsert(conversation, operation[1], operation[2])
        elif operation[0] == "set":
            conversation = []
            for message_id, text in operation[1]:
                upsert(conversation, message_id, text)
        else:
            ids = [known for known, _ in conversation]
            cut = ids.index(operation[1]) if operation[1] in ids else 0
            conversation = conversation[:cut]
    return conversation


def texts(messages: Any) -> list[tuple[str, str]]:
    return [(m["id"], m["content"][0]["text"]) for m in messages]


@given(OPERATIONS)
def test_replay_matches_the_list_model(operations: list[Any]) -> None:
    assert texts(replay(as_records(operations)).messages.values()) == model(operations)


@settings(max_examples=40, deadline=None)
@given(OPERATIONS)
def test_a_session_file_reads_back_as_the_list_model(tmp_path_factory: Any,
                                                     operations: list[Any]) -> None:
    path = Path(tmp_path_factory.mktemp("gemini")) / "session-2026-12-06T08-00-s1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in as_records(operations)),
                    encoding="utf-8")
    conversation = read_conversation(path)
    assert texts(conversation.messages) == model(operations)
    prompts = [text for _, text in model(operations) if text.strip()]
    assert conversation.session.user_messages == len(prompts)
