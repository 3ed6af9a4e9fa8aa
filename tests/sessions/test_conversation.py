"""Rewinding and summarising the conversation around a checkpoint (DESIGN.md §5, docs/cli.md
`cos rewind`), through `cos` as a user runs it: a cos-native session gets `rewind` and `summary`
entries and keeps every original; Claude Code and Codex sessions get the agent's own command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from coding_os import api
from tests.helpers import cos, create, fire, one_line_failure, rewind, rewind_ok


ENV = {"COS_AGENT": "claude"}


def native_session(project: Path) -> str:
    """A cos-native session with one turn: a prompt, an edit, a failing command."""
    env = {**os.environ, **ENV}
    where = str(project)
    sid = api.create_session("claude", env=env, cwd=where)
    api.append_event(sid, "user", {"turn": 1, "text": "fix the parser bug"}, env=env, cwd=where)
    api.append_event(sid, "tool_call", {"turn": 1, "tool": "Edit", "call_id": "c1",
                                        "input": {"file_path": "src/parser.py",
                                                  "old_string": "a", "new_string": "b"}},
                     env=env, cwd=where)
    api.append_event(sid, "tool_result", {"turn": 1, "call_id": "c1", "ok": True,
                                          "output": "ok"}, env=env, cwd=where)
    api.append_event(sid, "tool_call", {"turn": 1, "tool": "Bash", "call_id": "c2",
                                        "input": {"command": "pytest -x tests/test_parser.py"}},
                     env=env, cwd=where)
    api.append_event(sid, "tool_result", {"turn": 1, "call_id": "c2", "ok": False,
                                          "output": "error: 1 failed"}, env=env, cwd=where)
    return sid


def second_turn(project: Path, sid: str) -> None:
    env = {**os.environ, **ENV}
    where = str(project)
    api.append_event(sid, "user", {"turn": 2, "text": "now add the docs"}, env=env, cwd=where)
    api.append_event(sid, "tool_call", {"turn": 2, "tool": "Write", "call_id": "c3",
                                        "input": {"file_path": "docs/parser.md",
                                                  "content": "# Parser\n"}},
                     env=env, cwd=where)
    api.append_event(sid, "tool_result", {"turn": 2, "call_id": "c3", "ok": True,
                                          "output": "written"}, env=env, cwd=where)
    api.append_event(sid, "tool_call", {"turn": 2, "tool": "Bash", "call_id": "c4",
                                        "input": {"command": "make docs"}}, env=env, cwd=where)


def entries(project: Path, sid: str) -> list[dict[str, object]]:
    path = project / ".coding-os" / "claude" / "transcripts" / f"{sid}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_manual_checkpoint_of_a_native_session_records_its_seq_and_a_checkpoint_entry(
        project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    log = entries(project, sid)
    assert record["session"] == sid and record["seq"] == 5
    assert log[-1]["type"] == "checkpoint" and log[-1]["checkpoint"] == record["id"]


def test_rewinding_the_conversation_of_a_native_session_appends_a_rewind_to_the_records_seq(
        project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    before = entries(project, sid)
    report = rewind_ok(project, str(record["id"]), "--conversation")
    after = entries(project, sid)
    assert after[:-1] == before  # nothing deleted
    assert after[-1]["type"] == "rewind" and after[-1]["to_seq"] == record["seq"]
    conversation = report["conversation"]
    assert isinstance(conversation, dict)
    assert conversation["kind"] == "cos" and conversation["applied"] is True
    assert conversation["to_seq"] == record["seq"]
    assert "code" not in report


def test_rewind_both_restores_the_code_and_appends_the_rewind_entry(project: Path) -> None:
    sid = native_session(project)
    (project / "parser.py").write_text("v1\n", encoding="utf-8")
    record = create(project, "--session", sid)
    second_turn(project, sid)
    (project / "parser.py").write_text("v2\n", encoding="utf-8")
    (project / "README.md").unlink()
    report = rewind_ok(project, str(record["id"]), "--both")
    assert (project / "parser.py").read_text(encoding="utf-8") == "v1\n"
    assert (project / "README.md").read_text(encoding="utf-8") == "hello\n"
    assert entries(project, sid)[-1] == {**entries(project, sid)[-1], "type": "rewind",
                                         "to_seq": record["seq"]}
    assert report["code"]["applied"] is True  # type: ignore[index]
    assert report["conversation"]["applied"] is True  # type: ignore[index]


def test_a_dry_run_conversation_rewind_appends_nothing(project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    before = entries(project, sid)
    report = rewind_ok(project, str(record["id"]), "--conversation", "--dry-run")
    assert entries(project, sid) == before
    assert report["conversation"]["applied"] is False  # type: ignore[index]


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_an_agents_checkpoint_whose_log_is_gone_rewinds_nothing_with_both(
        project: Path, agent: str) -> None:
    native = "0f3c9a7e-1b2d-4c5e-8f90-000000000001"
    assert fire("SessionStart", {"session_id": native, "source": "startup"}, cwd=project,
                agent=agent).returncode == 0
    assert fire("UserPromptSubmit", {"session_id": native, "prompt": "rename the module"},
                cwd=project, agent=agent).returncode == 0
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    assert len(listed) == 1 and listed[0]["session"].startswith(f"ses-{agent}-")
    assert listed[0]["native"]["agent"] == agent and listed[0]["native"]["native_id"] == native
    (project / "README.md").write_text("changed\n", encoding="utf-8")
    state_before = sorted(str(p) for p in (project / ".coding-os").rglob("*.jsonl"))
    line = one_line_failure(rewind(project, listed[0]["id"], "--both"), 1)
    assert "cannot be rewound" in line
    # Nothing half done: the code stays as it is when the conversation cannot be rewound.
    assert (project / "README.md").read_text(encoding="utf-8") == "changed\n"
    assert sorted(str(p) for p in (project / ".coding-os").rglob("*.jsonl")) == state_before


def _summary_entries(project: Path, sid: str) -> list[dict[str, object]]:
    return [e for e in entries(project, sid) if e["type"] == "summary"]


def test_summarize_up_to_appends_a_summary_of_the_first_seqs_and_keeps_the_originals(
        project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    before = entries(project, sid)
    report = rewind_ok(project, str(record["id"]), "--summarize-up-to")
    after = entries(project, sid)
    assert after[:-1] == before
    summary = after[-1]
    assert summary["type"] == "summary"
    assert (summary["from_seq"], summary["to_seq"]) == (1, record["seq"])
    text = str(summary["text"])
    assert "fix the parser bug" in text and "src/parser.py" in text
    assert "pytest -x tests/test_parser.py" in text and "Errors: none" not in text
    assert "now add the docs" not in text and "make docs" not in text
    assert report["summarizer"] == "default" and report["summary"] == text
    assert report["appended"] == {"seq": summary["seq"], "from_seq": 1,
                                  "to_seq": record["seq"]}


def test_the_default_summary_lists_each_error_with_its_message(project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    report = rewind_ok(project, str(record["id"]), "--summarize-up-to", "--dry-run")
    assert "- error: 1 failed" in str(report["summary"])


def test_summarize_from_appends_a_summary_of_what_followed_the_checkpoint(project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    last = entries(project, sid)[-1]["seq"]
    rewind_ok(project, str(record["id"]), "--summarize-from", "--instructions", "keep it short")
    summary = entries(project, sid)[-1]
    assert summary["type"] == "summary"
    assert (summary["from_seq"], summary["to_seq"]) == (int(str(record["seq"])) + 1, last)
    text = str(summary["text"])
    assert "now add the docs" in text and "docs/parser.md" in text and "make docs" in text
    assert "fix the parser bug" not in text
    assert "keep it short" in text
    assert len([e for e in entries(project, sid) if e["type"] == "user"]) == 2


def test_a_dry_run_summary_prints_it_and_appends_nothing(project: Path) -> None:
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    before = entries(project, sid)
    report = rewind_ok(project, str(record["id"]), "--summarize-from", "--dry-run")
    assert entries(project, sid) == before
    assert report["appended"] is None and "now add the docs" in str(report["summary"])


SUMMARIZER = """\
import sys
text = sys.stdin.read()
print("SUMMARY lines=%d has-docs=%s" % (len(text.splitlines()), "now add the docs" in text))
"""


def _configure(project: Path, command: str) -> None:
    """Configure `command` as the summariser, and trust the file as the user would."""
    (project / ".coding-os.yaml").write_text(
        f"summarizer:\n  command: {json.dumps(command)}\n", encoding="utf-8")
    assert cos("trust", cwd=project).returncode == 0


@pytest.mark.slow
def test_a_configured_summarizer_command_gets_the_text_on_stdin_and_its_stdout_is_the_summary(
        project: Path, tmp_path: Path) -> None:
    script = tmp_path / "summarize.py"
    script.write_text(SUMMARIZER, encoding="utf-8")
    _configure(project, f"{sys.executable} {script}")
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    report = rewind_ok(project, str(record["id"]), "--summarize-from")
    summary = entries(project, sid)[-1]
    assert summary["type"] == "summary"
    assert str(summary["text"]).startswith("SUMMARY lines=") and "has-docs=True" in \
        str(summary["text"])
    assert report["summarizer"] == f"{sys.executable} {script}"


def test_a_failing_summarizer_command_exits_1_with_one_line_and_appends_nothing(
        project: Path, tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("import sys\nsys.stderr.write('model unavailable\\n')\nsys.exit(3)\n",
                      encoding="utf-8")
    _configure(project, f"{sys.executable} {script}")
    sid = native_session(project)
    record = create(project, "--session", sid)
    second_turn(project, sid)
    before = entries(project, sid)
    line = one_line_failure(rewind(project, str(record["id"]), "--summarize-from"), 1)
    assert "exited 3" in line and "model unavailable" in line
    assert entries(project, sid) == before


def test_a_summarizer_command_not_on_path_exits_1_with_one_line(project: Path) -> None:
    _configure(project, "no-such-summarizer-anywhere -p")
    sid = native_session(project)
    record = create(project, "--session", sid)
    line = one_line_failure(rewind(project, str(record["id"]), "--summarize-up-to"), 1)
    assert "no-such-summarizer-anywhere" in line


@pytest.mark.slow
@pytest.mark.parametrize("how", [("--conversation",), ("--summarize-up-to",),
                                 ("--summarize-from",)])
def test_a_checkpoint_of_no_session_exits_2_for_conversation_and_summaries(
        project: Path, how: tuple[str, ...]) -> None:
    record = create(project)
    assert record["session"] is None
    line = one_line_failure(rewind(project, str(record["id"]), *how), 2)
    assert "no session" in line
