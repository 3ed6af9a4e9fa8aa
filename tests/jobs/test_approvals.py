"""What a job's approval request shows (jobs/approvals.py): the request as the runner keeps it
in the job's state, for the requests of Claude Code's tools and Codex's approvals."""

from __future__ import annotations

from coding_os.jobs.approvals import DIFF_MAX, pending, summary


def test_a_shell_command_request_shows_its_command_and_no_diff() -> None:
    asked = pending({"type": "approval_request", "request": "toolu_1", "tool": "Bash",
                     "input": {"command": "rm -rf build", "description": "clean"}})
    assert asked == {"request": "toolu_1", "tool": "Bash", "command": "rm -rf build",
                     "path": None, "diff": None}
    assert summary(asked) == "Bash rm -rf build (request toolu_1)"


def test_an_edit_request_shows_its_path_and_the_change_as_a_diff() -> None:
    asked = pending({"request": 7, "tool": "Edit",
                     "input": {"file_path": "/p/app.py", "old_string": "a = 1\nb = 2\n",
                               "new_string": "a = 1\nb = 3\n"}})
    assert asked["path"] == "/p/app.py" and asked["command"] is None
    assert asked["diff"].splitlines() == ["--- a//p/app.py", "+++ b//p/app.py",
                                          "@@ -1,2 +1,2 @@", " a = 1", "-b = 2", "+b = 3"]
    several = pending({"request": 8, "tool": "MultiEdit", "input": {
        "file_path": "/p/x", "edits": [{"old_string": "1", "new_string": "2"},
                                       {"old_string": "3", "new_string": "4"}]}})
    assert ["-1", "+2", "-3", "+4"] == [line for line in several["diff"].splitlines()
                                        if line[:1] in "+-" and line[:3] not in ("---", "+++")]


def test_a_codex_command_as_words_and_a_codex_patch_are_shown() -> None:
    command = pending({"request": 0, "tool": "commandExecution",
                       "input": {"command": ["git", "push"], "cwd": "/p"}})
    assert command["command"] == "git push"
    patch = pending({"request": 1, "tool": "fileChange", "input": {"changes": [
        {"path": "/p/a.txt", "kind": {"type": "update"}, "diff": "@@ -1 +1 @@\n-x\n+y\n"},
        {"path": "/p/b.txt", "kind": {"type": "add"}, "diff": "@@ -0,0 +1 @@\n+new\n"}]}})
    assert patch["path"] == "/p/a.txt and 1 more" and patch["command"] is None
    assert "+++ b//p/b.txt\n@@ -0,0 +1 @@\n+new\n" in patch["diff"]


def test_a_huge_request_is_kept_bounded() -> None:
    asked = pending({"request": "r", "tool": "Write",
                     "input": {"file_path": "/p/big", "content": "line\n" * 100_000}})
    assert len(asked["diff"]) == DIFF_MAX and asked["diff"].endswith("…")
    long = pending({"request": "r", "tool": "Bash", "input": {"command": "x" * 10_000}})
    assert len(long["command"]) == 2000
    assert len(summary(long)) < 200
    other = pending({"request": "r", "tool": "WebFetch", "input": {"url": "https://e.org"}})
    assert other["command"] == '{"url": "https://e.org"}'
