"""`cos hook` fed bad input or a broken state dir (interfaces/hook.py): one line on stderr, exit 1
(or 3 for a misroute), never 2 (which would block the agent), no traceback, and whatever the
project had stored before left exactly as it was."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_os import api
from coding_os.state.hookslog import MAX_VALUE, parse_line
from coding_os.state.identity import sanitize_panel_id
from tests.helpers import COS, cos, needs_namespaces


ENV = {"COS_AGENT": "claude", "COS_PANEL_ID": "panel-1"}
NATIVE = "7d1c2b3a-0000-4000-8000-000000000001"
PANEL_RE = r"[A-Za-z0-9._-]{1,64}"
SQLITE_SIDE = ("coding-os.db-wal", "coding-os.db-shm")
# What an agent's panel leaves behind: a session, prompts, tool calls, a stop (the database).
SEED = (
    ("SessionStart", {"source": "startup"}),
    ("UserPromptSubmit", {"prompt": "fix the bug"}),
    ("PostToolUse", {"tool_name": "Bash", "tool_input": {"command": "make test"},
                     "tool_response": {"stdout": "ok"}}),
    ("Stop", {"last_assistant_message": "done"}),
)


def seed(repo: Path) -> Path:
    """Store state the way a working panel does; return the state dir. The set-up is not what
    these tests check: its hooks and `state set` run in process, through the library entries
    `cos hook` and `cos state set` call (five processes fewer per test); the bad input after it
    goes through the real `cos hook`."""
    env = {**os.environ, **ENV}
    for event, payload in SEED:
        result = api.hook(event, {"hook_event_name": event, "cwd": str(repo),
                                  "session_id": NATIVE, **payload}, env=env, cwd=str(repo))
        assert result.exit_code == 0, result.message
    api.state_set(".task-current", "TASK-7", env=env, cwd=str(repo))
    state = repo / ".coding-os"
    assert (state / "coding-os.db").is_file() and (state / ".hooks.log").is_file()
    return state


def snapshot(root: Path) -> tuple[dict[str, bytes], set[str]]:
    """Every file's bytes and every directory under `root` (symlinks are not followed)."""
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for top, dirnames, filenames in os.walk(root):
        for name in dirnames:
            dirs.add(os.path.relpath(os.path.join(top, name), root))
        for name in filenames:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            files[rel] = b"<symlink>" if os.path.islink(path) else Path(path).read_bytes()
    return files, dirs


def assert_one_line_failure(proc: subprocess.CompletedProcess[str], code: int,
                            prefix: str = "cos hook: ") -> str:
    """The documented failure: exit `code`, one line on stderr, nothing on stdout; from a hook
    never exit 2, which would block the agent."""
    if prefix == "cos hook: ":
        assert proc.returncode != 2, "exit 2 would block the agent"
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr, "bad input reported as a bug in cos"
    assert proc.stderr.startswith(prefix), proc.stderr
    return proc.stderr[len(prefix):-1]


def assert_unchanged(before: tuple[dict[str, bytes], set[str]],
                     after: tuple[dict[str, bytes], set[str]], log: str,
                     error_lines: tuple[int, ...] = (0,)) -> list[dict[str, str | None]]:
    """Same directories, same files, same bytes; the hooks log only gained error lines.

    SQLite's own -wal and -shm files are left out: it may create them empty when it opens the
    database, and the database file itself is compared byte for byte."""
    (old_files, old_dirs), (new_files, new_dirs) = before, after
    old_files = {rel: data for rel, data in old_files.items() if not rel.endswith(SQLITE_SIDE)}
    new_files = {rel: data for rel, data in new_files.items() if not rel.endswith(SQLITE_SIDE)}
    assert new_dirs == old_dirs
    assert set(new_files) == set(old_files)
    changed = sorted(rel for rel in old_files if old_files[rel] != new_files[rel] and rel != log)
    assert changed == []
    old_log, new_log = old_files[log], new_files[log]
    assert new_log.startswith(old_log), "earlier hooks-log lines were changed"
    added = [parse_line(line) for line in new_log[len(old_log):].decode().splitlines(True)]
    assert len(added) in error_lines
    for fields in added:
        assert fields is not None and fields.get("error"), added
    return added  # type: ignore[return-value]


# Bad payloads, bad event names, bad agents.

VALID = {"session_id": NATIVE, "tool_name": "Bash", "tool_input": {"command": "ls"}}
BAD_PAYLOADS = {
    "malformed JSON": b'{"session_id": "' + NATIVE.encode() + b'", "tool_name": "Bash"',
    "empty stdin": b"",
    "only whitespace": b" \n\t\r\n",
    "not UTF-8": b'{"session_id": "\xff\xfe"}',
    "a JSON array": json.dumps([VALID]).encode(),
    "a JSON string": b'"PostToolUse"',
    "JSON null": b"null",
    "trailing data": json.dumps(VALID).encode() + b" {}",
    "two objects": json.dumps(VALID).encode() * 2,
    "nesting too deep": b'{"tool_input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "session_id a number": json.dumps({**VALID, "session_id": 42}).encode(),
    "session_id an object": json.dumps({**VALID, "session_id": {"id": NATIVE}}).encode(),
}
# Other fields of an unexpected type: clients drift, so the hook carries on without them and
# says so in the log (only the identity field, session_id, is strict).
DRIFTED_FIELDS = {
    "tool_name a list": ("tool_name", ["Bash"]),
    "cwd an object": ("cwd", {"path": "/"}),
    "source a boolean": ("source", True),
    "prompt a number": ("prompt", 3),
    "hook_event_name a number": ("hook_event_name", 1),
    "transcript_path a list": ("transcript_path", ["/x"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("event", ["PostToolUse", "SessionStart", "UserPromptSubmit"])
@pytest.mark.parametrize("field,value", DRIFTED_FIELDS.values(), ids=DRIFTED_FIELDS.keys())
def test_a_field_of_an_unexpected_type_is_logged_and_ignored(
        repo: Path, event: str, field: str, value: object) -> None:
    seed(repo)
    proc = cos("hook", event, cwd=repo, env=ENV,
               input=json.dumps({**VALID, field: value}).encode())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    last = (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8").splitlines()[-1]
    fields = parse_line(last + "\n")
    assert fields is not None and fields["event"] == event and fields["bad_fields"] == field


@pytest.mark.slow
@pytest.mark.parametrize("event", ["PostToolUse", "SessionStart"])
@pytest.mark.parametrize("data", BAD_PAYLOADS.values(), ids=BAD_PAYLOADS.keys())
def test_a_bad_payload_exits_1_with_one_line_and_changes_no_stored_state(
        repo: Path, tmp_path: Path, data: bytes, event: str) -> None:
    state = seed(repo)
    before = snapshot(tmp_path)
    proc = cos("hook", event, cwd=repo, env=ENV, input=data)
    message = assert_one_line_failure(proc, 1)
    [logged] = assert_unchanged(before, snapshot(tmp_path), str(state.relative_to(tmp_path) /
                                                                 ".hooks.log"), (1,))
    assert logged["event"] == event and logged["error"] == message


@pytest.mark.slow
@pytest.mark.parametrize("args", [["../x"], [""], ["Post Tool"], ["Pre-ToolUse"], ["a" * 65],
                                  ["Événement"], ["PostToolUse", "extra"], []],
                         ids=["dotdot", "empty", "space", "dash", "too long", "non-ascii",
                              "two arguments", "none"])
def test_an_invalid_event_name_argument_exits_1_and_changes_no_stored_state(
        repo: Path, tmp_path: Path, args: list[str]) -> None:
    state = seed(repo)
    before = snapshot(tmp_path)
    proc = cos("hook", *args, cwd=repo, env=ENV, input=json.dumps(VALID).encode())
    assert_one_line_failure(proc, 1)
    added = assert_unchanged(before, snapshot(tmp_path),
                             str(state.relative_to(tmp_path) / ".hooks.log"), (0, 1))
    # The failure is logged under a valid event name or none, never under the bad one.
    events = [fields["event"] for fields in added]
    assert all(e is None or re.fullmatch("[A-Za-z0-9]{1,64}", e) for e in events), events


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["../x", "..", "Claude", "panels", "a" * 40, "claude/../x"])
def test_an_invalid_cos_agent_exits_1_and_creates_no_directory(
        repo: Path, tmp_path: Path, agent: str) -> None:
    state = seed(repo)
    before = snapshot(tmp_path)
    proc = cos("hook", "PostToolUse", cwd=repo, env={**ENV, "COS_AGENT": agent},
               input=json.dumps(VALID).encode())
    assert "invalid agent name" in assert_one_line_failure(proc, 1)
    assert_unchanged(before, snapshot(tmp_path), str(state.relative_to(tmp_path) / ".hooks.log"),
                     (1,))


# Hostile panel and session ids.

HOSTILE_IDS = {
    "dotdot escape": "../../../../escape",
    "dotdot": "..",
    "dot": ".",
    "inner dotdot": "a/../../b",
    "absolute path": "/etc/cron.d",
    "leading dash": "-rf",
    "spaces": "a b c",
    "sixty-five characters": "x" * 65,
}
# Ids a hook may refuse as bad input (they cannot be stored beside the session as they are).
REFUSABLE_IDS = {
    "ten thousand characters": "x" * 10_000,
    "ten thousand slashes": "../" * 3_334,
    "NUL": "a\x00b",
    "newline": "a\nb",
    "lone surrogate": "\ud800",
}


@pytest.mark.slow
@pytest.mark.parametrize("event", ["SessionStart", "PostToolUse"])
@pytest.mark.parametrize("raw", [*HOSTILE_IDS.values(), *REFUSABLE_IDS.values()],
                         ids=[*HOSTILE_IDS, *REFUSABLE_IDS])
def test_a_hostile_session_id_never_creates_a_directory_outside_the_panels_dir(
        repo: Path, tmp_path: Path, raw: str, event: str) -> None:
    state = seed(repo)
    before_files, before_dirs = snapshot(tmp_path)
    payload = {"session_id": raw, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    proc = cos("hook", event, cwd=repo, env={"COS_AGENT": "claude"},
               input=json.dumps(payload).encode())
    after_files, after_dirs = snapshot(tmp_path)
    panels = state.relative_to(tmp_path) / "claude" / "panels"
    new_dirs = after_dirs - before_dirs
    assert all(Path(d).parent == panels and re.fullmatch(PANEL_RE, Path(d).name)
               and Path(d).name not in (".", "..") for d in new_dirs), new_dirs
    assert len(new_dirs) <= 1
    state_rel = str(state.relative_to(tmp_path))
    assert all(rel.startswith(state_rel + os.sep) for rel in set(after_files) - set(before_files))
    if raw in REFUSABLE_IDS.values():
        assert proc.returncode in (0, 1)
        if proc.returncode == 1:
            assert_one_line_failure(proc, 1)
            return
    assert (proc.returncode, proc.stderr) == (0, "")
    assert new_dirs == {str(panels / sanitize_panel_id(raw))}
    last = parse_line(after_files[str(Path(state_rel) / ".hooks.log")].decode().splitlines()[-1])
    assert last is not None and last["panel"] == sanitize_panel_id(raw)
    # The native id is logged beside the panel, cut to the log's value limit.
    assert last["native"] == (raw if len(raw) <= MAX_VALUE else raw[:MAX_VALUE - 1] + "…")


@pytest.mark.slow
@pytest.mark.parametrize("raw", ["../x", "..", "x" * 10_000, "/tmp/evil", "a/../../b"])
def test_a_hostile_cos_panel_id_never_creates_a_directory_outside_the_panels_dir(
        repo: Path, tmp_path: Path, raw: str) -> None:
    state = seed(repo)
    before_dirs = snapshot(tmp_path)[1]
    proc = cos("hook", "PostToolUse", cwd=repo, env={"COS_AGENT": "claude", "COS_PANEL_ID": raw},
               input=json.dumps(VALID).encode())
    assert (proc.returncode, proc.stderr) == (0, "")
    panels = state.relative_to(tmp_path) / "claude" / "panels"
    assert snapshot(tmp_path)[1] - before_dirs == {str(panels / sanitize_panel_id(raw))}
    assert re.fullmatch(PANEL_RE, sanitize_panel_id(raw))
    assert not Path("/tmp/evil").exists()


# A huge payload.

def test_a_10_mb_payload_succeeds_and_the_log_keeps_only_a_bounded_excerpt(repo: Path) -> None:
    state = seed(repo)
    log_before = (state / ".hooks.log").stat().st_size
    spool_before = (state / ".observations.jsonl").stat().st_size
    command = "echo " + "y" * 5_000_000
    payload = {"session_id": NATIVE, "tool_name": "Bash", "tool_input": {"command": command},
               "tool_response": {"stdout": "z" * 5_000_000, "stderr": ""}}
    data = json.dumps(payload).encode()
    assert len(data) > 10_000_000
    proc = cos("hook", "PostToolUse", cwd=repo, env=ENV, input=data)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    lines = (state / ".hooks.log").read_text(encoding="utf-8").splitlines()
    last = parse_line(lines[-1])
    assert last is not None and last["event"] == "PostToolUse"
    assert last["input"] == command[:3999] + "…"
    assert (state / ".hooks.log").stat().st_size - log_before < 8192
    assert (state / ".observations.jsonl").stat().st_size - spool_before < 8192


# Misroutes: exit 3 and nothing written anywhere.

@pytest.mark.parametrize("event", ["SessionStart", "PostToolUse", "Stop"])
def test_a_state_dir_that_is_a_symlink_elsewhere_exits_3_and_writes_nothing_there(
        repo: Path, tmp_path: Path, event: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("untouched\n", encoding="utf-8")
    (repo / ".coding-os").symlink_to(elsewhere)
    before = snapshot(tmp_path)
    proc = cos("hook", event, cwd=repo, env=ENV,
               input=json.dumps({**VALID, "source": "startup"}).encode())
    assert "COS_STATE_MISROUTE" in assert_one_line_failure(proc, 3)
    assert snapshot(tmp_path) == before
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]


def test_a_hook_fired_in_home_exits_3_and_creates_no_hub_state(isolated_env: Path) -> None:
    before = snapshot(isolated_env)
    proc = cos("hook", "SessionStart", cwd=isolated_env, env=ENV, input=json.dumps(VALID).encode())
    assert "COS_STATE_MISROUTE" in assert_one_line_failure(proc, 3)
    assert snapshot(isolated_env) == before
    assert not (isolated_env / ".coding-os").exists()


# A read-only state dir and a full disk, in a private mount namespace.


@needs_namespaces
@pytest.mark.parametrize("event", ["PostToolUse", "UserPromptSubmit", "Stop", "SessionStart"])
def test_a_read_only_state_dir_exits_1_with_one_line_and_changes_nothing(
        repo: Path, tmp_path: Path, event: str) -> None:
    state = seed(repo)
    before = snapshot(tmp_path)
    script = ('mount --bind "$STATE" "$STATE" && mount -o remount,bind,ro "$STATE" '
              '&& exec "$0" "$@"')
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, COS, "hook", event], cwd=repo,
        env={**os.environ, **ENV, "STATE": str(state)},
        input=json.dumps({**VALID, "source": "startup", "prompt": "p"}).encode(),
        capture_output=True, timeout=60)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(),
                                         proc.stderr.decode())
    assert "read-only file system" in assert_one_line_failure(result, 1)
    assert_unchanged(before, snapshot(tmp_path), str(state.relative_to(tmp_path) / ".hooks.log"))


FULL_DISK_DRIVER = r'''
import base64, json, os, subprocess, sys

repo, cos, event, payload, seed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
state = os.path.join(repo, ".coding-os")
os.mkdir(state)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", state], check=True)


def run(*args, data=b""):
    proc = subprocess.run([cos, *args], cwd=repo, input=data, capture_output=True)
    return {"code": proc.returncode, "stdout": proc.stdout.decode(), "stderr": proc.stderr.decode()}


def snapshot():
    files, dirs = {}, []
    for top, dirnames, filenames in os.walk(state):
        dirs += [os.path.relpath(os.path.join(top, n), state) for n in dirnames]
        for name in filenames:
            if name != "fill":
                with open(os.path.join(top, name), "rb") as f:
                    files[os.path.relpath(os.path.join(top, name), state)] = (
                        base64.b64encode(f.read()).decode())
    return {"files": files, "dirs": dirs}


for seed_event, seed_payload in json.loads(seed):
    out = run("hook", seed_event, data=json.dumps(seed_payload).encode())
    assert out["code"] == 0, out
out = run("state", "set", ".task-current", "TASK-7")
assert out["code"] == 0, out
before = snapshot()
fd = os.open(os.path.join(state, "fill"), os.O_WRONLY | os.O_CREAT, 0o600)
try:
    while True:
        os.write(fd, b"\0" * 4096)
except OSError as exc:
    full = exc.strerror
os.close(fd)
result = run("hook", event, data=payload.encode())
print(json.dumps({"full": full, "before": before, "after": snapshot(), "result": result}))
'''


def _decode(snap: dict[str, Any]) -> tuple[dict[str, bytes], set[str]]:
    return ({rel: base64.b64decode(data) for rel, data in snap["files"].items()},
            set(snap["dirs"]))


@needs_namespaces
@pytest.mark.parametrize("event", ["PostToolUse", "SessionStart"])
def test_a_full_disk_exits_1_with_one_line_and_changes_no_stored_state(
        repo: Path, event: str) -> None:
    seed_steps = [(ev, {"session_id": NATIVE, **payload}) for ev, payload in SEED]
    # A tool call whose log line is over 4 KiB: it cannot fit in the log's last page.
    payload = {"session_id": NATIVE, "source": "startup", "tool_name": "Bash",
               "tool_input": {"command": "echo " + "q" * 6000}}
    proc = subprocess.run(
        ["unshare", "-rm", sys.executable, "-c", FULL_DISK_DRIVER, str(repo), COS, event,
         json.dumps(payload), json.dumps(seed_steps)],
        cwd=repo, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["full"] == "No space left on device"
    result = subprocess.CompletedProcess([], report["result"]["code"], report["result"]["stdout"],
                                         report["result"]["stderr"])
    assert "no space left on device" in assert_one_line_failure(result, 1)
    assert_unchanged(_decode(report["before"]), _decode(report["after"]), ".hooks.log", (0, 1))


# `cos state` on bad input.

def test_state_set_of_a_value_with_a_newline_exits_2_with_one_line_and_keeps_the_old_value(
        repo: Path) -> None:
    state = seed(repo)
    marker = state / "claude" / "panels" / "panel-1" / ".task-current"
    stored = marker.read_bytes()
    proc = cos("state", "set", ".task-current", "TASK-8\nrm -rf /", cwd=repo, env=ENV)
    assert_one_line_failure(proc, 2, prefix="cos: ")
    assert marker.read_bytes() == stored
    assert sorted(p.name for p in marker.parent.iterdir()) == [".task-current", "heartbeat",
                                                               "session-id"]


def test_state_get_of_an_absent_file_exits_1_with_no_file_on_stderr(repo: Path) -> None:
    seed(repo)
    proc = cos("state", "get", ".gate-review", cwd=repo, env=ENV)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "no_file\n")
