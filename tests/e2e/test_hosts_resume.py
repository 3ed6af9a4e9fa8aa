"""`cos resume` on host B of a session written on host A (DESIGN.md §8), two hosts simulated on
this machine: two HOMEs, two clones of one repository at different paths, COS_HOST=a and b, one
PostgreSQL schema. The real Claude Code and Codex run the session on A against the scripted model;
`cos sync` replicates it; on B `cos resume` materialises it and hands over to the real client
(through a shim on PATH that adds the non-interactive prompt), whose model request carries the
earlier messages and runs in B's checkout. A cos-native session with its events log goes the same
way and continues on B. Bad input: a repository B does not have, a local file that differs, and
a PostgreSQL that stops answering mid-resume (nothing half-written)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
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
from tests.e2e.model_server import ModelServer, Text, ToolCall, tool_output_text, when_prompted
from tests.helpers import (COS, ECHO_AGENT, CuttingProxy, Host, make_host, new_origin,
                           replicator_stopped, require_clients, succeeded, until)

pytestmark = pytest.mark.e2e

FIRST = "FIRST-PROMPT remember the word PELICAN"
SECOND = "SECOND-PROMPT where are you now?"


@pytest.fixture
def hosts(tmp_path: Path, pg_url: str) -> Iterator[tuple[Host, Host]]:
    """Host A and host B: clones of one repository at different paths, one PostgreSQL schema;
    the background replicators their agents' hooks started are stopped before the schema."""
    origin = new_origin(tmp_path / "origin")
    a = make_host(tmp_path, "a", origin, "host-a/src/proj", pg_url)
    b = make_host(tmp_path, "b", origin, "host-b/work/deeper/proj", pg_url)
    yield a, b
    for host in (a, b):
        replicator_stopped(host.checkout / ".coding-os")


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


def no_temporaries(folder: Path) -> bool:
    return not folder.exists() or not [p for p in folder.rglob(".*.tmp-*")]


# -- Claude Code ----------------------------------------------------------------------------------


def claude_on_a(a: Host, server: ModelServer) -> str:
    done = succeeded(run_claude(a.checkout, FIRST, server, a.home,
                                env={"COS_HOST": "a", "COS_DATABASE_URL": a.env["COS_DATABASE_URL"]}))
    native: str = json.loads(done.stdout)["session_id"]
    succeeded(a.cos("sync"))
    return native


def munged(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def test_a_claude_session_of_host_a_resumes_on_host_b_in_bs_checkout(
        hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = hosts
    with ModelServer(pwd_script("second turn done")) as server:
        native = claude_on_a(a, server)
        listed = b.cos_json("sessions", "--all-hosts")
        row = next(r for r in listed if native in (r["id"], r["native_id"]))
        assert row["host"] == "a"
        assert all(r["host"] == "b" for r in b.cos_json("sessions"))  # default: this host
        assert [r["host"] for r in b.cos_json("sessions", "--host", "a")
                if native in (r["id"], r["native_id"])] == ["a"]
        table = succeeded(b.cos("sessions", "--all-hosts")).stdout
        assert any(row["id"] in line and "@a" in line for line in table.splitlines())

        env = {**claude_env(server, b.home), **b.env, **shim(b, "claude", SECOND)}
        resumed = b.cos("resume", native, env=env)
        assert resumed.returncode == 0, resumed.stderr
        target = b.home / ".claude" / "projects" / munged(b.checkout) / f"{native}.jsonl"
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
    stored = stored_lines(b, row["id"], "native") or stored_lines(b, native, "native")
    assert len(stored) == len(written)
    assert any(str(a.checkout).encode() in line for line in stored)  # A's lines as A wrote them
    assert stored[-1] == written[-1]  # B's own lines as written on B


def test_a_claude_session_that_ended_on_a_is_read_on_b_with_no_command_run_on_a(
        hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = hosts
    script = [ToolCall("Bash", {"command": "pwd", "description": "where"}),
              Text("LAST-WORDS-OF-HOST-A")]
    with ModelServer(script) as server:
        # Claude Code and its hooks only: not one cos command on A after the session.
        done = succeeded(run_claude(a.checkout, FIRST, server, a.home, env={
            "COS_HOST": "a", "COS_DATABASE_URL": a.env["COS_DATABASE_URL"]}))
    native = json.loads(done.stdout)["session_id"]
    a_file = a.home / ".claude" / "projects" / munged(a.checkout) / f"{native}.jsonl"

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
        hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = hosts
    with ModelServer(pwd_script("second turn done")) as server:
        native = claude_on_a(a, server)
        a_file = a.home / ".claude" / "projects" / munged(a.checkout) / f"{native}.jsonl"
        first = a_file.read_bytes().splitlines()
        env = {**claude_env(server, b.home), **b.env, **shim(b, "claude", SECOND)}
        resumed = b.cos("resume", native, env=env)
        assert resumed.returncode == 0, resumed.stderr
    b_file = b.home / ".claude" / "projects" / munged(b.checkout) / f"{native}.jsonl"
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
        hosts: tuple[Host, Host], tmp_path: Path, pg_url: str) -> None:
    require_clients()
    a, _ = hosts
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
        hosts: tuple[Host, Host]) -> None:
    require_clients()
    a, b = hosts
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


# -- cos-native -----------------------------------------------------------------------------------


def engine_session(host: Host, *inputs: str, session: str | None = None) -> str:
    ops = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
           *[{"id": str(n + 2), "op": {"type": "user_input", "text": text}}
             for n, text in enumerate(inputs)]]
    args = ("protocol",) if session is None else ("protocol", "--session", session)
    done = succeeded(host.cos(*args, input="".join(json.dumps(x) + "\n" for x in ops)))
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(e["msg"]["type"] == "task_complete" for e in events), events
    return str(events[0]["session"])


def test_a_cos_native_session_with_events_resumes_on_host_b(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    sid = engine_session(a, FIRST)
    succeeded(a.cos("sync"))
    report = b.cos_json("resume", sid)
    assert report["host"] == "a" and report["handover"] is None
    written = {f["stream"]: f for f in report["materialized"]}
    transcript = b.checkout / ".coding-os" / "python" / "transcripts" / f"{sid}.jsonl"
    events = b.checkout / ".coding-os" / "python" / "events" / f"{sid}.jsonl"
    assert written["transcript"]["path"] == str(transcript)
    assert written["transcript"]["action"] == "written" and transcript.is_file()
    assert written["events"]["path"] == str(events) and events.is_file()
    assert report["restored"]["entries"] == len(transcript.read_bytes().splitlines())
    meta = json.loads(transcript.read_bytes().splitlines()[0])
    assert meta["project"] == str(b.checkout)
    engine_session(b, SECOND, session=sid)  # the engine goes on with it here, in B's checkout
    entries = [json.loads(x) for x in transcript.read_bytes().splitlines()]
    assert [e["text"] for e in entries if e["type"] == "user"] == [FIRST, SECOND]
    assert entries[-1]["text"] == f"echo: {SECOND}"
    configured = [json.loads(x)["msg"] for x in events.read_bytes().splitlines()]
    assert {m["cwd"] for m in configured if m["type"] == "session_configured"} == {
        str(b.checkout)}


def test_a_local_file_that_differs_is_left_alone_and_a_prefix_gets_the_rest(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    sid = engine_session(a, FIRST)
    succeeded(a.cos("sync"))
    preview = b.cos_json("resume", sid, "--dry-run")
    transcript = Path(next(f["path"] for f in preview["materialized"]
                           if f["stream"] == "transcript"))
    assert not transcript.exists()  # a dry run writes nothing
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_bytes(b'{"something": "else"}\n')
    refused = b.cos("resume", sid, "--json")
    assert refused.returncode == 7 and refused.stderr.count("\n") == 1, refused.stderr
    assert transcript.read_bytes() == b'{"something": "else"}\n'
    transcript.unlink()
    whole = b.cos_json("resume", sid)
    assert whole["moved_from"] == "a"
    full = transcript.read_bytes()
    # A takes it back: its own files are the replica mapped to A's checkout, left as they are.
    back = a.cos_json("resume", sid)
    assert back["moved_from"] == "b"
    assert {f["action"] for f in back["materialized"]} == {"unchanged"}
    transcript.write_bytes(full[:full.index(b"\n") + 1])  # its first line only
    again = b.cos_json("resume", sid)
    assert {f["stream"]: f["action"] for f in again["materialized"]}["transcript"] == "extended"
    assert transcript.read_bytes() == full
    assert whole["restored"]["entries"] == again["restored"]["entries"]


def stored_lines(host: Host, sid: str, stream: str) -> list[bytes]:
    from coding_os.storage.postgres import PostgresStorage

    with PostgresStorage(host.env["COS_DATABASE_URL"]) as storage:
        return [line for _, line in storage.replica_lines(sid, stream)]


def test_a_cos_native_session_moves_to_host_b_goes_on_there_and_comes_back_to_a(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    sid = engine_session(a, FIRST)
    succeeded(a.cos("sync"))
    a_file = a.checkout / ".coding-os" / "python" / "transcripts" / f"{sid}.jsonl"
    b_file = b.checkout / ".coding-os" / "python" / "transcripts" / f"{sid}.jsonl"
    first = a_file.read_bytes().splitlines()
    moved = b.cos("resume", sid)
    assert moved.returncode == 0, moved.stderr
    assert re.search(r"^moved +from host a to this one", moved.stdout, re.M), moved.stdout
    again = b.cos_json("resume", sid)  # B's own now, its row naming B's checkout
    assert (again["host"], again["moved_from"], again["cwd"]) == (None, None, str(b.checkout))
    row = next(r for r in b.cos_json("sessions", "--all-hosts") if r["id"] == sid)
    assert row["host"] == "b"
    engine_session(b, SECOND, session=sid)  # B goes on with it
    pushed = b.cos_json("sync")
    assert pushed["refused"] == [] and pushed["restarted"] == []
    on_b = b_file.read_bytes().splitlines()
    # exactly B's new lines were pushed, after A's: each line once, as its host wrote it
    assert pushed["pushed"][f"transcript:{sid}"] == len(on_b) - len(first)
    stored = stored_lines(a, sid, "transcript")
    assert stored == first + on_b[len(first):]
    assert stored_lines(a, sid, "events")[-1] == \
        (b.checkout / ".coding-os" / "python" / "events" / f"{sid}.jsonl").read_bytes() \
        .splitlines()[-1]
    assert b.cos_json("sync")["pushed"] == {}  # nothing more

    back = a.cos_json("resume", sid)  # back on A: its own file is a prefix, it gets the rest
    assert back["moved_from"] == "b"
    assert {f["stream"]: f["action"] for f in back["materialized"]}["transcript"] == "extended"
    data = a_file.read_bytes()
    assert str(b.checkout).encode() not in data  # B's lines carry A's paths here
    entries = [json.loads(x) for x in data.splitlines()]
    assert [e["text"] for e in entries if e["type"] == "user"] == [FIRST, SECOND]
    assert [e["text"] for e in entries if e["type"] == "assistant"][-1] == f"echo: {SECOND}"
    assert len({json.dumps(e, sort_keys=True) for e in entries}) == len(entries)
    assert entries[0]["project"] == str(a.checkout)
    again = a.cos_json("sync")
    assert again["restarted"] == [] and again["refused"] == [] and again["pushed"] == {}
    engine_session(a, "THIRD-PROMPT", session=sid)  # A goes on: its lines follow B's
    assert a.cos_json("sync")["pushed"][f"transcript:{sid}"] == \
        len(a_file.read_bytes().splitlines()) - len(stored)
    assert stored_lines(a, sid, "transcript")[:len(stored)] == stored


def test_two_hosts_resuming_one_session_at_once_exactly_one_takes_it_from_its_owner(
        hosts: tuple[Host, Host], tmp_path: Path, pg_url: str) -> None:
    a, b = hosts
    c = make_host(tmp_path, "c", Path(subprocess.run(
        ["git", "-C", str(a.checkout), "remote", "get-url", "origin"], check=True,
        capture_output=True, text=True).stdout.strip()), "host-c/proj", pg_url)
    from coding_os.storage.postgres import PostgresStorage

    for _ in range(3):
        sid = engine_session(a, FIRST)
        succeeded(a.cos("sync"))
        runs = [subprocess.Popen([COS, "resume", sid, "--json"], cwd=h.checkout, env=h.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for h in (b, c)]
        outs = [run.communicate(timeout=120) for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outs
        moved = {h.name: json.loads(out)["moved_from"] for h, (out, _) in zip((b, c), outs)}
        # One takes it from A; the other either lost the race (not moved) or resumed after
        # it and took it from the first (the last host to resume owns it).
        (first,) = [name for name, old in moved.items() if old == "a"]
        other = "c" if first == "b" else "b"
        assert moved[other] in (None, first)
        owner = other if moved[other] == first else first
        with PostgresStorage(pg_url) as storage:
            row = storage.index_row(sid)
            assert row is not None and row.host == owner
            assert {s.host for s in storage.replica_sources(sid)} == {owner}


# -- PostgreSQL going away mid-resume -------------------------------------------------------------


@pytest.fixture
def proxy() -> Iterator[CuttingProxy]:
    cutting = CuttingProxy(budget=11 << 19)  # 5.5 MB: inside the second batch of lines
    yield cutting
    cutting.close()


def big_claude_session(a: Host, native: str, lines: int = 7000) -> Path:
    """A Claude Code transcript of A's checkout, about 6.7 MB (two batches of replicated lines
    read back), as Claude writes them."""
    folder = a.home / ".claude" / "projects" / munged(a.checkout)
    folder.mkdir(parents=True)
    path = folder / f"{native}.jsonl"
    parent = None
    with open(path, "w", encoding="utf-8") as f:
        for n in range(lines):
            uuid = f"00000000-0000-4000-8000-{n:012d}"
            kind = "user" if n % 2 == 0 else "assistant"
            content = f"turn {n}: " + "lorem ipsum dolor sit amet " * 20
            entry = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                     "cwd": str(a.checkout), "sessionId": native, "version": "2.1.328",
                     "gitBranch": "main", "type": kind, "uuid": uuid,
                     "timestamp": f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                     "message": {"role": kind, "content": content}}
            f.write(json.dumps(entry, separators=(",", ":")) + "\n")
            parent = uuid
    return path


def test_postgresql_going_away_mid_resume_leaves_nothing_half_written(
        hosts: tuple[Host, Host], proxy: CuttingProxy) -> None:
    a, b = hosts
    native = "0a1b2c3d-1111-4222-8333-444455556666"
    source = big_claude_session(a, native)
    succeeded(a.cos("sync"))
    url = proxy.url(b.env["COS_DATABASE_URL"])
    assert url != b.env["COS_DATABASE_URL"]
    folder = b.home / ".claude" / "projects" / munged(b.checkout)
    target = folder / f"{native}.jsonl"
    done = b.cos("resume", native, "--json", env={"COS_DATABASE_URL": url})
    assert proxy.cut >= 1, done.stderr  # the database did stop answering mid-read
    assert done.returncode == 6, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not target.exists() and no_temporaries(folder)
    # A previous (shorter) file stays as it was.
    mapped = source.read_bytes().replace(f'"cwd":"{a.checkout}"'.encode(),
                                         f'"cwd":"{b.checkout}"'.encode())
    folder.mkdir(parents=True, exist_ok=True)
    first = mapped.split(b"\n", 1)[0] + b"\n"
    target.write_bytes(first)
    done = b.cos("resume", native, "--json", env={"COS_DATABASE_URL": url})
    assert done.returncode == 6 and target.read_bytes() == first, done.stderr
    assert no_temporaries(folder)
    report = b.cos_json("resume", native)  # with the database back, the rest is written
    assert [f["action"] for f in report["materialized"]] == ["extended"]
    assert target.read_bytes() == mapped


# -- listing --------------------------------------------------------------------------------------


def test_sessions_of_each_host_are_listed_by_host_and_bad_host_flags_are_refused(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    sid_a = engine_session(a, FIRST)
    sid_b = engine_session(b, SECOND)
    succeeded(a.cos("sync"))
    mine = [r["id"] for r in b.cos_json("sessions")]
    assert mine == [sid_b]
    every = {r["id"]: r["host"] for r in b.cos_json("sessions", "--all-hosts")}
    assert every == {sid_a: "a", sid_b: "b"}  # A's in B's worktree scope: its root mapped
    assert [r["id"] for r in b.cos_json("sessions", "--host", "a")] == [sid_a]
    assert [r["id"] for r in a.cos_json("sessions", "--host", "b", "--scope", "repo")] == [sid_b]
    table = succeeded(b.cos("sessions", "--all-hosts")).stdout.splitlines()
    assert len(table) == 2
    assert all(("@a " in line) == line.startswith(sid_a) for line in table)  # B's unmarked
    for args in (("--host", "a", "--all-hosts"), ("--host", "no such/host")):
        refused = b.cos("sessions", *args)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr


def test_on_sqlite_a_session_indexed_under_an_earlier_host_name_is_listed_and_resumed_as_local(
        repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(isolated_env), "COS_HOST": "old-name"}
    ops = [{"id": "1", "op": {"type": "configure", "agent": "python", "target": ECHO_AGENT}},
           {"id": "2", "op": {"type": "user_input", "text": FIRST}}]
    done = succeeded(subprocess.run([COS, "protocol"], cwd=repo, env=env, capture_output=True,
                                    text=True, timeout=120,
                                    input="".join(json.dumps(x) + "\n" for x in ops)))
    sid = json.loads(done.stdout.splitlines()[0])["session"]
    succeeded(subprocess.run([COS, "sessions"], cwd=repo, env=env, capture_output=True))
    renamed = {**env, "COS_HOST": "new-name"}  # SQLite: one machine, renamed; nothing replicated
    listed = subprocess.run([COS, "sessions", "--json"], cwd=repo, env=renamed,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["host"]) for r in json.loads(listed.stdout)] == [(sid, "new-name")]  # re-indexed as its own
    resumed = subprocess.run([COS, "resume", sid, "--json"], cwd=repo, env=renamed,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["host"] is None and report["materialized"] == []  # this machine's own
    assert report["restored"]["entries"] == 3 and report["cwd"] == str(repo)
