"""`cos resume` on host B of a session written on host A (DESIGN.md §8), two hosts simulated on
this machine: two HOMEs, two clones of one repository at different paths, COS_HOST=a and b, one
PostgreSQL schema. The real Claude Code, Codex and Gemini CLI run the session on A against the
scripted model; `cos sync` replicates it; on B `cos resume` materialises it and hands over to the real client
(through a shim on PATH that adds the non-interactive prompt), whose model request carries the
earlier messages and runs in B's checkout. Bad input: a repository B does not have. The
cos-native sessions, which need no client, are in tests/hosts/test_resume_other_host.py."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (
    CLAUDE_BIN,
    CODEX_BIN,
    claude_env,
    codex_env,
    codex_rollouts,
    run_claude,
    run_codex,
    write_codex_config,
)
from tests.e2e.gemini_cli import (GEMINI_BIN, gemini_chats, gemini_env, gemini_sessions,
                                  require_gemini, run_gemini, write_gemini_settings)
from tests.e2e.gemini_server import GeminiServer, contents_text
from tests.e2e.model_server import ModelServer, Text, ToolCall, tool_output_text, when_prompted
from tests.helpers import (Host, claude_project_dir, make_host, new_origin, replica_lines,
                           replicator_stopped, require_clients, succeeded, until)

pytestmark = pytest.mark.e2e

FIRST = "FIRST-PROMPT remember the word PELICAN"
SECOND = "SECOND-PROMPT where are you now?"


def shim(host: Host, agent: str, prompt: str) -> dict[str, str]:
    """A `claude` or `codex` first on PATH that runs the real client non-interactively with
    `prompt`, as `cos resume` execs it (`claude --resume ID`, `codex resume ID`)."""
    folder = host.home / "shim"
    folder.mkdir(exist_ok=True)
    if agent == "claude":
        body = (f'exec {CLAUDE_BIN} -p {json.dumps(prompt)} "$@" --output-format json '
                '--permission-mode acceptEdits --allowedTools "Bash(*)" Read Edit Write')
    else:
        body = (f'[ "$1" = resume ] || exit 64\nshift\nexec {CODEX_BIN} exec '
                '--skip-git-repo-check --dangerously-bypass-approvals-and-sandbox resume "$@" '
                f'{json.dumps(prompt)}')
    script = folder / agent
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def pwd_script(done: str) -> list[Any]:
    """pwd in the first turn; pwd again when resumed with SECOND; then a text each time."""
    return [ToolCall("Bash", {"command": "pwd", "description": "where"}),
            when_prompted("SECOND-PROMPT", ToolCall("Bash", {"command": "pwd",
                                                            "description": "where now"}),
                          Text("first turn done")),
            Text(done)]


def codex_pwd_script(done: str) -> list[Any]:
    return [ToolCall("exec_command", {"cmd": "pwd"}),
            when_prompted("SECOND-PROMPT", ToolCall("exec_command", {"cmd": "pwd"}),
                          Text("first turn done")),
            Text(done)]


def resumed_request(server: ModelServer, path: str) -> dict[str, Any]:
    """The body of the last agent turn the model was asked for (the resumed turn's end)."""
    turns = [r for r in server.requests_to(path) if r.answer.startswith("step")]
    assert turns, "the client asked the model nothing"
    body: dict[str, Any] = turns[-1].body
    return body


def tool_outputs(body: dict[str, Any]) -> list[str]:
    if "messages" in body:
        return [tool_output_text(block.get("content")) for message in body["messages"]
                if isinstance(message.get("content"), list)
                for block in message["content"] if block.get("type") == "tool_result"]
    return [tool_output_text(item.get("output")) for item in body["input"]
            if item.get("type") == "function_call_output"]


# -- Claude Code ----------------------------------------------------------------------------------


def claude_on_a(a: Host, server: ModelServer) -> str:
    done = succeeded(run_claude(a.checkout, FIRST, server, a.home,
                                env={"COS_HOST": "a", "COS_DATABASE_URL": a.env["COS_DATABASE_URL"]}))
    native: str = json.loads(done.stdout)["session_id"]
    succeeded(a.cos("sync"))
    return native


def test_a_claude_session_of_host_a_resumes_on_host_b_in_bs_checkout(
        two_hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = two_hosts
    with ModelServer(pwd_script("second turn done")) as server:
        native = claude_on_a(a, server)
        listed = b.cos_json("sessions", "--all-hosts")
        row = next(r for r in listed if native in (r["id"], r["native_id"]))
        assert row["host"] == "a"
        assert all(r["host"] == "b" for r in b.cos_json("sessions"))  # default: this host
        assert [r["host"] for r in b.cos_json("sessions", "--host", "a")
                if native in (r["id"], r["native_id"])] == ["a"]
        table = succeeded(b.cos("sessions", "--all-hosts")).stdout
        assert any(row["id"].endswith(line.split()[0]) and "@a" in line  # its id shown short
                   for line in table.splitlines()[1:])

        env = {**claude_env(server, b.home), **b.env, **shim(b, "claude", SECOND)}
        resumed = b.cos("resume", native, env=env)
        assert resumed.returncode == 0, resumed.stderr
        target = claude_project_dir(b.home, b.checkout) / f"{native}.jsonl"
        assert f"from host: a" in resumed.stderr and str(target) in resumed.stderr
        assert "moved: from host a to this one" in resumed.stderr
        assert json.loads(resumed.stdout)["session_id"] == native
        body = resumed_request(server, "/v1/messages")
    assert FIRST in json.dumps(body["messages"])  # the earlier messages were carried
    outputs = tool_outputs(body)
    assert outputs[0].strip() == str(a.checkout)  # the first turn ran on A
    assert outputs[-1].strip() == str(b.checkout)  # the resumed turn runs in B's checkout
    lines = [json.loads(x) for x in target.read_bytes().splitlines()]
    cwds = {x["cwd"] for x in lines if "cwd" in x}
    assert cwds == {str(b.checkout)}  # A's cwd mapped, and the new turn's own
    # The session moved with its resume: B owns it, and B's sync pushes exactly its new lines.
    report = b.cos_json("resume", native)
    assert report["host"] is None and report["materialized"] == []
    synced = b.cos_json("sync")
    assert synced["refused"] == [] and synced["restarted"] == []
    written = target.read_bytes().splitlines()
    stored = replica_lines(b, row["id"], "native") or replica_lines(b, native, "native")
    assert len(stored) == len(written)
    assert any(str(a.checkout).encode() in line for line in stored)  # A's lines as A wrote them
    assert stored[-1] == written[-1]  # B's own lines as written on B


def test_a_claude_session_that_ended_on_a_is_read_on_b_with_no_command_run_on_a(
        two_hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = two_hosts
    script = [ToolCall("Bash", {"command": "pwd", "description": "where"}),
              Text("LAST-WORDS-OF-HOST-A")]
    with ModelServer(script) as server:
        # Claude Code and its hooks only: not one cos command on A after the session.
        done = succeeded(run_claude(a.checkout, FIRST, server, a.home, env={
            "COS_HOST": "a", "COS_DATABASE_URL": a.env["COS_DATABASE_URL"]}))
    native = json.loads(done.stdout)["session_id"]
    a_file = claude_project_dir(a.home, a.checkout) / f"{native}.jsonl"

    def read_on_b() -> str | None:
        shown = b.cos("export", native, "--format", "md")
        return shown.stdout if "LAST-WORDS-OF-HOST-A" in shown.stdout else None

    exported = until(read_on_b, "host B to read A's session to its end", timeout=60)
    assert FIRST in exported
    replicator_stopped(a.checkout / ".coding-os")
    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(a.env["COS_DATABASE_URL"]) as storage:
        row = storage.index_row(native)
        assert row is not None and row.host == "a"
        lines = [line for _, line in storage.replica_lines(row.id, "native")]
    assert lines == a_file.read_bytes().splitlines()  # every line once, as A wrote it
    log = (a.checkout / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
    assert " replicator=started" in log and "event=replicate " not in log


def test_a_claude_session_goes_on_at_b_and_comes_back_to_a_with_every_line_once(
        two_hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = two_hosts
    with ModelServer(pwd_script("second turn done")) as server:
        native = claude_on_a(a, server)
        a_file = claude_project_dir(a.home, a.checkout) / f"{native}.jsonl"
        first = a_file.read_bytes().splitlines()
        env = {**claude_env(server, b.home), **b.env, **shim(b, "claude", SECOND)}
        resumed = b.cos("resume", native, env=env)
        assert resumed.returncode == 0, resumed.stderr
    b_file = claude_project_dir(b.home, b.checkout) / f"{native}.jsonl"
    synced = b.cos_json("sync")
    assert synced["restarted"] == [] and synced["refused"] == []
    on_b = b_file.read_bytes().splitlines()
    assert len(on_b) > len(first)

    back = a.cos_json("resume", native)  # A's own file is a prefix: it gets B's lines
    assert back["moved_from"] == "b"
    assert [f["action"] for f in back["materialized"]] == ["extended"]
    on_a = a_file.read_bytes().splitlines()
    assert on_a[:len(first)] == first and len(on_a) == len(on_b)
    # B's lines carry A's paths here (the pwd B's turn printed is text, kept as it was)
    assert {json.loads(x)["cwd"] for x in on_a if "cwd" in json.loads(x)} == {str(a.checkout)}
    assert any(str(b.checkout) in json.loads(x).get("cwd", "") for x in on_b)
    assert [json.loads(x).get("uuid") for x in on_a] == [json.loads(x).get("uuid") for x in on_b]
    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(a.env["COS_DATABASE_URL"]) as storage:
        row = storage.index_row(native)
        assert row is not None and row.host == "a"
        stored = [line for _, line in storage.replica_lines(row.id, "native")] or \
            [line for _, line in storage.replica_lines(native, "native")]
    assert stored[:len(first)] == first and stored[len(first):] == on_b[len(first):]
    again = a.cos_json("sync")
    assert again["restarted"] == [] and again["refused"] == [] and again["pushed"] == {}


def test_a_session_of_a_repository_host_b_has_not_checked_out_writes_nothing(
        two_hosts: tuple[Host, Host], tmp_path: Path, pg_url: str) -> None:
    require_clients()
    a, _ = two_hosts
    other = make_host(tmp_path, "c", new_origin(tmp_path / "unrelated"), "host-c/proj", pg_url)
    with ModelServer(pwd_script("done")) as server:
        native = claude_on_a(a, server)
    done = other.cos("resume", native)
    assert done.returncode == 4, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # The command to run on A, naming the session by its index id (the cos id the hooks gave).
    assert re.search(rf"on a: cd {re.escape(str(a.checkout))} && cos resume "
                     rf"(ses-claude-\S+|{native})$", done.stderr.strip()), done.stderr
    assert not (other.home / ".claude" / "projects").exists()


# -- Codex ----------------------------------------------------------------------------------------


THIRD = "THIRD-PROMPT and back home?"


def test_a_codex_rollout_of_host_a_resumes_on_host_b_and_comes_back_to_a_with_every_line_once(
        two_hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = two_hosts
    # pwd on A; pwd again on B (SECOND); pwd again back on A (THIRD); a text ends each turn.
    script = [ToolCall("exec_command", {"cmd": "pwd"}),
              when_prompted("SECOND-PROMPT", ToolCall("exec_command", {"cmd": "pwd"}),
                            Text("first turn done")),
              when_prompted("THIRD-PROMPT", ToolCall("exec_command", {"cmd": "pwd"}),
                            Text("second turn done")),
              Text("third turn done")]
    with ModelServer(script) as server:
        succeeded(run_codex(a.checkout, FIRST, server, a.home,
                            env={"COS_HOST": "a", "COS_DATABASE_URL": a.env["COS_DATABASE_URL"]}))
        (rollout,) = codex_rollouts(a.codex_home)
        native = rollout.name[-len("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.jsonl"):-len(".jsonl")]
        first = rollout.read_bytes().splitlines()
        succeeded(a.cos("sync"))
        write_codex_config(b.codex_home, server)
        env = {**codex_env(b.home, b.codex_home), **b.env, **shim(b, "codex", SECOND)}
        resumed = b.cos("resume", native, env=env)
        assert resumed.returncode == 0, resumed.stderr
        body = resumed_request(server, "/v1/responses")
        relative = rollout.relative_to(a.codex_home)
        target = b.codex_home / relative  # the same path under sessions/ as on A
        assert str(target) in resumed.stderr
        assert FIRST in json.dumps(body["input"])
        outputs = tool_outputs(body)
        assert str(a.checkout) in outputs[0] and str(b.checkout) in outputs[-1]
        metas = [json.loads(x) for x in target.read_bytes().splitlines()]
        cwds = [x["payload"]["cwd"] for x in metas if x.get("type") in ("session_meta",
                                                                         "turn_context")]
        assert cwds and set(cwds) == {str(b.checkout)}
        synced = b.cos_json("sync")
        assert synced["restarted"] == [] and synced["refused"] == []
        on_b = target.read_bytes().splitlines()
        assert on_b[len(first):] and on_b[len(first):] != first[:len(on_b) - len(first)]

        # Back on A: A's rollout is a prefix of the replica, it gets B's lines, A takes the
        # session back and Codex goes on there with the whole conversation.
        asked = len(server.requests_to("/v1/responses"))
        env = {**codex_env(a.home, a.codex_home), **a.env, **shim(a, "codex", THIRD)}
        back = a.cos("resume", native, env=env)
        assert back.returncode == 0, back.stderr
        assert "moved: from host b to this one" in back.stderr and str(rollout) in back.stderr
        assert len(server.requests_to("/v1/responses")) > asked
        body = resumed_request(server, "/v1/responses")
    sent = json.dumps(body["input"])
    assert FIRST in sent and SECOND in sent and THIRD in sent  # A's and B's turns carried
    outputs = tool_outputs(body)
    assert len(outputs) == 3 and str(a.checkout) in outputs[0] and \
        str(b.checkout) in outputs[1] and str(a.checkout) in outputs[2]
    assert codex_rollouts(b.codex_home) == [target] and codex_rollouts(a.codex_home) == [rollout]
    on_a = rollout.read_bytes().splitlines()
    # Every line once, in order: A's first turn as written, B's lines (their paths mapped to
    # A's checkout), then A's new turn.
    assert on_a[:len(first)] == first and len(on_a) > len(on_b)
    assert [json.loads(x).get("timestamp") for x in on_a[:len(on_b)]] == \
        [json.loads(x).get("timestamp") for x in on_b]
    stamps = [str(json.loads(x).get("timestamp", "")) for x in on_a]
    assert min(stamps[len(on_b):]) >= max(stamps[:len(on_b)])  # nothing of before again
    metas = [json.loads(x) for x in on_a]
    cwds = [x["payload"]["cwd"] for x in metas if x.get("type") in ("session_meta",
                                                                     "turn_context")]
    assert len(cwds) >= 3 and set(cwds) == {str(a.checkout)}
    succeeded(a.cos("sync"))
    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(a.env["COS_DATABASE_URL"]) as storage:
        row = storage.index_row(native)
        assert row is not None and row.host == "a"
        stored = [line for _, line in storage.replica_lines(row.id, "native")] or \
            [line for _, line in storage.replica_lines(native, "native")]
    # The replica: A's lines and B's as each host wrote them, then A's new turn, each once.
    assert stored[:len(first)] == first and stored[len(first):len(on_b)] == on_b[len(first):]
    assert stored[len(on_b):] == on_a[len(on_b):]
    again = a.cos_json("sync")
    assert again["restarted"] == [] and again["refused"] == [] and again["pushed"] == {}


# -- Gemini CLI -----------------------------------------------------------------------------------


def gemini_shim(host: Host, prompt: str) -> dict[str, str]:
    """A `gemini` first on PATH that runs the real Gemini CLI non-interactively with `prompt`,
    as `cos resume` execs it (`gemini --resume ID`)."""
    folder = host.home / "shim"
    folder.mkdir(exist_ok=True)
    script = folder / "gemini"
    script.write_text(f'#!/bin/sh\nexec {GEMINI_BIN} "$@" -p {json.dumps(prompt)} '
                      '--output-format json --yolo\n', encoding="utf-8")
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def gemini_outputs(body: dict[str, Any]) -> list[str]:
    """The outputs of the shell commands a Gemini request carries, in order."""
    return [json.dumps(part["functionResponse"]) for content in body.get("contents") or []
            for part in content.get("parts") or [] if "functionResponse" in part]


@pytest.mark.slow
def test_a_gemini_session_of_host_a_resumes_on_host_b_in_bs_checkout(
        two_hosts: tuple[Host, Host]) -> None:
    require_gemini()
    a, b = two_hosts
    script = [ToolCall("run_shell_command", {"command": "pwd"}), Text("first turn done"),
              ToolCall("run_shell_command", {"command": "pwd"}), Text("second turn done")]
    with GeminiServer(script) as server:
        first = succeeded(run_gemini(a.checkout, FIRST, server, a.home, env={
            "COS_HOST": "a", "COS_DATABASE_URL": a.env["COS_DATABASE_URL"]}))
        native = json.loads(first.stdout)["session_id"]
        (a_file,) = gemini_sessions(a.home, a.checkout)
        succeeded(a.cos("sync"))
        row = next(r for r in b.cos_json("sessions", "--all-hosts")
                   if native in (r["id"], r["native_id"]))
        assert (row["host"], row["agent"]) == ("a", "gemini")

        write_gemini_settings(b.home)
        env = {**gemini_env(server, b.home), **b.env, **gemini_shim(b, SECOND)}
        resumed = b.cos("resume", native, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["session_id"] == native
        body = server.agent_requests()[-1].body
    target = gemini_chats(b.home, b.checkout) / a_file.name  # B's slug, registered as Gemini does
    assert "from host: a" in resumed.stderr and str(target) in resumed.stderr
    assert "moved: from host a to this one" in resumed.stderr
    assert (target.parent.parent / ".project_root").read_text(encoding="utf-8") == \
        str(b.checkout)
    sent = contents_text(body)
    assert FIRST in sent and "first turn done" in sent and SECOND in sent  # the earlier turns
    outputs = gemini_outputs(body)
    assert str(a.checkout) in outputs[0]  # the first turn ran on A
    assert str(b.checkout) in outputs[-1]  # the resumed turn runs in B's checkout
    # B owns the session now, and its sync pushes exactly the lines B's turn added.
    report = b.cos_json("resume", native)
    assert report["host"] is None and report["materialized"] == []
    synced = b.cos_json("sync")
    assert synced["refused"] == [] and synced["restarted"] == []
    written = target.read_bytes().splitlines()
    stored = replica_lines(b, row["id"], "native")
    assert stored == written and stored[:len(a_file.read_bytes().splitlines())] == \
        a_file.read_bytes().splitlines()
