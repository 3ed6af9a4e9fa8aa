"""`cos mcp` over stdio, driven by the official SDK client as Claude Code and Codex drive it: the
tools, their schemas, bad arguments, unknown ids, SQL-looking searches, paging, and a stdout that
carries nothing but the protocol. A real project (git checkout, SQLite), and PostgreSQL too."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from coding_os.interfaces.mcp import TOOL_NAMES
from tests.helpers import COS, cos_json, fire


T = TypeVar("T")
Body = Callable[[Client], Awaitable[T]]
SESSION = "ses-claude-20261129-100000-abcd"


def server_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "COS_AGENT": "claude", "COS_PANEL_ID": "mcp-test-panel", **extra}


def with_server(project: Path, body: Body[T], env: dict[str, str] | None = None) -> T:
    """Start `cos mcp` in `project`, run `body` with a connected client, stop the server."""
    async def main() -> T:
        params = StdioServerParameters(command=COS, args=["mcp"], cwd=str(project),
                                       env=env or server_env())
        async with Client(params, read_timeout_seconds=60) as client:
            return await body(client)
    return asyncio.run(main())


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The structured result of a successful call (fails the test on an error result)."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, args, result.content)
    assert isinstance(result.structured_content, dict)
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    return result.structured_content


async def error(client: Client, tool: str, args: dict[str, Any]) -> str:
    """The message of an error result."""
    result = await client.call_tool(tool, args)
    assert result.is_error, (tool, args, result.structured_content)
    return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.slow
def test_the_server_lists_exactly_the_nine_tools_each_with_an_object_schema(
        project: Path) -> None:
    async def body(client: Client) -> list[Any]:
        return (await client.list_tools()).tools

    tools = with_server(project, body)
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES) and len(tools) == 9
    for tool in tools:
        schema = tool.input_schema
        assert schema["type"] == "object" and "agent_session" in schema["properties"], tool.name
        assert tool.description
    by_name = {t.name: t.input_schema for t in tools}
    assert by_name["cos_task_create"]["required"] == ["title"]
    assert by_name["cos_task_create"]["properties"]["title"]["maxLength"] == 200
    assert set(by_name["cos_task_move"]["required"]) == {"task", "status"}
    assert by_name["cos_search"]["required"] == ["query"]


@pytest.mark.slow
def test_every_tool_answers_a_good_call(project: Path, isolated_env: Path) -> None:
    from tests.helpers import conversation, write_jsonl

    native = "aaaaaaaa-0000-0000-0000-00000000000a"
    entries = conversation(native, 1)
    for entry in entries:
        entry["cwd"] = str(project)
    key = "".join(c if c.isalnum() else "-" for c in str(project))
    write_jsonl(isolated_env / ".claude" / "projects" / key / f"{native}.jsonl", entries)
    (project / "README.md").write_text("changed\n", encoding="utf-8")
    checkpoint = cos_json("checkpoint", "create", cwd=project)
    assert isinstance(checkpoint, dict)

    async def body(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["create"] = await call(client, "cos_task_create",
                                   {"title": "Write the MCP tests", "body": "all nine tools",
                                    "status": "doing"})
        out["move"] = await call(client, "cos_task_move",
                                 {"task": "TASK-1", "status": "done", "note": "finished"})
        out["list"] = await call(client, "cos_task_list", {})
        out["log"] = await call(client, "cos_work_log_append",
                                {"text": "wrote the tests for nine tools", "task": "TASK-1"})
        out["search"] = await call(client, "cos_search", {"query": "nine tools"})
        out["sessions"] = await call(client, "cos_sessions_search", {})
        out["show"] = await call(client, "cos_session_show",
                                 {"session": out["sessions"]["sessions"][0]["id"]})
        out["checkpoints"] = await call(client, "cos_checkpoints_list", {})
        out["preview"] = await call(client, "cos_rewind_preview",
                                    {"checkpoint": out["checkpoints"]["checkpoints"][0]["id"]})
        return out

    out = with_server(project, body)
    assert out["create"]["id"] == "TASK-1" and out["create"]["status"] == "doing"
    assert [m["to_status"] for m in out["move"]["moves"]] == ["doing", "done"]
    assert [t["id"] for t in out["list"]["tasks"]] == ["TASK-1"]
    assert out["list"]["next_cursor"] is None
    assert out["log"]["task"] == "TASK-1" and out["log"]["text"].startswith("wrote")
    assert sorted(r["kind"] for r in out["search"]["results"]) == ["task", "work_log"]
    assert [s["native_id"] for s in out["sessions"]["sessions"]] == [native]
    assert out["show"]["native_id"] == native
    assert out["checkpoints"]["checkpoints"][0]["id"]
    assert isinstance(out["preview"], dict) and out["preview"]
    # every call got its hooks-log line, attributed to the panel's session
    log = (project / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
    for tool in TOOL_NAMES:
        assert f"tool={tool}" in log, tool


@pytest.mark.slow
def test_writes_are_attributed_to_the_injected_session_or_else_the_panels(project: Path) -> None:
    assert fire("SessionStart", {"session_id": "native-1", "source": "startup"}, cwd=project,
                env={"COS_PANEL_ID": "mcp-test-panel"}).returncode == 0
    panel_session = cos_json("whoami", cwd=project,
                             env={"COS_AGENT": "claude", "COS_PANEL_ID": "mcp-test-panel"})
    assert isinstance(panel_session, dict)

    async def body(client: Client) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        injected = await call(client, "cos_work_log_append",
                              {"text": "from the hook", "agent_session": SESSION})
        from_panel = await call(client, "cos_work_log_append", {"text": "no injection"})
        rejected = await call(client, "cos_task_create",
                              {"title": "bad injection", "agent_session": "../../etc"})
        return injected, from_panel, rejected

    injected, from_panel, rejected = with_server(project, body)
    assert (injected["session"], injected["attributed_by"]) == (SESSION, "injected")
    assert from_panel["attributed_by"] == "panel"
    assert from_panel["session"] == panel_session["session_id"]
    assert rejected["attributed_by"] == "panel"
    log = (project / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
    assert "../../etc" in log  # the rejected value is noted


BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("cos_task_create", {"title": 5}, "title"),
    ("cos_task_create", {}, "title"),
    ("cos_task_create", {"title": ""}, "title"),
    ("cos_task_create", {"title": "x" * 201}, "title"),
    ("cos_task_create", {"title": "t", "body": "b" * 16_001}, "body"),
    ("cos_task_create", {"title": "t", "status": "finished"}, "status"),
    ("cos_task_create", {"title": "t", "agent_session": "s" * 201}, "agent_session"),
    ("cos_task_move", {"task": "TASK-1"}, "status"),
    ("cos_task_move", {"task": "TASK-1", "status": "finished"}, "status"),
    ("cos_task_move", {"task": ["TASK-1"], "status": "done"}, "task"),
    ("cos_task_move", {"task": "TASK-1", "status": "done", "note": "n" * 2001}, "note"),
    ("cos_task_move", {"task": "TASK-1", "status": "done", "force": "maybe"}, "force"),
    ("cos_task_list", {"limit": 0}, "limit"),
    ("cos_task_list", {"limit": 51}, "limit"),
    ("cos_task_list", {"limit": "ten"}, "limit"),
    ("cos_task_list", {"status": "open"}, "status"),
    ("cos_work_log_append", {"text": ""}, "text"),
    ("cos_work_log_append", {"text": "t" * 8001}, "text"),
    ("cos_work_log_append", {"text": None}, "text"),
    ("cos_search", {}, "query"),
    ("cos_search", {"query": "q" * 1001}, "query"),
    ("cos_search", {"query": "word", "kinds": ["secrets"]}, "kinds"),
    ("cos_search", {"query": "word", "limit": 1000}, "limit"),
    ("cos_search", {"query": {"$ne": 1}}, "query"),
    ("cos_sessions_search", {"query": "q" * 501}, "query"),
    ("cos_sessions_search", {"agent": "gemini"}, "agent"),
    ("cos_session_show", {}, "session"),
    ("cos_rewind_preview", {"checkpoint": ""}, "checkpoint"),
    ("cos_checkpoints_list", {"cursor": "c" * 201}, "cursor"),
]


def test_bad_arguments_are_error_results_naming_the_argument_and_the_server_keeps_serving(
        project: Path) -> None:
    async def body(client: Client) -> tuple[list[tuple[str, str, str]], dict[str, Any]]:
        messages = [(tool, field, await error(client, tool, args))
                    for tool, args, field in BAD_ARGUMENTS]
        return messages, await call(client, "cos_task_create", {"title": "still serving"})

    messages, created = with_server(project, body)
    for tool, field, message in messages:
        assert field in message and tool in message, (tool, field, message)
        assert "Traceback" not in message and len(message) < 2000, message
    assert created["id"] == "TASK-1"  # nothing the bad calls sent was stored


@pytest.mark.slow
def test_cos_errors_are_error_results_with_their_one_line_message(project: Path) -> None:
    async def body(client: Client) -> list[str]:
        await call(client, "cos_task_create", {"title": "exists"})
        return [
            await error(client, "cos_task_move", {"task": "TASK-9", "status": "done"}),
            await error(client, "cos_task_move", {"task": "TASK-x", "status": "done"}),
            await error(client, "cos_work_log_append", {"text": "t", "task": "TASK-77"}),
            await error(client, "cos_session_show", {"session": "ses-claude-20991231-000000-ffff"}),
            await error(client, "cos_rewind_preview", {"checkpoint": "cp-nothing"}),
            await error(client, "cos_search", {"query": "***"}),
            await error(client, "cos_task_list", {"cursor": "garbage"}),
            await error(client, "cos_sessions_search", {"cursor": "-1"}),
        ]

    messages = with_server(project, body)
    assert "no task TASK-9" in messages[0]
    assert "not a task id" in messages[1] and "TASK-x" in messages[1]
    assert "no task TASK-77" in messages[2]
    assert "ses-claude-20991231-000000-ffff" in messages[3]
    assert "cp-nothing" in messages[4]
    assert "at least one word" in messages[5]
    assert "not a task id" in messages[6]
    assert "cursor" in messages[7]
    for message in messages:
        assert "Traceback" not in message and "\n" not in message.strip(), message


def test_a_task_another_session_is_doing_is_an_error_result_naming_the_owner(
        project: Path) -> None:
    other = "ses-claude-20261129-100000-eeee"

    async def body(client: Client) -> tuple[str, dict[str, Any]]:
        await call(client, "cos_task_create", {"title": "t", "status": "doing",
                                               "agent_session": other})
        refused = await error(client, "cos_task_move", {"task": "TASK-1", "status": "doing",
                                                        "agent_session": SESSION})
        forced = await call(client, "cos_task_move", {"task": "TASK-1", "status": "doing",
                                                      "force": True, "agent_session": SESSION})
        return refused, forced

    refused, forced = with_server(project, body)
    assert f"being done by {other}" in refused
    assert forced["owner"] == SESSION


SQL_LOOKING = ["'; DROP TABLE tasks; --", '" OR 1=1', "NEAR(a b)", "a* OR b*",
               "title:drop", "tasks) --", "^start", "x AND NOT y", "\\x00 \\' \\\"",
               "1; DELETE FROM search_docs"]


def sql_queries_body(client: Client) -> Awaitable[tuple[list[dict[str, Any]], str, list[Any]]]:
    async def body() -> tuple[list[dict[str, Any]], str, list[Any]]:
        await call(client, "cos_task_create", {"title": "drop table tasks sometime"})
        await call(client, "cos_work_log_append", {"text": "near a b c"})
        pages = [await call(client, "cos_search", {"query": q}) for q in SQL_LOOKING]
        star = await error(client, "cos_search", {"query": "*"})
        after = (await call(client, "cos_task_list", {}))["tasks"]
        return pages, star, after
    return body()


def check_sql_queries(pages: list[dict[str, Any]], star: str, after: list[Any]) -> None:
    found = dict(zip(SQL_LOOKING, pages))
    assert [r["ref"] for r in found["'; DROP TABLE tasks; --"]["results"]] == ["TASK-1"]
    assert [r["kind"] for r in found["NEAR(a b)"]["results"]] == ["work_log"]
    for query, page in found.items():
        assert set(page) == {"results", "next_cursor"}, query
    assert "at least one word" in star
    assert [t["id"] for t in after] == ["TASK-1"]


def test_sql_and_fts_looking_searches_are_plain_words_and_the_tables_stay_intact(
        project: Path) -> None:
    pages, star, after = with_server(project, sql_queries_body)
    check_sql_queries(pages, star, after)
    with sqlite3.connect(project / ".coding-os" / "coding-os.db") as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM search_docs").fetchone() == (2,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def walk(client: Client, tool: str, args: dict[str, Any], key: str,
               as_given: bool) -> list[Any]:
    """Every item of a paged tool, following next_cursor (verbatim, or as text)."""
    items: list[Any] = []
    cursor: Any = None
    for _ in range(100):
        page = await call(client, tool, {**args, **({"cursor": cursor} if cursor else {})})
        items.extend(page[key])
        if page["next_cursor"] is None:
            return items
        cursor = page["next_cursor"] if as_given else str(page["next_cursor"])
    raise AssertionError("paging never ended")


@pytest.mark.slow
def test_task_list_and_search_pages_walk_every_result_once(project: Path) -> None:
    async def body(client: Client) -> tuple[list[Any], list[Any]]:
        for i in range(23):
            await call(client, "cos_task_create", {"title": f"paging task {i}"})
        tasks = await walk(client, "cos_task_list", {"limit": 5}, "tasks", True)
        hits = await walk(client, "cos_search", {"query": "paging", "limit": 4}, "results", False)
        return tasks, hits

    tasks, hits = with_server(project, body)
    assert [t["id"] for t in tasks] == [f"TASK-{i}" for i in range(1, 24)]
    assert [h["ref"] for h in hits] == [f"TASK-{i}" for i in range(23, 0, -1)]


def test_search_next_cursor_can_be_passed_back_exactly_as_it_came(project: Path) -> None:
    async def body(client: Client) -> list[Any]:
        for i in range(5):
            await call(client, "cos_work_log_append", {"text": f"cursor line {i}"})
        return await walk(client, "cos_search", {"query": "cursor", "limit": 2}, "results", True)

    assert len(with_server(project, body)) == 5


@pytest.mark.slow
@pytest.mark.parametrize("tool,cursor", [
    ("cos_search", 10 ** 23), ("cos_search", "9" * 23), ("cos_search", "\u00b2"),
    ("cos_sessions_search", "\u00b2"), ("cos_checkpoints_list", "9" * 23),
    ("cos_task_list", "TASK-\u00b2"),
])
def test_a_cursor_that_is_not_a_page_cursor_is_a_clear_error(project: Path, tool: str,
                                                              cursor: object) -> None:
    arguments: dict[str, object] = {"cursor": cursor}
    if tool == "cos_search":
        arguments["query"] = "anything"

    async def body(client: Client) -> str:
        return await error(client, tool, arguments)

    message = with_server(project, body)
    assert "cursor" in message or "task id" in message, message


def test_a_state_dir_problem_is_an_error_result_with_its_message(project: Path) -> None:
    async def body(client: Client) -> str:
        return await error(client, "cos_task_list", {})

    # a HOME at the checkout makes its .coding-os the global hub: state must not go there
    message = with_server(project, body, server_env(HOME=str(project)))
    assert "COS_STATE_MISROUTE" in message


@pytest.mark.slow
def test_stdout_carries_only_json_rpc_messages(project: Path) -> None:
    from mcp_types import LATEST_PROTOCOL_VERSION

    proc = subprocess.Popen([COS, "mcp"], cwd=project, env=server_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: list[bytes] = []
    pool = ThreadPoolExecutor(2)

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        proc.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        while True:
            line = pool.submit(proc.stdout.readline).result(timeout=60)  # type: ignore[union-attr]
            assert line, "the server closed stdout"
            lines.append(line)
            message = json.loads(line)
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]

    try:
        errors = pool.submit(proc.stderr.read)
        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}}})
        assert "result" in answer(1)
        send({"method": "notifications/initialized"})
        # lines the server cannot read must not stop it (nor reach stdout as anything but JSON)
        proc.stdin.write(b"not json at all\n[1, 2\n\n")
        proc.stdin.write(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": '
                         b'{"name": "cos_task_create", "arguments": {"title": "\\ud800"}}}\n')
        send({"id": 2, "method": "tools/list"})
        tools = answer(2)
        send({"id": 3, "method": "tools/call", "params": {
            "name": "cos_task_create", "arguments": {"title": "over raw pipes"}}})
        created = answer(3)
        send({"id": 4, "method": "tools/call", "params": {
            "name": "cos_task_move", "arguments": {"task": "TASK-5", "status": "done"}}})
        failed = answer(4)
        proc.stdin.close()
        rest = pool.submit(proc.stdout.read).result(timeout=60)
        err = errors.result(timeout=60)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pool.shutdown()
        proc.stdout.close()
        proc.stderr.close()
    lines.extend(rest.splitlines(keepends=True))
    assert len(tools["result"]["tools"]) == 9
    assert created["result"]["isError"] is False
    assert failed["result"]["isError"] is True
    for line in lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0" and ("id" in message or "method" in message), line
    assert b"Traceback" not in err


# PostgreSQL: the same server with COS_DATABASE_URL naming a fresh schema.


@pytest.fixture
def pg_env(pg_url: str) -> dict[str, str]:
    return server_env(COS_DATABASE_URL=pg_url)


@pytest.mark.slow
def test_create_move_and_search_work_the_same_on_postgres(project: Path,
                                                          pg_env: dict[str, str]) -> None:
    async def body(client: Client) -> tuple[dict[str, Any], ...]:
        created = await call(client, "cos_task_create", {"title": "Postgres task foo_bar",
                                                         "status": "doing",
                                                         "agent_session": SESSION})
        moved = await call(client, "cos_task_move", {"task": "TASK-1", "status": "done",
                                                     "agent_session": SESSION})
        missing = await error(client, "cos_task_move", {"task": "TASK-2", "status": "done"})
        logged = await call(client, "cos_work_log_append", {"text": "logged on postgres"})
        found = await call(client, "cos_search", {"query": "FOO-BAR postgres"})
        both = await call(client, "cos_search", {"query": "postgres", "limit": 1})
        return created, moved, {"missing": missing}, logged, found, both

    created, moved, missing, logged, found, both = with_server(project, body, pg_env)
    assert created["owner"] == SESSION and moved["status"] == "done"
    assert "no task TASK-2" in missing["missing"]
    assert [r["ref"] for r in found["results"]] == ["TASK-1"]
    assert [r["kind"] for r in both["results"]] == ["work_log"] and both["next_cursor"]
    assert not (project / ".coding-os" / "coding-os.db").exists()


@pytest.mark.slow
def test_sql_looking_searches_leave_postgres_tables_intact(project: Path,
                                                           pg_env: dict[str, str]) -> None:
    pages, star, after = with_server(project, sql_queries_body, pg_env)
    check_sql_queries(pages, star, after)


@pytest.mark.slow
def test_results_stay_small_for_a_context_window(project: Path) -> None:
    long_body = "word " * 3000

    async def body(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        await call(client, "cos_task_create", {"title": "Big task", "body": long_body})
        await call(client, "cos_work_log_append", {"text": "needle " + "hay " * 1900})
        listed = await call(client, "cos_task_list", {})
        found = await call(client, "cos_search", {"query": "needle"})
        return listed, found

    listed, found = with_server(project, body)
    preview = listed["tasks"][0]["body"]
    assert preview.endswith("…") and len(preview) <= 301 and long_body.startswith(preview[:-1])
    (hit,) = found["results"]
    assert "needle" in hit["snippet"] and len(hit["snippet"]) <= 242


# -- over HTTP: a bearer token as well as a loopback Host (DESIGN.md §11) -------------------------


def task_titles(project: Path) -> list[str]:
    listed = cos_json("tasks", cwd=project)
    assert isinstance(listed, dict)
    return [task["title"] for task in listed["tasks"]]


@pytest.mark.slow
def test_over_http_a_call_without_the_bearer_token_is_refused_with_401_and_runs_nothing(
        project: Path) -> None:
    from tests.helpers import mcp_http_call, mcp_http_server

    with mcp_http_server(project) as server:
        created = mcp_http_call(server.url, "cos_task_create", {"title": "made by anyone"})
        searched = mcp_http_call(server.url, "cos_search", {"query": "deploy"})
    for status, body in (created, searched):
        assert status == 401, body
        assert json.loads(body)["error"] == "invalid_token"
    assert task_titles(project) == []


@pytest.mark.slow
def test_over_http_a_wrong_token_is_refused_with_401(project: Path) -> None:
    from tests.helpers import mcp_http_call, mcp_http_server

    with mcp_http_server(project) as server:
        token = server.token
        wrong = [f"Bearer {token[:-1]}", f"Bearer {token}x", f"Bearer {'A' * len(token)}",
                 f"Basic {token}", token, "Bearer", "Bearer ", f"Bearer {token[::-1]}"]
        answers = [mcp_http_call(server.url, "cos_task_create", {"title": "guessed"},
                                 authorization=value) for value in wrong]
    assert [status for status, _ in answers] == [401] * len(wrong)
    assert task_titles(project) == []


@pytest.mark.slow
def test_over_http_the_token_does_not_lift_the_loopback_host_check(project: Path) -> None:
    from tests.helpers import mcp_http_call, mcp_http_server

    with mcp_http_server(project) as server:
        status, body = mcp_http_call(server.url, "cos_task_create", {"title": "rebound"},
                                     authorization=f"Bearer {server.token}",
                                     headers={"Host": "attacker.example"})
    assert status == 421, body
    assert task_titles(project) == []


@pytest.mark.slow
def test_over_http_a_client_sending_the_token_is_served(project: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.helpers import mcp_http_call, mcp_http_server

    async def listed(url: str, token: str) -> list[str]:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(url, http_client=http),
                              read_timeout_seconds=60) as client:
                return [tool.name for tool in (await client.list_tools()).tools]

    with mcp_http_server(project) as server:
        names = asyncio.run(listed(server.url, server.token))
        status, body = mcp_http_call(server.url, "cos_task_create", {"title": "with the token"},
                                     authorization=f"Bearer {server.token}")
        errors = server.stderr.read_text(encoding="utf-8")
    assert sorted(names) == sorted(TOOL_NAMES)
    assert status == 200, body
    assert task_titles(project) == ["with the token"]
    assert "Traceback" not in errors


@pytest.mark.slow
def test_the_http_token_is_kept_0600_in_the_hub_and_the_same_at_the_next_start(
        project: Path, isolated_env: Path) -> None:
    from tests.helpers import mcp_http_server

    hub = isolated_env / ".coding-os"
    with mcp_http_server(project) as first:
        started = first.stderr.read_text(encoding="utf-8")
    with mcp_http_server(project) as second:
        pass
    path = hub / "mcp-token"
    assert path.read_text(encoding="utf-8").strip() == first.token == second.token
    assert len(first.token) >= 40
    assert path.stat().st_mode & 0o777 == 0o600 and hub.stat().st_mode & 0o777 == 0o700
    # stderr (never stdout: that may be the wire) says where to connect and with what
    (line,) = [line for line in started.splitlines() if first.url in line]
    assert f"Authorization: Bearer {first.token}" in line and str(path) in line


@pytest.mark.slow
def test_a_token_file_others_could_read_is_replaced_by_a_private_one(
        project: Path, isolated_env: Path) -> None:
    from tests.helpers import mcp_http_call, mcp_http_server

    hub = isolated_env / ".coding-os"
    hub.mkdir()
    hub.chmod(0o755)
    path = hub / "mcp-token"
    known = "K" * 43  # another user may have read it: it must not open the server
    path.write_text(known + "\n", encoding="utf-8")
    path.chmod(0o644)
    with mcp_http_server(project) as server:
        status, _ = mcp_http_call(server.url, "cos_task_create", {"title": "with a read token"},
                                  authorization=f"Bearer {known}")
    assert status == 401 and server.token != known
    assert path.read_text(encoding="utf-8").strip() == server.token
    assert path.stat().st_mode & 0o777 == 0o600 and hub.stat().st_mode & 0o777 == 0o700
    assert task_titles(project) == []


OTHER_USER_CLIENT = """
import json, sys, urllib.error, urllib.request
token_path, url = sys.argv[1], sys.argv[2]
try:
    open(token_path, encoding="utf-8").read()
    read = "read"
except PermissionError:
    read = "refused"
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "cos_search", "arguments": {"query": "deploy"},
    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {}}}}
request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "cos_search"})
try:
    status = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request).status
except urllib.error.HTTPError as exc:
    status = exc.code
print(read, status)
"""


@pytest.mark.slow
def test_another_local_user_can_neither_read_the_http_token_nor_call_the_server(
        project: Path) -> None:
    import shutil
    import tempfile

    from tests.helpers import mcp_http_server

    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv as root is needed to act as another user (CI=true)")
        pytest.skip("needs setpriv, run as root, to act as another user")
    # A HOME the other user can walk into (a test's tmp_path is behind 0700 directories): only
    # the hub's and the token's own modes keep the token.
    home = Path(tempfile.mkdtemp(prefix="cos-open-home-"))
    try:
        home.chmod(0o755)
        with mcp_http_server(project, env={"HOME": str(home)}) as server:
            proc = subprocess.run(
                [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                 "-c", OTHER_USER_CLIENT, str(home / ".coding-os" / "mcp-token"), server.url],
                capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["refused", "401"]
    finally:
        shutil.rmtree(home, ignore_errors=True)
