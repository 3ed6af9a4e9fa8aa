"""The e2e harness drives the real Claude Code and Codex CLIs offline, and their hooks fire.

Each client runs once per module through a scripted session (read a file, edit it, run a shell
command, delegate to a subagent, compact) in a scratch git repository whose project hooks run a
tiny capture script; the tests then read what happened on disk, in the hook captures and in the
clients' own transcripts. ``COS_E2E_SAVE_PAYLOADS=1`` rewrites ``tests/e2e/payloads/`` from the
captures (after a client upgrade, say).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .harness import (
    claude_project_dir,
    claude_transcript,
    codex_rollout,
    codex_rollouts,
    run_claude,
    run_codex,
)
from .model_server import (
    ModelServer,
    Script,
    Step,
    Text,
    ToolCall,
    claude_edit_script,
    codex_edit_script,
)
from tests.helpers import (
    EDITED_LINE,
    ORIGINAL_LINE,
    SUBAGENT_MARKER,
    require_clients,
    wait_for_spawned_agent,
)


pytestmark = pytest.mark.e2e

PAYLOADS_DIR = Path(__file__).resolve().parent / "payloads"
RUN_BUDGET_SECONDS = 60

CLAUDE_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
CODEX_EVENTS = CLAUDE_EVENTS

# The environment variables a hook capture keeps: the clients' own, and where the hook runs.
CAPTURED_ENV_PREFIXES = ("CLAUDE", "CODEX", "ANTHROPIC", "OPENAI", "MOCK_", "AI_AGENT")
CAPTURED_ENV_NAMES = ("HOME", "PWD")

CAPTURE_SCRIPT = textwrap.dedent(
    """\
    import json, os, sys
    event, out = sys.argv[1], sys.argv[2]
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = raw
    env = {k: v for k, v in os.environ.items() if k.startswith(__PREFIXES__) or k in __NAMES__}
    record = {"event": event, "payload": payload, "env": env, "cwd": os.getcwd(), "stdin": raw}
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\\n")
    """
)
CAPTURE_SCRIPT = CAPTURE_SCRIPT.replace("__PREFIXES__", repr(CAPTURED_ENV_PREFIXES))
CAPTURE_SCRIPT = CAPTURE_SCRIPT.replace("__NAMES__", repr(CAPTURED_ENV_NAMES))


@dataclass
class HookRecord:
    """One hook invocation, as the capture script saw it."""

    event: str
    payload: dict[str, Any]
    env: dict[str, str]
    cwd: str
    stdin: str  # the payload's bytes as the client wrote them


@dataclass
class ClientRun:
    """A scratch project, the client runs made in it, and what its hooks captured."""

    project: Path
    home: Path
    captures: Path
    server: ModelServer
    results: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    def hooks(self, event: str | None = None) -> list[HookRecord]:
        """The captured hook invocations, in order, optionally of one event only."""
        if not self.captures.exists():
            return []
        records = [
            HookRecord(**json.loads(line))
            for line in self.captures.read_text(encoding="utf-8").splitlines()
        ]
        return [r for r in records if event is None or r.event == event]

    def payloads(self, event: str) -> list[dict[str, Any]]:
        """The stdin payloads of one event's hooks."""
        return [r.payload for r in self.hooks(event)]


def scratch_project(
    root: Path, hooks_file: str, events: tuple[str, ...], script: Script = ()
) -> ClientRun:
    """A git repository with ``hello.txt``, project hooks capturing ``events``, and a server."""
    project = (root / "project").resolve()
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "hello.txt").write_text(ORIGINAL_LINE + "\n", encoding="utf-8")
    capture = root / "capture_hook.py"
    capture.write_text(CAPTURE_SCRIPT, encoding="utf-8")
    captures = root / "hooks.jsonl"

    def handler(event: str) -> dict[str, Any]:
        command = shlex.join([sys.executable, str(capture), event, str(captures)])
        return {"hooks": [{"type": "command", "command": command, "timeout": 30}]}

    settings = {"hooks": {event: [handler(event)] for event in events}}
    hooks_path = project / hooks_file
    hooks_path.parent.mkdir(parents=True, exist_ok=True)
    hooks_path.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    home = root / "home"
    home.mkdir()
    return ClientRun(project=project, home=home, captures=captures, server=ModelServer(script))


def timed(
    run: ClientRun, call: Callable[[], subprocess.CompletedProcess[str]]
) -> subprocess.CompletedProcess[str]:
    """Make one client run, recording its result and duration; it must succeed."""
    start = time.monotonic()
    result = call()
    run.durations.append(time.monotonic() - start)
    run.results.append(result)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def save_payloads(client: str, run: ClientRun) -> None:
    """Save the first stdin of each event, byte for byte, as ``payloads/<client>-<Event>.json``."""
    PAYLOADS_DIR.mkdir(exist_ok=True)
    seen: set[str] = set()
    for record in run.hooks():
        if record.event in seen:
            continue
        seen.add(record.event)
        path = PAYLOADS_DIR / f"{client}-{record.event}.json"
        path.write_text(record.stdin, encoding="utf-8")


# -- the model server on its own ------------------------------------------------------------------


def post(server: ModelServer, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """POST JSON to the server; the status and the response text (an error's too)."""
    request = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8")


def sse_data(stream: str) -> list[dict[str, Any]]:
    """The ``data:`` objects of a Server-Sent Events stream, in order."""
    return [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


def test_model_server_answers_a_retried_request_with_the_same_step() -> None:
    script: list[Step] = [ToolCall("Bash", {"command": "true"}), Text("end")]
    body: dict[str, Any] = {
        "stream": True,
        "tools": TOOLS,
        "messages": [user({"type": "text", "text": "go"})],
    }
    with ModelServer(script) as server:
        first = sse_data(post(server, "/v1/messages?beta=true", body)[1])
        again = sse_data(post(server, "/v1/messages?beta=true", body)[1])
        body["messages"] += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}]},
            user({"type": "tool_result", "tool_use_id": "t1", "content": "ok"}),
        ]
        last = sse_data(post(server, "/v1/messages?beta=true", body)[1])
    assert [e["type"] for e in first][0] == "message_start"
    assert first[1]["content_block"]["name"] == again[1]["content_block"]["name"] == "Bash"
    assert json.loads(first[2]["delta"]["partial_json"]) == {"command": "true"}
    assert first[-2]["delta"]["stop_reason"] == "tool_use"
    assert last[2]["delta"] == {"type": "text_delta", "text": "end"}
    assert [r.answer for r in server.requests] == ["step 0", "step 0", "step 1"]


def test_model_server_answers_side_requests_token_counts_and_unknown_paths() -> None:
    with ModelServer([Text("scripted")]) as server:
        side = post(server, "/v1/messages", {"messages": [user({"type": "text", "text": "x"})]})
        count = post(server, "/v1/messages/count_tokens", {"messages": []})
        unknown = post(server, "/v1/anything", {})
    assert json.loads(side[1])["content"] == [{"type": "text", "text": "Scripted session"}]
    assert count[0] == 200 and json.loads(count[1])["input_tokens"] > 0
    assert unknown[0] == 404


def test_model_server_resumes_the_script_after_a_compaction_summary() -> None:
    script: list[Step] = [ToolCall("exec_command", {"cmd": f"echo {n}"}) for n in range(3)]
    prompt = {"role": "user", "content": [{"type": "input_text", "text": "go"}]}
    done = [{"type": "function_call_output", "call_id": f"c{n}", "output": ""} for n in range(2)]
    cue = "You are performing a CONTEXT CHECKPOINT COMPACTION."
    ask = {"role": "user", "content": [{"type": "input_text", "text": cue}]}
    with ModelServer(script) as server:
        summary_stream = post(
            server, "/v1/responses", {"stream": True, "input": [prompt, *done, ask]}
        )[1]
        summary = sse_data(summary_stream)[-1]["response"]["output"][0]["content"][0]["text"]
        handoff = {"role": "user", "content": [{"type": "input_text", "text": summary}]}
        body = {"stream": True, "tools": [{"type": "function"}], "input": [prompt, handoff]}
        resumed = sse_data(post(server, "/v1/responses", body)[1])
    assert "[scripted steps done: 2]" in summary
    assert json.loads(resumed[-1]["response"]["output"][0]["arguments"]) == {"cmd": "echo 2"}


# -- Claude Code ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientRun]:
    """One Claude Code session (edit, Bash, a subagent), then ``-p /compact --resume`` on it."""
    require_clients()
    root = tmp_path_factory.mktemp("claude")
    hello = str((root / "project" / "hello.txt").resolve())
    main = claude_edit_script(
        hello, ORIGINAL_LINE, EDITED_LINE, "printenv CLAUDE_CODE_SESSION_ID > ran.txt"
    )[:-1] + [
        ToolCall(
            "Agent",
            {
                "description": "Scripted subagent",
                "prompt": f"{SUBAGENT_MARKER}: write sub.txt",
                "run_in_background": False,
            },
        ),
        Text("All done."),
    ]
    sub: list[Step] = [
        ToolCall("Bash", {"command": "echo sub > sub.txt", "description": "sub"}),
        Text("Sub done."),
    ]
    script = {"": main, SUBAGENT_MARKER: sub}
    run = scratch_project(root, ".claude/settings.json", CLAUDE_EVENTS, script)
    with run.server:
        first = timed(
            run, lambda: run_claude(run.project, "Say hello to coding-os", run.server, run.home)
        )
        session_id = json.loads(first.stdout)["session_id"]
        timed(
            run,
            lambda: run_claude(
                run.project, "/compact", run.server, run.home, extra_args=("--resume", session_id)
            ),
        )
    if os.environ.get("COS_E2E_SAVE_PAYLOADS") == "1":
        save_payloads("claude", run)
    yield run


def claude_session_id(run: ClientRun) -> str:
    return str(json.loads(run.results[0].stdout)["session_id"])


def test_claude_code_edits_the_file_and_runs_the_shell_command(claude_run: ClientRun) -> None:
    assert (claude_run.project / "hello.txt").read_text(encoding="utf-8") == EDITED_LINE + "\n"
    ran = (claude_run.project / "ran.txt").read_text(encoding="utf-8").strip()
    assert ran == claude_session_id(claude_run)  # CLAUDE_CODE_SESSION_ID reaches tool processes
    assert (claude_run.project / "sub.txt").exists()  # the subagent's Bash ran too


def test_claude_code_runs_stay_well_under_a_minute(claude_run: ClientRun) -> None:
    assert all(d < RUN_BUDGET_SECONDS / 2 for d in claude_run.durations), claude_run.durations


def test_claude_code_talks_only_to_the_scripted_messages_api(claude_run: ClientRun) -> None:
    assert claude_run.server.answered("step")
    assert claude_run.server.answered("summary")  # /compact asked for a summary
    for request in claude_run.server.requests:
        assert request.path.startswith("/v1/messages"), request.path
        assert request.headers.get("x-api-key") == "sk-ant-scripted-test-key"


def test_claude_code_fires_every_hook_event_with_the_documented_fields(
    claude_run: ClientRun,
) -> None:
    common = {"session_id", "transcript_path", "cwd", "hook_event_name"}
    documented = {
        "SessionStart": {"source"},
        "UserPromptSubmit": {"prompt", "prompt_id", "permission_mode"},
        "PreToolUse": {"tool_name", "tool_input", "tool_use_id"},
        "PostToolUse": {"tool_name", "tool_input", "tool_use_id", "tool_response"},
        "Stop": {"stop_hook_active", "last_assistant_message"},
        "SubagentStart": {"agent_id", "agent_type"},
        "SubagentStop": {"agent_id", "agent_type", "agent_transcript_path"},
        "PreCompact": {"trigger", "custom_instructions"},
        "PostCompact": {"trigger", "compact_summary"},
        "SessionEnd": {"reason"},
    }
    session_id = claude_session_id(claude_run)
    for event, fields in documented.items():
        payloads = claude_run.payloads(event)
        assert payloads, f"{event} never fired"
        for payload in payloads:
            assert common | fields <= payload.keys(), (event, sorted(payload))
            assert payload["hook_event_name"] == event
            assert payload["session_id"] == session_id
            assert payload["cwd"] == str(claude_run.project)


def test_claude_code_hook_payloads_carry_what_happened(claude_run: ClientRun) -> None:
    sources = [p["source"] for p in claude_run.payloads("SessionStart")]
    assert sources[0] == "startup" and "resume" in sources and "compact" in sources
    assert claude_run.payloads("UserPromptSubmit")[0]["prompt"] == "Say hello to coding-os"
    assert claude_run.payloads("UserPromptSubmit")[0]["permission_mode"] == "acceptEdits"
    tools = [p["tool_name"] for p in claude_run.payloads("PreToolUse")]
    assert tools == ["Read", "Edit", "Bash", "Agent", "Bash"], tools
    post = {p["tool_name"]: p for p in claude_run.payloads("PostToolUse")}
    assert post["Edit"]["tool_input"]["new_string"] == EDITED_LINE
    assert claude_run.payloads("Stop")[0]["last_assistant_message"] == "All done."
    assert claude_run.payloads("PreCompact")[0]["trigger"] == "manual"
    assert "[scripted steps done: " in claude_run.payloads("PostCompact")[0]["compact_summary"]
    assert {p["reason"] for p in claude_run.payloads("SessionEnd")} == {"other"}
    start = claude_run.payloads("SubagentStart")[0]
    stops = {p["agent_id"]: p for p in claude_run.payloads("SubagentStop")}
    assert start["agent_type"] == "general-purpose"
    assert stops[start["agent_id"]]["last_assistant_message"] == "Sub done."
    # Tool hooks inside the subagent say whose they are.
    sub_tools = [p for p in claude_run.payloads("PreToolUse") if "agent_id" in p]
    assert [p["agent_id"] for p in sub_tools] == [start["agent_id"]]


def test_claude_code_hooks_run_in_the_project_with_its_session_in_the_environment(
    claude_run: ClientRun,
) -> None:
    session_id = claude_session_id(claude_run)
    for record in claude_run.hooks():
        assert record.cwd == str(claude_run.project), record.event
        assert record.env["CLAUDE_PROJECT_DIR"] == str(claude_run.project)
        assert record.env["CLAUDE_CODE_SESSION_ID"] == session_id
        assert record.env["HOME"] == str(claude_run.home)


def test_claude_code_transcripts_are_where_the_harness_looks(claude_run: ClientRun) -> None:
    session_id = claude_session_id(claude_run)
    transcript = claude_transcript(claude_run.home, claude_run.project, session_id)
    assert transcript.exists()
    # Every hook, the subagent's included, names the main session's transcript.
    assert {r.payload["transcript_path"] for r in claude_run.hooks()} == {str(transcript)}
    stop = claude_run.payloads("SubagentStop")[0]
    assert Path(stop["agent_transcript_path"]).is_relative_to(
        claude_project_dir(claude_run.home, claude_run.project) / session_id / "subagents"
    )
    entries = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert any(e.get("subtype") == "compact_boundary" for e in entries)
    assert any(e.get("isCompactSummary") for e in entries)


def test_two_claude_code_sessions_can_share_one_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_clients()
    roots = [tmp_path_factory.mktemp(f"claude-pair-{n}") for n in range(2)]
    runs = [scratch_project(root, ".claude/settings.json", ("Stop",)) for root in roots]
    script: list[Step] = [
        ToolCall("Bash", {"command": "echo ran > ran.txt", "description": "run"}),
        Text("ok"),
    ]
    with ModelServer(script) as server:
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(
                pool.map(lambda r: run_claude(r.project, "Run it", server, r.home), runs)
            )
    for run, result in zip(runs, results):
        assert result.returncode == 0, result.stderr
        assert (run.project / "ran.txt").read_text(encoding="utf-8") == "ran\n"
        assert json.loads(result.stdout)["result"] == "ok"


# -- Codex ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def codex_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientRun]:
    """One Codex session: cat, apply_patch, a command, a subagent, then an automatic compaction."""
    require_clients()
    root = tmp_path_factory.mktemp("codex")
    hello = str((root / "project" / "hello.txt").resolve())
    main = codex_edit_script(
        hello, ORIGINAL_LINE, EDITED_LINE, "printenv CODEX_THREAD_ID > ran.txt"
    )[:-1] + [
        ToolCall(
            "spawn_agent",
            {"message": f"{SUBAGENT_MARKER}: write sub.txt"},
            namespace="multi_agent_v1",
        ),
        wait_for_spawned_agent,
        Text("All done."),
    ]
    sub: list[Step] = [ToolCall("exec_command", {"cmd": "echo sub > sub.txt"}), Text("Sub done.")]
    script = {"": main, SUBAGENT_MARKER: sub}
    # "Bogus" shows that Codex skips event names it does not know.
    run = scratch_project(root, ".codex/hooks.json", CODEX_EVENTS + ("Bogus",), script)
    with run.server:
        timed(
            run,
            lambda: run_codex(
                run.project,
                "Say hello to coding-os",
                run.server,
                run.home,
                config_toml="model_auto_compact_token_limit = 100000",
            ),
        )
    if os.environ.get("COS_E2E_SAVE_PAYLOADS") == "1":
        save_payloads("codex", run)
    yield run


def codex_session_id(run: ClientRun) -> str:
    return str(run.payloads("SessionStart")[0]["session_id"])


def test_codex_patches_the_file_and_runs_the_shell_command(codex_run: ClientRun) -> None:
    assert (codex_run.project / "hello.txt").read_text(encoding="utf-8") == EDITED_LINE + "\n"
    ran = (codex_run.project / "ran.txt").read_text(encoding="utf-8").strip()
    assert ran == codex_session_id(codex_run)  # CODEX_THREAD_ID reaches tool processes
    assert (codex_run.project / "sub.txt").exists()


def test_codex_runs_stay_well_under_a_minute(codex_run: ClientRun) -> None:
    assert all(d < RUN_BUDGET_SECONDS / 2 for d in codex_run.durations), codex_run.durations


def test_codex_talks_only_to_the_scripted_responses_api(codex_run: ClientRun) -> None:
    assert codex_run.server.answered("summary")  # the automatic compaction
    for request in codex_run.server.requests:
        assert request.path == "/v1/responses", request.path
        assert request.headers.get("authorization") == "Bearer mock-scripted-test-key"
    tools = {t.get("name"): t for t in codex_run.server.requests[0]["tools"]}
    assert tools["apply_patch"]["type"] == "custom"  # freeform, the patch is the raw input
    assert tools["exec_command"]["type"] == "function"


def test_codex_fires_every_hook_event_with_the_documented_fields(codex_run: ClientRun) -> None:
    common = {"session_id", "transcript_path", "cwd", "hook_event_name"}
    documented = {
        "SessionStart": {"source", "model", "permission_mode"},
        "UserPromptSubmit": {"prompt", "turn_id", "model", "permission_mode"},
        "PreToolUse": {"tool_name", "tool_input", "tool_use_id", "turn_id"},
        "PostToolUse": {"tool_name", "tool_input", "tool_use_id", "tool_response", "turn_id"},
        "Stop": {"stop_hook_active", "last_assistant_message", "turn_id"},
        "SubagentStart": {"agent_id", "agent_type", "turn_id"},
        "SubagentStop": {
            "agent_id", "agent_type", "agent_transcript_path", "last_assistant_message"
        },
        "PreCompact": {"trigger", "turn_id", "model"},
        "PostCompact": {"trigger", "turn_id", "model"},
        "SessionEnd": {"reason"},
    }
    session_id = codex_session_id(codex_run)
    for event, fields in documented.items():
        payloads = codex_run.payloads(event)
        assert payloads, f"{event} never fired"
        for payload in payloads:
            assert common | fields <= payload.keys(), (event, sorted(payload))
            assert payload["hook_event_name"] == event
            assert payload["session_id"] == session_id  # subagents report the parent's
            assert payload["cwd"] == str(codex_run.project)
    assert not codex_run.hooks("Bogus")


def test_codex_hook_payloads_carry_what_happened(codex_run: ClientRun) -> None:
    sources = [p["source"] for p in codex_run.payloads("SessionStart")]
    assert sources == ["startup", "compact"], sources
    prompts = [p["prompt"] for p in codex_run.payloads("UserPromptSubmit")]
    assert prompts[0] == "Say hello to coding-os"
    assert codex_run.payloads("UserPromptSubmit")[0]["permission_mode"] == "bypassPermissions"
    main_tools = [p for p in codex_run.payloads("PreToolUse") if "agent_id" not in p]
    # exec_command is reported as Bash with {"command": ...}, apply_patch by its own name with
    # the patch as "command"; of the namespaced subagent tools, wait_agent comes out glued to
    # its namespace (0.169).
    assert [p["tool_name"] for p in main_tools] == [
        "Bash",
        "apply_patch",
        "Bash",
        "spawn_agent",
        "multi_agent_v1wait_agent",
    ]
    assert main_tools[0]["tool_input"] == {"command": f"cat {codex_run.project / 'hello.txt'}"}
    assert main_tools[1]["tool_input"]["command"].startswith("*** Begin Patch\n")
    posts = [p for p in codex_run.payloads("PostToolUse") if p["tool_name"] == "apply_patch"]
    assert "Success" in posts[0]["tool_response"]
    assert codex_run.payloads("Stop")[-1]["last_assistant_message"] == "All done."
    assert codex_run.payloads("PreCompact")[0]["trigger"] == "auto"
    start = codex_run.payloads("SubagentStart")[0]
    stop = codex_run.payloads("SubagentStop")[0]
    assert start["agent_id"] == stop["agent_id"]
    assert stop["last_assistant_message"] == "Sub done."
    assert stop["transcript_path"] != stop["agent_transcript_path"]


def test_codex_hooks_run_in_the_project_without_a_session_variable(codex_run: ClientRun) -> None:
    for record in codex_run.hooks():
        assert record.cwd == str(codex_run.project), record.event
        assert record.env["HOME"] == str(codex_run.home)
        assert record.env["CODEX_HOME"] == str(codex_run.home / ".codex")
        # Unlike tool processes (CODEX_THREAD_ID, CODEX_SESSION_ID), hooks get no session id
        # in the environment: it is in the payload only.
        assert "CODEX_THREAD_ID" not in record.env
        assert "CODEX_SESSION_ID" not in record.env


def test_codex_rollouts_are_where_the_harness_looks(codex_run: ClientRun) -> None:
    session_id = codex_session_id(codex_run)
    rollout = codex_rollout(codex_run.home / ".codex", session_id)
    assert {p["transcript_path"] for p in codex_run.payloads("Stop")} == {str(rollout)}
    stop = codex_run.payloads("SubagentStop")[0]
    assert Path(stop["agent_transcript_path"]) in codex_rollouts(codex_run.home / ".codex")
    first = json.loads(rollout.read_text(encoding="utf-8").splitlines()[0])
    assert first["type"] == "session_meta"
    assert first["payload"]["id"] == session_id
    assert first["payload"]["cwd"] == str(codex_run.project)


def test_codex_ignores_a_hooks_file_with_an_unknown_top_level_key(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_clients()
    root = tmp_path_factory.mktemp("codex-strict")
    run = scratch_project(root, ".codex/hooks.json", ("Stop",), [Text("ok")])
    hooks_path = run.project / ".codex" / "hooks.json"
    settings = json.loads(hooks_path.read_text(encoding="utf-8"))
    hooks_path.write_text(json.dumps({**settings, "version": 1}), encoding="utf-8")
    with run.server:
        result = run_codex(run.project, "Hi", run.server, run.home)
    assert result.returncode == 0, result.stderr
    assert "failed to parse hooks config" in result.stderr
    assert not run.hooks()


# -- saved payloads ------------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_saved_payloads_have_only_fields_the_live_clients_send(
    client: str, request: pytest.FixtureRequest
) -> None:
    run: ClientRun = request.getfixturevalue(f"{client}_run")
    saved = sorted(PAYLOADS_DIR.glob(f"{client}-*.json"))
    assert saved, f"no saved {client} payloads in {PAYLOADS_DIR}"
    for path in saved:
        event = path.stem.split("-", 1)[1]
        live_fields = set().union(*(p.keys() for p in run.payloads(event)))
        saved_fields = json.loads(path.read_text(encoding="utf-8")).keys()
        assert saved_fields <= live_fields, (path.name, sorted(saved_fields - live_fields))
