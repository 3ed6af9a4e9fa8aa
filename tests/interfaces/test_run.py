"""`cos run` as a whole process: the events as JSON lines, text with approvals asked, Ctrl-C and
further prompts on a real terminal (a pty that is the process's controlling terminal), and the
running tool's line as the screen shows it (tmux)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import COS, Pane, Terminal, on_terminal, require_tmux, tmux_panes

ROOT = Path(__file__).resolve().parents[2]
ECHO = f"python:{ROOT / 'examples' / 'echo_agent.py'}:EchoAgent"


def run(project: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([COS, "run", *args], cwd=project, input=stdin, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def terminal(project: Path) -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for each in started:
        each.end()


def on_pty(started: list[Terminal], project: Path, *args: str) -> Terminal:
    term = Terminal(project, "run", *args)
    started.append(term)
    return term


def test_json_prints_the_events_exactly_as_they_are_stored(project: Path) -> None:
    done = run(project, "--agent", ECHO, "--json", "hello")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["msg"]["type"] for e in events] == [
        "session_configured", "task_started", "agent_message", "task_complete"]
    assert events[2]["msg"]["text"] == "echo: hello"
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    session = events[0]["session"]
    log = next(project.rglob(f"events/{session}.jsonl")).read_text(encoding="utf-8")
    assert done.stdout == log


def test_json_denies_an_approval_and_asks_nothing(project: Path) -> None:
    done = run(project, "--agent", ECHO, "--json", "write notes.txt: a line")
    assert done.returncode == 0, done.stderr
    kinds = [json.loads(line)["msg"]["type"] for line in done.stdout.splitlines()]
    assert "approval_request" in kinds and "tool_call" not in kinds
    assert not (project / "notes.txt").exists()
    assert "denied" in done.stderr


def test_approve_allow_lets_the_tool_run_without_a_terminal(project: Path) -> None:
    done = run(project, "--agent", ECHO, "--approve", "allow", "write notes.txt: a line")
    assert done.returncode == 0, done.stderr
    assert (project / "notes.txt").read_text(encoding="utf-8") == "a line\n"
    assert "▸ Write " in done.stdout and "· ok" in done.stdout


def test_without_a_terminal_text_is_shown_and_approvals_are_denied_with_a_note(
        project: Path) -> None:
    done = run(project, "--agent", ECHO, "write notes.txt: a line")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "not allowed to write notes.txt\n"
    assert "approval r1 denied" in done.stderr
    assert not (project / "notes.txt").exists()


def test_exit_status_is_one_when_the_last_task_failed(project: Path) -> None:
    done = run(project, "--agent", "exec", "echo out; exit 3")
    assert done.returncode == 1
    assert done.stdout == "out\n"
    assert "exited 3" in done.stderr


def test_an_unknown_agent_or_a_python_agent_without_target_is_a_one_line_error(
        project: Path) -> None:
    for agent in ("nope", "python", "exec:x"):
        done = run(project, "--agent", agent, "hello")
        assert done.returncode != 0 and done.stdout == ""
        assert len(done.stderr.splitlines()) == 1, done.stderr


def test_text_on_a_terminal_shows_control_characters_visibly(project: Path) -> None:
    code, shown = on_terminal("run", "--agent", "exec", "printf 'a\\033]0;T\\007b\\n'",
                              cwd=project)
    assert code == 0
    assert b"a^[]0;T^Gb" in shown
    assert b"\x1b]0;T" not in shown


def test_an_approval_answered_y_on_the_terminal_makes_the_write_happen(
        terminal: list[Terminal], project: Path) -> None:
    term = on_pty(terminal, project, "--agent", ECHO, "write notes.txt: yes line")
    term.expect("[y/N] ")
    term.type("y\n")
    term.expect("wrote notes.txt")
    term.expect("› ")
    term.type("\n")
    assert term.wait() == 0
    assert (project / "notes.txt").read_text(encoding="utf-8") == "yes line\n"
    assert "▸ Write " in term.shown.decode()


def test_an_approval_answered_n_on_the_terminal_writes_nothing(
        terminal: list[Terminal], project: Path) -> None:
    term = on_pty(terminal, project, "--agent", ECHO, "write notes.txt: no line")
    term.expect("[y/N] ")
    term.type("n\n")
    term.expect("not allowed to write notes.txt")
    term.expect("› ")
    term.type("\x04")  # Ctrl-D ends
    assert term.wait() == 0
    assert not (project / "notes.txt").exists()


def test_ctrl_c_interrupts_a_slow_task_and_the_next_prompt_works(
        terminal: list[Terminal], project: Path) -> None:
    term = on_pty(terminal, project, "--agent", ECHO, "sleep 30")
    term.expect("sleeping 30s")
    started = time.monotonic()
    term.type("\x03")
    term.expect("aborted (interrupted)")
    assert time.monotonic() - started < 10
    term.expect("› ")
    term.type("hello again\n")
    term.expect("echo: hello again")
    term.expect("› ")
    term.type("\n")
    assert term.wait() == 0  # the last task completed


def test_ctrl_c_at_the_prompt_exits_130(terminal: list[Terminal], project: Path) -> None:
    term = on_pty(terminal, project, "--agent", ECHO, "hello")
    term.expect("echo: hello")
    term.expect("› ")
    term.type("\x03")
    assert term.wait() == 130


def a_package_with_an_agent_entry_point(folder: Path) -> Path:
    """An installed-looking package in `folder` (a dist-info with entry_points.txt, no pip):
    the entry point `greeter` of the group coding_os.agents names greeter_agent:Greeter."""
    folder.mkdir()
    (folder / "greeter_agent.py").write_text(
        "class Greeter:\n"
        "    async def run_turn(self, session, text):\n"
        "        yield {'type': 'agent_message', 'text': f'greetings, {text}'}\n",
        encoding="utf-8")
    info = folder / "greeter_agent-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greeter-agent\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text("[coding_os.agents]\ngreeter = greeter_agent:Greeter\n",
                                           encoding="utf-8")
    return folder


def test_a_python_agent_named_by_an_entry_point_of_coding_os_agents_runs(
        project: Path, tmp_path: Path) -> None:
    packages = a_package_with_an_agent_entry_point(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(packages)}
    done = subprocess.run([COS, "run", "--agent", "python:greeter", "--json", "you"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line)["msg"] for line in done.stdout.splitlines()]
    assert {"type": "agent_message", "text": "greetings, you"} in messages
    missing = subprocess.run([COS, "run", "--agent", "python:nobody", "you"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1
    assert "no entry point of that name in the group coding_os.agents" in missing.stderr


def test_sigint_without_a_terminal_interrupts_the_task_and_exits_130(project: Path) -> None:
    proc = subprocess.Popen([COS, "run", "--agent", ECHO, "--json", "sleep 30"], cwd=project,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        shown, deadline = b"", time.monotonic() + 20
        while b'"sleeping 30s"' not in shown:
            assert time.monotonic() < deadline, shown
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, shown
                shown += chunk
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=20)
        assert proc.returncode == 130
        ends = [json.loads(line)["msg"] for line in (shown + rest).decode().splitlines()]
        assert {"type": "turn_aborted", "task": 1, "reason": "interrupted"} in ends
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_json_stdout_holds_the_events_only_when_the_agent_prints(project: Path) -> None:
    (project / "noisy.py").write_text(
        "class Noisy:\n"
        "    async def run_turn(self, session, text):\n"
        "        print('chatter')\n"
        "        yield {'type': 'agent_message', 'text': 'quiet'}\n", encoding="utf-8")
    done = run(project, "--agent", "python:noisy.py:Noisy", "--json", "hi")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["msg"]["type"] for line in done.stdout.splitlines()] == [
        "session_configured", "task_started", "agent_message", "task_complete"]
    assert "chatter" in done.stderr


def test_an_agents_text_holding_a_lone_surrogate_is_shown_escaped_and_the_run_ends(
        project: Path) -> None:
    agent = project / "odd.py"
    agent.write_text(
        "class Odd:\n"
        "    async def run_turn(self, session, text):\n"
        "        yield {'type': 'agent_message', 'text': 'caf\\ud800e'}\n", encoding="utf-8")
    done = run(project, "--agent", "python:odd.py:Odd", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "caf\\ud800e\n"


# A python agent with one tool call that runs until a file is there (`until PATH`) or for a
# number of seconds (`for N`), then says so.
SLOW_TOOL = """
import asyncio, os

class SlowTool:
    async def run_turn(self, session, text):
        how, _, what = text.partition(' ')
        yield {'type': 'tool_call', 'call_id': 't1', 'tool': 'Bash',
               'input': {'command': 'make slow'}}
        if how == 'until':
            while not os.path.exists(what):
                await asyncio.sleep(0.05)
        else:
            await asyncio.sleep(float(what))
        yield {'type': 'tool_result', 'call_id': 't1', 'ok': True, 'output': 'built'}
        yield {'type': 'agent_message', 'text': 'the build is done'}
"""


def slow_tool_agent(folder: Path) -> str:
    """The `--agent` naming SLOW_TOOL, written in `folder`."""
    path = folder / "slow_tool.py"
    path.write_text(SLOW_TOOL, encoding="utf-8")
    return f"python:{path}:SlowTool"


def running_lines(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if "· running" in line]


@pytest.fixture
def panes(tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    require_tmux("the cos run screen tests")
    with tmux_panes(tmp_path) as start:
        yield start


@pytest.mark.slow
def test_on_a_terminal_the_running_tool_shows_its_growing_time_until_the_next_output_replaces_it(
        panes: Callable[..., Pane], project: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    pane = panes([COS, "run", "--agent", slow_tool_agent(tmp_path), f"until {release}"],
                 cwd=project)
    seen = set()
    for wanted in ("running 1s", "running 2s"):
        screen = pane.wait(lambda s: any(wanted in line for line in running_lines(s)),
                           f"the tool's line at {wanted}")
        [line] = running_lines(screen)
        assert line.startswith("▸ Bash make slow · running "), screen
        seen.add(line)
        # the line is the last one shown: nothing under it
        assert screen.rstrip("\n").splitlines()[-1] == line, screen
    assert len(seen) == 2  # redrawn in place with the time grown, one line only
    release.touch()
    screen = pane.wait(lambda s: "the build is done" in s and s.rstrip().endswith("›"),
                       "the next output and the prompt")
    assert running_lines(screen) == [], screen
    lines = screen.splitlines()
    assert lines.index("▸ Bash make slow · ok") + 1 == lines.index("the build is done"), screen
    pane.keys("C-d")
    assert pane.exit_code() == 0


@pytest.mark.slow
def test_with_json_on_a_terminal_no_running_tool_line_is_written(
        terminal: list[Terminal], project: Path, tmp_path: Path) -> None:
    term = on_pty(terminal, project, "--json", "--agent", slow_tool_agent(tmp_path), "for 2.5")
    assert term.wait(timeout=60) == 0
    assert b'"the build is done"' in term.shown
    assert b"running" not in term.shown and b"\x1b" not in term.shown


@pytest.mark.slow
def test_with_output_to_a_pipe_no_running_tool_line_is_written(
        project: Path, tmp_path: Path) -> None:
    done = subprocess.run([COS, "run", "--agent", slow_tool_agent(tmp_path), "for 2.5"],
                          cwd=project, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "▸ Bash make slow · ok\nthe build is done\n"
    assert b"\r" not in done.stdout + done.stderr
    assert b"\x1b" not in done.stdout + done.stderr
