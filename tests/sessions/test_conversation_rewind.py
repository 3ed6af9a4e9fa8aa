"""The conversation half of a rewind of a Claude Code or Codex session (sessions/conversation.py):
the point the agent goes back to, found from the checkpoint's native point in the agent's own
log (entries shaped as Claude Code 2.1.328 and Codex 0.169 write them), the handover, and the
refusals when the point cannot be found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_os.errors import InvalidInput, NotFound
from coding_os.sessions.conversation import pending_handover, plan_rewind
from coding_os.state.tiers import Tiers
from tests.helpers import cos, create, fire, one_line_failure, rewind

NATIVE = "4462f16d-9c60-48b8-ba22-1d179c89494c"
SESSION = "ses-claude-20261202-040902-7804"


def claude_transcript(path: Path, cwd: str) -> Path:
    """Two turns as Claude Code writes them: prompt, attachments, answer, stop summary."""
    entries: list[dict[str, Any]] = []
    parent = None
    for turn, prompt_id in ((1, "pid-1"), (2, "pid-2")):
        for uuid, kind, extra in ((f"u{turn}", "user", {"promptId": prompt_id,
                                                        "message": {"role": "user",
                                                                    "content": f"P{turn}"}}),
                                  (f"att{turn}", "attachment", {}),
                                  (f"a{turn}", "assistant", {"message": {
                                      "role": "assistant",
                                      "content": [{"type": "text", "text": f"A{turn}"}]}}),
                                  (f"s{turn}", "system", {"subtype": "stop_hook_summary"})):
            entries.append({"type": kind, "uuid": uuid, "parentUuid": parent, "cwd": cwd,
                            "sessionId": NATIVE, **extra})
            parent = uuid
        entries.append({"type": "last-prompt", "sessionId": NATIVE})
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


def record(native: dict[str, Any] | None, trigger: str = "prompt",
           session: str = SESSION) -> dict[str, Any]:
    found: dict[str, Any] = {"id": "cp-20261202-040916-000-abcd", "session": session,
                             "trigger": trigger, "root": "/work/project", "turn": 2,
                             "ts": "2026-12-02T04:09:16.000Z"}
    if native is not None:
        found["native"] = native
    return found


def claude_point(path: Path, uuid: str | None, prompt_id: str | None = "pid-2") -> dict[str, Any]:
    return {"agent": "claude", "native_id": NATIVE, "transcript": str(path), "uuid": uuid,
            "prompt_id": prompt_id}


@pytest.mark.parametrize("leaf", ["s1", "u2"])
def test_a_prompt_checkpoint_goes_back_to_the_last_answer_before_the_prompt(
        tiers: Tiers, tmp_path: Path, leaf: str) -> None:
    # The leaf the hook read is the stop summary of turn 1, or the prompt itself when Claude
    # Code wrote it before the hook ran: either way the point is turn 1's answer.
    path = claude_transcript(tmp_path / f"{NATIVE}.jsonl", "/work/project")
    plan = plan_rewind(tiers, record(claude_point(path, leaf)))
    assert plan.available and plan.point["uuid"] == "a1"
    report = plan.apply(tiers, dry_run=True)
    argv = report["handover"]["argv"]
    assert argv[:5] == ["claude", "--resume", NATIVE, "--resume-session-at", "a1"]
    assert argv[5] == "--fork-session" and argv[6] == "--session-id"
    assert report["handover"]["cwd"] == "/work/project" and report["applied"] is False


def test_in_place_hands_over_the_same_session_without_a_fork(tiers: Tiers,
                                                              tmp_path: Path) -> None:
    path = claude_transcript(tmp_path / f"{NATIVE}.jsonl", "/work/project")
    report = plan_rewind(tiers, record(claude_point(path, "s1")), in_place=True).apply(
        tiers, dry_run=False)
    assert report["handover"]["argv"] == ["claude", "--resume", NATIVE, "--resume-session-at",
                                          "a1"]
    assert report["rewound_session"] == SESSION
    # Resuming the session runs the handover until Claude Code has written past the old leaf.
    assert pending_handover(tiers, SESSION) == report["handover"]
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"type": "user", "uuid": "u4", "parentUuid": "a1"}) + "\n")
    assert pending_handover(tiers, SESSION) is None


def test_a_fork_is_a_new_session_pending_until_its_transcript_exists(
        tiers: Tiers, tmp_path: Path) -> None:
    path = claude_transcript(tmp_path / f"{NATIVE}.jsonl", "/work/project")
    report = plan_rewind(tiers, record(claude_point(path, "s1"))).apply(tiers, dry_run=False)
    new = report["rewound_session"]
    assert new != SESSION and new.startswith("ses-claude-")
    assert pending_handover(tiers, new) == report["handover"]
    (tmp_path / f"{report['new_native_id']}.jsonl").write_text("", encoding="utf-8")
    assert pending_handover(tiers, new) is None


def test_the_first_prompts_checkpoint_starts_a_new_conversation(tiers: Tiers,
                                                                tmp_path: Path) -> None:
    path = claude_transcript(tmp_path / f"{NATIVE}.jsonl", "/work/project")
    plan = plan_rewind(tiers, record(claude_point(path, None, "pid-1")))
    assert plan.point["uuid"] is None
    argv = plan.apply(tiers, dry_run=True)["handover"]["argv"]
    assert argv[:2] == ["claude", "--session-id"] and "--resume" not in argv


def test_a_turn_end_checkpoint_keeps_its_turn(tiers: Tiers, tmp_path: Path) -> None:
    path = claude_transcript(tmp_path / f"{NATIVE}.jsonl", "/work/project")
    plan = plan_rewind(tiers, record(claude_point(path, "a2"), trigger="turn-end"))
    assert plan.point["uuid"] == "a2"


def test_a_native_point_missing_from_the_transcript_is_refused(tiers: Tiers,
                                                               tmp_path: Path) -> None:
    path = claude_transcript(tmp_path / f"{NATIVE}.jsonl", "/work/project")
    edited = path.read_text(encoding="utf-8").replace('"s1"', '"s1-edited"')
    path.write_text(edited, encoding="utf-8")
    with pytest.raises(NotFound, match="is not in"):
        plan_rewind(tiers, record(claude_point(path, "s1")))
    with pytest.raises(NotFound, match="is not in"):
        plan_rewind(tiers, record(claude_point(path, None, "pid-gone")))


def test_a_checkpoint_without_a_native_point_says_the_conversation_is_unavailable(
        tiers: Tiers) -> None:
    plan = plan_rewind(tiers, record(None))
    assert plan.available is False and "unavailable" in plan.note
    assert plan.apply(tiers, dry_run=False)["applied"] is False


def test_a_checkpoint_of_no_session_is_refused(tiers: Tiers) -> None:
    with pytest.raises(InvalidInput, match="belongs to no session"):
        plan_rewind(tiers, {"id": "cp-x", "session": None})


def codex_rollout(path: Path, turns: list[str]) -> Path:
    lines: list[dict[str, Any]] = [{"type": "session_meta", "payload": {
        "id": "thread-1", "cwd": "/work/project"}}]
    for number, turn in enumerate(turns):
        lines += [{"timestamp": f"2026-12-02T04:0{number}:00.000Z", "type": "event_msg",
                   "payload": {"type": "task_started", "turn_id": turn}},
                  {"type": "turn_context", "payload": {"turn_id": turn}},
                  {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def codex_record(path: Path, turn: str | None, trigger: str = "prompt",
                 ts: str = "") -> dict[str, Any]:
    found = record({"agent": "codex", "native_id": "thread-1", "transcript": str(path),
                    "turn_id": turn}, trigger=trigger,
                   session="ses-codex-20261202-040902-7804")
    found["ts"] = ts
    return found


def test_a_codex_prompt_checkpoint_forks_through_the_turn_before_it_or_reverts_before_it(
        tiers: Tiers, tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "rollout-x-thread-1.jsonl", ["t1", "t2", "t3"])
    plan = plan_rewind(tiers, codex_record(path, "t2"))
    assert (plan.point["through"], plan.point["before"]) == ("t1", "t2")
    ended = plan_rewind(tiers, codex_record(path, "t2", trigger="turn-end"))
    assert (ended.point["through"], ended.point["before"]) == ("t2", "t3")
    first = plan_rewind(tiers, codex_record(path, "t1")).apply(tiers, dry_run=True)
    assert first["handover"]["argv"] == ["codex"]  # nothing before the first turn


def test_an_engine_checkpoint_finds_its_turn_by_time(tiers: Tiers, tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "rollout-x-thread-1.jsonl", ["t1", "t2", "t3"])
    plan = plan_rewind(tiers, codex_record(path, None, ts="2026-12-02T04:00:30.000Z"))
    assert (plan.point["through"], plan.point["before"]) == ("t1", "t2")


def test_a_codex_turn_missing_from_the_rollout_is_refused(tiers: Tiers,
                                                         tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "rollout-x-thread-1.jsonl", ["t1", "t2"])
    with pytest.raises(NotFound, match="turn t9"):
        plan_rewind(tiers, codex_record(path, "t9"))


@pytest.mark.slow
def test_an_old_checkpoint_rewinds_the_code_with_both_and_refuses_conversation_alone(
        project: Path) -> None:
    native = "0f3c9a7e-1b2d-4c5e-8f90-000000000002"
    assert fire("SessionStart", {"session_id": native, "source": "startup"},
                cwd=project).returncode == 0
    assert fire("UserPromptSubmit", {"session_id": native, "prompt": "go"},
                cwd=project).returncode == 0
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    checkpoint = listed[0]["id"]
    stored = project / ".coding-os" / "checkpoints" / "points" / f"{checkpoint}.json"
    old = json.loads(stored.read_text(encoding="utf-8"))
    del old["native"]  # as cos wrote records before it kept native points
    stored.write_text(json.dumps(old), encoding="utf-8")
    (project / "README.md").write_text("changed\n", encoding="utf-8")
    line = one_line_failure(rewind(project, checkpoint, "--conversation"), 2)
    assert "unavailable" in line
    assert (project / "README.md").read_text(encoding="utf-8") == "changed\n"
    proc = rewind(project, checkpoint, "--both", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["conversation"]["available"] is False
    assert (project / "README.md").read_text(encoding="utf-8") == "hello\n"
    assert create(project)["id"]  # the store still works after it
