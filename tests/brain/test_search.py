"""brain.search: query parsing, snippets, paging, and reading transcripts into the search."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coding_os.brain.search import (
    MAX_QUERY_CHARS,
    parse_query,
    search_page,
    snippet,
    sync_transcripts,
)
from coding_os.errors import InvalidInput
from coding_os.state.tiers import Tiers
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import (GEMINI_PLAIN, GEMINI_REWOUND, SHARED_FIXTURES, copy_gemini_fixtures,
                           cos_json_in)


SESSION = "ses-claude-20261129-100000-aaaa"


@pytest.mark.parametrize("query,terms", [
    ("login", ["login"]),
    ("Fix LOGIN bug", ["fix", "login", "bug"]),
    ("foo_bar", ["foo bar"]),
    ("foo-bar", ["foo bar"]),
    ("src/coding_os/api.py", ["src coding os api py"]),
    ("login login LOGIN", ["login"]),
    ("  spaced\tout\n words ", ["spaced", "out", "words"]),
    ("'; DROP TABLE tasks; --", ["drop", "table", "tasks"]),
    ('" OR 1=1', ["or", "1 1"]),
    ("NEAR(a b)", ["near a", "b"]),
    ("*", None),
    ("a* OR b*", ["a", "or", "b"]),
    ("Ünïcödé straße", ["ünïcödé", "straße"]),
])
def test_a_query_is_words_never_syntax(query: str, terms: list[str] | None) -> None:
    if terms is None:
        with pytest.raises(InvalidInput, match="at least one word"):
            parse_query(query)
    else:
        assert parse_query(query) == terms


@pytest.mark.parametrize("bad,message", [
    ("", "at least one word"), ("   ", "at least one word"), ("***", "at least one word"),
    ("-- ;; ''", "at least one word"), (None, "must be text"), (42, "must be text"),
    (["a"], "must be text"), ("x" * (MAX_QUERY_CHARS + 1), "longer than 1000"),
    (" ".join(f"w{i}" for i in range(17)), "more than 16 words"),
])
def test_a_query_without_words_too_long_or_not_text_is_refused(bad: object,
                                                                message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_query(bad)


def test_a_short_text_is_its_own_snippet_with_whitespace_folded() -> None:
    assert snippet("one\n  two\tthree", ["two"]) == "one two three"


def test_a_long_texts_snippet_shows_the_first_term_with_ellipses() -> None:
    text = "filler " * 100 + "NEEDLE here " + "tail " * 100
    cut = snippet(text, ["needle"], width=60)
    assert "NEEDLE" in cut and cut.startswith("…") and cut.endswith("…")
    assert len(cut) <= 62


def test_search_pages_walk_every_hit_once_newest_first(storage: SQLiteStorage) -> None:
    for i in range(25):
        storage.append_work_log(SESSION, "cli", None, f"walk step {i}", "2026-11-29T10:00:00Z")
    seen: list[str] = []
    cursor = None
    while True:
        page = search_page(storage, "walk", cursor=cursor, limit=10)
        seen.extend(str(hit["snippet"]) for hit in page.hits)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"walk step {i}" for i in range(24, -1, -1)]
    last = search_page(storage, "walk", limit=25)
    assert last.next_cursor is None and len(last.hits) == 25


@pytest.mark.parametrize("kwargs,message", [
    ({"kinds": ["nope"]}, "unknown search kind"), ({"limit": 0}, "limit"),
    ({"limit": 101}, "limit"), ({"limit": True}, "limit"), ({"cursor": 0}, "cursor"),
    ({"cursor": "5"}, "cursor"), ({"cursor": True}, "cursor"),
])
def test_bad_search_arguments_are_refused(storage: SQLiteStorage, kwargs: dict[str, object],
                                          message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        search_page(storage, "word", **kwargs)  # type: ignore[arg-type]


# Transcripts


def transcript(tiers: Tiers, sid: str = SESSION, agent: str = "claude") -> Path:
    path = Path(tiers.agent_dir(agent)) / "transcripts" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def entry(seq: int, text: str, kind: str = "user") -> str:
    return json.dumps({"v": 1, "seq": seq, "ts": f"2026-11-29T10:00:{seq % 60:02d}.000Z",
                       "type": kind, "text": text, "turn": 1}) + "\n"


def append(path: Path, *lines: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.writelines(lines)


def texts(storage: SQLiteStorage, word: str) -> list[str]:
    return sorted(h.text for h in storage.search([word], kinds=["transcript"], limit=1000))


def test_a_transcripts_messages_become_searchable_and_other_entries_do_not(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    path = transcript(tiers)
    append(path, json.dumps({"v": 1, "seq": 0, "type": "session_meta", "session": SESSION,
                             "text": "meta marmot"}) + "\n",
           entry(1, "the user asks about marmot"), entry(2, "the assistant explains marmot",
                                                        "assistant"),
           json.dumps({"v": 1, "seq": 3, "type": "tool_call", "text": "tool marmot"}) + "\n",
           "not json at all marmot\n", entry(4, "   "))
    assert sync_transcripts(storage, tiers) == 2
    hits = storage.search(["marmot"])
    assert sorted(h.text for h in hits) == ["the assistant explains marmot",
                                           "the user asks about marmot"]
    assert {h.session for h in hits} == {SESSION}
    assert sync_transcripts(storage, tiers) == 0  # nothing new: nothing read


def test_an_appended_transcript_adds_only_its_new_messages(storage: SQLiteStorage,
                                                           tiers: Tiers) -> None:
    path = transcript(tiers)
    append(path, entry(1, "first otter"), entry(2, "second otter"))
    assert sync_transcripts(storage, tiers) == 2
    append(path, entry(3, "third otter"))
    assert sync_transcripts(storage, tiers) == 1
    assert texts(storage, "otter") == ["first otter", "second otter", "third otter"]


def test_a_rewritten_transcript_loses_the_documents_of_its_old_content(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    path = transcript(tiers)
    append(path, entry(1, "old heron"), entry(2, "old heron again"))
    sync_transcripts(storage, tiers)
    replacement = path.with_name("new.tmp")
    append(replacement, entry(1, "new heron"))
    os.replace(replacement, path)  # a new file (new inode), shorter
    sync_transcripts(storage, tiers)
    assert texts(storage, "heron") == ["new heron"]


def test_a_transcript_rewritten_in_place_and_longer_is_read_again_from_the_start(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    path = transcript(tiers)
    append(path, entry(1, "old badger"))
    sync_transcripts(storage, tiers)
    with path.open("r+", encoding="utf-8") as f:  # same inode, other bytes, more of them
        f.truncate(0)
        f.write(entry(1, "new badger text") + entry(2, "more badger"))
    sync_transcripts(storage, tiers)
    assert texts(storage, "badger") == ["more badger", "new badger text"]


def test_a_torn_last_line_is_searchable_only_once_it_is_complete(storage: SQLiteStorage,
                                                                 tiers: Tiers) -> None:
    path = transcript(tiers)
    whole = entry(2, "torn walrus")
    append(path, entry(1, "whole walrus"), whole[:20])
    assert sync_transcripts(storage, tiers) == 1
    assert texts(storage, "walrus") == ["whole walrus"]
    append(path, whole[20:])
    assert sync_transcripts(storage, tiers) == 1
    assert texts(storage, "walrus") == ["torn walrus", "whole walrus"]


def test_several_transcripts_are_read_each_under_its_session(storage: SQLiteStorage,
                                                              tiers: Tiers) -> None:
    other = "ses-codex-20261129-100000-bbbb"
    append(transcript(tiers), entry(1, "shared lynx"))
    append(transcript(tiers, other, "codex"), entry(1, "shared lynx too"))
    assert sync_transcripts(storage, tiers) == 2
    assert {h.session for h in storage.search(["lynx"])} == {SESSION, other}
    assert [h.text for h in storage.search(["lynx"], sessions=[other])] == ["shared lynx too"]


_KILLER = """
import os, signal, sys
from coding_os.brain import search
from coding_os.state.tiers import Tiers
from coding_os.storage.sqlite import SQLiteStorage

search._CHUNK_BYTES = 400  # several chunks, each its own transaction
calls = 0
real = SQLiteStorage.add_source_docs
real_put = SQLiteStorage._put_doc

def add_then_die(self, mark, docs, restart=False):
    global calls
    calls += 1
    if calls == int(sys.argv[2]) and sys.argv[3] == "inside":
        def put_then_die(self, conn, doc, source=None):
            real_put(self, conn, doc, source)
            os.kill(os.getpid(), signal.SIGKILL)  # mid-transaction, before its commit
        SQLiteStorage._put_doc = put_then_die
    added = real(self, mark, docs, restart)
    if calls == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)  # between two committed chunks
    return added

SQLiteStorage.add_source_docs = add_then_die
storage = SQLiteStorage(os.path.join(sys.argv[1], "coding-os.db"))
search.sync_transcripts(storage, Tiers(sys.argv[1]))
"""


@pytest.mark.parametrize("where", ["between", "inside"])
def test_a_sync_killed_midway_leaves_no_duplicates_and_the_next_sync_finishes_it(
        storage: SQLiteStorage, tiers: Tiers, where: str) -> None:
    path = transcript(tiers)
    append(path, *(entry(i, f"message {i} of the beaver log") for i in range(40)))
    proc = subprocess.run([sys.executable, "-c", _KILLER, tiers.state_dir, "3", where],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    partial = texts(storage, "beaver")
    assert 0 < len(partial) < 40 and len(partial) == len(set(partial))
    sync_transcripts(storage, tiers)
    hits = storage.search(["beaver"], limit=1000)
    assert sorted(h.text for h in hits) == sorted(f"message {i} of the beaver log"
                                                  for i in range(40))
    assert sync_transcripts(storage, tiers) == 0


FIXTURES = SHARED_FIXTURES


def test_the_real_fixture_transcripts_are_indexed_and_searchable(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path) -> None:
    from coding_os.sessions import index
    from tests.helpers import MAIN_1053, copy_claude_fixtures, copy_codex_fixtures

    claude = copy_claude_fixtures(tmp_path / "claude")
    codex = copy_codex_fixtures(tmp_path / "codex")
    index.refresh(storage, tiers, str(claude), str(codex))
    assert sync_transcripts(storage, tiers) > 10
    claude_hits = storage.search(["regenerating", "tui"], kinds=["transcript"])
    assert claude_hits and {h.session for h in claude_hits} == {MAIN_1053}
    assert any("launches the session HTML page" in h.text for h in claude_hits)
    assert len({h.ref for h in claude_hits}) == len(claude_hits)
    (codex_hit,) = storage.search(["summarize", "purpuse"], kinds=["transcript"])
    assert codex_hit.session == "019b7f94-51b4-7593-922e-ba12b5b73b52"
    # injected context (AGENTS.md, environment) is not indexed as a message
    assert storage.search(["environment_context"]) == []
    assert sync_transcripts(storage, tiers) == 0


def test_searchers_syncing_the_same_transcripts_at_once_never_duplicate_a_message(
        project: Path, storage: SQLiteStorage, tiers: Tiers) -> None:
    from tests.helpers import COS

    for n in range(4):
        append(transcript(tiers, f"ses-claude-20261129-10000{n}-aaaa"),
               *(entry(i, f"parallel gecko {n} {i}") for i in range(300)))
    procs = [subprocess.Popen([COS, "search", "gecko", "--json", "--limit", "5"], cwd=project,
                              env={**os.environ, "COS_AGENT": "claude"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert len(json.loads(out)["results"]) == 5
    hits = storage.search(["gecko"], limit=2000)
    assert len(hits) == 1200 and len({h.text for h in hits}) == 1200
    assert sync_transcripts(storage, tiers) == 0


def test_a_deleted_transcripts_messages_are_no_longer_found(storage: SQLiteStorage,
                                                             tiers: Tiers) -> None:
    path = transcript(tiers)
    append(path, entry(1, "my password is hunter2zebra"))
    sync_transcripts(storage, tiers)
    assert texts(storage, "hunter2zebra") == ["my password is hunter2zebra"]
    path.unlink()  # deleted, or moved to the trash by retention
    sync_transcripts(storage, tiers)
    assert texts(storage, "hunter2zebra") == []
    assert str(path) not in storage.source_marks()


def test_an_emptied_transcripts_messages_are_no_longer_found(storage: SQLiteStorage,
                                                              tiers: Tiers) -> None:
    path = transcript(tiers)
    append(path, entry(1, "secret pangolin"))
    sync_transcripts(storage, tiers)
    path.write_bytes(b"")
    sync_transcripts(storage, tiers)
    assert texts(storage, "pangolin") == []
    append(path, entry(1, "a new pangolin"))
    sync_transcripts(storage, tiers)
    assert texts(storage, "pangolin") == ["a new pangolin"]


def test_a_native_transcripts_hits_are_shown_and_filtered_under_the_linked_cos_session(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path) -> None:
    from coding_os.sessions import index
    from coding_os.storage.base import SessionRecord
    from tests.helpers import MAIN_1053, copy_claude_fixtures

    cos_id = "ses-claude-20261129-100000-beef"
    storage.upsert_session(SessionRecord(id=cos_id, agent="claude", panel="p1",
                                         native_id=MAIN_1053, started="2026-11-29T10:00:00.000Z",
                                         last_active="2026-11-29T10:00:00.000Z"))
    index.refresh(storage, tiers, str(copy_claude_fixtures(tmp_path / "claude")),
                  str(tmp_path / "none"))
    sync_transcripts(storage, tiers)
    page = search_page(storage, "regenerating tui", kinds=["transcript"])
    assert page.hits and {hit["session"] for hit in page.hits} == {cos_id}
    for key in (cos_id, MAIN_1053):  # either id of the session filters to its transcript
        assert search_page(storage, "regenerating tui", session=key).hits == page.hits
    assert search_page(storage, "regenerating tui", session=SESSION).hits == []


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "redact-false"])
def test_a_transcript_message_is_searchable_without_its_secrets(
        storage: SQLiteStorage, tiers: Tiers, redacting: bool) -> None:
    secret = "hf" + "_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # made up, built at run time
    if not redacting:
        (Path(tiers.state_dir).parent / ".coding-os.yaml").write_text("redact: false\n",
                                                                     encoding="utf-8")
    append(transcript(tiers), entry(1, f"download the weasel model with {secret}"))
    assert sync_transcripts(storage, tiers) == 1
    assert texts(storage, "weasel") == [
        "download the weasel model with "
        + ("[REDACTED:huggingface_token]" if redacting else secret)]
    page = search_page(storage, "weasel").to_dict()
    assert (secret in json.dumps(page)) is not redacting


def test_a_claude_transcript_is_searched_along_its_live_chain_only(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path) -> None:
    """A resume at an earlier entry leaves the turns after it as a branch: they are no longer
    the conversation, and search stops finding them; an append on the live chain adds to it."""
    from coding_os.sessions import index
    from tests.helpers import assistant, user, write_jsonl

    native = "bbbbbbbb-0000-0000-0000-00000000000b"
    projects = tmp_path / "claude" / "projects" / "-work-app"
    log = projects / f"{native}.jsonl"
    write_jsonl(log, [user("u1", None, "first walrus", 1, native),
                      assistant("a1", "u1", "m1", "r1", 2, native),
                      user("u2", "a1", "second walrus", 3, native),
                      assistant("a2", "u2", "m2", "r2", 4, native)])
    index.refresh(storage, tiers, str(tmp_path / "claude"), str(tmp_path / "none"))
    sync_transcripts(storage, tiers)
    assert texts(storage, "walrus") == ["first walrus", "second walrus"]
    # Appended on the live chain: read incrementally, kept with what was there.
    write_jsonl(log, [user("u3", "a2", "third walrus", 5, native),
                      assistant("a3", "u3", "m3", "r3", 6, native)], mode="a")
    index.refresh(storage, tiers, str(tmp_path / "claude"), str(tmp_path / "none"))
    assert sync_transcripts(storage, tiers) == 2  # the third prompt and its answer
    assert texts(storage, "walrus") == ["first walrus", "second walrus", "third walrus"]
    # Resumed at the first answer (--resume-session-at a1): the second and third turns are a
    # branch now.
    write_jsonl(log, [user("u4", "a1", "fourth walrus", 7, native),
                      assistant("a4", "u4", "m4", "r4", 8, native)], mode="a")
    index.refresh(storage, tiers, str(tmp_path / "claude"), str(tmp_path / "none"))
    sync_transcripts(storage, tiers)
    assert texts(storage, "walrus") == ["first walrus", "fourth walrus"]
    assert sync_transcripts(storage, tiers) == 0


def test_a_codex_thread_is_searched_along_its_live_history_only(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path) -> None:
    """Rollouts the real Codex wrote (tests/adapters/fixtures/codex_history): a revert in
    place writes a new rollout of the thread and leaves the dropped turns in the old one."""
    import shutil

    from coding_os.sessions import index

    fixtures = Path(__file__).resolve().parents[1] / "adapters" / "fixtures" / "codex_history"
    thread = "01a234f8-198f-7441-8a98-76c6ad64d4b2"
    day = tmp_path / "codex" / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    first, *later = sorted(fixtures.glob(f"rollout-*-{thread}*.jsonl"))
    shutil.copy(first, day)
    index.refresh(storage, tiers, str(tmp_path / "none"), str(tmp_path / "codex"))
    sync_transcripts(storage, tiers)
    assert {h.session for h in storage.search(["prompt", "two"])} == {thread}
    for path in later:  # the two reverts: the turns after prompt one are dropped, twice
        shutil.copy(path, day)
    index.refresh(storage, tiers, str(tmp_path / "none"), str(tmp_path / "codex"))
    sync_transcripts(storage, tiers)
    said = sorted(h.text for h in storage.search(["prompt"]) if h.text.startswith("prompt"))
    assert said == ["prompt four, in place", "prompt one", "prompt six"]
    assert {h.session for h in storage.search(["prompt"])} == {thread}
    assert sync_transcripts(storage, tiers) == 0


def test_cos_search_finds_what_was_typed_and_answered_in_a_gemini_session_but_not_a_rewound_prompt(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path, tmp_path: Path) -> None:
    repo = checkout[0]
    chats = copy_gemini_fixtures(isolated_env, repo, tmp_path / "legacy") / "tmp" / "project" \
        / "chats"

    def found(query: str) -> list[tuple[str, str]]:
        page = cos_json_in(checkout, "search", query, "--kind", "transcript")
        assert isinstance(page, dict)
        return [(hit["session"], hit["snippet"]) for hit in page["results"]]

    resumed = found("RESUMED notes")
    assert (GEMINI_PLAIN, "RESUMED: what does notes.txt hold now?") in resumed
    assert any(session == GEMINI_PLAIN and "alpha and gamma" in snippet
               for session, snippet in found("gamma"))
    assert (GEMINI_REWOUND, "REWIND third prompt") in found("REWIND third")
    assert found("REWIND second") == []  # /rewind took it out of the conversation
    assert found("session_context") == []  # the context Gemini CLI injects
    # A session that goes on is searched as it is now.
    plain = next(chats.glob(f"session-*-{GEMINI_PLAIN[:8]}.jsonl"))
    with plain.open("a", encoding="utf-8") as log:
        log.write(json.dumps({"id": "later-prompt", "timestamp": "2026-12-06T09:00:00.000Z",
                              "type": "user", "content": [{"text": "LATER: zebra"}]}) + "\n")
    assert found("zebra") == [(GEMINI_PLAIN, "LATER: zebra")]
