"""`cos protocol` as a whole process (runtime/protocol.py): the conformance scenarios of §7 over
every backend the `backend` fixture lists, re-attach across a SIGKILL, and bad input."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from coding_os.runtime import events
from coding_os.state.tiers import Tiers

Start = Any  # the `protocol` fixture: starts a cos protocol process


def kinds(got: list[dict[str, Any]]) -> list[str]:
    return [event["msg"]["type"] for event in got]


def stored(project: Path, session: str) -> list[dict[str, Any]]:
    return events.read_since(events.events_path(Tiers(str(project / ".coding-os")), session),
                             0).events


def configured(client: Any, backend: Any) -> str:
    client.send("configure", **backend.configure)
    event = client.until_type("session_configured")[-1]
    assert event["msg"]["agent"] == backend.agent
    return str(event["session"])


def test_a_task_runs_to_task_complete_with_the_agents_messages(protocol: Start, backend: Any,
                                                                project: Path) -> None:
    client = protocol()
    session = configured(client, backend)
    submission = client.send("user_input", text=backend.quick)
    got = client.until_type("task_complete")
    assert kinds(got)[0] == "task_started"
    assert backend.quick_says in [e["msg"].get("text") for e in got]
    assert all(e["id"] == submission and e["session"] == session for e in got)
    assert got[-1]["msg"]["task"] == got[0]["msg"]["task"]
    seqs = [e["seq"] for e in client.seen]
    assert seqs == list(range(1, len(seqs) + 1))
    assert client.seen == stored(project, session)


def test_an_interrupt_mid_task_aborts_it_and_the_next_input_works(protocol: Start,
                                                                    backend: Any) -> None:
    client = protocol()
    configured(client, backend)
    client.send("user_input", text=backend.slow)
    client.until_says(backend.slow_says)
    client.send("interrupt")
    aborted = client.until_type("turn_aborted")[-1]
    assert aborted["msg"]["reason"] == "interrupted"
    client.send("user_input", text=backend.quick)
    got = client.until_type("task_complete")
    assert backend.quick_says in [e["msg"].get("text") for e in got]


def test_a_second_input_mid_task_replaces_the_running_one(protocol: Start,
                                                           backend: Any) -> None:
    client = protocol()
    configured(client, backend)
    client.send("user_input", text=backend.slow)
    first = client.until_says(backend.slow_says)[0]
    client.send("user_input", text=backend.quick)
    aborted = client.until_type("turn_aborted")[-1]
    assert aborted["msg"] == {"type": "turn_aborted", "reason": "replaced",
                              "task": first["msg"]["task"]}
    got = client.until_type("task_complete")
    assert kinds(got)[0] == "task_started"
    assert got[-1]["msg"]["task"] != first["msg"]["task"]
    assert backend.quick_says in [e["msg"].get("text") for e in got]


def test_an_approval_denied_then_allowed_runs_the_tool_only_after_allow(
        protocol: Start, backend: Any, project: Path) -> None:
    if not backend.approvals:
        pytest.skip(f"{backend.agent} asks for no approval")
    client = protocol()
    configured(client, backend)
    target = project / "notes.txt"
    client.send("user_input", text="write notes.txt: first")
    asked = client.until_type("approval_request")[-1]["msg"]
    assert asked["tool"] == "Write" and not target.exists()
    client.send("approval", request=asked["request"], decision="deny")
    got = client.until_type("task_complete")
    assert "tool_call" not in kinds(got) and not target.exists()
    client.send("user_input", text="write notes.txt: second")
    asked = client.until_type("approval_request")[-1]["msg"]
    assert not target.exists()
    client.send("approval", request=asked["request"], decision="allow")
    got = client.until_type("task_complete")
    assert kinds(got)[:2] == ["tool_call", "tool_result"]
    assert target.read_text(encoding="utf-8") == "second\n"


def test_shutdown_ends_the_process_with_exit_status_zero(protocol: Start,
                                                          backend: Any) -> None:
    client = protocol()
    configured(client, backend)
    client.send("user_input", text=backend.slow)
    client.until_says(backend.slow_says)
    client.send("shutdown")
    aborted = client.until_type("turn_aborted")[-1]
    assert aborted["msg"]["reason"] == "shutdown"
    assert client.proc.wait(timeout=15) == 0


@pytest.mark.slow
@pytest.mark.parametrize("run", range(3))
def test_a_new_process_resumes_after_a_sigkill_mid_task_with_no_gap_and_no_duplicate(
        protocol: Start, backend: Any, project: Path, run: int) -> None:
    first = protocol()
    session = configured(first, backend)
    first.send("user_input", text=backend.quick)
    first.until_type("task_complete")
    first.send("user_input", text=backend.slow)
    slow = first.until_says(backend.slow_says)[-1]["msg"]["text"]
    seen_before = list(first.seen)
    first.kill()
    if backend.agent == "exec":
        # The kernel kills the command's shell with the process (its parent-death signal), but
        # not what the shell started: end the rest of its group here, if any is left.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(slow.split()[-1]), signal.SIGKILL)
    # The client saw up to some seq (a different one each run), then resumes from there.
    last_seen = seen_before[-1 - run]["seq"] if run < len(seen_before) else 0
    second = protocol()
    second.send("resume", session=session, last_seq=last_seen)
    replayed = second.until(lambda e: e["msg"]["type"] == "error" and e["msg"]["fatal"])
    assert [e["msg"]["type"] for e in replayed[-2:]] == ["turn_aborted", "error"]
    assert replayed[-2]["msg"]["reason"] == "backend_exit"
    second.send("user_input", text=backend.quick)
    second.until_type("task_complete")
    union = {e["seq"]: e for e in seen_before if e["seq"] <= last_seen}
    for event in second.seen:
        assert event["seq"] not in union
        union[event["seq"]] = event
    log = stored(project, session)
    assert [union[s] for s in sorted(union)] == log
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    # The resumed session started its backend again with the stored settings.
    restarted = [e for e in second.seen if e["msg"]["type"] == "session_configured"]
    assert restarted and restarted[0]["msg"]["agent"] == backend.agent


def test_resume_in_the_same_process_replays_from_last_seq_then_goes_on_live(
        protocol: Start, backend: Any) -> None:
    client = protocol()
    session = configured(client, backend)
    client.send("user_input", text=backend.quick)
    client.until_type("task_complete")
    before = list(client.seen)
    client.send("resume", session=session, last_seq=1)
    replayed = client.until(lambda e: e["seq"] == before[-1]["seq"])
    assert replayed == before[1:]
    client.send("user_input", text=backend.quick)
    live = client.until_type("task_complete")
    assert live[0]["seq"] == before[-1]["seq"] + 1


def bad(client: Any) -> dict[str, Any]:
    event: dict[str, Any] = client.read()
    assert event["msg"]["type"] == "error" and event["seq"] is None, event
    return event


def test_bad_input_gets_error_events_and_the_process_keeps_serving(
        protocol: Start, project: Path, tmp_path: Path) -> None:
    client = protocol("--agent", "exec")
    client.send_raw(b"this is not json\n")
    assert "not JSON" in bad(client)["msg"]["message"]
    client.send_raw(b"[1, 2]\n")
    bad(client)
    client.send("reticulate")
    assert "unknown op" in bad(client)["msg"]["message"]
    client.send("user_input", text="echo x")
    assert "no session" in bad(client)["msg"]["message"]
    client.send_raw(b'{"id": "big", "op": {"type": "user_input", "text": "'
                    + b"x" * (3 << 20) + b'"}}\n')
    assert "longer than" in bad(client)["msg"]["message"]
    client.send("resume", session="ses-exec-20200101-000000-abcd", last_seq=0)
    assert "no session" in bad(client)["msg"]["message"]
    client.send("resume", session="not-an-id", last_seq=0)
    bad(client)
    client.send("configure")
    session = client.until_type("session_configured")[-1]["session"]
    client.send("user_input")
    assert "'text'" in bad(client)["msg"]["message"]
    client.send("approval", request="r9", decision="allow")
    assert "no approval" in bad(client)["msg"]["message"]
    client.send("interrupt")
    assert "no task" in bad(client)["msg"]["message"]
    client.send("fork", session=session)
    assert "not supported" in bad(client)["msg"]["message"]
    client.send("resume", session=session, last_seq=99)
    assert "beyond the end" in bad(client)["msg"]["message"]
    # still serving, and nothing of the above was stored
    client.send("user_input", text="echo still here")
    got = client.until_type("task_complete")
    assert "still here" in [e["msg"].get("text") for e in got]
    assert all(e["seq"] is not None for e in stored(project, str(session)))


def test_a_lone_surrogate_gets_an_error_event_and_the_session_goes_on(protocol: Start,
                                                                      project: Path) -> None:
    client = protocol("--agent", "exec")
    client.send("configure")
    session = str(client.until_type("session_configured")[-1]["session"])
    client.send_raw(b'{"id": "bad", "op": {"type": "user_input", "text": "echo \\ud800"}}\n')
    refused = bad(client)
    assert refused["id"] == "bad" and "lone surrogate (\\ud800)" in refused["msg"]["message"]
    client.send("user_input", text="echo pair \U0001F600")  # a pair in JSON: one character
    got = client.until_type("task_complete")
    assert "pair \U0001F600" in [e["msg"].get("text") for e in got]
    assert kinds(stored(project, session)).count("task_started") == 1


def test_on_a_jobs_socket_a_lone_surrogate_gets_an_error_event_and_the_job_goes_on(
        project: Path) -> None:
    import socket

    from coding_os.jobs import jobs
    from tests.helpers import cos, until

    started = cos("bg", "--exec", "sleep 30", "--isolation", "none", "--json", cwd=project)
    assert started.returncode == 0, started.stderr
    job = jobs.load(json.loads(started.stdout)["id"])
    until(lambda: jobs.runner_alive(jobs.reload(job)) and os.path.exists(jobs.socket_path(job)),
          "the job's runner to serve its socket")
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(15)
        client.connect(jobs.socket_path(job))
        client.sendall(b'{"id": "bad", "op": {"type": "user_input", "text": "\\ud800"}}\n')
        answer = json.loads(client.makefile("rb").readline())
        assert answer["msg"]["type"] == "error" and "lone surrogate" in answer["msg"]["message"]
        client.sendall(b'{"id": "good", "op": {"type": "user_input", "text": "echo next"}}\n')

        def said_next() -> bool:
            logs = cos("logs", job.id, "--json", cwd=project)
            return "next" in [e["msg"].get("text") for e in json.loads(logs.stdout)["events"]]

        until(said_next, "the job to run the next input")


def test_resume_of_a_session_of_another_project_is_an_error(protocol: Start, project: Path,
                                                            tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / ".git").mkdir()
    elsewhere = protocol("--cwd", str(other))
    elsewhere.send("configure", agent="exec")
    session = elsewhere.until_type("session_configured")[-1]["session"]
    client = protocol()
    client.send("resume", session=session, last_seq=0)
    assert "no session" in bad(client)["msg"]["message"]


def test_the_wire_is_one_json_object_per_line_and_nothing_else(protocol: Start,
                                                                project: Path) -> None:
    agent = project / "noisy.py"
    agent.write_text(
        "class Noisy:\n"
        "    async def run_turn(self, session, text):\n"
        "        print('this goes to stderr')\n"
        "        yield {'type': 'agent_message', 'text': 'quiet'}\n", encoding="utf-8")
    client = protocol()
    client.send("configure", agent="python", target="noisy.py:Noisy")
    client.until_type("session_configured")
    client.send("user_input", text="hi")
    got = client.until_type("task_complete")
    assert "quiet" in [e["msg"].get("text") for e in got]
    client.send("shutdown")
    assert client.proc.wait(timeout=15) == 0
    assert json.loads(json.dumps(client.seen)) == client.seen


def test_a_python_session_forks_into_a_new_session_that_answers(protocol: Start,
                                                                 project: Path) -> None:
    client = protocol()
    echo = Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py"
    client.send("configure", agent="python", target=f"{echo}:EchoAgent")
    source = client.until_type("session_configured")[-1]["session"]
    client.send("user_input", text="hello")
    client.until_type("task_complete")
    client.send("fork", session=source)
    forked = client.until_type("session_configured")[-1]
    assert forked["session"] != source and forked["seq"] == 1
    client.send("user_input", text="again")
    got = client.until_type("task_complete")
    assert {e["session"] for e in got} == {forked["session"]}
    assert "echo: again" in [e["msg"].get("text") for e in got]


def test_an_agent_that_cannot_start_is_a_stored_fatal_error_and_the_process_keeps_serving(
        protocol: Start, project: Path) -> None:
    client = protocol()
    client.send("configure", agent="python", target="missing_agent.py:Agent")
    failed = client.until_type("error")[-1]
    assert failed["seq"] == 1 and failed["msg"]["fatal"] is True
    assert "did not start" in failed["msg"]["message"]
    (project / "missing_agent.py").write_text(
        "class Agent:\n"
        "    async def run_turn(self, session, text):\n"
        "        yield {'type': 'agent_message', 'text': 'here now'}\n", encoding="utf-8")
    client.send("user_input", text="hi")  # starts it with the stored settings
    got = client.until_type("task_complete")
    assert kinds(got)[:2] == ["session_configured", "task_started"]
    assert "here now" in [e["msg"].get("text") for e in got]


@pytest.mark.slow
def test_a_process_started_with_session_serves_it_from_now_on(protocol: Start,
                                                               backend: Any) -> None:
    first = protocol()
    session = configured(first, backend)
    first.send("user_input", text=backend.quick)
    first.until_type("task_complete")
    first.send("shutdown")
    assert first.proc.wait(timeout=15) == 0
    last = first.seen[-1]["seq"]
    second = protocol("--session", session)
    second.send("user_input", text=backend.quick)
    got = second.until_type("task_complete")
    assert got[0]["seq"] == last + 1
    assert kinds(got)[:2] == ["session_configured", "task_started"]


def drained(client: Any) -> None:
    """Read every whole line the ended process wrote into `client.seen` (a torn last line was
    never sent whole, so it is no event)."""
    client.proc.wait(timeout=15)
    while True:
        try:
            client.read(timeout=5)
        except AssertionError:  # the end of its output
            return


@pytest.mark.slow
def test_fifty_sigkills_at_random_moments_replay_every_stored_event_and_invent_none(
        protocol: Start, project: Path) -> None:
    (project / "ticker.py").write_text(
        "import asyncio\n"
        "class Ticker:\n"
        "    async def run_turn(self, session, text):\n"
        "        for i in range(100000):\n"
        "            yield {'type': 'agent_message', 'text': f'tick {i}'}\n"
        "            await asyncio.sleep(0.002)\n", encoding="utf-8")
    rng = random.Random(15)
    client = protocol()
    client.send("configure", agent="python", target="ticker.py:Ticker")
    session = str(client.until_type("session_configured")[-1]["session"])
    seen: dict[int, dict[str, Any]] = {}  # what the user's client saw, by seq
    sent: list[dict[str, Any]] = []  # everything a killed process wrote to its client

    def saw(events_seen: list[dict[str, Any]]) -> None:
        for event in events_seen:  # dense from the resume point: no gap, no duplicate
            assert event["seq"] == len(seen) + 1, (event, len(seen))
            seen[event["seq"]] = event

    for run in range(50):
        client.send("user_input", text="tick")
        if run % 2:
            client.until_type("task_started")
        for _ in range(rng.randint(0, 30)):  # replayed or live: a random number of events
            client.read()
        time.sleep(rng.uniform(0, 0.004))  # not a wait: the kill lands at a random moment
        read = len(client.seen)
        client.kill()
        drained(client)
        saw(client.seen[:read])
        sent.extend(client.seen)
        client = protocol()
        client.send("resume", session=session, last_seq=len(seen))
    client.send("shutdown")
    drained(client)
    saw(client.seen)
    log = stored(project, session)
    assert [seen[seq] for seq in sorted(seen)] == log
    by_seq = {event["seq"]: event for event in log}
    assert all(by_seq.get(event["seq"]) == event for event in sent)
    # Every other kill lands after its task started: each left a task the next process closed.
    assert kinds(log).count("turn_aborted") >= 25


def test_at_the_end_of_input_an_approval_nobody_can_answer_is_denied_and_the_process_ends(
        project: Path) -> None:
    """A client that sends its input and closes the pipe leaves no one to answer: the approval
    is denied (the tool does not run), the task ends, and the process exits by itself."""
    import subprocess

    from tests.helpers import COS, ECHO_AGENT

    ops = [{"id": "1", "op": {"type": "configure", "agent": "python",
                              "target": ECHO_AGENT}},
           {"id": "2", "op": {"type": "user_input", "text": "write notes.txt: hi"}}]
    done = subprocess.run([COS, "protocol"], cwd=project, capture_output=True, text=True,
                          input="".join(json.dumps(op) + "\n" for op in ops), timeout=60)
    assert done.returncode == 0, done.stderr
    types = [json.loads(line)["msg"]["type"] for line in done.stdout.splitlines()]
    assert "approval_request" in types and types[-1] == "task_complete", types
    assert not (project / "notes.txt").exists()


def test_an_exec_task_whose_shell_left_a_child_holding_its_output_is_interrupted_whole(
        protocol: Start) -> None:
    """`sleep … & echo` ends the shell at once while the child keeps the output open: an
    interrupt still ends the task, and no process of the command is left."""
    marker = f"{4000 + random.randrange(1000)}.{os.getpid()}"
    client = protocol()
    client.send("configure", agent="exec")
    client.until_type("session_configured")
    client.send("user_input", text=f"sleep {marker} & echo started")
    client.until_says("started")
    client.send("interrupt")
    aborted = client.until_type("turn_aborted")[-1]
    assert aborted["msg"]["reason"] == "interrupted"

    def left() -> list[str]:
        found = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(pid)
            except OSError:
                continue
        return found

    deadline = time.monotonic() + 10
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left()
    client.send("user_input", text="echo after")
    client.until_says("after")


def test_a_fork_or_a_refused_resume_of_a_running_session_writes_no_false_backend_exit(
        protocol: Start, project: Path) -> None:
    """Reading a session (as a fork's source, or to check a resume's last_seq) never records
    that its serving process died: a fork mid-task ends the task once, `shutdown`, with no
    fatal error; a refused resume writes nothing."""
    client = protocol()
    echo = Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py"
    client.send("configure", agent="python", target=f"{echo}:EchoAgent")
    source = client.until_type("session_configured")[-1]["session"]
    client.send("user_input", text="sleep 30")
    client.until_says("sleeping 30s")
    other = protocol()
    other.send("resume", session=source, last_seq=10_000)
    assert "beyond the end" in other.until_type("error")[-1]["msg"]["message"]
    log = events.events_path(Tiers(str(project / ".coding-os")), source)
    assert [e["msg"]["type"] for e in events.replay(log, 0)][-1] != "turn_aborted"
    client.send("fork", session=source)
    client.until_type("session_configured")
    ends = [e["msg"] for e in events.replay(log, 0)
            if e["msg"]["type"] in ("turn_aborted", "task_complete", "error")]
    assert ends == [{"type": "turn_aborted", "task": 1, "reason": "shutdown"}], ends
