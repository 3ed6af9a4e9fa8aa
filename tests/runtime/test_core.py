"""The session core (runtime/core.py), in process: subscribers, task rules, bounded waits, the
repair of a task a killed process left open, and what a python session leaves behind."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from coding_os import api
from coding_os.errors import Conflict, InvalidInput
from coding_os.runtime import core, events
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.core import SessionCore, SessionSettings, Subscription, Timeouts
from coding_os.sessions import transcript
from tests.helpers import ProtocolProcess, cos, cos_json

ECHO = str(Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py") + ":EchoAgent"


def run(work: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(work(), 20))


async def until(subscription: Subscription, kind: str) -> list[dict[str, Any]]:
    """Events of `subscription` up to and including the first of type `kind`."""
    got = []
    while True:
        event = await asyncio.wait_for(subscription.get(), 10)
        assert event is not None, got
        got.append(event)
        if event["msg"]["type"] == kind:
            return got


class ScriptedBackend:
    """A backend whose agent does what the test says: it can end its process, or ignore an
    interrupt. Stands in for the agent, not for the core under test."""

    agent = "exec"
    runs_hooks = True  # no automatic checkpoints: not what these tests check

    def __init__(self, ignore_interrupts: bool = False) -> None:
        self.queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
        self.ignore_interrupts = ignore_interrupts
        self.inputs: list[str] = []
        self.configs: list[BackendConfig] = []

    async def start(self, config: BackendConfig) -> str | None:
        self.configs.append(config)
        return "native-1"

    async def submit(self, text: str) -> None:
        self.inputs.append(text)
        self.queue.put_nowait(BackendEvent("agent_message", {"text": f"got {text}"}))
        if text == "quick":
            self.queue.put_nowait(BackendEvent("task_complete", {"usage": {"n": 1}}))
        elif text == "die":
            self.queue.put_nowait(None)

    async def interrupt(self) -> None:
        if not self.ignore_interrupts:
            self.queue.put_nowait(BackendEvent("turn_aborted", {"reason": "interrupted"}))

    async def answer(self, request: str | int, allow: bool) -> None:
        return None

    async def events(self) -> AsyncIterator[BackendEvent]:
        while (event := await self.queue.get()) is not None:
            yield event

    async def close(self) -> None:
        self.queue.put_nowait(None)


def scripted_session(project: Path, backend: ScriptedBackend, **timeouts: float) -> SessionCore:
    made = core.create_session(SessionSettings("exec", str(project)), timeouts=Timeouts(**timeouts))
    made._backends = lambda agent: backend  # type: ignore[assignment]
    return made


def kinds(got: list[dict[str, Any]]) -> list[str]:
    return [event["msg"]["type"] for event in got]


def test_every_subscriber_gets_every_event_once_in_seq_order(project: Path) -> None:
    async def work() -> None:
        session = core.create_session(SessionSettings("exec", str(project)))
        early = session.subscribe(0)
        await session.configure()
        await session.user_input("echo one; echo two")
        await until(early, "task_complete")
        late = session.subscribe(2)  # joins after seq 2: gets the rest, then live
        await session.user_input("echo three")
        await until(early, "task_complete")
        await session.shutdown()
        stored = events.read_since(session.events_path, 0).events
        early_seen = [e async for e in drained(early)]
        late_seen = [e async for e in drained(late)]
        assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
        assert early_seen == [] and late_seen[-1] == stored[-1]
        assert [e["seq"] for e in late_seen] == list(range(3, len(stored) + 1))

    run(work)


async def drained(subscription: Subscription) -> AsyncIterator[dict[str, Any]]:
    while (event := await asyncio.wait_for(subscription.get(), 5)) is not None:
        yield event


def test_an_input_holding_a_lone_surrogate_is_refused_before_a_task_starts(project: Path) -> None:
    async def work() -> None:
        session = core.create_session(SessionSettings("exec", str(project)))
        await session.configure()
        with pytest.raises(InvalidInput, match=r"lone surrogate \(\\ud800\)"):
            await session.user_input("echo \ud800")
        await session.shutdown()
        assert "task_started" not in kinds(events.read_since(session.events_path, 0).events)

    run(work)


def test_a_backend_that_ends_mid_task_leaves_backend_exit_and_a_fatal_error_and_restarts(
        project: Path) -> None:
    async def work() -> None:
        backend = ScriptedBackend()
        session = scripted_session(project, backend)
        stream = session.subscribe(0)
        await session.user_input("die")
        got = await until(stream, "error")
        assert kinds(got)[-2:] == ["turn_aborted", "error"]
        assert got[-2]["msg"]["reason"] == "backend_exit" and got[-1]["msg"]["fatal"] is True
        backend.queue = asyncio.Queue()
        await session.user_input("quick")  # starts the backend again, resuming native-1
        got = await until(stream, "task_complete")
        assert kinds(got)[:2] == ["session_configured", "task_started"]
        assert backend.configs[-1].native_id == "native-1"
        await session.shutdown()

    run(work)


def test_an_agent_that_ignores_an_interrupt_is_recorded_aborted_after_a_bounded_wait(
        project: Path) -> None:
    async def work() -> None:
        started: list[ScriptedBackend] = []

        def stubborn(agent: str) -> ScriptedBackend:
            started.append(ScriptedBackend(ignore_interrupts=True))
            return started[-1]

        session = core.create_session(SessionSettings("exec", str(project)),
                                      timeouts=Timeouts(stop=0.2))
        session._backends = stubborn  # type: ignore[assignment]
        stream = session.subscribe(0)
        await session.user_input("slow")
        await session.user_input("quick")
        got = await until(stream, "task_complete")
        assert kinds(got) == ["session_configured", "task_started", "agent_message",
                              "turn_aborted", "error", "session_configured", "task_started",
                              "agent_message", "task_complete"]
        assert got[3]["msg"]["reason"] == "replaced" and got[4]["msg"]["fatal"] is False
        # the stubborn one was closed; a second one, resuming its native session, ran the input
        assert len(started) == 2 and started[1].configs[0].native_id == "native-1"
        assert started[0].inputs == ["slow"] and started[1].inputs == ["quick"]
        await session.shutdown()

    run(work)


def test_an_agent_that_never_answers_gets_an_error_then_an_interrupt(project: Path) -> None:
    async def work() -> None:
        session = core.create_session(SessionSettings("python", str(project),
                                                      options={"target": ECHO}),
                                      timeouts=Timeouts(reply=0.3))
        stream = session.subscribe(0)
        await session.user_input("sleep 60")
        got = await until(stream, "turn_aborted")
        assert kinds(got)[-2:] == ["error", "turn_aborted"]
        assert "no answer" in got[-2]["msg"]["message"]
        assert got[-1]["msg"]["reason"] == "interrupted"
        await session.shutdown()

    run(work)


def test_opening_a_log_that_ends_in_an_open_task_closes_it_as_backend_exit(
        project: Path) -> None:
    async def work() -> None:
        session = core.create_session(SessionSettings("exec", str(project)))
        await session.configure()
        session._log.append("task_started", {"task": 7}, reply_to="ui-1")
        session._log.close()  # as a killed process leaves it: no end of task 7,
        session._lease.release()  # type: ignore[union-attr]  # and its lease free
        reopened = core.open_session(session.session, str(project))
        stored = events.read_since(reopened.events_path, 0).events
        assert [e["msg"] for e in stored[-2:]][0] == {"type": "turn_aborted", "task": 7,
                                                      "reason": "backend_exit"}
        assert stored[-1]["msg"]["type"] == "error" and stored[-1]["id"] == "ui-1"
        stream = reopened.subscribe(reopened.last_seq)
        task = await reopened.user_input("echo again")
        assert task == 8
        got = await until(stream, "task_complete")
        assert got[0]["msg"]["type"] == "session_configured"
        await reopened.shutdown()

    run(work)


def test_a_python_session_is_a_cos_session_that_lists_and_forks(project: Path) -> None:
    async def work() -> None:
        session = core.create_session(SessionSettings("python", str(project),
                                                      options={"target": ECHO}))
        stream = session.subscribe(0)
        await session.user_input("hello")
        await until(stream, "task_complete")
        await session.shutdown()
        read = transcript.read(transcript.transcript_path(session.tiers, session.session))
        assert [(e["type"], e.get("text")) for e in read.entries[1:]] == [
            ("user", "hello"), ("assistant", "echo: hello")]
        listed = api.list_sessions(cwd=str(project))
        assert session.session in [row["id"] for row in listed]
        forked = core.fork_session(session.session, str(project))
        stream = forked.subscribe(0)
        await forked.user_input("again")
        got = await until(stream, "task_complete")
        assert got[0]["msg"]["native_id"] == forked.session != session.session
        await forked.shutdown()
        child = transcript.read(transcript.transcript_path(forked.tiers, forked.session))
        assert [e.get("text") for e in child.entries if e["type"] == "user"] == [
            "hello", "again"]

    run(work)



class NativeBackend(ScriptedBackend):
    """A backend of an agent with native sessions: a fork gets a native id of its own."""

    async def start(self, config: BackendConfig) -> str | None:
        self.configs.append(config)
        return "native-2" if config.fork else (config.native_id or "native-1")


def test_a_claude_session_forks_once_from_its_native_id_into_a_new_cos_session(
        project: Path) -> None:
    async def work() -> None:
        source_backend, fork_backend = NativeBackend(), NativeBackend()
        source = core.create_session(SessionSettings("claude", str(project), model="m"))
        source._backends = lambda agent: source_backend  # type: ignore[assignment]
        with pytest.raises(InvalidInput, match="never started"):
            core.fork_session(source.session, str(project))
        await source.configure()
        await source.shutdown()
        with pytest.raises(InvalidInput, match="forks whole"):
            core.fork_session(source.session, str(project), at=2)
        forked = core.fork_session(source.session, str(project))
        forked._backends = lambda agent: fork_backend  # type: ignore[assignment]
        stream = forked.subscribe(0)
        await forked.user_input("quick")
        got = await until(stream, "task_complete")
        assert forked.session != source.session and forked.agent == "claude"
        assert got[0]["msg"]["native_id"] == "native-2" and got[0]["msg"]["model"] == "m"
        assert [(c.native_id, c.fork) for c in fork_backend.configs] == [("native-1", True)]
        await fork_backend.close()  # its process ends: the next input resumes the fork itself
        await until(stream, "error")
        await forked.user_input("quick")
        await until(stream, "task_complete")
        assert [(c.native_id, c.fork) for c in fork_backend.configs][1:] == [("native-2", False)]
        await forked.shutdown()
        exec_session = core.create_session(SessionSettings("exec", str(project)))
        await exec_session.shutdown()
        with pytest.raises(InvalidInput, match="not supported"):
            core.fork_session(exec_session.session, str(project))

    run(work)


def test_an_engine_run_python_session_is_checkpointed_and_rewinds_to_before_its_prompt(
        project: Path, protocol: Callable[..., ProtocolProcess]) -> None:
    (project / "notes.txt").write_text("first\n", encoding="utf-8")
    process = protocol("--agent", "python")
    process.send("configure", target=ECHO)
    session = process.until_type("session_configured")[-1]["session"]
    process.send("user_input", text="write notes.txt: the AARDVARK line")
    request = process.until_type("approval_request")[-1]["msg"]["request"]
    process.send("approval", request=request, decision="allow")
    process.until_type("task_complete")
    process.send("shutdown")
    assert process.proc.wait(timeout=30) == 0
    assert (project / "notes.txt").read_text(encoding="utf-8") == "first\nthe AARDVARK line\n"
    rows = cos_json("checkpoints", "--session", session, cwd=project)
    assert isinstance(rows, list)
    # The tool's checkpoint is the prompt's: nothing changed between them (none is stored).
    assert [row["trigger"] for row in reversed(rows)] == ["prompt", "turn-end"]
    assert {row["prompt"] for row in rows} == {"write notes.txt: the AARDVARK line"}
    assert "notes.txt" in rows[0]["changed"]  # the turn's end saw what the tool wrote
    prompt_checkpoint = rows[-1]["id"]
    rewound = cos("rewind", "--code", prompt_checkpoint, cwd=project)
    assert rewound.returncode == 0, rewound.stderr
    assert (project / "notes.txt").read_text(encoding="utf-8") == "first\n"


def test_an_engine_run_session_takes_no_checkpoint_when_the_project_turns_them_off(
        project: Path) -> None:
    (project / ".coding-os.yaml").write_text("checkpoints:\n  auto: false\n", encoding="utf-8")

    async def work() -> None:
        session = core.create_session(SessionSettings("exec", str(project)))
        stream = session.subscribe(0)
        await session.user_input("echo hi > made.txt")
        got = await until(stream, "task_complete")
        await session.shutdown()
        assert "error" not in kinds(got)
        assert (project / "made.txt").exists()
        assert cos_json("checkpoints", "--session", session.session, cwd=project) == []

    run(work)


def test_a_secret_in_an_engine_run_prompt_is_redacted_in_its_checkpoint(project: Path) -> None:
    secret = "ghp_" + "a1B2" * 9

    async def work() -> None:
        session = core.create_session(SessionSettings("exec", str(project)))
        stream = session.subscribe(0)
        await session.user_input(f"echo {secret} > /dev/null")
        await until(stream, "task_complete")
        await session.shutdown()
        rows = cos_json("checkpoints", "--session", session.session, cwd=project)
        assert isinstance(rows, list) and rows
        assert all(secret not in str(row["prompt"]) for row in rows)
        assert [row["trigger"] for row in reversed(rows)] == ["prompt", "turn-end"]

    run(work)


class ApprovingBackend(ScriptedBackend):
    """An agent without hooks that asks before a Codex-like file change, and ends its turn once
    answered."""

    runs_hooks = False

    async def submit(self, text: str) -> None:
        self.inputs.append(text)
        self.queue.put_nowait(BackendEvent("approval_request", {
            "request": 7, "tool": "fileChange",
            "input": {"changes": [{"path": "edited.txt", "kind": "update"}]}}))

    async def answer(self, request: str | int, allow: bool) -> None:
        self.queue.put_nowait(BackendEvent("task_complete", {"usage": None}))


def test_an_allowed_writing_tool_of_an_agent_without_hooks_is_checkpointed_before_it_runs(
        project: Path) -> None:
    async def work() -> None:
        session = scripted_session(project, ApprovingBackend())
        stream = session.subscribe(0)
        await session.user_input("change it")
        await until(stream, "approval_request")
        (project / "edited.txt").write_text("changed before the answer\n", encoding="utf-8")
        await session.approval(7, True)
        await until(stream, "task_complete")
        await session.shutdown()
        rows = cos_json("checkpoints", "--session", session.session, cwd=project)
        assert isinstance(rows, list)
        assert [row["trigger"] for row in reversed(rows)] == [
            "prompt", "tool:fileChange", "turn-end"]
        assert "edited.txt" in rows[1]["changed"]

    run(work)


def test_one_process_serves_a_session_and_reading_it_needs_no_lease(project: Path) -> None:
    async def work() -> None:
        served = core.create_session(SessionSettings("exec", str(project)))
        await served.user_input("echo one")
        await served.wait_idle()
        stored = (Path(served.events_path)).read_bytes()
        with pytest.raises(Conflict, match=f"session {served.session} is being served by "
                                           rf"another process \(pid {os.getpid()}\)"):
            core.open_session(served.session, str(project))
        assert Path(served.events_path).read_bytes() == stored  # the refused open wrote nothing
        lock = Path(events.lease_path(served.tiers, served.session))
        assert lock.stat().st_mode & 0o777 == 0o600
        read = core.open_session(served.session, str(project), repair=False)
        assert read.last_seq == served.last_seq
        await read.shutdown()
        await served.shutdown()
        again = core.open_session(served.session, str(project))
        stream = again.subscribe(again.last_seq)
        await again.user_input("echo two")
        assert "two" in [e["msg"].get("text") for e in await until(stream, "task_complete")]
        await again.shutdown()

    run(work)


def test_a_second_cos_protocol_on_a_served_session_is_refused_and_a_killed_servers_is_free(
        project: Path, protocol: Callable[..., ProtocolProcess]) -> None:
    first = protocol("--agent", "exec")
    first.send("configure")
    session = first.until_type("session_configured")[-1]["session"]
    first.send("user_input", text="echo before")
    first.until_type("task_complete")
    log = project / ".coding-os" / "exec" / "events" / f"{session}.jsonl"
    stored = log.read_bytes()
    second = protocol("--session", session)
    refused = second.until_type("error")[-1]["msg"]
    assert refused["message"] == (f"session {session} is being served by another process "
                                  f"(pid {first.proc.pid})")
    assert log.read_bytes() == stored
    first.send("user_input", text="echo still served")
    assert first.until_type("task_complete")[-2]["msg"]["text"] == "still served"
    first.kill()
    third = protocol("--session", session)
    third.send("user_input", text="echo resumed")
    got = third.until_type("task_complete")
    assert [e["msg"].get("text") for e in got if e["msg"]["type"] == "agent_message"] == [
        "resumed"]


class StreamingBackend(ScriptedBackend):
    """An agent that says `count` things per input, one per turn of the event loop, then ends
    its turn: events keep coming while a client is away."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count
        self.turns: list[asyncio.Task[None]] = []

    async def submit(self, text: str) -> None:
        self.turns.append(asyncio.create_task(self._say(text)))

    async def _say(self, text: str) -> None:
        for number in range(self.count):
            self.queue.put_nowait(BackendEvent("agent_message", {"text": f"{text} {number}"}))
            await asyncio.sleep(0)
        self.queue.put_nowait(BackendEvent("task_complete", {"usage": None}))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_a_client_that_leaves_at_a_random_seq_and_resumes_sees_with_the_other_the_whole_log(
        project: Path, seed: int) -> None:
    rng = random.Random(seed)

    async def work() -> None:
        session = scripted_session(project, StreamingBackend(count=40))
        staying, leaving = session.subscribe(0), session.subscribe(0)

        async def drive() -> None:
            for number in range(3):
                await session.user_input(f"input {number}")
                await session.wait_idle()

        driver = asyncio.create_task(drive())
        cut = rng.randint(1, 100)  # three tasks of 40 messages make about 130 events
        before: list[dict[str, Any]] = []
        while not before or before[-1]["seq"] < cut:
            event = await asyncio.wait_for(leaving.get(), 10)
            assert event is not None
            before.append(event)
        session.unsubscribe(leaving)
        for _ in range(rng.randint(0, 60)):  # away while the agent goes on
            await asyncio.sleep(0)
        back = session.subscribe(before[-1]["seq"])
        await driver
        await session.shutdown()  # ends every subscription once what it holds is read
        stayed = [event async for event in drained(staying)]
        after = [event async for event in drained(back)]
        stored = events.read_since(session.events_path, 0).events
        assert len(stored) > cut
        assert stayed == stored
        assert before + after == stored  # in order, no gap, no duplicate

    run(work)


def test_a_resumed_python_agent_is_given_the_conversation_so_far_in_a_new_process(
        project: Path, protocol: Callable[..., ProtocolProcess]) -> None:
    first = protocol("--agent", "python")
    first.send("configure", target=ECHO)
    session = first.until_type("session_configured")[-1]["session"]
    for text in ("hello", "recall"):
        first.send("user_input", text=text)
        said = first.until_type("task_complete")[-2]["msg"]["text"]
    assert said == "turn 2; you said: hello"
    first.send("shutdown")
    assert first.proc.wait(timeout=30) == 0
    second = protocol("--session", session)
    second.send("user_input", text="recall")
    got = second.until_type("task_complete")
    assert [e["msg"]["text"] for e in got if e["msg"]["type"] == "agent_message"] == [
        "turn 3; you said: hello | recall"]


def test_a_forked_python_agent_is_given_the_conversation_up_to_the_fork(project: Path) -> None:
    async def work() -> None:
        source = core.create_session(SessionSettings("python", str(project),
                                                     options={"target": ECHO}))
        for text in ("one", "two"):
            await source.user_input(text)
            await source.wait_idle()
        await source.shutdown()
        entries = transcript.read(transcript.transcript_path(source.tiers, source.session))
        first_answer = next(e["seq"] for e in entries.entries if e.get("text") == "echo: one")
        forked = core.fork_session(source.session, str(project), at=first_answer)
        stream = forked.subscribe(0)
        await forked.user_input("recall")
        got = await until(stream, "task_complete")
        assert got[-2]["msg"]["text"] == "turn 2; you said: one"
        await forked.shutdown()

    run(work)


@pytest.mark.slow
def test_a_command_that_never_takes_its_large_input_is_killed_and_reaped_when_the_submit_times_out(
        project: Path) -> None:
    command = ('read first; echo "$$" >> pids.txt; '
               'if [ "$first" = big ]; then exec sleep 60; fi; echo took "$first"')

    async def work() -> None:
        session = core.create_session(
            SessionSettings("exec", str(project), options={"command": command}),
            timeouts=Timeouts(call=1.0))
        stream = session.subscribe(0)
        await session.user_input("big\n" + "x" * (8 << 20))  # far more than a pipe holds
        got = await until(stream, "turn_aborted")
        assert got[-1]["msg"]["reason"] == "backend_exit"
        assert "the agent did not take the input in time" in [e["msg"].get("message") for e in got]
        await session.user_input("small\n")
        got = await until(stream, "task_complete")
        assert "took small" in [e["msg"].get("text") for e in got]
        await session.shutdown()
        stuck = int((project / "pids.txt").read_text(encoding="utf-8").split()[0])
        with pytest.raises(ProcessLookupError):
            os.kill(stuck, 0)  # killed, and reaped: not even a zombie is left

    run(work)
