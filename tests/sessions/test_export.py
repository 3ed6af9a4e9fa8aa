"""Export of a conversation as Markdown, JSON and HTML, from each kind of session log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions import transcript
from coding_os.sessions.export import read_turns, render
from coding_os.state.tiers import Tiers

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
CLAUDE = FIXTURES / "claude" / "claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
CODEX = FIXTURES / "codex" / ("madshn__localpush__rollout-2026-02-23T13-19-38-"
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


def test_bad_format_kind_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="format"):
        render({}, [], "pdf")
    with pytest.raises(InvalidInput, match="kind"):
        read_turns(str(CLAUDE), "gemini")
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
