"""Transcripts that are damaged or hostile, and ids that try to leave the state dir: tolerated,
reported, refused before any file is touched — never a crash, a hang or a silent loss."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os import api
from coding_os.errors import InvalidId, InvalidInput, NotFound, StateIOError
from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers

BIG = 20 * 1024 * 1024  # a single 20 MB line
TS = "2026-11-29T16:20:00.123Z"


def line(seq: int, entry_type: str = "clear", **fields: Any) -> bytes:
    entry = {"v": 1, "seq": seq, "ts": TS, "type": entry_type, **fields}
    return json.dumps(entry, separators=(",", ":")).encode() + b"\n"


def meta_line(session: str) -> bytes:
    return line(0, "session_meta", session=session, agent="claude", native_id=None,
                project=None, worktree=None, branch=None, title=None, forked_from=None,
                fork_point=None, parent=None, seed_ref=None)


def inject(tiers: Tiers, session: str, data: bytes) -> str:
    path = transcript.transcript_path(tiers, session)
    with open(path, "ab") as f:
        f.write(data)
    return path


def test_an_invalid_utf8_line_is_skipped_and_reported_and_writing_continues(
        tiers: Tiers, session: str) -> None:
    transcript.append(tiers, session, "user", {"text": "before", "turn": 1})
    path = inject(tiers, session, b'{"v":1,"seq":2,"ts":"' + b"\xff\xfe\x80" + b'"}\n')
    appended = transcript.append(tiers, session, "user", {"text": "after", "turn": 2})
    # The damaged line had a seq: the writer never reuses it, so a gap is reported too.
    assert appended.seq == 3
    read = transcript.read(path)
    assert [e.get("text") for e in read.entries[1:]] == ["before", "after"]
    assert read.report.kinds() == ["invalid_utf8", "seq_gap"]
    bad = read.report.problems[0]
    meta, before = Path(path).read_bytes().split(b"\n")[:2]
    assert (bad.line, bad.offset) == (3, len(meta) + 1 + len(before) + 1)
    assert "invalid UTF-8" in bad.detail and "seq 2 missing" in read.report.problems[1].detail


def test_non_json_and_blank_lines_are_skipped_and_reported(tiers: Tiers, session: str) -> None:
    path = inject(tiers, session, b"this is not JSON\n\n[1, 2]\n" + line(1, v=2) + line(1, v=1))
    read = transcript.read(path)
    assert [e["seq"] for e in read.entries] == [0, 1]
    assert read.report.kinds() == ["not_json", "blank_line", "invalid_entry",
                                   "unsupported_version"]
    assert [p.line for p in read.report.problems] == [2, 3, 4, 5]
    assert transcript.append(tiers, session, "clear").seq == 2


def test_seq_gaps_are_reported_and_out_of_order_entries_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    session = "ses-claude-20261129-162000-abcd"
    path.write_bytes(meta_line(session) + line(1) + line(3) + line(3) + line(2) + line(7))
    read = transcript.read(str(path))
    assert [e["seq"] for e in read.entries] == [0, 1, 3, 7]
    assert [(p.kind, p.line, p.detail) for p in read.report.problems] == [
        ("seq_gap", 3, "seq 2 missing"),
        ("seq_order", 4, "seq 3 after seq 3; entry skipped"),
        ("seq_order", 5, "seq 2 after seq 3; entry skipped"),
        ("seq_gap", 6, "seqs 4..6 missing"),
    ]
    back = transcript.tail(str(path), 10)
    assert [e["seq"] for e in back.entries] == [0, 1, 3, 7]
    assert [p.kind for p in back.report.problems] == [p.kind for p in read.report.problems]


def test_a_transcript_without_its_session_meta_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(1) + line(2))
    read = transcript.read(str(path))
    assert read.meta is None and read.report.kinds() == ["missing_meta"]
    assert transcript.read_meta(str(path)) is None


def test_a_20_mb_entry_is_written_read_and_tailed(tiers: Tiers, session: str) -> None:
    text = "é" * (BIG // 6)  # the writer's ASCII JSON escapes each to six bytes: \u00e9
    started = time.monotonic()
    big = transcript.append(tiers, session, "tool_result",
                            {"turn": 1, "call_id": "c", "ok": True, "output": text})
    after = transcript.append(tiers, session, "user", {"text": "next", "turn": 2})
    assert (big.seq, after.seq) == (1, 2)
    path = transcript.transcript_path(tiers, session)
    assert transcript.tail(path, 1).entries == [after.entry]
    assert os.path.getsize(path) > BIG
    assert transcript.read(path).entries[1]["output"] == text
    assert time.monotonic() - started < 20


def test_a_20_mb_line_of_garbage_is_reported_in_a_bounded_detail(tiers: Tiers,
                                                                 session: str) -> None:
    path = inject(tiers, session, b"x" * BIG + b"\n")
    assert transcript.append(tiers, session, "clear").seq == 2
    read = transcript.read(path)
    [garbage, gap] = read.report.problems
    assert (garbage.kind, garbage.length, gap.kind) == ("not_json", BIG, "seq_gap")
    assert len(garbage.detail) < 300


def test_a_20_mb_torn_tail_is_set_aside_whole(tiers: Tiers, session: str) -> None:
    torn = b'{"v":1,"seq":1,"ts":"' + b"y" * BIG
    path = inject(tiers, session, torn)
    assert transcript.tail(path, 1).report.kinds() == ["torn_tail"]
    appended = transcript.append(tiers, session, "clear")
    assert (appended.seq, appended.torn_bytes) == (1, len(torn))
    assert Path(path + ".torn").read_bytes() == torn + b"\n"


def test_a_transcript_with_no_readable_entry_is_not_appended_to(tiers: Tiers) -> None:
    session = "ses-claude-20261129-162000-abcd"
    path = Path(transcript.transcript_path(tiers, session))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage\n")
    with pytest.raises(StateIOError, match="no readable entry"):
        transcript.append(tiers, session, "clear")
    assert path.read_bytes() == b"garbage\n"


BAD_IDS = [
    "../../../etc/passwd",
    "ses-claude-20261129-162000-abcd/../../x",
    "ses-../x-20261129-162000-abcd",
    "ses-claude-20261129-162000-ABCD",
    "ses-checkpoints-20261129-162000-abcd",  # an agent name that is a reserved directory
    "ses-claude-20261129-162000-abcd.jsonl",
    "",
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_bad_session_id_is_refused_before_any_file_is_touched(tiers: Tiers, bad: str,
                                                                repo: Path,
                                                                isolated_env: Path) -> None:
    calls = [
        lambda: transcript.append(tiers, bad, "clear"),
        lambda: transcript.set_title(tiers, bad, "t"),
        lambda: transcript.close(tiers, bad),
        lambda: transcript.fork(tiers, bad),
        lambda: transcript.create(tiers, "claude", session=bad),
    ]
    env = {"HOME": str(isolated_env), "COS_AGENT": "claude"}
    calls += [
        lambda: api.append_event(bad, "clear", env=env, cwd=str(repo)),
        lambda: api.set_title(bad, "t", env=env, cwd=str(repo)),
        lambda: api.mark_compact(bad, "t", 0, 0, env=env, cwd=str(repo)),
        lambda: api.fork_session(bad, env=env, cwd=str(repo)),
        lambda: api.close_session(bad, env=env, cwd=str(repo)),
    ]
    for call in calls:
        with pytest.raises(InvalidId):
            call()
    assert not os.path.exists(tiers.state_dir)
    assert not (repo / ".coding-os").exists()


@pytest.mark.parametrize("name", ["../../x", "..", "a/../b", "a/..", " ../x", "/etc/passwd",
                                  "\\x", "a\\b", "two\nlines", "\x00", "a\x7fb", " ", "", "x" * 201,
                                  "ses-claude-20261129-162000-abcd"])
def test_a_bad_title_or_fork_name_is_refused(tiers: Tiers, session: str, name: str) -> None:
    files = os.listdir(os.path.dirname(transcript.transcript_path(tiers, session)))
    with pytest.raises(InvalidInput):
        transcript.set_title(tiers, session, name)
    with pytest.raises(InvalidInput):
        transcript.fork(tiers, session, name=name)
    with pytest.raises(InvalidInput):
        transcript.create(tiers, "claude", title=name)
    assert os.listdir(os.path.dirname(transcript.transcript_path(tiers, session))) == files


@pytest.mark.parametrize("name", ["CI/CD", "front/back", "a/b/c", "v1.2/x..y", "../"[1:] + "x"])
def test_a_slash_inside_a_title_or_fork_name_is_accepted(tiers: Tiers, session: str,
                                                         name: str) -> None:
    assert transcript.validate_title(name) == name
    transcript.set_title(tiers, session, name)
    forked = transcript.fork(tiers, session, name=name)
    titles = [e["title"] for e in transcript.read(forked.path).entries if e["type"] == "title"]
    assert titles[-1] == name


def test_a_missing_transcript_is_not_found(tiers: Tiers) -> None:
    missing = "ses-claude-20261129-162000-abcd"
    with pytest.raises(NotFound):
        transcript.append(tiers, missing, "clear")
    with pytest.raises(NotFound):
        transcript.fork(tiers, missing)
    with pytest.raises(NotFound):
        transcript.read(transcript.transcript_path(tiers, missing))
    assert not os.path.exists(transcript.transcript_path(tiers, missing))


def test_a_symlinked_transcript_is_neither_read_nor_written_through(tiers: Tiers, session: str,
                                                                    tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    path = Path(transcript.transcript_path(tiers, session))
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    with pytest.raises(StateIOError, match="symlink"):
        transcript.append(tiers, session, "clear")
    with pytest.raises(StateIOError, match="symlink"):
        transcript.read(str(path))
    assert elsewhere.read_bytes() == before


def test_a_fifo_in_place_of_a_transcript_does_not_hang_a_reader_or_writer(tiers: Tiers) -> None:
    session = "ses-claude-20261129-162000-abcd"
    path = transcript.transcript_path(tiers, session)
    os.makedirs(os.path.dirname(path))
    os.mkfifo(path)
    with pytest.raises(StateIOError, match="not a regular file"):
        transcript.read(path)
    with pytest.raises(StateIOError, match="not a regular file"):
        transcript.append(tiers, session, "clear")


def test_a_torn_tail_that_cannot_be_set_aside_stays_in_the_transcript(tiers: Tiers,
                                                                      session: str) -> None:
    path = inject(tiers, session, b'{"v":1,"seq":1,"ts":"2026')
    before = Path(path).read_bytes()
    os.mkdir(path + ".torn")  # where the torn bytes would go cannot take them
    with pytest.raises(StateIOError):
        transcript.append(tiers, session, "clear")
    assert Path(path).read_bytes() == before


@pytest.mark.parametrize("agent", ["../x", "Claude", "trash", "a" * 33, ""])
def test_a_bad_agent_is_refused_before_any_file_is_touched(agent: str, tiers: Tiers, repo: Path,
                                                           isolated_env: Path) -> None:
    with pytest.raises(InvalidId):
        transcript.create(tiers, agent)
    with pytest.raises(InvalidId):
        api.create_session(agent, env={"HOME": str(isolated_env)}, cwd=str(repo))
    assert not os.path.exists(tiers.state_dir) and not (repo / ".coding-os").exists()
