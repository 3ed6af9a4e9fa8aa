"""Codex threads count their live history: what a fork or a revert leaves is read across rollouts.

The fixtures are rollouts the real Codex 0.169.0 wrote through `codex app-server` (a fork with
`lastTurnId`, two reverts in place with `beforeTurnId`), with the live histories the model
requests showed, in fixtures/codex_history/SOURCES.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_os.adapters.codex.rollouts import read_history, scan_codex
from coding_os.adapters.native import NativeSession

HISTORY = Path(__file__).resolve().parent / "fixtures" / "codex_history"
T = "01a234f8-198f-7441-8a98-76c6ad64d4b2"
FORK = "01a234f8-1ae6-7390-84ac-6b35be6969ef"
FIRST_REVERT = "01a234f8-1b35-7430-bba1-694bb8850235"
SECOND_REVERT = "01a234f8-1bdc-7770-9a34-2648d9246976"
TURN = {1: "01a234f8-19a7-7c52-b507-5ff9fe38f7e0", 3: "01a234f8-1a96-7713-a6a5-81ed6a310a89",
        4: "01a234f8-1b78-72c3-87a7-8c5a46c0cead", 5: "01a234f8-1bad-7bd2-8f42-74bccb92987f",
        6: "01a234f8-1d05-7e92-a0df-6b6b0c9c8539"}
LIVE = ["prompt one", "answer to prompt one", "prompt four, in place",
        "answer to prompt four, in place", "prompt six", "answer to prompt six"]


def lay_out(codex_home: Path, names: list[str] | None = None, cwd: str | None = None) -> Path:
    """The fixture rollouts under `codex_home/sessions/2026/12/02` (only `names` if given),
    their cwd rewritten to `cwd` if given."""
    day = codex_home / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True, exist_ok=True)
    for path in sorted(HISTORY.glob("rollout-*.jsonl")):
        if names is not None and not any(name in path.name for name in names):
            continue
        text = path.read_text(encoding="utf-8")
        if cwd is not None:
            text = text.replace("/tmp/f2fx/run/proj", cwd)
        (day / path.name).write_text(text, encoding="utf-8")
    return day


def rollout_of(day: Path, history: str) -> Path:
    (path,) = day.glob(f"rollout-*{history}.jsonl")
    return path


def messages(lines: list[dict[str, Any]]) -> list[str]:
    texts = []
    for entry in lines:
        payload = entry.get("payload") or {}
        if entry.get("type") == "response_item" and payload.get("type") == "message" \
                and payload.get("role") in ("user", "assistant"):
            text = payload["content"][0]["text"]
            if not text.startswith("<"):
                texts.append(text)
    return texts


def sessions(codex_home: Path) -> dict[str, NativeSession]:
    return {s.native_id: s for s in scan_codex(codex_home)[0]}


def test_a_reverted_thread_counts_the_history_codex_resumes(tmp_path: Path) -> None:
    day = lay_out(tmp_path)
    thread = sessions(tmp_path)[T]
    assert (thread.user_messages, thread.assistant_messages) == (3, 3)
    assert (thread.first_prompt, thread.last_prompt) == ("prompt one", "prompt six")
    # The rollout Codex resumes (thread/read's path), then the others of the thread.
    assert thread.path == str(rollout_of(day, SECOND_REVERT))
    assert set(thread.paths) == {str(rollout_of(day, h)) for h in (T, FIRST_REVERT,
                                                                   SECOND_REVERT)}
    assert (thread.branches, thread.tree_warnings, thread.forked_from) == (2, (), None)
    # The last cumulative token count of the live history (prompts one, four and six).
    assert thread.tokens.total == 16954


def test_a_fork_counts_its_base_and_its_own_turns_but_spends_only_its_own(
        tmp_path: Path) -> None:
    lay_out(tmp_path)
    fork = sessions(tmp_path)[FORK]
    assert (fork.user_messages, fork.assistant_messages) == (2, 2)
    assert (fork.first_prompt, fork.last_prompt) == ("prompt one", "prompt four, forked")
    assert (fork.forked_from, fork.branches) == (T, 0)
    # Its token_count includes turn one's, which the original thread spent: left out.
    assert fork.tokens.total == 11246 - 5569


def test_the_live_history_is_what_the_model_was_sent() -> None:
    history = read_history(next(HISTORY.glob(f"rollout-*{SECOND_REVERT}.jsonl")))
    assert (history.thread, history.leaf, history.warnings) == (T, TURN[6], [])
    assert messages(history.live) == LIVE
    fork = read_history(next(HISTORY.glob(f"rollout-*{FORK}.jsonl")))
    assert messages(fork.live) == ["prompt one", "answer to prompt one", "prompt four, forked",
                                   "answer to prompt four, forked"]
    assert fork.branches == []


def test_the_turns_a_revert_dropped_are_listed_as_branches_whichever_rollout_is_read(
        ) -> None:
    for history in (T, FIRST_REVERT, SECOND_REVERT):
        read = read_history(next(HISTORY.glob(f"rollout-*{history}.jsonl")))
        assert messages(read.live) == LIVE, history
        found = [(b["number"], b["tip"], b["fork_point"], b["length"], b["messages"],
                  b["first_prompt"]) for b in read.branches]
        assert found == [(1, TURN[3], TURN[1], 18, 4, "prompt two"),
                         (2, TURN[5], TURN[4], 9, 2, "prompt five")], history


def test_a_revert_found_by_a_later_scan_moves_the_live_history(tmp_path: Path) -> None:
    lay_out(tmp_path, [f"{T}.jsonl"])
    first, state = scan_codex(tmp_path)
    (before,) = first
    assert (before.user_messages, before.last_prompt, before.branches) == (3, "prompt three", 0)
    lay_out(tmp_path, [FIRST_REVERT, SECOND_REVERT])
    after, state = scan_codex(tmp_path, state)
    assert state.report is not None and state.report.files_unchanged == 1
    (thread,) = after
    assert (thread.user_messages, thread.last_prompt, thread.branches) == (3, "prompt six", 2)
    assert thread == sessions(tmp_path)[T]  # the same as a first import


def test_a_missing_base_rollout_is_a_warning_and_the_history_starts_at_its_own_lines(
        tmp_path: Path) -> None:
    day = lay_out(tmp_path, [SECOND_REVERT])
    thread = sessions(tmp_path)[T]
    assert (thread.user_messages, thread.first_prompt) == (1, "prompt six")
    (warning,) = thread.tree_warnings
    assert FIRST_REVERT in warning and "not found" in warning
    history = read_history(rollout_of(day, SECOND_REVERT))
    assert messages(history.live) == ["prompt six", "answer to prompt six"]
    assert history.warnings == [warning]


def line(kind: str, payload: dict[str, Any], second: int) -> dict[str, Any]:
    return {"timestamp": f"2026-04-01T09:00:{second:02d}.000Z", "type": kind, "payload": payload}


def turn(text: str, second: int) -> list[dict[str, Any]]:
    return [line("event_msg", {"type": "task_started", "turn_id": f"turn-{second}"}, second),
            line("response_item", {"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": text}]}, second),
            line("event_msg", {"type": "user_message", "message": text}, second),
            line("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text",
                                                "text": f"answer to {text}"}]}, second)]


def test_a_rollback_recorded_in_the_rollout_drops_its_last_turns(tmp_path: Path) -> None:
    thread = "00000001-0000-7000-8000-000000000000"
    day = tmp_path / "sessions" / "2026" / "04" / "01"
    day.mkdir(parents=True)
    path = day / f"rollout-2026-04-01T09-00-00-{thread}.jsonl"
    lines = [line("session_meta", {"id": thread, "timestamp": "2026-04-01T09:00:00.000Z",
                                   "cwd": "/work/app", "cli_version": "0.125.0"}, 0),
             *turn("one", 1), *turn("two", 2), *turn("three", 3),
             line("event_msg", {"type": "thread_rolled_back", "num_turns": 2}, 4),
             *turn("four", 5)]
    path.write_text("".join(json.dumps(item) + "\n" for item in lines), encoding="utf-8")
    (session,) = scan_codex(tmp_path)[0]
    assert (session.user_messages, session.assistant_messages) == (2, 2)
    assert (session.first_prompt, session.last_prompt) == ("one", "four")
    assert messages(read_history(path).live) == ["one", "answer to one", "four",
                                                  "answer to four"]


@pytest.mark.parametrize("damage", ["loop", "not an ordinal"])
def test_a_damaged_history_base_never_fails_the_import(tmp_path: Path, damage: str) -> None:
    day = lay_out(tmp_path)
    path = rollout_of(day, FIRST_REVERT)
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["payload"]["history_base"] = ({"thread_id": FIRST_REVERT, "end_ordinal_exclusive": 14}
                                        if damage == "loop" else
                                        {"thread_id": T, "end_ordinal_exclusive": "x"})
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    thread = sessions(tmp_path)[T]
    assert thread.last_prompt == "prompt six"
    history = read_history(rollout_of(day, SECOND_REVERT))
    assert messages(history.live)[-2:] == ["prompt six", "answer to prompt six"]
    if damage == "loop":
        assert any("loops" in w for w in thread.tree_warnings)


def test_cos_lists_exports_and_shows_a_reverted_codex_thread(
        repo: Path, isolated_env: Path) -> None:
    from tests.helpers import cos

    lay_out(isolated_env / ".codex", cwd=str(repo))
    listed = json.loads(cos("sessions", "--json", cwd=repo).stdout)
    rows = {row["native_id"]: row for row in listed}
    assert rows[T]["messages"] == 6
    assert rows[FORK]["messages"] == 4 and rows[FORK]["forked_from"] == T
    exported = json.loads(cos("export", T, "--format", "json", cwd=repo).stdout)
    assert [t["text"] for t in exported["turns"]] == LIVE
    shown = cos("sessions", "show", T, cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert f"live chain   36 entries, leaf {TURN[6]}" in shown.stdout
    assert (f"branch 2     tip {TURN[5]}, 9 entries after {TURN[4]}, first prompt: prompt five"
            in shown.stdout)
    shown_json = json.loads(cos("sessions", "show", T, "--json", cwd=repo).stdout)
    # What the picker previews: the live history's first and last prompts.
    assert (shown_json["first_prompt"], shown_json["last_prompt"]) == ("prompt one",
                                                                       "prompt six")
    tree = shown_json["tree"]
    assert [b["first_prompt"] for b in tree["branches"]] == ["prompt two", "prompt five"]
    refused = cos("export", T, "--branch", "1", cwd=repo)
    assert refused.returncode != 0 and refused.stderr.strip().count("\n") == 0


def test_a_thread_whose_rollouts_are_gone_exports_as_a_clear_error(tmp_path: Path) -> None:
    from coding_os.errors import NotFound
    from coding_os.sessions.export import read_turns

    with pytest.raises(NotFound, match="no session log at"):
        read_turns(str(tmp_path / f"rollout-2026-12-02T04-16-44-{T}.jsonl"), "codex")


def test_a_history_read_again_sees_an_appended_turn_and_a_revert_written_since(
        tmp_path: Path) -> None:
    day = lay_out(tmp_path, [f"{T}.jsonl"])
    path = rollout_of(day, T)
    first = read_history(path)
    assert messages(first.live)[-1] == "answer to prompt three"
    assert read_history(path) is first  # unchanged: not parsed again
    with path.open("a", encoding="utf-8") as handle:
        for item in turn("prompt appended", 59):
            handle.write(json.dumps(item) + "\n")
    appended = read_history(path)
    assert messages(appended.live)[-2:] == ["prompt appended", "answer to prompt appended"]
    lay_out(tmp_path, [FIRST_REVERT, SECOND_REVERT])  # new rollouts of the thread
    assert messages(read_history(path).live) == LIVE
