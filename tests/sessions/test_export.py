"""Export of a conversation as Markdown, JSON and HTML, from each kind of session log."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions import transcript
from coding_os.sessions.export import branches, read_page, read_turns, render, stylesheet
from coding_os.state.tiers import Tiers
from tests.helpers import (CLAUDE_FIXTURES, CODEX_FIXTURES, GEMINI_PLAIN, GEMINI_REWOUND, TOOLS,
                           copy_codex_fixtures, copy_gemini_fixtures, cos)

CLAUDE = CLAUDE_FIXTURES / "claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
CODEX = CODEX_FIXTURES / ("madshn__localpush__rollout-2026-02-23T13-19-38-"
                              "019c8a70-dda7-7f33-98ea-f30553347322.jsonl")


def test_a_cos_native_session_exports_its_visible_conversation(tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    sid = transcript.create(tiers, "claude", title="Fix <the> build")
    transcript.append(tiers, sid, "user", {"text": "make it pass", "turn": 1})
    transcript.append(tiers, sid, "tool_call", {"turn": 1, "tool": "Bash",
                                                "input": {"command": "make"}, "call_id": "c1"})
    transcript.append(tiers, sid, "tool_result", {"turn": 1, "call_id": "c1", "ok": True,
                                                  "output": "ok"})
    transcript.append(tiers, sid, "assistant", {"text": "done & dusted", "turn": 1})
    meta, turns = read_turns(transcript.transcript_path(tiers, sid), "cos")
    assert [t.role for t in turns] == ["user", "tool_call", "tool_result", "assistant"]
    md = render(meta, turns, "md")
    assert md.startswith("# Fix <the> build") and "make it pass" in md and "```" in md
    page = render(meta, turns, "html")
    assert "Fix &lt;the&gt; build" in page and "done &amp; dusted" in page
    data = json.loads(render(meta, turns, "json"))
    assert data["turns"][1] == {"role": "tool_call", "text": '{"command": "make"}',
                                "ts": turns[1].ts, "tool": "Bash"}


def test_a_claude_transcript_exports_without_its_inline_subagents() -> None:
    meta, turns = read_turns(str(CLAUDE), "claude")
    assert meta["native_id"] == "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
    assert turns[0].role == "user" and "/orchestrator" in turns[0].text
    assert {t.role for t in turns} >= {"user", "assistant", "tool_call", "tool_result"}
    assert "Warmup" not in render(meta, turns, "md")


def test_a_codex_rollout_exports_prompts_answers_and_tool_calls() -> None:
    meta, turns = read_turns(str(CODEX), "codex")
    assert meta["native_id"] == "019c8a70-dda7-7f33-98ea-f30553347322"
    assert any(t.role == "user" for t in turns) and any(t.role == "assistant" for t in turns)
    assert "<!doctype html>" in render(meta, turns, "html")


def test_a_codex_rollout_exports_no_context_codex_injected_as_a_user_message(
        tmp_path: Path) -> None:
    def message(role: str, text: str) -> dict[str, object]:
        return {"timestamp": "2026-02-23T13:19:40Z", "type": "response_item",
                "payload": {"type": "message", "role": role,
                            "content": [{"type": "input_text", "text": text}]}}

    rollout = tmp_path / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347399.jsonl"
    rollout.write_text("".join(json.dumps(line) + "\n" for line in [
        {"timestamp": "2026-02-23T13:19:38Z", "type": "session_meta",
         "payload": {"id": "019c8a70-dda7-7f33-98ea-f30553347399", "cwd": "/w"}},
        message("user", "# AGENTS.md instructions for /w\n\nbe brief"),
        message("user", "  <environment_context><cwd>/w</cwd></environment_context>"),
        message("user", "fix the build"),
        message("assistant", "fixed")]), encoding="utf-8")
    _, turns = read_turns(str(rollout), "codex")
    assert [(t.role, t.text) for t in turns] == [("user", "fix the build"),
                                                 ("assistant", "fixed")]


def test_bad_format_kind_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="format"):
        render({}, [], "pdf")
    with pytest.raises(InvalidInput, match="kind"):
        read_turns(str(CLAUDE), "goose")
    with pytest.raises(NotFound):
        read_turns(str(tmp_path / "gone.jsonl"), "claude")


def test_a_line_nested_too_deeply_is_skipped_as_import_skips_it(tmp_path: Path) -> None:
    session = "c7c7c7c7-0000-0000-0000-0000000000aa"
    lines = [
        {"type": "user", "sessionId": session, "timestamp": "2025-01-01T00:00:00Z",
         "message": {"role": "user", "content": "before"}},
        "[" * 100_000,
        '{"type": "user", "message": {"content": ' + "[" * 5_000 + "]" * 5_000 + "}}",
        {"type": "assistant", "sessionId": session, "timestamp": "2025-01-01T00:00:01Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "name": "Bash", "input": {"deep": [[[["kept"]]]]}}]}},
    ]
    log = tmp_path / f"{session}.jsonl"
    log.write_text("\n".join(line if isinstance(line, str) else json.dumps(line)
                             for line in lines) + "\n", encoding="utf-8")
    for kind in ("claude", "codex"):
        read_turns(str(log), kind)  # no RecursionError, whatever the reader
    meta, turns = read_turns(str(log), "claude")
    assert [(t.role, t.text) for t in turns] == [
        ("user", "before"), ("tool_call", '{"deep": [[[["kept"]]]]}')]


def test_an_export_shows_no_secret_unless_redaction_is_off(tmp_path: Path) -> None:
    secret = "gl" + "pat-xY7zQ2wE9rT4uI1oP6aS"  # made up, built at run time
    path = tmp_path / "s.jsonl"
    lines = [{"type": "user", "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z",
              "message": {"role": "user", "content": f"push with {secret}"}},
             {"type": "assistant", "sessionId": "s", "timestamp": "2026-01-01T00:00:01Z",
              "message": {"role": "assistant", "content": [
                  {"type": "tool_use", "name": "Bash",
                   "input": {"command": "x " * 1990 + f" GITLAB_TOKEN={secret}"}}]}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    meta, turns = read_turns(str(path), "claude")
    for fmt in ("md", "json", "html"):
        assert secret[6:16] not in render(meta, turns, fmt)
    assert turns[0].text == "push with [REDACTED:gitlab_token]"
    assert turns[1].text.endswith("x  …") and "GITLA" not in turns[1].text  # cut before it
    meta, turns = read_turns(str(path), "claude", redacting=False)
    assert secret in turns[0].text


# -- Claude Code transcripts are trees --------------------------------------------------------


def _tree_transcript(cwd: str, session: str) -> list[dict[str, object]]:
    """Three turns, then `--resume-session-at` the first answer and one more turn."""
    from tests.helpers import assistant, user

    entries = []
    parent = None
    for turn in range(3):
        entries.append(user(f"u{turn}", parent, f"prompt {turn}", 2 * turn, session))
        entries.append(assistant(f"a{turn}", f"u{turn}", f"m{turn}", f"r{turn}", 2 * turn + 1,
                                 session))
        parent = f"a{turn}"
    entries.append(user("x-u", "a0", "after the resume-at", 20, session))
    entries.append(assistant("x-a", "x-u", "xm", "xr", 21, session))
    for entry in entries:
        entry["cwd"] = cwd
    return entries


def _prompts(turns: list[object]) -> list[str]:
    return [t.text for t in turns if t.role == "user"]  # type: ignore[attr-defined]


def test_a_claude_transcript_exports_its_live_chain_or_a_branch(tmp_path: Path) -> None:
    from tests.helpers import write_jsonl

    path = tmp_path / "s.jsonl"
    write_jsonl(path, _tree_transcript("/work/app", "s"))  # type: ignore[arg-type]
    meta, turns = read_turns(str(path), "claude")
    assert _prompts(turns) == ["prompt 0", "after the resume-at"]
    assert "warnings" not in meta and "branch" not in meta
    meta, turns = read_turns(str(path), "claude", branch=1)
    assert _prompts(turns) == ["prompt 0", "prompt 1", "prompt 2"]
    assert meta["branch"]["tip"] == "a2" and meta["branch"]["fork_point"] == "a0"
    with pytest.raises(InvalidInput, match="--branch 2: the session has branches 1 to 1"):
        read_turns(str(path), "claude", branch=2)
    with pytest.raises(InvalidInput, match="no branches"):
        read_turns(str(CODEX), "codex", branch=1)


def test_a_broken_chain_exports_its_longest_whole_chain_with_the_warning(tmp_path: Path) -> None:
    from tests.helpers import user, write_jsonl

    path = tmp_path / "s.jsonl"
    entries = _tree_transcript("/work/app", "s")[:6]
    entries.append(user("stray", "nowhere", "edited by hand", 30, "s"))
    write_jsonl(path, entries)  # type: ignore[arg-type]
    meta, turns = read_turns(str(path), "claude")
    assert _prompts(turns) == ["prompt 0", "prompt 1", "prompt 2"]
    [warning] = meta["warnings"]
    assert "broken chain" in warning and "nowhere" in warning
    assert render(meta, turns, "md").splitlines()[2] == f"> {warning}"


@st.composite
def grown_transcripts(draw: st.DrawFn) -> tuple[list[dict[str, object]], list[str]]:
    """A transcript grown turn by turn, each turn continuing the live leaf or (a rewind) an
    earlier answer, with bookkeeping and inline subagent lines in between; and the prompts of
    its live chain."""
    from tests.helpers import assistant, user

    entries: list[dict[str, object]] = []
    parent_of: dict[str, str | None] = {}
    answers: list[str] = []
    leaf: str | None = None
    for turn in range(draw(st.integers(1, 10))):
        if answers and draw(st.booleans()):
            leaf = draw(st.sampled_from(answers))
        entries.append(user(f"u{turn}", leaf, f"prompt {turn}", turn, "s"))
        if draw(st.booleans()):
            entries.append({"type": "summary", "summary": "t", "leafUuid": f"u{turn}"})
        if draw(st.booleans()):
            entries.append(user(f"side{turn}", None, f"subagent {turn}", turn, "s",
                                isSidechain=True))
        entries.append(assistant(f"a{turn}", f"u{turn}", f"m{turn}", f"r{turn}", turn, "s"))
        parent_of[f"u{turn}"], parent_of[f"a{turn}"] = leaf, f"u{turn}"
        answers.append(f"a{turn}")
        leaf = f"a{turn}"
    prompts: list[str] = []
    node: str | None = leaf
    while node is not None:
        if node.startswith("u"):
            prompts.append(f"prompt {node[1:]}")
        node = parent_of[node]
    return entries, prompts[::-1]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.function_scoped_fixture])
@given(grown_transcripts())
def test_random_trees_export_exactly_their_live_chain(
    tmp_path: Path, case: tuple[list[dict[str, object]], list[str]],
) -> None:
    from tests.helpers import write_jsonl

    entries, prompts = case
    path = tmp_path / "s.jsonl"
    write_jsonl(path, entries)  # type: ignore[arg-type]
    meta, turns = read_turns(str(path), "claude")
    assert _prompts(turns) == prompts
    assert [t.role for t in turns] == ["user", "assistant"] * len(prompts)
    data = json.loads(render(meta, turns, "json"))
    assert [t["text"] for t in data["turns"] if t["role"] == "user"] == prompts


@pytest.mark.slow
def test_sessions_show_lists_the_branches_and_export_takes_one(
        repo: Path, isolated_env: Path) -> None:
    from tests.helpers import cos, write_jsonl

    native = "e5c0e5c0-0000-4000-8000-0000000000b1"
    key = "".join(c if c.isalnum() else "-" for c in str(repo))
    write_jsonl(isolated_env / ".claude" / "projects" / key / f"{native}.jsonl",
                _tree_transcript(str(repo), native))  # type: ignore[arg-type]
    listed = json.loads(cos("sessions", "--json", cwd=repo).stdout)
    assert [row["messages"] for row in listed if row["native_id"] == native] == [4]
    shown = cos("sessions", "show", native, cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert "live chain   4 entries, leaf x-a" in shown.stdout
    assert "branch 1     tip a2, 4 entries after a0, first prompt: prompt 1" in shown.stdout
    tree = json.loads(cos("sessions", "show", native, "--json", cwd=repo).stdout)["tree"]
    assert [b["tip"] for b in tree["branches"]] == ["a2"] and tree["warnings"] == []
    live = json.loads(cos("export", native, "--format", "json", cwd=repo).stdout)
    assert [t["text"] for t in live["turns"] if t["role"] == "user"] == [
        "prompt 0", "after the resume-at"]
    branch = json.loads(cos("export", native, "--branch", "1", "--format", "json",
                            cwd=repo).stdout)
    assert [t["text"] for t in branch["turns"] if t["role"] == "user"] == [
        "prompt 0", "prompt 1", "prompt 2"]
    missing = cos("export", native, "--branch", "2", cwd=repo)
    assert missing.returncode != 0 and missing.stdout == ""
    assert missing.stderr.strip().count("\n") == 0 and "branches 1 to 1" in missing.stderr


# -- a page of a conversation costs what the page shows ----------------------------------------


SECRET = "gl" + "pat-xY7zQ2wE9rT4uI1oP6aS"  # made up, built at run time


def _long_cos_session(tiers: Tiers, turns: int, rewind_at: int | None = None,
                      rewind_to: int = 0) -> str:
    """A cos session of `turns` prompts and answers (each answer with a tool call and result,
    every fifth prompt holding a secret); after turn `rewind_at`, a rewind to seq `rewind_to`."""
    sid = transcript.create(tiers, "claude", title="long")
    transcript.set_title(tiers, sid, "long and titled", durability="none")
    for n in range(1, turns + 1):
        text = f"prompt {n}" + (f" with {SECRET}" if n % 5 == 0 else "")
        transcript.append(tiers, sid, "user", {"text": text, "turn": n}, durability="none")
        transcript.append(tiers, sid, "tool_call", {"turn": n, "tool": "Bash",
                                                    "input": {"command": f"echo {n}"},
                                                    "call_id": f"c{n}"}, durability="none")
        transcript.append(tiers, sid, "tool_result", {"turn": n, "call_id": f"c{n}", "ok": True,
                                                      "output": f"{n}"}, durability="none")
        transcript.append(tiers, sid, "assistant", {"text": f"answer {n}", "turn": n},
                          durability="none")
        if n == rewind_at:
            transcript.append(tiers, sid, "rewind", {"to_seq": rewind_to}, durability="none")
    return transcript.transcript_path(tiers, sid)


def _assert_pages_are_slices_of_the_whole(path: str, offsets: list[int], limit: int) -> None:
    meta, whole = read_turns(path, "cos")
    for offset in offsets:
        page = read_page(path, "cos", offset, limit)
        assert page.turns == whole[offset:offset + limit], offset
        assert page.meta == meta
        assert page.more == (offset + limit < len(whole))
        assert page.total in (None, len(whole))
        if not page.more:
            assert page.total == len(whole)


@pytest.mark.parametrize("rewind", [None, (12, 30), (45, 90)],
                         ids=["no-rewind", "rewind-into-the-first-page", "rewind-past-it"])
def test_a_page_of_a_long_cos_session_is_that_slice_of_its_whole_conversation(
        tmp_path: Path, rewind: tuple[int, int] | None) -> None:
    rewind_at, rewind_to = rewind or (None, 0)
    path = _long_cos_session(Tiers(str(tmp_path / ".coding-os")), 60, rewind_at, rewind_to)
    _assert_pages_are_slices_of_the_whole(path, [0, 1, 7, 19, 20, 50, 100, 199, 235, 239],
                                          limit=20)
    meta, whole = read_turns(path, "cos")
    if rewind is None:
        assert len(whole) == 240
    elif rewind == (12, 30):  # seq 30 is turn 8's prompt: the rest of turns 8 to 12 hidden
        assert len(whole) == 240 - 19
    first = read_page(path, "cos", 0, 20)
    assert first.turns[16].text == "prompt 5 with [REDACTED:gitlab_token]"
    assert SECRET not in render(first.meta, first.turns, "json")
    assert read_page(path, "cos", 0, 20, redacting=False).turns[16].text.endswith(SECRET)


def test_a_cos_page_is_read_only_as_far_as_the_page_unless_a_rewind_may_hide_it(
        tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    path = _long_cos_session(tiers, 200)
    report = transcript.ReadReport(path)
    taken = list(itertools.islice(transcript.iter_visible(path, report), 10))
    assert [e["seq"] for e in taken] == list(range(10))
    assert not report.complete and report.lines == 10
    page = read_page(path, "cos", 0, 20)
    assert page.total is None and page.more and len(page.turns) == 20
    last = read_page(path, "cos", 780, 20)
    assert last.total == 800 and not last.more and len(last.turns) == 20

    sid = Path(path).stem
    transcript.append(tiers, sid, "rewind", {"to_seq": 9}, durability="none")
    report = transcript.ReadReport(path)
    taken = list(itertools.islice(transcript.iter_visible(path, report), 12))
    assert report.complete  # seq 10 and on may be hidden: the whole file is read
    assert taken == transcript.read(path).visible()[:12] == transcript.read(path).entries[:10]
    assert read_page(path, "cos", 0, 20).total == 8  # turns 1 and 2 (seqs 2 to 9)


def test_a_rewind_appended_or_a_transcript_replaced_after_a_read_shows_in_the_next_read(
        tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    path = _long_cos_session(tiers, 30)
    sid = Path(path).stem
    assert read_page(path, "cos", 0, 10).more
    transcript.append(tiers, sid, "user", {"text": "x " * 3000, "turn": 31}, durability="none")
    transcript.append(tiers, sid, "rewind", {"to_seq": 4}, durability="none")
    assert list(transcript.iter_visible(path)) == transcript.read(path).visible()
    assert [t.text for t in read_page(path, "cos", 0, 10).turns] == ["prompt 1", '{"command": '
                                                                    '"echo 1"}', "1"]

    other = _long_cos_session(Tiers(str(tmp_path / "other" / ".coding-os")), 5,
                              rewind_at=3, rewind_to=2)
    os.replace(other, path)  # another file at the same path
    assert list(transcript.iter_visible(path)) == transcript.read(path).visible()
    assert read_page(path, "cos", 0, 50).turns == read_turns(path, "cos")[1]
    Path(path).write_bytes(Path(path).read_bytes()[:-1])  # a torn tail: its last newline gone
    assert list(transcript.iter_visible(path)) == transcript.read(path).visible()


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(["user", "assistant", "title", "compact"]),
                          st.integers(0, 40)), max_size=40),
       st.integers(0, 45), st.integers(1, 12))
def test_random_cos_transcripts_page_exactly_as_their_whole_read(
        tmp_path_factory: pytest.TempPathFactory, steps: list[str | int], offset: int,
        limit: int) -> None:
    tiers = Tiers(str(tmp_path_factory.mktemp("t") / ".coding-os"))
    sid = transcript.create(tiers, "claude")
    seq = 0
    for step in steps:
        if isinstance(step, int):  # a rewind to an earlier seq
            fields: dict[str, object] = {"to_seq": min(step, seq)}
            kind = "rewind"
        elif step == "title":
            kind, fields = "title", {"title": f"t{seq}"}
        elif step == "compact":
            kind, fields = "compact", {"text": "c", "from_seq": 0, "to_seq": seq}
        else:
            kind, fields = step, {"text": f"{step} {seq}", "turn": 1}
        seq = transcript.append(tiers, sid, kind, fields, durability="none").seq
    path = transcript.transcript_path(tiers, sid)
    assert list(transcript.iter_visible(path)) == transcript.read(path).visible()
    meta, whole = read_turns(path, "cos")
    if offset and offset >= len(whole):
        assert read_page(path, "cos", offset, limit).turns == []
        return
    _assert_pages_are_slices_of_the_whole(path, [offset], limit)


def test_a_claude_or_codex_page_is_that_slice_of_the_whole_read_with_its_total() -> None:
    for path, kind in ((str(CLAUDE), "claude"), (str(CODEX), "codex")):
        meta, whole = read_turns(path, kind)
        for offset in (0, 3, len(whole) - 2):
            page = read_page(path, kind, offset, 5)
            assert (page.meta, page.turns, page.total) == (meta, whole[offset:offset + 5],
                                                           len(whole))
            assert page.more == (offset + 5 < len(whole))
    with pytest.raises(InvalidInput, match="no branches"):
        read_page(str(CODEX), "codex", 0, 5, branch=1)
    with pytest.raises(InvalidInput, match="offset"):
        read_page(str(CODEX), "codex", -1, 5)


def test_a_claude_transcript_read_for_a_page_is_read_again_once_it_changes(
        tmp_path: Path) -> None:
    from tests.helpers import assistant, user, write_jsonl

    path = tmp_path / "s.jsonl"
    write_jsonl(path, _tree_transcript("/work/app", "s"))  # type: ignore[arg-type]
    page = read_page(str(path), "claude", 0, 2)
    assert _prompts(page.turns) == ["prompt 0"] and page.total == 4 and page.more
    page.meta["title"] = "changed by a caller"
    shape = branches(str(path), "claude")
    assert [b["tip"] for b in shape["branches"]] == ["a2"]
    shape["branches"].clear()
    assert [b["tip"] for b in branches(str(path), "claude")["branches"]] == ["a2"]
    assert "title" not in read_page(str(path), "claude", 2, 2).meta
    assert _prompts(read_page(str(path), "claude", 0, 9, branch=1).turns) == [
        "prompt 0", "prompt 1", "prompt 2"]

    write_jsonl(path, [{"type": "custom-title", "customTitle": "retitled", "sessionId": "s"},
                       user("y-u", "x-a", "one more", 30, "s"),
                       assistant("y-a", "y-u", "ym", "yr", 31, "s")], mode="a")
    page = read_page(str(path), "claude", 2, 9)
    assert page.meta["title"] == "retitled" and page.total == 6 and not page.more
    assert _prompts(page.turns) == ["after the resume-at", "one more"]
    assert branches(str(path), "claude")["live_leaf"] == "y-a"
    path.unlink()
    with pytest.raises(NotFound):
        read_page(str(path), "claude", 0, 9)


def test_a_read_of_the_visible_conversation_continues_where_an_earlier_one_stopped(
        tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    path = _long_cos_session(tiers, 50)
    sid = Path(path).stem
    first = transcript.ReadReport(path)
    taken = list(itertools.islice(transcript.iter_visible(path, first), 30))
    assert first.resume is not None and first.resume.seq == 29
    later = transcript.ReadReport(path)
    rest = list(transcript.iter_visible(path, later, first.resume))
    assert later.resumed and later.lines == 202 - 30  # only the lines after the first 30
    assert taken + rest == transcript.read(path).visible()

    transcript.append(tiers, sid, "rewind", {"to_seq": 100}, durability="none")  # after it
    later = transcript.ReadReport(path)
    rest = list(transcript.iter_visible(path, later, first.resume))
    assert later.resumed and later.resume is None  # the rest read whole, past seq 100
    assert taken + rest == transcript.read(path).visible()

    transcript.append(tiers, sid, "rewind", {"to_seq": 20}, durability="none")  # before it
    again = transcript.ReadReport(path)
    assert list(transcript.iter_visible(path, again, first.resume)) == \
        transcript.read(path).visible()
    assert not again.resumed and again.complete

    other = transcript.ReadReport(path)
    list(itertools.islice(transcript.iter_visible(path, other), 10))
    os.replace(_long_cos_session(Tiers(str(tmp_path / "other" / ".coding-os")), 3), path)
    replaced = transcript.ReadReport(path)
    assert list(transcript.iter_visible(path, replaced, other.resume)) == \
        transcript.read(path).visible()
    assert not replaced.resumed


@pytest.mark.slow
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 25), st.booleans(),
                          st.integers(0, 30), st.integers(1, 8)), min_size=1, max_size=5))
def test_pages_asked_while_a_cos_transcript_grows_and_rewinds_are_slices_of_its_whole_read(
        tmp_path_factory: pytest.TempPathFactory,
        phases: list[tuple[int, int, bool, int, int]]) -> None:
    tiers = Tiers(str(tmp_path_factory.mktemp("t") / ".coding-os"))
    sid = transcript.create(tiers, "claude")
    path = transcript.transcript_path(tiers, sid)
    seq = 0
    # Each phase: a rewind of some entries back, entries appended (prompts, answers, now and
    # then a title), then a page asked, and the one after it.
    for back, added, titled, offset, limit in phases:
        if back and seq:
            seq = transcript.append(tiers, sid, "rewind", {"to_seq": max(0, seq - back)},
                                    durability="none").seq
        for n in range(added):
            kind = "title" if titled and n % 7 == 3 else ("user", "assistant")[n % 2]
            fields = ({"title": f"t{seq}"} if kind == "title"
                      else {"text": f"{kind} {seq}", "turn": 1})
            seq = transcript.append(tiers, sid, kind, fields, durability="none").seq
        _, whole = read_turns(path, "cos")
        for at in (offset, offset + limit):
            page = read_page(path, "cos", at, limit)
            assert page.turns == whole[at:at + limit]
            assert page.more == (at + limit < len(whole))


# -- the HTML page -----------------------------------------------------------------------------


def test_the_html_page_opens_with_the_sessions_facts_and_folds_each_tool_call_under_its_line(
        tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    sid = transcript.create(tiers, "python", title="Fix the build", project="/src/shop",
                            branch="fix/<build>")
    transcript.append(tiers, sid, "user", {"text": "make it pass", "turn": 1})
    transcript.append(tiers, sid, "tool_call", {"turn": 1, "tool": "Bash", "call_id": "c1",
                                                "input": {"command": "make test\n"}})
    transcript.append(tiers, sid, "tool_result", {"turn": 1, "call_id": "c1", "ok": True,
                                                  "output": "\n42 passed\nin 3 s"})
    transcript.append(tiers, sid, "tool_call", {"turn": 1, "tool": "Edit", "call_id": "c2",
                                                "input": {"file_path": "src/app.py"}})
    meta, turns = read_turns(transcript.transcript_path(tiers, sid), "cos")
    tokens = {"input": 12_345, "output": 678, "cached": 10_000, "cache_write": 90,
              "models": ["claude-opus-5"], "cost": 0.0312}
    page = render(meta, turns, "html", {"agent": "claude", "created": "2026-11-29T16:20:00Z",
                                        "tokens": tokens})
    # Its facts: agent, project, branch (escaped), dates, token use, model and cost.
    for fact in ("<dt>agent</dt><dd>claude</dd>", "<dt>project</dt><dd>/src/shop</dd>",
                 "<dt>branch</dt><dd>fix/&lt;build&gt;</dd>",
                 "2026-11-29 16:20:00 UTC</time>", "<dt>last active</dt>",
                 "12,345 in (10,000 read from the cache, 90 written to it) · 678 out",
                 "<dt>model</dt><dd>claude-opus-5</dd>", '<span class="cost">$0.0312</span>'):
        assert fact in page, fact
    # Each tool call folded under what it did; a result under its first line.
    assert '<details class="turn tool_call" id="turn-1"><summary><span class="tool">Bash</span>' \
        '<code class="call">$ make test</code>' in page
    assert '<span class="tool">result</span><code class="call">42 passed</code>' in page
    assert '<span class="tool">Edit</span><code class="call">src/app.py</code>' in page
    # It stands alone with cos web's look: the shared stylesheet inline, nothing fetched.
    assert f"<style>\n{stylesheet()}</style>" in page
    assert "<link" not in page and "<script" not in page and "src=" not in page
    # A model without a price: the page says the cost is not known, never a guess.
    unknown = render(meta, turns, "html", {"tokens": {**tokens, "cost": None}})
    assert "$" not in unknown.split("<main>")[1].split("</header>")[0]
    assert "not known" in unknown


def test_the_json_and_markdown_exports_leave_the_summary_lines_out(tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    sid = transcript.create(tiers, "python")
    transcript.append(tiers, sid, "tool_call", {"turn": 1, "tool": "Bash", "call_id": "c1",
                                                "input": {"command": "ls"}})
    meta, turns = read_turns(transcript.transcript_path(tiers, sid), "cos")
    assert turns[0].summary == "$ ls"
    assert json.loads(render(meta, turns, "json"))["turns"] == [
        {"role": "tool_call", "text": '{"command": "ls"}', "ts": turns[0].ts, "tool": "Bash"}]
    assert "$ ls" not in render(meta, turns, "md")


def test_a_secret_in_a_tool_calls_summary_line_is_redacted_as_its_text_is(
        tmp_path: Path) -> None:
    tiers = Tiers(str(tmp_path / ".coding-os"))
    sid = transcript.create(tiers, "python")
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    transcript.append(tiers, sid, "tool_call", {"turn": 1, "tool": "Bash", "call_id": "c1",
                                                "input": {"command": f"export AWS_KEY={key}"}})
    path = transcript.transcript_path(tiers, sid)
    [call] = read_turns(path, "cos")[1]
    assert call.summary is not None and key not in call.summary and key not in call.text
    assert key in (read_turns(path, "cos", redacting=False)[1][0].summary or "")


def test_cos_export_html_of_a_codex_session_says_its_facts_token_use_and_cost(
        project: Path) -> None:
    copy_codex_fixtures(Path.home() / ".codex")
    done = cos("export", TOOLS, "--format", "html", cwd=project)
    assert done.returncode == 0, done.stderr
    page = done.stdout
    header = page.split('<header class="session">')[1].split("</header>")[0]
    for fact in ("<dt>agent</dt><dd>codex</dd>", "<dt>branch</dt><dd>feat/codex-agent-plugin</dd>",
                 "/repos/codemie-ai/codemie-code</dd>", "<dt>model</dt><dd>gpt-5.5</dd>",
                 "<dt>started</dt>", "<dt>last active</dt>",
                 "6,055,836 in (4,929,536 read from the cache, 0 written to it) · 9,118 out"):
        assert fact in header, fact
    # gpt-5.5: $5 a million fresh input tokens, $0.50 cached, $30 output.
    dollars = ((6_055_836 - 4_929_536) * 5 + 4_929_536 * 0.5 + 9_118 * 30) / 1e6
    assert f'<span class="cost">${dollars:,.2f}</span>' in header
    assert "<code class=\"call\">$ sed -n &#x27;1,180p&#x27; /Users/Sample_User/.codex/" in page


def test_a_gemini_session_exports_its_live_conversation_as_markdown_json_and_html(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path, tmp_path: Path) -> None:
    repo, env = checkout
    copy_gemini_fixtures(isolated_env, repo, tmp_path / "legacy")
    done = cos("export", GEMINI_PLAIN[:8], "--format", "json", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    turns = [(t["role"], t["tool"], t["text"]) for t in exported["turns"]]
    assert exported["meta"]["native_id"] == GEMINI_PLAIN
    # Both prompts of the session and its resume, never the injected context.
    assert [text for role, _, text in turns if role == "user"] == [
        "PLAIN: create notes.txt with alpha and beta, then rename beta.",
        "RESUMED: what does notes.txt hold now?"]
    assert [tool for role, tool, _ in turns if role == "tool_call"] == [
        "run_shell_command", "write_file", "replace", "run_shell_command"]
    assert sum(1 for role, _, _ in turns if role == "tool_result") == 4
    assert ("assistant", None, "notes.txt holds alpha and gamma.") in turns
    assert not any("<session_context>" in text for _, _, text in turns)
    markdown = cos("export", GEMINI_PLAIN, cwd=repo, env=env)
    assert markdown.returncode == 0 and "## Tool call `replace`" in markdown.stdout
    assert "RESUMED: what does notes.txt hold now?" in markdown.stdout
    page = cos("export", GEMINI_PLAIN, "--format", "html", cwd=repo, env=env)
    assert page.returncode == 0 and page.stdout.startswith("<!doctype html>")
    assert "notes.txt holds alpha and gamma." in page.stdout


def test_a_rewound_gemini_prompt_is_not_in_the_export(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path, tmp_path: Path) -> None:
    repo, env = checkout
    copy_gemini_fixtures(isolated_env, repo, tmp_path / "legacy")
    done = cos("export", GEMINI_REWOUND, "--format", "json", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    prompts = [t["text"] for t in json.loads(done.stdout)["turns"] if t["role"] == "user"]
    assert prompts == ["REWIND: write rewind.txt with one line.", "REWIND third prompt"]
