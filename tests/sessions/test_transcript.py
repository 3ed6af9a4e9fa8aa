"""Transcript format v1 (DESIGN.md §4.1, §4.4): writer, reader, rewind, durability, fork, schema."""

from __future__ import annotations

import errno
import json
import os
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_os import api
from coding_os.errors import InvalidInput, StateIOError
from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers
from tests.sessions.jsonschema_subset import ANNOTATING, ASSERTING, errors, keywords, load_schema


SCHEMA = load_schema()


def lines_of(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def schema_errors(path: str) -> list[str]:
    return [f"line {n}: {e}" for n, line in enumerate(lines_of(path), 1)
            for e in errors(line, SCHEMA, SCHEMA)]


def conversation(tiers: Tiers, session: str) -> None:
    """One of each appendable entry type, as an agent's turn would write them."""
    add = transcript.append
    add(tiers, session, "user", {"text": "fix the login bug", "turn": 1})
    add(tiers, session, "tool_call", {"turn": 1, "tool": "Edit", "call_id": "c1",
                                      "input": {"path": "a.py", "old": "x", "new": "y"}})
    add(tiers, session, "tool_result", {"turn": 1, "call_id": "c1", "ok": True, "output": "done"})
    add(tiers, session, "assistant", {"turn": 1, "text": "Fixed.",
                                      "usage": {"input": 1200, "output": 80}})
    add(tiers, session, "checkpoint", {"turn": 2, "checkpoint": "cp-0001"})
    transcript.set_title(tiers, session, "Login bug")
    transcript.mark_compact(tiers, session, "the user asked for a fix; it was made", 1, 4)
    add(tiers, session, "summary", {"text": "s", "from_seq": 1, "to_seq": 3, "direction": "up_to"})
    add(tiers, session, "rewind", {"to_seq": 4})
    add(tiers, session, "clear")
    add(tiers, session, "bookmark", {"response_id": "resp_abc"})
    add(tiers, session, "event", {"name": "permission", "data": {"tool": "Bash"}})
    transcript.close(tiers, session)


# --- writer -----------------------------------------------------------------------------------


def test_a_new_transcript_holds_its_session_meta_at_seq_0(tiers: Tiers, session: str) -> None:
    path = transcript.transcript_path(tiers, session)
    assert path == os.path.join(tiers.state_dir, "claude", "transcripts", f"{session}.jsonl")
    [meta] = lines_of(path)
    assert meta == {**meta, "v": 1, "seq": 0, "type": "session_meta", "session": session,
                    "agent": "claude", "native_id": None, "project": "/abs/root",
                    "worktree": "/abs/root", "branch": "main", "title": None,
                    "forked_from": None, "fork_point": None, "parent": None, "seed_ref": None}
    assert list(meta)[:4] == ["v", "seq", "ts", "type"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    # Nothing but the transcript is left in the directory (the temp file was linked, removed).
    assert os.listdir(os.path.dirname(path)) == [f"{session}.jsonl"]


def test_every_entry_type_is_written_with_dense_seqs_and_reads_back(tiers: Tiers,
                                                                     session: str) -> None:
    conversation(tiers, session)
    path = transcript.transcript_path(tiers, session)
    read = transcript.read(path)
    assert read.report.ok, read.report.problems
    assert [e["seq"] for e in read.entries] == list(range(14))
    assert read.entries == lines_of(path)
    assert {e["type"] for e in read.entries} == set(transcript.ENTRY_TYPES) - {"fork"}
    assert read.entries[-1] == {**read.entries[-1], "type": "event", "name": "close"}
    assert (read.report.first_seq, read.report.last_seq, read.report.complete) == (0, 13, True)


def test_every_line_the_writer_produces_validates_against_the_json_schema(
        tiers: Tiers, session: str) -> None:
    conversation(tiers, session)
    forked = transcript.fork(tiers, session, at_seq=8, name="branch")
    for path in (transcript.transcript_path(tiers, session), forked.path):
        assert schema_errors(path) == []


def test_the_schema_and_the_writer_agree_on_types_and_required_fields() -> None:
    assert SCHEMA["properties"]["type"]["enum"] == list(transcript.ENTRY_TYPES)
    for entry_type, fields in transcript.ENTRY_FIELDS.items():
        definition = SCHEMA["$defs"][entry_type]
        assert definition.get("required", []) == [name for name, _ in fields]
        optional = [name for name, _ in transcript.OPTIONAL_FIELDS.get(entry_type, ())]
        assert set(definition.get("properties", {})) - {"seq"} == {n for n, _ in fields} | set(
            optional)


def test_the_subset_validator_knows_every_keyword_the_schema_uses() -> None:
    assert keywords(SCHEMA) <= ASSERTING | ANNOTATING


@pytest.mark.parametrize("line", [
    {"v": 2, "seq": 1, "ts": "2026-11-29T16:20:00.123Z", "type": "clear"},
    {"v": 1, "seq": -1, "ts": "2026-11-29T16:20:00.123Z", "type": "clear"},
    {"v": 1, "seq": True, "ts": "2026-11-29T16:20:00.123Z", "type": "clear"},
    {"v": 1, "seq": 1, "ts": "2026-11-29 16:20:00", "type": "clear"},
    {"v": 1, "seq": 1, "ts": "2026-11-29T16:20:00.123Z", "type": "chat"},
    {"v": 1, "seq": 1, "ts": "2026-11-29T16:20:00.123Z", "type": "user", "text": "hi"},
    {"v": 1, "seq": 1, "ts": "2026-11-29T16:20:00.123Z", "type": "user", "text": 1, "turn": 1},
    {"v": 1, "seq": 1, "ts": "2026-11-29T16:20:00.123Z", "type": "tool_result", "turn": 1,
     "call_id": "c", "ok": "yes", "output": None},
    {"v": 1, "seq": 1, "ts": "2026-11-29T16:20:00.123Z", "type": "fork",
     "forked_from": "../../etc", "fork_point": 3},
    {"v": 1, "seq": 0, "ts": "2026-11-29T16:20:00.123Z", "type": "session_meta",
     "session": "ses-trash-20261129-162000-abcd", "agent": "trash", "native_id": None,
     "project": None, "worktree": None, "branch": None, "title": None, "forked_from": None,
     "fork_point": None, "parent": None, "seed_ref": None},
])
def test_the_schema_and_the_reader_both_refuse_a_bad_line(line: dict[str, Any]) -> None:
    assert errors(line, SCHEMA, SCHEMA) != []
    assert transcript.entry_problem(line) is not None


def test_unknown_fields_are_kept(tiers: Tiers, session: str) -> None:
    appended = transcript.append(tiers, session, "user",
                                 {"text": "hi", "turn": 1, "images": [{"sha": "b2:ab"}]})
    assert transcript.tail(appended.path, 1).entries == [appended.entry]
    assert appended.entry["images"] == [{"sha": "b2:ab"}]


@pytest.mark.parametrize(("entry_type", "fields", "message"), [
    ("chat", {"text": "hi"}, "unknown entry type"),
    ("user", {"text": "hi"}, "missing field 'turn'"),
    ("user", {"text": "hi", "turn": "1"}, "turn must be an integer"),
    ("user", {"text": "hi", "turn": True}, "turn must be an integer"),
    ("user", {"text": "hi", "turn": -1}, "turn must be an integer"),
    ("tool_result", {"turn": 1, "call_id": "c", "ok": 1, "output": ""}, "ok must be true"),
    ("assistant", {"turn": 1, "text": "", "usage": [1, 2]}, "usage must be an object"),
    ("user", {"text": "hi", "turn": 1, "seq": 7}, "'seq' is set by the writer"),
    ("user", {"text": "hi", "turn": 1, "ts": "2026-11-29T16:20:00.123Z"}, "set by the writer"),
    ("user", {"text": "hi", "turn": 1, "x": float("nan")}, "not JSON"),
    ("user", {"text": "hi", "turn": 1, "x": {1: "a"}}, "not JSON"),
    ("user", {"text": "hi", "turn": 1, "x": object()}, "not JSON"),
    ("rewind", {"to_seq": 1}, "not before its own seq"),
    ("compact", {"text": "", "from_seq": 0, "to_seq": 5}, "to_seq < its own seq"),
    ("summary", {"text": "", "from_seq": 1, "to_seq": 0}, "from_seq <= to_seq"),
    ("session_meta", {}, "written by create and fork"),
    ("fork", {"forked_from": "ses-claude-20261129-162000-abcd", "fork_point": 0},
     "written by create and fork"),
])
def test_a_bad_entry_is_refused_and_nothing_is_written(tiers: Tiers, session: str,
                                                       entry_type: str, fields: dict[str, Any],
                                                       message: str) -> None:
    path = transcript.transcript_path(tiers, session)
    before = Path(path).read_bytes()
    with pytest.raises(InvalidInput, match=message):
        transcript.append(tiers, session, entry_type, fields)
    assert Path(path).read_bytes() == before


def test_an_unknown_durability_is_refused(tiers: Tiers, session: str) -> None:
    with pytest.raises(InvalidInput, match="unknown durability 'always'"):
        transcript.append(tiers, session, "clear", durability="always")


def test_a_session_id_given_to_create_is_used_once(tiers: Tiers) -> None:
    sid = "ses-codex-20261129-162000-0001"
    assert transcript.create(tiers, "codex", session=sid, native_id="0199-uuid") == sid
    with pytest.raises(InvalidInput, match="already has a transcript"):
        transcript.create(tiers, "codex", session=sid)
    with pytest.raises(InvalidInput, match="does not belong to agent claude"):
        transcript.create(tiers, "claude", session="ses-codex-20261129-162000-0002")


def test_create_never_reuses_an_id_a_panel_reserved(tiers: Tiers,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    taken = "ses-claude-20261129-162000-0001"
    presence = Path(tiers.presence_path("claude", taken))
    presence.parent.mkdir(parents=True)
    presence.write_text("{}", encoding="utf-8")
    minted = iter([taken, taken, "ses-claude-20261129-162000-0002"])
    monkeypatch.setattr(transcript, "mint_session_id", lambda agent: next(minted))
    assert transcript.create(tiers, "claude") == "ses-claude-20261129-162000-0002"


# --- durability and failures ------------------------------------------------------------------


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


@pytest.mark.parametrize(("durability", "user", "assistant", "closing"), [
    ("event", 1, 1, 1),
    ("turn", 0, 1, 1),
    ("none", 0, 0, 0),
])
def test_durability_modes_fsync_per_event_per_turn_or_never(
        tiers: Tiers, session: str, monkeypatch: pytest.MonkeyPatch, durability: str,
        user: int, assistant: int, closing: int) -> None:
    calls = count_fsyncs(monkeypatch)
    transcript.append(tiers, session, "user", {"text": "q", "turn": 1}, durability=durability)
    assert len(calls) == user
    transcript.append(tiers, session, "assistant", {"text": "a", "turn": 1},
                      durability=durability)
    assert len(calls) == user + assistant
    transcript.close(tiers, session, durability=durability)
    assert len(calls) == user + assistant + closing


def test_turn_durability_is_the_default(tiers: Tiers, session: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_fsyncs(monkeypatch)
    transcript.append(tiers, session, "user", {"text": "q", "turn": 1})
    transcript.append(tiers, session, "assistant", {"text": "a", "turn": 1})
    assert len(calls) == 1


def fail(after: int) -> Callable[[int, Any], int]:
    real = os.write

    def short_then_full(fd: int, data: Any) -> int:
        real(fd, bytes(data[:after]))
        raise OSError(errno.ENOSPC, "No space left on device")

    return short_then_full


def test_a_failed_append_leaves_the_transcript_exactly_as_it_was(
        tiers: Tiers, session: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = transcript.transcript_path(tiers, session)
    transcript.append(tiers, session, "user", {"text": "q", "turn": 1})
    before = Path(path).read_bytes()
    monkeypatch.setattr(os, "write", fail(after=10))
    with pytest.raises(StateIOError, match="no space left"):
        transcript.append(tiers, session, "assistant", {"text": "a" * 1000, "turn": 1})
    monkeypatch.undo()
    assert Path(path).read_bytes() == before
    assert transcript.append(tiers, session, "clear").seq == 2


def test_an_entry_whose_fsync_failed_is_taken_back(tiers: Tiers, session: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = transcript.transcript_path(tiers, session)
    before = Path(path).read_bytes()

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(StateIOError):
        transcript.append(tiers, session, "clear", durability="event")
    monkeypatch.undo()
    assert Path(path).read_bytes() == before


def test_a_failed_create_leaves_no_transcript_and_no_temp_file(
        tiers: Tiers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "write", fail(after=5))
    with pytest.raises(StateIOError):
        transcript.create(tiers, "claude")
    monkeypatch.undo()
    assert os.listdir(os.path.join(tiers.state_dir, "claude", "transcripts")) == []


# --- torn tails -------------------------------------------------------------------------------


def test_a_torn_tail_is_reported_then_set_aside_by_the_next_writer(tiers: Tiers,
                                                                   session: str) -> None:
    path = transcript.transcript_path(tiers, session)
    transcript.append(tiers, session, "user", {"text": "q", "turn": 1})
    torn = b'{"v":1,"seq":2,"ts":"2026-11-29T16:20:00.123Z","type":"assistant","te'
    with open(path, "ab") as f:
        f.write(torn)
    read = transcript.read(path)
    assert [e["seq"] for e in read.entries] == [0, 1]
    assert read.report.kinds() == ["torn_tail"]
    assert read.report.problems[0].length == len(torn)
    assert transcript.tail(path, 5).report.kinds() == ["torn_tail"]
    appended = transcript.append(tiers, session, "assistant", {"text": "a", "turn": 1})
    assert (appended.seq, appended.torn_bytes) == (2, len(torn))
    assert Path(path + ".torn").read_bytes() == torn + b"\n"
    after = transcript.read(path)
    assert after.report.ok and [e["seq"] for e in after.entries] == [0, 1, 2]


def test_a_torn_line_that_happens_to_be_whole_json_is_still_torn(tiers: Tiers,
                                                                 session: str) -> None:
    # A kill can cut an append just before its newline: the bytes parse, but the append never
    # returned, and the next writer reuses the seq. The reader must not show it either.
    path = transcript.transcript_path(tiers, session)
    line = transcript.append(tiers, session, "clear").entry
    with open(path, "ab") as f:
        f.write(json.dumps({**line, "seq": 2}, separators=(",", ":")).encode())
    assert [e["seq"] for e in transcript.read(path).entries] == [0, 1]
    assert transcript.last_seq(path) == 1
    assert transcript.append(tiers, session, "clear").seq == 2


# --- reader -----------------------------------------------------------------------------------


def test_tail_reads_the_last_entries_and_last_seq_without_the_whole_file(
        tiers: Tiers, session: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for turn in range(1, 201):
        transcript.append(tiers, session, "user", {"text": "x" * 1000, "turn": turn},
                          durability="none")
    path = transcript.transcript_path(tiers, session)
    read_bytes = []
    real_pread = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        read_bytes.append(n)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting)
    last = transcript.tail(path, 3)
    assert [e["seq"] for e in last.entries] == [198, 199, 200]
    assert transcript.last_seq(path) == 200
    assert not last.report.complete and last.report.ok
    assert sum(read_bytes) < 2 * 65536 + 10  # two reads of one block each, not 200 KB
    assert transcript.tail(path, 0).entries == []
    everything = transcript.tail(path, 10_000)
    assert everything.report.complete and everything.entries == transcript.read(path).entries
    with pytest.raises(InvalidInput):
        transcript.tail(path, -1)


def test_rewound_entries_are_hidden_from_the_conversation_but_kept(tiers: Tiers,
                                                                   session: str) -> None:
    for turn in (1, 2, 3):  # seqs 1..6
        transcript.append(tiers, session, "user", {"text": f"q{turn}", "turn": turn})
        transcript.append(tiers, session, "assistant", {"text": f"a{turn}", "turn": turn})
    transcript.append(tiers, session, "rewind", {"to_seq": 2})  # 7: back to after turn 1
    transcript.append(tiers, session, "user", {"text": "q2'", "turn": 2})  # 8
    transcript.append(tiers, session, "rewind", {"to_seq": 4})  # 9: 4 is hidden: back to 2
    transcript.append(tiers, session, "user", {"text": "q2''", "turn": 2})  # 10
    read = transcript.read(transcript.transcript_path(tiers, session))
    assert len(read.entries) == 11
    assert [e["seq"] for e in read.visible()] == [0, 1, 2, 10]
    assert [e["seq"] for e in read.visible(up_to=8)] == [0, 1, 2, 8]
    assert [e["seq"] for e in read.visible(up_to=6)] == [0, 1, 2, 3, 4, 5, 6]


# --- round trip -------------------------------------------------------------------------------

# Any code point, with the ones JSON writers get wrong drawn often: lone surrogates, NUL,
# newlines, quotes, backslashes, U+2028.
TEXT = st.text(alphabet=st.characters(codec=None, categories=None)
               | st.sampled_from("\ud800\udfff\x00\n\"\\é∑\u2028"), max_size=60)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
TURN = st.integers(min_value=0, max_value=10**6)
# (type, fields); seq fields hold fractions, turned into earlier seqs when written.
ENTRY = st.one_of(
    st.fixed_dictionaries({"text": TEXT, "turn": TURN}).map(lambda f: ("user", f)),
    st.fixed_dictionaries({"text": TEXT, "turn": TURN},
                          optional={"usage": st.none() | st.dictionaries(TEXT, JSON, max_size=3)}
                          ).map(lambda f: ("assistant", f)),
    st.fixed_dictionaries({"turn": TURN, "tool": TEXT, "input": JSON, "call_id": TEXT}
                          ).map(lambda f: ("tool_call", f)),
    st.fixed_dictionaries({"turn": TURN, "call_id": TEXT, "ok": st.booleans(), "output": JSON}
                          ).map(lambda f: ("tool_result", f)),
    st.fixed_dictionaries({"turn": TURN, "checkpoint": TEXT}).map(lambda f: ("checkpoint", f)),
    st.fixed_dictionaries({"title": TEXT}).map(lambda f: ("title", f)),
    st.tuples(st.sampled_from(["compact", "summary"]),
              st.fixed_dictionaries({"text": TEXT, "from_seq": st.floats(0, 1),
                                     "to_seq": st.floats(0, 1)})),
    st.fixed_dictionaries({"to_seq": st.floats(0, 1)}).map(lambda f: ("rewind", f)),
    st.just(("clear", {})),
    st.fixed_dictionaries({"response_id": TEXT}).map(lambda f: ("bookmark", f)),
    st.fixed_dictionaries({"name": TEXT}, optional={"data": JSON}).map(lambda f: ("event", f)),
)
EXTRA = st.dictionaries(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=8).map(
    lambda k: "x_" + k), JSON, max_size=2)


def concrete(fields: dict[str, Any], seq: int) -> dict[str, Any]:
    """Seq fields drawn as fractions become seqs of earlier entries (seq is the entry's own)."""
    out = dict(fields)
    if "to_seq" in out:
        out["to_seq"] = int(out["to_seq"] * (seq - 1))
    if "from_seq" in out:
        out["from_seq"] = int(out["from_seq"] * out["to_seq"])
    return out


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ENTRY, EXTRA), min_size=1, max_size=12),
       st.sampled_from(transcript.DURABILITY_MODES))
def test_any_entries_written_read_back_identical(entries: list[tuple[tuple[str, dict[str, Any]],
                                                                      dict[str, Any]]],
                                                 durability: str) -> None:
    with tempfile.TemporaryDirectory() as state_dir:
        tiers = Tiers(state_dir)
        session = transcript.create(tiers, "claude", durability=durability)
        written = []
        for seq, ((entry_type, fields), extra) in enumerate(entries, start=1):
            given_fields = {**extra, **concrete(fields, seq)}
            appended = transcript.append(tiers, session, entry_type, given_fields,
                                         durability=durability)
            assert appended.seq == seq
            assert {k: v for k, v in appended.entry.items()
                    if k not in transcript.HEAD_FIELDS} == given_fields
            written.append(appended.entry)
        path = transcript.transcript_path(tiers, session)
        read = transcript.read(path)
        assert read.report.ok, read.report.problems
        assert read.entries[1:] == written
        assert transcript.tail(path, 3).entries == read.entries[-3:]
        # Lone surrogates are escaped: the file is ASCII, whatever the text.
        Path(path).read_bytes().decode("ascii")


# --- fork -------------------------------------------------------------------------------------


def test_a_fork_copies_the_visible_conversation_and_leaves_the_source_untouched(
        tiers: Tiers, session: str) -> None:
    conversation(tiers, session)  # 13 entries; the rewind at 9 hides 5..8
    source_path = transcript.transcript_path(tiers, session)
    before = Path(source_path).read_bytes()
    forked = transcript.fork(tiers, session, name="try another fix")
    assert Path(source_path).read_bytes() == before
    assert forked.session != session and forked.session.startswith("ses-claude-")
    assert (forked.forked_from, forked.fork_point, forked.copied) == (session, 13, 7)
    child = transcript.read(forked.path)
    assert child.report.ok
    meta, fork_entry, *copied, title = child.entries
    assert (meta["session"], meta["forked_from"], meta["fork_point"], meta["parent"],
            meta["native_id"], meta["project"]) == (forked.session, session, 13, None, None,
                                                    "/abs/root")
    assert {k: fork_entry[k] for k in ("type", "forked_from", "fork_point")} == {
        "type": "fork", "forked_from": session, "fork_point": 13}
    assert [e["seq"] for e in child.entries] == list(range(len(child.entries)))
    source = transcript.read(source_path).entries
    # The rewind (seq 9, to 4) hid the checkpoint, title, compact and summary; the close
    # marker describes the source, so it is not copied.
    assert [e["type"] for e in copied] == ["user", "tool_call", "tool_result", "assistant",
                                           "clear", "bookmark", "event"]
    for copy, original in zip(copied, [source[i] for i in (1, 2, 3, 4, 10, 11, 12)],
                              strict=True):
        assert {**copy, "seq": original["seq"]} == original
    assert (title["type"], title["title"]) == ("title", "try another fix")


def test_a_fork_at_a_seq_sees_the_conversation_as_it_stood_then(tiers: Tiers,
                                                                session: str) -> None:
    for turn in (1, 2):  # 1..4
        transcript.append(tiers, session, "user", {"text": f"q{turn}", "turn": turn})
        transcript.append(tiers, session, "assistant", {"text": f"a{turn}", "turn": turn})
    transcript.append(tiers, session, "rewind", {"to_seq": 2})  # 5
    transcript.mark_compact(tiers, session, "turn 1", 1, 2)  # 6
    # At seq 4 the second turn was still there: a fork can recover a rewound branch.
    before_rewind = transcript.fork(tiers, session, at_seq=4)
    texts = [e.get("text") for e in transcript.read(before_rewind.path).entries[2:]]
    assert texts == ["q1", "a1", "q2", "a2"]
    after = transcript.fork(tiers, session)
    copied = transcript.read(after.path).entries
    assert [e["type"] for e in copied] == ["session_meta", "fork", "user", "assistant", "compact"]
    assert (copied[4]["from_seq"], copied[4]["to_seq"]) == (2, 3)  # renumbered with the copy
    assert schema_errors(after.path) == []


def test_a_fork_of_a_fork_is_allowed_but_not_of_a_sidechain_of_a_fork(tiers: Tiers,
                                                                       session: str) -> None:
    transcript.append(tiers, session, "user", {"text": "q", "turn": 1})
    first = transcript.fork(tiers, session).session
    second = transcript.fork(tiers, first)
    assert transcript.read(second.path).entries[0]["forked_from"] == first
    of_plain = transcript.create(tiers, "claude", parent=session)
    transcript.fork(tiers, of_plain)  # a sidechain of an ordinary session: depth one
    of_fork = transcript.create(tiers, "claude", parent=first)
    files = sorted(os.listdir(os.path.dirname(second.path)))
    with pytest.raises(InvalidInput, match="sidechain of a fork"):
        transcript.fork(tiers, of_fork)
    assert sorted(os.listdir(os.path.dirname(second.path))) == files


@pytest.mark.parametrize(("at_seq", "message"), [
    (2, "it ends at seq 1"), (-1, "must be a seq"), ("1", "must be a seq"), (True, "must be a seq"),
])
def test_a_fork_point_past_the_end_or_not_a_seq_is_refused(tiers: Tiers, session: str,
                                                           at_seq: Any, message: str) -> None:
    transcript.append(tiers, session, "clear")
    with pytest.raises(InvalidInput, match=message):
        transcript.fork(tiers, session, at_seq=at_seq)
    assert len(os.listdir(os.path.dirname(transcript.transcript_path(tiers, session)))) == 1


# --- api --------------------------------------------------------------------------------------


def test_the_api_writes_a_session_in_the_callers_project(repo: Path, isolated_env: Path) -> None:
    env = {"HOME": str(isolated_env), "COS_AGENT": "codex"}
    session = api.create_session(title="Refactor", env=env, cwd=str(repo))
    path = repo / ".coding-os" / "codex" / "transcripts" / f"{session}.jsonl"
    meta = lines_of(str(path))[0]
    assert (meta["agent"], meta["project"], meta["worktree"], meta["branch"], meta["title"]) == (
        "codex", str(repo), str(repo), "main", "Refactor")
    api.append_event(session, "user", {"text": "hi", "turn": 1}, env=env, cwd=str(repo))
    api.append_event(session, "assistant", {"text": "hello", "turn": 1}, env=env, cwd=str(repo))
    assert api.set_title(session, "Refactor auth", env=env, cwd=str(repo)).seq == 3
    assert api.mark_compact(session, "greeting", 1, 2, env=env, cwd=str(repo)).seq == 4
    forked = api.fork_session(session, at_seq=2, name="Alt", env=env, cwd=str(repo))
    assert forked.as_dict()["fork_point"] == 2
    closed = api.close_session(session, env=env, cwd=str(repo))
    assert (closed.seq, closed.entry["name"]) == (5, "close")
    assert schema_errors(str(path)) == [] and schema_errors(forked.path) == []


def test_a_transcript_field_with_a_number_key_is_refused(tmp_path: Path) -> None:
    from coding_os.errors import InvalidInput
    from coding_os.sessions import transcript

    tiers = Tiers(str(tmp_path / ".coding-os"))
    session = transcript.create(tiers, "claude", project="/abs/root", worktree="/abs/root",
                                branch="main")
    with pytest.raises(InvalidInput, match="not JSON"):
        transcript.append(tiers, session, "user", {"text": "hi", "turn": 1, "x": {1: "a"}})
