"""cos's MCP server driven by the real Claude Code, Codex and Gemini CLIs, and who its writes are
filed under.

Each test runs a scripted model in a scratch repository where `cos init` installed the hooks and
registered `cos mcp`. The model calls `cos_task_create`, then `cos_work_log_append` for the task
it got back; the tests read the brain (`cos tasks show`, `cos work-log`), the hooks log and what
the client sent the model after each call.

What the clients do, as checked with Claude Code 2.1.328 and Codex 0.169.0:

- Claude Code starts the stdio server of the project's `.mcp.json` in `-p` mode, and offers its
  tools as deferred tools (not in the request's `tools` list, behind ToolSearch); a model may call
  `mcp__cos__<tool>` directly. In `-p` mode the call needs a permission: cos's hook answers
  `"permissionDecision": "allow"` with its `updatedInput`, so none is needed; without the hook,
  `--allowedTools mcp__cos` (a `permissions.allow` entry in the project's settings is ignored
  until the workspace is trusted). `updatedInput` alone, without a decision, is applied too.
- Claude Code gives a stdio server `CLAUDE_CODE_SESSION_ID` and `CLAUDE_PROJECT_DIR`: such a
  server can tell its panel by itself (`panel`); a shared HTTP server cannot.
- Codex starts the `[mcp_servers.cos]` server of a trusted project's `.codex/config.toml` and
  offers its tools as the Responses API namespace `mcp__cos` (function `cos_task_create`); its
  PreToolUse hook reports them as `mcp__cos__cos_task_create`, like Claude Code. `codex exec`
  does not wait for a server that is not `required` before the first model request, so the tools
  are missing from a turn that starts before `cos mcp` is up. Codex rejects a PreToolUse output
  with `updatedInput` but no `"permissionDecision": "allow"` ("PreToolUse hook returned
  updatedInput without permissionDecision:allow"): hence cos's hook sends the allow.
- Gemini CLI 0.61 starts the stdio server of the project's `.gemini/settings.json` in `-p` mode
  before its first model request and declares its tools as `mcp_cos_<tool>`; its BeforeTool hook
  gets that name (and `mcp_context.server_name`), and merges a `hookSpecificOutput.tool_input`
  into the call's arguments. A `"trust": true` server's tools run without `--yolo`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gemini_cli import require_gemini, run_gemini, write_gemini_settings
from tests.e2e.gemini_server import GeminiServer, GeminiStep, contents_text
from tests.e2e.harness import run_claude, run_codex
from tests.e2e.model_server import Answer, ModelServer, Step, Text, ToolCall, tool_output_text
from tests.helpers import COS, CosProject, new_project, require_clients, succeeded


pytestmark = pytest.mark.e2e

# The minimal permission Claude Code's `-p` mode needs to call the server's tools.
ALLOW_COS_TOOLS = ("--allowedTools", "mcp__cos")
CREATE = "mcp__cos__cos_task_create"
APPEND = "mcp__cos__cos_work_log_append"
TASK_ID = re.compile(r"TASK-[0-9]+")
SERVER_START_TIMEOUT = 60.0
POLL_INTERVAL = 0.05
RENDEZVOUS_TIMEOUT = 90.0
# The PreToolUse hook of `cos init`, with a matcher that leaves cos's MCP tools out.
MATCHER_WITHOUT_MCP = "Bash|Read|Edit|Write"


# -- what the model saw ----------------------------------------------------------------------------


def claude_tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results a Claude Code request carries, in order."""
    results = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(tool_output_text(block.get("content")))
    return results


def codex_tool_results(body: dict[str, Any]) -> list[str]:
    """The tool outputs a Codex request carries, in order."""
    return [tool_output_text(item.get("output")) for item in body.get("input") or []
            if isinstance(item, dict) and item.get("type") == "function_call_output"]


def agent_turns(server: ModelServer, path: str, marker: str = "") -> list[dict[str, Any]]:
    """The bodies of the agent turns (requests with tools) of the conversation whose first
    message holds `marker`, in the order received."""
    turns = []
    for request in server.requests_to(path):
        body = request.body
        if not isinstance(body, dict) or not body.get("tools"):
            continue
        first = (body.get("messages") or body.get("input") or [None])[0]
        if marker in json.dumps(first):
            turns.append(body)
    return turns


def turn_with_results(turns: Sequence[dict[str, Any]], count: int,
                      results: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    """The tool results of the first turn that carries `count` of them."""
    for body in turns:
        found = results(body)
        if len(found) == count:
            return found
    raise AssertionError(f"no request carried {count} tool results")


def created_task(results: Sequence[str]) -> str:
    """The task id in the latest tool result (the one cos_task_create returned)."""
    found = TASK_ID.findall(results[-1]) if results else []
    return found[0] if found else "TASK-unknown"


def log_own_task(text: str, name: str = APPEND, **call: Any) -> Step:
    """A step appending `text` to the work log for the task the previous call created."""
    def step(body: dict[str, Any]) -> Answer:
        results = claude_tool_results(body) if "messages" in body else codex_tool_results(body)
        return ToolCall(name, {"text": text, "task": created_task(results)}, **call)
    return step


def claude_script(title: str, text: str) -> list[Step]:
    return [ToolCall(CREATE, {"title": title}), log_own_task(text), Text("Logged.")]


class Rendezvous:
    """Holds each named conversation at a step until every conversation asked for that step, so
    two clients' calls interleave: both started before either calls, both created before either
    logs. A conversation held longer than the timeout goes on, and `timed_out` says so."""

    def __init__(self, names: Sequence[str], timeout: float = RENDEZVOUS_TIMEOUT) -> None:
        self.names = set(names)
        self.timeout = timeout
        self.arrived: dict[int, set[str]] = {}
        self.timed_out: list[tuple[str, int]] = []
        self._cond = threading.Condition()

    def hold(self, name: str, index: int, step: Step) -> Step:
        def held(body: dict[str, Any]) -> Answer:
            with self._cond:
                here = self.arrived.setdefault(index, set())
                here.add(name)
                self._cond.notify_all()
                if not self._cond.wait_for(lambda: here >= self.names, timeout=self.timeout):
                    self.timed_out.append((name, index))
            return step if isinstance(step, (ToolCall, Text)) else step(body)
        return held


# -- the project, the server, the brain ------------------------------------------------------------


def claude_project(root: Path) -> CosProject:
    require_clients()
    return new_project(root / "run", "claude")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def point_mcp_json_at(cp: CosProject, url: str, token: str | None = None) -> None:
    """Replace cos's stdio entry of `.mcp.json` by an HTTP one (sending the server's bearer
    token, as docs/mcp.md says)."""
    path = cp.project / ".mcp.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["mcpServers"]["cos"] = {"type": "http", "url": url}
    if token is not None:
        data["mcpServers"]["cos"]["headers"] = {"Authorization": f"Bearer {token}"}
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def leave_mcp_tools_out_of_the_hook(cp: CosProject) -> None:
    """Narrow the PreToolUse matcher of `cos init` so that cos's MCP tools go unhooked."""
    path = cp.project / ".claude" / "settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    for group in settings["hooks"]["PreToolUse"]:
        group["matcher"] = MATCHER_WITHOUT_MCP
    path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(POLL_INTERVAL)


@contextmanager
def http_server(cp: CosProject) -> Iterator[tuple[str, str]]:
    """`cos mcp --http` for the project on a free port; yields its URL and bearer token (kept
    in the hub) once it accepts connections."""
    port = free_port()
    log = cp.project.parent / f"cos-mcp-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [COS, "mcp", "--http", "--port", str(port)], cwd=cp.project,
            env={"PATH": os.environ["PATH"], "HOME": str(cp.home), "COS_AGENT": cp.agent},
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    try:
        def listening() -> bool:
            assert process.poll() is None, log.read_text(encoding="utf-8", errors="replace")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_until(listening, SERVER_START_TIMEOUT, "cos mcp --http listening")
        token = (cp.home / ".coding-os" / "mcp-token").read_text(encoding="utf-8").strip()
        yield f"http://127.0.0.1:{port}/mcp", token
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def cos_json(cp: CosProject, *args: str) -> Any:
    proc = cp.cos(*args, "--json")
    assert proc.returncode == 0, f"cos {' '.join(args)}: {proc.stderr}"
    return json.loads(proc.stdout)


def panel_session(cp: CosProject, native_id: str) -> str:
    """The cos session SessionStart minted for the client's session `native_id`."""
    path = cp.state / cp.agent / "panels" / native_id / "session-id"
    session, native = path.read_text(encoding="utf-8").split()
    assert native == native_id
    return session


def task(cp: CosProject, task_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = cos_json(cp, "tasks", "show", task_id)
    return shown


def work_log(cp: CosProject) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = cos_json(cp, "work-log")["entries"]
    return entries


def mcp_log_lines(cp: CosProject) -> list[dict[str, Any]]:
    return [line for line in cp.log() if line["event"] == "mcp"]


def run_claudes(cp: CosProject, server: ModelServer, prompts: Sequence[str],
                extra_args: Sequence[str] = ()) -> list[str]:
    """Run one `claude -p` per prompt, all at once, in the project; their native session ids."""
    def one(prompt: str) -> subprocess.CompletedProcess[str]:
        return run_claude(cp.project, prompt, server, cp.home, extra_args=tuple(extra_args),
                          timeout=180)
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        results = list(pool.map(one, prompts))
    return [json.loads(succeeded(result).stdout)["session_id"] for result in results]


# -- one Claude Code session, cos init's stdio server ----------------------------------------------


def test_claude_code_calls_cos_tools_and_the_rows_are_filed_under_its_session_as_injected(
        tmp_path: Path) -> None:
    cp = claude_project(tmp_path)
    with ModelServer(claude_script("Write the parser", "parser written")) as server:
        # No --allowedTools: the hook's allow decision lets cos's own tools run.
        result = succeeded(run_claude(cp.project, "Plan the work", server, cp.home))
        turns = agent_turns(server, "/v1/messages")
    native = json.loads(result.stdout)["session_id"]
    session = panel_session(cp, native)
    assert [row["id"] for row in cos_json(cp, "sessions") if row["native_id"] == native] == \
        [session]

    # What the model got back from each call: the task it created, then the logged line.
    after_create = turn_with_results(turns, 1, claude_tool_results)
    after_append = turn_with_results(turns, 2, claude_tool_results)
    created = json.loads(after_create[-1])
    assert (created["id"], created["title"], created["created_by"], created["attributed_by"]) \
        == ("TASK-1", "Write the parser", session, "injected")
    assert "parser written" in after_append[-1] and "TASK-1" in after_append[-1]

    shown = task(cp, "TASK-1")
    assert (shown["created_by"], shown["attributed_by"]) == (session, "injected")
    assert [(m["session"], m["attributed_by"]) for m in shown["moves"]] == [(session, "injected")]
    [entry] = work_log(cp)
    assert (entry["text"], entry["task"], entry["session"], entry["attributed_by"]) == \
        ("parser written", "TASK-1", session, "injected")

    # The hook saw each call and added the session; the server logged whom it filed it under.
    hooked = [line for line in cp.log() if line["event"] == "PreToolUse"]
    assert [(line["tool"], line["mcp_session"]) for line in hooked] == \
        [(CREATE, session), (APPEND, session)]
    assert [(line["tool"], line["session"], line["attributed_by"])
            for line in mcp_log_lines(cp)] == \
        [("cos_task_create", session, "injected"), ("cos_work_log_append", session, "injected")]


# -- two Claude Code sessions at once against one HTTP server --------------------------------------

PANELS = {"panel-alpha": ("Alpha task", "alpha logged"),
          "panel-bravo": ("Bravo task", "bravo logged")}


def two_panel_scripts(rendezvous: Rendezvous) -> dict[str, list[Step]]:
    """Per prompt marker: create a task and log a line of its own, the two panels in step."""
    return {marker: [rendezvous.hold(marker, 0, ToolCall(CREATE, {"title": title})),
                     rendezvous.hold(marker, 1, log_own_task(text)),
                     Text("Logged.")]
            for marker, (title, text) in PANELS.items()}


def run_two_panels(cp: CosProject, extra_args: Sequence[str] = ()
                   ) -> tuple[dict[str, str], list[dict[str, Any]], Rendezvous]:
    """Both panels at once against one `cos mcp --http`; per marker its cos session, the work
    log, and the rendezvous."""
    rendezvous = Rendezvous(list(PANELS))
    with http_server(cp) as (url, token), ModelServer(two_panel_scripts(rendezvous)) as server:
        point_mcp_json_at(cp, url, token)
        prompts = [f"{marker}: plan your part of the work" for marker in PANELS]
        natives = run_claudes(cp, server, prompts, extra_args)
    sessions = {marker: panel_session(cp, native) for marker, native in zip(PANELS, natives)}
    assert len(set(sessions.values())) == 2
    return sessions, work_log(cp), rendezvous


def test_two_claude_code_sessions_on_one_http_server_each_write_is_filed_under_its_own_session(
        tmp_path: Path) -> None:
    cp = claude_project(tmp_path)
    sessions, entries, rendezvous = run_two_panels(cp)
    assert rendezvous.timed_out == []  # both were in flight together at each call
    by_text = {entry["text"]: entry for entry in entries}
    assert sorted(by_text) == sorted(text for _, text in PANELS.values())
    for marker, (title, text) in PANELS.items():
        entry = by_text[text]
        assert (entry["session"], entry["attributed_by"]) == (sessions[marker], "injected"), marker
        shown = task(cp, entry["task"])  # the task this panel created (it logged for it)
        assert (shown["title"], shown["created_by"], shown["attributed_by"]) == \
            (title, sessions[marker], "injected"), marker
    lines = mcp_log_lines(cp)
    assert len(lines) == 4
    assert {(line["session"], line["attributed_by"]) for line in lines} == \
        {(session, "injected") for session in sessions.values()}


def test_without_the_hook_a_shared_http_server_files_both_sessions_writes_under_one_session(
        tmp_path: Path) -> None:
    """The control: with cos's MCP tools left out of the PreToolUse matcher nothing is
    injected; the HTTP server, started outside either panel, can only fall back to the agent's
    `.active-session` (the session that started last) and files the other panel's writes under
    it."""
    cp = claude_project(tmp_path)
    leave_mcp_tools_out_of_the_hook(cp)
    sessions, entries, rendezvous = run_two_panels(cp, ALLOW_COS_TOOLS)
    assert rendezvous.timed_out == []
    assert not [line for line in cp.log() if line["event"] == "PreToolUse"]
    active = (cp.state / "claude" / ".active-session").read_text(encoding="utf-8").split()[0]
    assert active in sessions.values()
    assert sorted((entry["session"], entry["attributed_by"]) for entry in entries) == \
        [(active, "active-session")] * 2
    tasks = cos_json(cp, "tasks")["tasks"]
    assert [(row["created_by"], row["attributed_by"]) for row in tasks] == \
        [(active, "active-session")] * 2
    assert [line["attributed_by"] for line in mcp_log_lines(cp)] == ["active-session"] * 4


def test_without_the_hook_claude_codes_own_stdio_server_knows_its_panel_from_the_environment(
        tmp_path: Path) -> None:
    """Claude Code starts one stdio server per session and gives it CLAUDE_CODE_SESSION_ID:
    without injection that server still files the writes under the right session (`panel`)."""
    cp = claude_project(tmp_path)
    leave_mcp_tools_out_of_the_hook(cp)
    with ModelServer(claude_script("Stdio task", "stdio logged")) as server:
        result = succeeded(run_claude(cp.project, "Plan the work", server, cp.home,
                                      extra_args=ALLOW_COS_TOOLS))
    session = panel_session(cp, json.loads(result.stdout)["session_id"])
    shown = task(cp, "TASK-1")
    assert (shown["created_by"], shown["attributed_by"]) == (session, "panel")
    [entry] = work_log(cp)
    assert (entry["session"], entry["attributed_by"]) == (session, "panel")


# -- the hooks without the server ------------------------------------------------------------------


def test_a_claude_code_session_whose_mcp_server_is_down_still_gets_hooks_state_and_checkpoints(
        tmp_path: Path) -> None:
    cp = claude_project(tmp_path)
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nobody listens there
    point_mcp_json_at(cp, url)
    script: list[Step] = [
        ToolCall("Bash", {"command": "echo written > down.txt", "description": "Write a file"}),
        Text("Done without the server."),
    ]
    with ModelServer(script) as server:
        result = succeeded(run_claude(cp.project, "Work without the brain", server, cp.home,
                                      extra_args=ALLOW_COS_TOOLS))
        first_turn = json.dumps(agent_turns(server, "/v1/messages")[0])
    assert (cp.project / "down.txt").read_text(encoding="utf-8") == "written\n"
    native = json.loads(result.stdout)["session_id"]
    session = panel_session(cp, native)
    assert [row["id"] for row in cos_json(cp, "sessions") if row["native_id"] == native] == \
        [session]
    events = [(line["event"], line["session"]) for line in cp.log()]
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                  "SessionEnd"):
        assert (event, session) in events, event
    [start] = [line for line in cp.log() if line["event"] == "SessionStart"]
    assert url in str(start.get("mcp_unreachable"))
    # The SessionStart card told the model, and the hooks' checkpoints were taken.
    assert "The cos MCP server is not reachable" in first_turn
    checkpoints = cos_json(cp, "checkpoints", "--session", session)
    # (Bash found the tree as the prompt's checkpoint left it, so it reused that one.)
    assert [row["trigger"] for row in reversed(checkpoints)] == ["prompt", "turn-end"]
    assert checkpoints[0]["changed"] == ["down.txt"]


# -- Codex -----------------------------------------------------------------------------------------

CODEX_NAMESPACE = "mcp__cos"


def codex_project(root: Path) -> CosProject:
    require_clients()
    cp = new_project(root / "run", "codex")
    # Without `required`, `codex exec` sends its first request before `cos mcp` answers, and
    # that turn has no cos tools (seen on a loaded machine every time); `required` makes it wait.
    config = cp.project / ".codex" / "config.toml"
    config.write_text(config.read_text(encoding="utf-8") + "required = true\n", encoding="utf-8")
    return cp


def codex_script() -> list[Step]:
    return [ToolCall("cos_task_create", {"title": "Codex task"}, namespace=CODEX_NAMESPACE),
            log_own_task("codex logged", "cos_work_log_append", namespace=CODEX_NAMESPACE),
            Text("Logged.")]


@pytest.fixture(scope="module")
def codex_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CosProject, str,
                                                                          list[dict[str, Any]]]]:
    """One Codex session calling cos's tools: the project, its cos session, its agent turns."""
    cp = codex_project(tmp_path_factory.mktemp("mcp-codex"))
    with ModelServer(codex_script()) as server:
        succeeded(run_codex(cp.project, "Plan the work", server, cp.home, timeout=180))
        turns = agent_turns(server, "/v1/responses")
    session, native = (cp.state / "codex" / ".active-session").read_text(
        encoding="utf-8").split()
    assert panel_session(cp, native) == session
    yield cp, session, turns


def test_codex_offers_cos_tools_in_the_mcp_cos_namespace_and_files_the_rows_under_its_session(
        codex_run: tuple[CosProject, str, list[dict[str, Any]]]) -> None:
    cp, session, turns = codex_run
    [namespace] = [tool for tool in turns[0]["tools"] if tool.get("name") == CODEX_NAMESPACE]
    assert {"cos_task_create", "cos_work_log_append"} <= \
        {tool["name"] for tool in namespace["tools"]}
    created = turn_with_results(turns, 1, codex_tool_results)[-1]
    assert "TASK-1" in created and session in created
    shown = task(cp, "TASK-1")
    assert (shown["title"], shown["created_by"]) == ("Codex task", session)
    [entry] = work_log(cp)
    assert (entry["text"], entry["task"], entry["session"]) == ("codex logged", "TASK-1", session)
    # Codex names MCP tools to its hooks as Claude Code does.
    hooked = [line for line in cp.log() if line["event"] == "PreToolUse"]
    assert [(line["tool"], line["mcp_session"]) for line in hooked] == [
        (CREATE, session), (APPEND, session)]


def test_codex_calls_are_attributed_by_injection(
        codex_run: tuple[CosProject, str, list[dict[str, Any]]]) -> None:
    cp, session, _ = codex_run
    assert task(cp, "TASK-1")["attributed_by"] == "injected"
    [entry] = work_log(cp)
    assert entry["attributed_by"] == "injected"
    assert [line["attributed_by"] for line in mcp_log_lines(cp)] == ["injected"] * 2


# -- Gemini CLI ------------------------------------------------------------------------------------

GEMINI_CREATE = "mcp_cos_cos_task_create"


def test_gemini_cli_calls_cos_tools_and_the_rows_are_filed_under_its_session_as_injected(
        tmp_path: Path) -> None:
    """`cos init --agent gemini` registers `cos mcp` in `.gemini/settings.json`; Gemini CLI
    offers its tools as `mcp_cos_<tool>`, its BeforeTool hook gets that name, and cos's hook
    hands the calling session back in `tool_input`, which Gemini merges into the call."""
    require_gemini()
    cp = new_project(tmp_path / "run", "gemini")
    settings = json.loads((cp.project / ".gemini" / "settings.json").read_text(encoding="utf-8"))
    assert settings["mcpServers"]["cos"] == {"command": COS, "args": ["mcp"],
                                             "env": {"COS_AGENT": "gemini"}, "trust": True}
    write_gemini_settings(cp.home)
    script: list[GeminiStep] = [ToolCall(GEMINI_CREATE, {"title": "Gemini task"}),
                                Text("Created.")]
    with GeminiServer(script) as server:
        # Without --yolo: the trusted server's tools need no confirmation.
        result = succeeded(run_gemini(cp.project, "Plan the work", server, cp.home, yolo=False))
        turns = [request.body for request in server.agent_requests()]
    native = json.loads(result.stdout)["session_id"]
    session = panel_session(cp, native)
    declared = [function["name"] for tools in turns[0]["tools"]
                for function in tools.get("functionDeclarations") or []]
    assert GEMINI_CREATE in declared

    shown = task(cp, "TASK-1")
    assert (shown["title"], shown["created_by"], shown["attributed_by"]) == \
        ("Gemini task", session, "injected")
    answered = contents_text(turns[-1])
    assert "TASK-1" in answered and session in answered  # what the model got back
    hooked = [line for line in cp.log() if line.get("payload_event") == "BeforeTool"]
    assert [(line["tool"], line["mcp_session"]) for line in hooked] == \
        [(GEMINI_CREATE, session)]
    assert [(line["tool"], line["session"], line["attributed_by"])
            for line in mcp_log_lines(cp)] == [("cos_task_create", session, "injected")]

    assert cp.cos("uninstall", "--agent", "gemini").returncode == 0
    assert not (cp.project / ".gemini").exists()
