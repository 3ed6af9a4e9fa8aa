"""The seed's matrix as tests: personas × scenarios of the state layer (DESIGN.md §3).

Personas: solo Claude, solo Codex, two agents one after the other, two agents at once, linked git
worktrees, two panels of one agent. Scenarios: a normal session, an agent switch, concurrent
panels, an abandoned session recovered as an orphan, compaction, a fresh `cos init`, two panels.

Each cell fires real `cos hook <Event>` processes with payloads of the clients' shapes
(tests/state/matrix_payloads.py) and asserts on which files exist where under `<repo>/.coding-os/`
and on what each reader trusts: `cos state get|check`, `cos whoami`, `cos hooks-log`, and the
`session_summaries` table of the SQLite database.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cos, cos_json, fire, git
from tests.state.matrix_payloads import EVENTS, new_native_id, payload


SESSION_RE = re.compile(r"^ses-[a-z][a-z0-9_-]{0,31}-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
SESSION_IN_TEXT = re.compile(r"ses-[a-z][a-z0-9_-]{0,31}-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}")
AGENTS = ("claude", "codex")
SETTINGS = {"claude": ".claude/settings.json", "codex": ".codex/hooks.json"}


# --- one panel of one agent ----------------------------------------------------------------------


class Panel:
    """One panel of one agent: fires its hooks and runs its shell commands as the client would.

    `native` is the client's own session id (the payload's `session_id`); `panel_id`, when set,
    is exported as COS_PANEL_ID (a pinned panel). Hooks and shell commands get the environment
    the real clients give them (tests/e2e/payloads/ENV.md): Claude hooks have CLAUDE_PROJECT_DIR
    (the checkout it was started in, unless `project_dir=False`), CLAUDE_CODE_SESSION_ID and
    CLAUDE_PID; Codex hooks have no session variable, its shell tool has CODEX_SESSION_ID.
    """

    def __init__(self, repo: Path, agent: str, *, native: str | None = None,
                 panel_id: str | None = None, cwd: Path | None = None,
                 checkout: Path | None = None, project_dir: bool = True) -> None:
        self.repo = repo  # the main repository: where the state must land
        self.agent = agent
        self.native = native or new_native_id()
        self.panel_id = panel_id
        self.cwd = cwd or repo
        self.checkout = checkout or repo
        self.project_dir = project_dir and agent == "claude"
        self.process = _agent_process()
        self.pid = str(self.process.pid)

    @property
    def panel(self) -> str:
        return self.panel_id or self.native

    @property
    def panel_dir(self) -> Path:
        return self.repo / ".coding-os" / self.agent / "panels" / self.panel

    def restart(self) -> None:
        """The client process is started again in this terminal: a new native id and pid."""
        self.native = new_native_id()
        self.exit()
        self.process = _agent_process()
        self.pid = str(self.process.pid)

    def exit(self) -> None:
        """The client process is gone (the terminal was closed, or it was killed)."""
        self.process.kill()
        self.process.wait()

    def hook_env(self) -> dict[str, str]:
        """What the client puts in a hook's environment (tests/e2e/payloads/ENV.md)."""
        env: dict[str, str] = {}
        if self.agent == "claude":
            env.update(CLAUDECODE="1", CLAUDE_CODE_ENTRYPOINT="cli", CLAUDE_PID=self.pid,
                       CLAUDE_CODE_SESSION_ID=self.native)
            if self.project_dir:
                env["CLAUDE_PROJECT_DIR"] = str(self.checkout)
        elif self.agent == "codex":
            env["CODEX_MANAGED_BY_NPM"] = "1"  # and no session id: that is in the payload only
        if self.panel_id:
            env["COS_PANEL_ID"] = self.panel_id
        return env

    def env(self) -> dict[str, str]:
        """What the client puts in its shell tool's environment (where `cos state` runs)."""
        env: dict[str, str] = {}
        if self.agent == "claude":
            env.update(CLAUDECODE="1", CLAUDE_CODE_ENTRYPOINT="cli", CLAUDE_PID=self.pid,
                       CLAUDE_CODE_SESSION_ID=self.native)
        elif self.agent == "codex":
            env.update(CODEX_SESSION_ID=self.native, CODEX_THREAD_ID=self.native, CODEX_CI="1")
        if self.panel_id:
            env["COS_PANEL_ID"] = self.panel_id
        return env

    def payload(self, event: str, **fields: object) -> dict[str, object]:
        return payload(self.agent, event, session_id=self.native, cwd=self.cwd, **fields)

    def hook(self, event: str, **fields: object) -> subprocess.CompletedProcess[str]:
        proc = fire(event, self.payload(event, **fields), cwd=self.cwd, agent=self.agent,
                    env=self.hook_env())
        assert proc.returncode == 0, f"{self.agent} {event}: {proc.stderr}"
        return proc

    def start(self, source: str = "startup") -> str:
        self.hook("SessionStart", source=source)
        session = self.session()
        assert session is not None
        return session

    def tool(self, command: str | None = None, *, tool_name: str = "Bash",
             tool_input: Mapping[str, object] | None = None) -> None:
        """One tool call: PreToolUse then PostToolUse."""
        tool_input = dict(tool_input or {"command": command or f"echo {self.panel}"})
        self.hook("PreToolUse", tool_name=tool_name, tool_input=tool_input)
        self.hook("PostToolUse", tool_name=tool_name, tool_input=tool_input)

    def normal_session(self, *, prompts: int = 1, tools: int = 1) -> str:
        session = self.start()
        for i in range(prompts):
            self.hook("UserPromptSubmit", prompt=f"prompt {i} of {self.panel}")
            for j in range(tools):
                self.tool(f"echo {self.panel}-{i}-{j}")
        self.hook("Stop")
        self.hook("SessionEnd", reason="other")
        return session

    def session(self) -> str | None:
        """The session id in this panel's session-id file."""
        path = self.panel_dir / "session-id"
        return state_line(path)[0] if path.exists() else None

    def cos(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`cos …` from this panel's shell tool."""
        return cos(*args, cwd=self.cwd, env=self.env())

    def json(self, *args: str) -> dict[str, Any]:
        data = cos_json(*args, cwd=self.cwd, env=self.env())
        assert isinstance(data, dict)
        return data

    def whoami(self) -> dict[str, Any]:
        return self.json("whoami")

    def check(self, name: str) -> dict[str, Any]:
        return self.json("state", "check", name)

    def set(self, name: str, value: str) -> None:
        proc = self.cos("state", "set", name, value)
        assert proc.returncode == 0, proc.stderr

    def get(self, name: str) -> subprocess.CompletedProcess[str]:
        return self.cos("state", "get", name)


# --- readers -------------------------------------------------------------------------------------


def state_line(path: Path) -> tuple[str, str]:
    """(owner, value) of a one-line state file `<session-id> <value>`."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n") and text.count("\n") == 1, text
    owner, _, value = text[:-1].partition(" ")
    return owner, value


def agent_tree(repo: Path, agent: str) -> set[str]:
    """Files under `.coding-os/<agent>/`, relative to `.coding-os` (transcripts left out)."""
    state_dir = repo / ".coding-os"
    return {str(p.relative_to(state_dir)) for p in (state_dir / agent).rglob("*")
            if p.is_file() and "transcripts" not in p.parts}


def agent_dirs(repo: Path) -> list[str]:
    state_dir = repo / ".coding-os"
    return sorted(p.name for p in state_dir.iterdir() if (p / "panels").is_dir())


def presence(repo: Path, agent: str, session: str) -> dict[str, Any]:
    data = json.loads((repo / ".coding-os" / agent / "sessions" / f"{session}.json").read_text())
    assert isinstance(data, dict)
    return data


def summaries(repo: Path) -> dict[str, dict[str, Any]]:
    """The rows of `session_summaries`, by session id (read with the stdlib sqlite3)."""
    db = repo / ".coding-os" / "coding-os.db"
    if not db.exists():
        return {}
    with closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        return {row["session"]: dict(row)
                for row in conn.execute("SELECT * FROM session_summaries")}


def json_of(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> Any:
    """`cos … --json` parsed (the command must succeed)."""
    return cos_json(*args, cwd=cwd, env=env)


def hooks_log(cwd: Path, *args: str) -> list[dict[str, Any]]:
    lines = json_of("hooks-log", *args, cwd=cwd)
    assert isinstance(lines, list)
    return lines


def context_of(proc: subprocess.CompletedProcess[str]) -> str:
    """The hook's `hookSpecificOutput.additionalContext`, or "" when it printed none."""
    if not proc.stdout.strip():
        return ""
    output = json.loads(proc.stdout)
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == "SessionStart"
    context = specific["additionalContext"]
    assert isinstance(context, str)
    return context


def installed_commands(repo: Path, agent: str, root: Path | None = None) -> dict[str, list[str]]:
    """Event → the commands of every hook entry in the agent's hooks file."""
    data = json.loads(((root or repo) / SETTINGS[agent]).read_text(encoding="utf-8"))
    return {event: [h["command"] for group in groups for h in group["hooks"]]
            for event, groups in data["hooks"].items()}


def run_installed(command: str, body: Mapping[str, object], *, cwd: Path,
                  env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a hook command exactly as written in the settings file, the way the client does."""
    return subprocess.run(["sh", "-c", command], cwd=cwd, env={**os.environ, **env},
                          input=json.dumps(body), text=True, capture_output=True, timeout=60)


# --- normal session: solo Claude, solo Codex ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_normal_session_leaves_one_session_id_an_ended_presence_a_heartbeat_and_the_active_session(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent)
    first = p.hook("SessionStart", source="startup")
    sid = p.session()
    assert sid is not None and SESSION_RE.match(sid) and sid.startswith(f"ses-{agent}-")
    assert summaries(repo) == {}  # nothing to recover on a fresh panel
    p.hook("UserPromptSubmit", prompt="make the test pass")
    p.tool("pytest -q")
    p.hook("Stop")
    p.hook("SessionEnd", reason="prompt_input_exit")

    assert p.session() == sid
    assert agent_dirs(repo) == [agent]
    assert agent_tree(repo, agent) == {
        f"{agent}/.active-session",
        f"{agent}/sessions/{sid}.json",
        f"{agent}/panels/{p.native}/session-id",
        f"{agent}/panels/{p.native}/heartbeat",
    }
    assert (repo / ".coding-os" / ".hooks.log").is_file()
    assert (repo / ".coding-os" / "coding-os.db").is_file()
    assert state_line(p.panel_dir / "session-id") == (sid, p.native)
    assert state_line(p.panel_dir / "heartbeat")[0] == sid
    assert state_line(repo / ".coding-os" / agent / ".active-session") == (sid, p.native)
    record = presence(repo, agent, sid)
    assert record["status"] == "ended"
    assert record["end_reason"] == "prompt_input_exit"
    assert (record["agent"], record["panel"], record["native_id"]) == (agent, p.native, p.native)
    assert record["project"] == str(repo)
    assert record["source"] == "startup"
    assert set(SESSION_IN_TEXT.findall(first.stdout)) <= {sid}  # nothing else to recover

    lines = hooks_log(repo)
    assert [line["event"] for line in lines] == [
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"]
    assert (lines[0]["source"], lines[0].get("recovered")) == ("startup", None)
    assert lines[-1]["reason"] == "prompt_input_exit"
    assert {(line["agent"], line["panel"], line["session"]) for line in lines} == {
        (agent, p.native, sid)}
    assert [(line["tool"], line["input"]) for line in lines if line.get("tool")] == [
        ("Bash", "pytest -q"), ("Bash", "pytest -q")]

    who = p.whoami()
    assert (who["agent"], who["panel_id"], who["session_id"]) == (agent, p.native, sid)
    assert who["state_dir"] == str(repo / ".coding-os")
    row = summaries(repo)[sid]
    assert (row["reason"], row["prompts"], row["tool_calls"]) == ("end:prompt_input_exit", 1, 1)
    assert (row["agent"], row["panel"], row["native_id"]) == (agent, p.native, p.native)


@pytest.mark.parametrize("agent", AGENTS)
def test_hooks_log_finds_a_sessions_lines_by_its_native_id_as_well_as_by_its_cos_id(
        repo: Path, agent: str) -> None:
    # DESIGN.md §3.3: the native id "is a valid lookup key too"; `cos hooks-log --session`
    # documents "cos or native id".
    p = Panel(repo, agent)
    sid = p.start()
    p.hook("UserPromptSubmit")
    by_cos_id = hooks_log(repo, "--session", sid)
    assert [line["event"] for line in by_cos_id] == ["SessionStart", "UserPromptSubmit"]
    assert hooks_log(repo, "--session", p.native) == by_cos_id


@pytest.mark.parametrize("agent", AGENTS)
def test_a_shell_command_without_a_session_sees_no_trusted_state(repo: Path, agent: str) -> None:
    p = Panel(repo, agent)
    proc = p.cos("state", "set", ".task-current", "too-early")
    assert proc.returncode == 1 and "no session" in proc.stderr
    assert not p.panel_dir.exists()
    assert p.whoami()["session_id"] is None


# --- agent switch: two agents one after the other ------------------------------------------------


@pytest.mark.slow
def test_codex_after_claude_gets_its_own_agent_dir_session_and_active_session(repo: Path) -> None:
    claude = Panel(repo, "claude")
    sid_c = claude.normal_session()
    claude_files = {name: (repo / ".coding-os" / name).read_bytes()
                    for name in agent_tree(repo, "claude")}

    codex = Panel(repo, "codex")
    sid_x = codex.normal_session()

    assert sid_c.startswith("ses-claude-") and sid_x.startswith("ses-codex-")
    assert agent_dirs(repo) == ["claude", "codex"]
    # Codex wrote nothing into Claude's directory, and changed none of its files.
    assert {name: (repo / ".coding-os" / name).read_bytes()
            for name in agent_tree(repo, "claude")} == claude_files
    assert agent_tree(repo, "codex") == {
        "codex/.active-session", f"codex/sessions/{sid_x}.json",
        f"codex/panels/{codex.native}/session-id", f"codex/panels/{codex.native}/heartbeat"}
    assert state_line(repo / ".coding-os/claude/.active-session") == (sid_c, claude.native)
    assert state_line(repo / ".coding-os/codex/.active-session") == (sid_x, codex.native)
    assert presence(repo, "claude", sid_c)["status"] == "ended"
    assert presence(repo, "codex", sid_x)["status"] == "ended"

    every = hooks_log(repo)
    assert len(every) == 12
    assert [line["agent"] for line in every] == ["claude"] * 6 + ["codex"] * 6
    assert {line["session"] for line in hooks_log(repo, "--agent", "claude")} == {sid_c}
    assert {line["session"] for line in hooks_log(repo, "--agent", "codex")} == {sid_x}
    assert {line["agent"] for line in hooks_log(repo, "--session", sid_x)} == {"codex"}

    assert (claude.whoami()["agent"], claude.whoami()["session_id"]) == ("claude", sid_c)
    assert (codex.whoami()["agent"], codex.whoami()["session_id"]) == ("codex", sid_x)
    rows = summaries(repo)
    assert (rows[sid_c]["agent"], rows[sid_x]["agent"]) == ("claude", "codex")


@pytest.mark.slow
def test_each_agents_task_marker_is_trusted_only_by_its_own_session(repo: Path) -> None:
    claude, codex = Panel(repo, "claude"), Panel(repo, "codex")
    sid_c = claude.start()
    codex.start()
    claude.set(".task-current", "claude-task")
    codex.set(".task-current", "codex-task")

    assert claude.get(".task-current").stdout == "claude-task\n"
    assert codex.get(".task-current").stdout == "codex-task\n"
    assert claude.whoami()["task"] == "claude-task"
    assert codex.whoami()["task"] == "codex-task"

    # A stray writer puts Claude's marker into Codex's panel: Codex must not trust it.
    shutil.copy2(claude.panel_dir / ".task-current", codex.panel_dir / ".task-current")
    verdict = codex.check(".task-current")
    assert (verdict["valid"], verdict["reason"], verdict["owner"]) == (
        False, "session_mismatch", sid_c)
    proc = codex.get(".task-current")
    assert proc.returncode == 1 and "session_mismatch" in proc.stderr and proc.stdout == ""
    assert codex.whoami()["task"] is None


def test_claude_and_codex_pinned_to_the_same_panel_id_keep_separate_panel_dirs(repo: Path) -> None:
    claude = Panel(repo, "claude", panel_id="term-1")
    codex = Panel(repo, "codex", panel_id="term-1")
    sid_c, sid_x = claude.start(), codex.start()
    claude.set(".task-current", "claude-task")
    codex.set(".task-current", "codex-task")

    assert state_line(repo / ".coding-os/claude/panels/term-1/session-id")[0] == sid_c
    assert state_line(repo / ".coding-os/codex/panels/term-1/session-id")[0] == sid_x
    assert state_line(repo / ".coding-os/claude/panels/term-1/.task-current") == (
        sid_c, "claude-task")
    assert claude.get(".task-current").stdout == "claude-task\n"
    assert codex.get(".task-current").stdout == "codex-task\n"


def test_a_codex_startup_does_not_recover_claudes_abandoned_session_on_the_same_panel_id(
        repo: Path) -> None:
    claude = Panel(repo, "claude", panel_id="term-1")
    sid_c = claude.start()
    claude.hook("UserPromptSubmit")  # then the terminal is closed: no SessionEnd

    codex = Panel(repo, "codex", panel_id="term-1")
    out = codex.hook("SessionStart", source="startup")
    assert sid_c not in context_of(out)
    assert sid_c not in summaries(repo)

    claude.restart()  # Claude comes back in that terminal
    out = claude.hook("SessionStart", source="startup")
    assert sid_c in context_of(out)
    assert summaries(repo)[sid_c]["reason"] == "orphan"


def test_init_for_claude_then_codex_shares_one_state_dir_and_records_both_installations(
        repo: Path) -> None:
    reports = [json_of("init", "--agent", agent, cwd=repo) for agent in AGENTS]
    assert [r["state_dir"] for r in reports] == [str(repo / ".coding-os")] * 2
    manifest = json.loads((repo / ".coding-os" / "installed-manifest.json").read_text())
    assert sorted((i["agent"], i["file"]) for i in manifest["installations"]) == [
        ("claude", str(repo / SETTINGS["claude"])), ("codex", str(repo / SETTINGS["codex"]))]
    for agent in AGENTS:
        Panel(repo, agent).start()
    assert agent_dirs(repo) == ["claude", "codex"]
    assert [p.name for p in repo.rglob(".coding-os")] == [".coding-os"]


# --- concurrent: two agents at once, two panels of one agent ------------------------------------


PAIRS = [
    pytest.param(("claude", "codex"), False, id="claude+codex"),
    pytest.param(("claude", "claude"), False, id="two-claude-panels"),
    pytest.param(("codex", "codex"), True, id="two-codex-panels-by-COS_PANEL_ID"),
]


def _pair(repo: Path, agents: tuple[str, str], pinned: bool) -> tuple[Panel, Panel]:
    if pinned:
        return (Panel(repo, agents[0], panel_id="left"), Panel(repo, agents[1], panel_id="right"))
    return Panel(repo, agents[0]), Panel(repo, agents[1])


@pytest.mark.slow
@pytest.mark.parametrize(("agents", "pinned"), PAIRS)
def test_interleaved_hook_fires_of_two_panels_are_never_cross_attributed(
        repo: Path, agents: tuple[str, str], pinned: bool) -> None:
    a, b = _pair(repo, agents, pinned)
    sid_a = a.start()
    sid_b = b.start()
    a.hook("UserPromptSubmit", prompt="A first")
    b.hook("UserPromptSubmit", prompt="B only")
    a.hook("PreToolUse", tool_input={"command": "echo A-0"})
    b.hook("PreToolUse", tool_input={"command": "echo B-0"})
    b.hook("PostToolUse", tool_input={"command": "echo B-0"})
    a.hook("PostToolUse", tool_input={"command": "echo A-0"})
    a.hook("UserPromptSubmit", prompt="A second")
    a.hook("PreToolUse", tool_input={"command": "echo A-1"})
    b.hook("Stop")
    a.hook("PostToolUse", tool_input={"command": "echo A-1"})
    a.tool("echo A-2")
    a.hook("Stop")
    b.hook("SessionEnd", reason="other")
    a.hook("SessionEnd", reason="other")

    assert sid_a != sid_b
    assert (a.session(), b.session()) == (sid_a, sid_b)
    owner = {(a.agent, a.panel): sid_a, (b.agent, b.panel): sid_b}
    lines = hooks_log(repo)
    for line in lines:
        assert line["session"] == owner[(line["agent"], line["panel"])], line
        if line.get("input"):
            assert line["input"].startswith("echo A-" if line["session"] == sid_a else "echo B-")
    per_session = Counter(line["session"] for line in lines)
    assert per_session == {sid_a: 11, sid_b: 6}

    rows = summaries(repo)
    assert (rows[sid_a]["prompts"], rows[sid_a]["tool_calls"], rows[sid_a]["panel"]) == (
        2, 3, a.panel)
    assert (rows[sid_b]["prompts"], rows[sid_b]["tool_calls"], rows[sid_b]["panel"]) == (
        1, 1, b.panel)
    assert rows[sid_a]["last_prompt"] == "A second"
    assert rows[sid_b]["last_prompt"] == "B only"
    for p, sid in ((a, sid_a), (b, sid_b)):
        record = presence(repo, p.agent, sid)
        assert (record["panel"], record["native_id"], record["status"]) == (
            p.panel, p.native, "ended")


@pytest.mark.slow
@pytest.mark.parametrize(("agents", "pinned"), PAIRS[:2])
def test_hook_fires_running_at_the_same_time_write_whole_lines_for_their_own_panel(
        repo: Path, agents: tuple[str, str], pinned: bool) -> None:
    a, b = _pair(repo, agents, pinned)
    sids = {"A": a.start(), "B": b.start()}
    panels = {"A": a, "B": b}
    # Inputs are logged up to 4000 characters: fill that, so each line is longer than PIPE_BUF.
    padding = "x" * (4000 - len("echo A-00 "))
    jobs = [(label, i) for i in range(10) for label in ("A", "B")]

    def run(job: tuple[str, int]) -> int:
        label, i = job
        proc = fire("PostToolUse", panels[label].payload(
            "PostToolUse", tool_input={"command": f"echo {label}-{i:02d} {padding}"}),
            cwd=repo, agent=panels[label].agent, env=panels[label].hook_env())
        return proc.returncode

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(run, jobs)) == [0] * len(jobs)

    raw = (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8").splitlines()
    assert len(raw) == 2 + len(jobs)
    assert all(line.startswith("ts=") for line in raw)
    assert sum(len(line.encode()) > 4096 for line in raw) == len(jobs)
    lines = hooks_log(repo, "--event", "PostToolUse")
    assert len(lines) == len(jobs)
    seen = set()
    for line in lines:
        label, _, rest = line["input"].removeprefix("echo ").partition("-")
        number, _, tail = rest.partition(" ")
        assert tail == padding
        assert line["session"] == sids[label] and line["panel"] == panels[label].panel
        seen.add((label, int(number)))
    assert seen == set(jobs)
    for p in (a, b):
        p.hook("SessionEnd")
    rows = summaries(repo)
    assert (rows[sids["A"]]["tool_calls"], rows[sids["B"]]["tool_calls"]) == (10, 10)


# --- worktrees ----------------------------------------------------------------------------------


@pytest.fixture
def worktree(repo: Path) -> Path:
    """A linked worktree of `repo` (`git worktree add`), with a subdirectory `pkg`."""
    path = repo.parent / "wt-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(path))
    (path / "pkg").mkdir()
    return path.resolve()


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_hooks_fired_inside_a_linked_worktree_land_in_the_main_repositorys_state_dir(
        repo: Path, worktree: Path, agent: str) -> None:
    p = Panel(repo, agent, cwd=worktree / "pkg", checkout=worktree)
    sid = p.normal_session()

    assert not (worktree / ".coding-os").exists()
    assert not (worktree / "pkg" / ".coding-os").exists()
    assert state_line(repo / ".coding-os" / agent / "panels" / p.native / "session-id") == (
        sid, p.native)
    record = presence(repo, agent, sid)
    assert (record["cwd"], record["project"], record["status"]) == (
        str(worktree / "pkg"), str(repo), "ended")
    where = json_of("where", cwd=worktree / "pkg", env=p.env())
    assert where == {**where, "state_dir": str(repo / ".coding-os"), "project_root": str(repo),
                     "rule": "worktree", "worktree": str(worktree)}
    from_worktree = hooks_log(worktree / "pkg")
    assert from_worktree == hooks_log(repo)
    assert len(from_worktree) == 6 and {line["session"] for line in from_worktree} == {sid}
    who = p.whoami()
    assert (who["session_id"], who["state_dir"]) == (sid, str(repo / ".coding-os"))


def test_panels_in_the_main_checkout_and_in_a_worktree_share_one_state_dir_but_not_markers(
        repo: Path, worktree: Path) -> None:
    main = Panel(repo, "claude")
    linked = Panel(repo, "claude", cwd=worktree, checkout=worktree)
    linked_codex = Panel(repo, "codex", cwd=worktree / "pkg", checkout=worktree)
    sid_main, sid_linked, sid_codex = main.start(), linked.start(), linked_codex.start()
    main.set(".task-current", "main-task")
    linked.set(".task-current", "worktree-task")

    assert sorted(os.listdir(repo / ".coding-os" / "claude" / "panels")) == sorted(
        [main.native, linked.native])
    assert os.listdir(repo / ".coding-os" / "codex" / "panels") == [linked_codex.native]
    assert main.get(".task-current").stdout == "main-task\n"
    assert linked.get(".task-current").stdout == "worktree-task\n"
    proc = linked_codex.get(".task-current")
    assert proc.returncode == 1 and "no_file" in proc.stderr
    assert [w["session_id"] for w in (main.whoami(), linked.whoami(), linked_codex.whoami())] == [
        sid_main, sid_linked, sid_codex]
    assert [p.name for p in worktree.rglob(".coding-os")] == []


@pytest.mark.parametrize("agent", AGENTS)
def test_cos_init_inside_a_worktree_writes_the_worktrees_settings_and_the_main_state_dir(
        repo: Path, worktree: Path, agent: str) -> None:
    report = json_of("init", "--agent", agent, cwd=worktree)
    assert report["file"] == str(worktree / SETTINGS[agent])
    assert report["state_dir"] == str(repo / ".coding-os")
    assert not (repo / SETTINGS[agent]).exists()
    assert not (worktree / ".coding-os").exists()

    p = Panel(repo, agent, cwd=worktree / "pkg", checkout=worktree)
    command = installed_commands(repo, agent, root=worktree)["SessionStart"][0]
    proc = run_installed(command, p.payload("SessionStart"), cwd=worktree / "pkg",
                         env=p.hook_env())
    assert proc.returncode == 0, proc.stderr
    assert p.session() is not None and SESSION_RE.match(p.session() or "")
    assert not (worktree / ".coding-os").exists()
    assert not (worktree / "pkg" / ".coding-os").exists()


# --- fresh init ---------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("where", [".", "src/backend"])
def test_init_installs_a_hook_command_for_every_event_at_the_repository_root(
        repo: Path, agent: str, where: str) -> None:
    (repo / where).mkdir(parents=True, exist_ok=True)
    report = json_of("init", "--agent", agent, cwd=repo / where)
    assert report["file"] == str(repo / SETTINGS[agent])
    commands = installed_commands(repo, agent)
    for event in EVENTS:
        ours = [c for c in commands[event] if c.endswith(f" hook {event}")]
        assert len(ours) == 1, (event, commands.get(event))
        words = shlex.split(ours[0])
        assert words[0] == f"COS_AGENT={agent}"
        # The interpreter, without `site`, running the launcher in the user's hub.
        assert os.path.isabs(words[1]) and os.access(words[1], os.X_OK)
        assert words[2:4] == ["-I", "-S"]
        assert os.path.isabs(words[4]) and os.path.isfile(words[4])
        assert not words[4].startswith(str(repo) + os.sep)
        assert words[5:] == ["hook", event]
    assert (repo / ".coding-os").is_dir()
    assert [p.relative_to(repo) for p in repo.rglob(".coding-os")] == [Path(".coding-os")]
    assert "/.coding-os/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert ".coding-os" not in git(repo, "status", "--porcelain")


FIRST_HOOKS = [
    pytest.param("claude", True, id="claude-with-CLAUDE_PROJECT_DIR"),
    pytest.param("claude", False, id="claude-without-CLAUDE_PROJECT_DIR"),
    pytest.param("codex", False, id="codex"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "project_dir"), FIRST_HOOKS)
def test_first_hooks_after_init_fired_from_a_subdirectory_use_the_state_dir_at_the_root(
        repo: Path, agent: str, project_dir: bool) -> None:
    json_of("init", "--agent", agent, cwd=repo)
    sub = repo / "src" / "backend"
    sub.mkdir(parents=True)
    p = Panel(repo, agent, cwd=sub, project_dir=project_dir)
    commands = installed_commands(repo, agent)
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
              "SessionEnd")
    for event in events:
        proc = run_installed(commands[event][0], p.payload(event), cwd=sub, env=p.hook_env())
        assert proc.returncode == 0, (event, proc.stderr)

    assert not (sub / ".coding-os").exists()
    assert not (repo / "src" / ".coding-os").exists()
    sid = p.session()
    assert sid is not None and sid.startswith(f"ses-{agent}-")
    assert presence(repo, agent, sid)["status"] == "ended"
    where = json_of("where", cwd=sub, env=p.env())
    assert (where["state_dir"], where["project_root"]) == (
        str(repo / ".coding-os"), str(repo))
    lines = hooks_log(sub)
    assert [line["event"] for line in lines] == list(events)
    assert {(line["agent"], line["session"]) for line in lines} == {(agent, sid)}


@pytest.mark.parametrize("agent", AGENTS)
def test_hooks_installed_mid_session_adopt_the_panel_at_its_first_prompt(
        repo: Path, agent: str) -> None:
    # `cos init` run from inside a live session: the first hook to fire is not SessionStart.
    json_of("init", "--agent", agent, cwd=repo)
    sub = repo / "src" / "backend"
    sub.mkdir(parents=True)
    p = Panel(repo, agent, cwd=sub)
    commands = installed_commands(repo, agent)
    for event in ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"):
        proc = run_installed(commands[event][0], p.payload(event), cwd=sub, env=p.hook_env())
        assert proc.returncode == 0, (event, proc.stderr)

    sid = p.session()
    assert sid is not None and sid.startswith(f"ses-{agent}-")
    assert not (sub / ".coding-os").exists()
    lines = hooks_log(repo)
    assert lines[0]["event"] == "UserPromptSubmit" and lines[0]["adopted"] == "1"
    assert {line["session"] for line in lines} == {sid}
    record = presence(repo, agent, sid)
    assert (record["source"], record["status"]) == ("adopt", "ended")
    row = summaries(repo)[sid]
    assert (row["prompts"], row["tool_calls"]) == (1, 1)


# --- abandoned session → orphan summary ---------------------------------------------------------


_AGENT_PROCESSES: list[subprocess.Popen[bytes]] = []


def _agent_process() -> subprocess.Popen[bytes]:
    """A live process standing in for the agent (its pid is CLAUDE_PID in hooks)."""
    process = subprocess.Popen(["sleep", "3600"])
    _AGENT_PROCESSES.append(process)
    return process


@pytest.fixture(autouse=True)
def _stop_agent_processes() -> Any:
    yield
    while _AGENT_PROCESSES:
        process = _AGENT_PROCESSES.pop()
        process.kill()
        process.wait()


def _abandon(p: Panel) -> str:
    """A session that does some work and is never ended (the terminal was closed)."""
    sid = p.start()
    p.hook("UserPromptSubmit", prompt="rename the module")
    if p.agent == "claude":
        p.tool(tool_name="Edit", tool_input={"file_path": "src/app.py", "old_string": "a",
                                             "new_string": "b"})
    else:  # Codex reports apply_patch with the patch as `command`
        p.tool(tool_name="apply_patch", tool_input={"command": (
            "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch\n")})
    p.tool("pytest -q")
    p.hook("UserPromptSubmit", prompt="now run the linter")
    p.tool("ruff check .")
    p.hook("Stop")
    return sid


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_an_abandoned_session_is_summarised_as_an_orphan_at_the_next_startup_of_its_panel(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent, panel_id="term-7")
    sid1 = _abandon(p)

    p.restart()  # a new process of the client in the same terminal
    second = p.hook("SessionStart", source="startup")
    sid2 = p.session()
    assert sid2 is not None and sid2 != sid1
    assert sid1 in context_of(second)
    row = summaries(repo)[sid1]
    assert (row["reason"], row["prompts"], row["tool_calls"], row["errors"]) == (
        "orphan", 2, 3, 0)
    assert (row["agent"], row["panel"]) == (agent, "term-7")
    assert row["last_prompt"] == "now run the linter"
    assert json.loads(str(row["files"])) == ["src/app.py"]
    assert presence(repo, agent, sid1)["status"] == "orphaned"
    assert presence(repo, agent, sid2)["status"] == "active"
    start_line = hooks_log(repo, "--session", sid2)[0]
    assert (start_line["event"], start_line["recovered"]) == ("SessionStart", sid1)

    p.restart()
    third = p.hook("SessionStart", source="startup")
    assert sid1 not in context_of(third)
    assert summaries(repo)[sid1] == row
    assert [line["session"] for line in hooks_log(repo, "--event", "SessionStart")
            if line.get("recovered") == sid1] == [sid2]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_session_that_ended_is_not_reported_as_an_orphan_at_the_next_startup(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent, panel_id="term-7")
    sid1 = p.normal_session()
    p.restart()
    out = p.hook("SessionStart", source="startup")
    assert sid1 not in context_of(out)
    assert summaries(repo)[sid1]["reason"] == "end:other"
    assert presence(repo, agent, sid1)["status"] == "ended"
    assert "recovered" not in hooks_log(repo, "--event", "SessionStart")[-1]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_startup_on_one_panel_leaves_the_other_panels_abandoned_session_alone(
        repo: Path, agent: str) -> None:
    a = Panel(repo, agent, panel_id="left")
    b = Panel(repo, agent, panel_id="right")
    sid_a = _abandon(a)
    out = b.hook("SessionStart", source="startup")
    assert sid_a not in context_of(out)
    assert sid_a not in summaries(repo)
    assert a.session() == sid_a
    assert presence(repo, agent, sid_a)["status"] == "active"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_startup_summarises_another_panels_session_whose_agent_process_is_gone(
        repo: Path, agent: str) -> None:
    a = Panel(repo, agent, panel_id="left")
    b = Panel(repo, agent, panel_id="right")
    sid_a = _abandon(a)
    a.exit()
    out = b.hook("SessionStart", source="startup")
    assert sid_a not in context_of(out)  # not this panel's story to tell
    if agent == "claude":  # CLAUDE_PID names the process; Codex gives hooks no such variable
        assert summaries(repo)[sid_a]["reason"] == "orphan"
        assert presence(repo, agent, sid_a)["status"] == "orphaned"
    else:
        assert sid_a not in summaries(repo)  # left for the panel itself, or `cos gc`


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_gc_reaps_only_the_panel_whose_heartbeat_aged_past_the_ttl_and_summarises_its_session(
        repo: Path, agent: str) -> None:
    stale, live = Panel(repo, agent), Panel(repo, agent)
    sid_stale = _abandon(stale)
    sid_live = live.start()
    old = time.time() - 25 * 3600
    os.utime(stale.panel_dir / "heartbeat", (old, old))

    report = json_of("gc", "--panels", cwd=repo)
    assert [(r["agent"], r["panel"], r["session"], r["summarised"])
            for r in report["reaped"]] == [(agent, stale.panel, sid_stale, True)]
    assert report["kept"] == 1
    assert not stale.panel_dir.exists()
    assert live.session() == sid_live
    row = summaries(repo)[sid_stale]
    assert (row["reason"], row["prompts"], row["tool_calls"]) == ("reaped", 2, 3)
    assert presence(repo, agent, sid_stale)["status"] == "reaped"
    assert sid_live not in summaries(repo)


# --- compact → same id and state kept ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_compaction_keeps_the_session_id_and_its_task_and_reinjects_the_session_state_line(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent)
    sid = p.start()
    p.hook("UserPromptSubmit")
    p.set(".task-current", "fix-login-42")
    p.set(".gate-review", "passed")
    p.hook("PreCompact", trigger="auto")
    out = p.hook("SessionStart", source="compact")

    assert p.session() == sid
    context = context_of(out)
    state_lines = [line for line in context.splitlines() if "[Session State]" in line]
    assert len(state_lines) == 1
    assert "task=fix-login-42" in state_lines[0]
    assert "gate=review:passed" in state_lines[0]
    assert sid in context
    assert p.get(".task-current").stdout == "fix-login-42\n"
    assert p.check(".gate-review")["valid"] is True
    assert p.whoami()["task"] == "fix-login-42"
    assert os.listdir(repo / ".coding-os" / agent / "sessions") == [f"{sid}.json"]
    record = presence(repo, agent, sid)
    assert (record["source"], record["last_source"], record["status"]) == (
        "startup", "compact", "active")

    p.hook("UserPromptSubmit", prompt="carry on")
    compact_line, prompt_line = hooks_log(repo, "-n", "2")
    assert (compact_line["event"], compact_line["source"], compact_line["session"]) == (
        "SessionStart", "compact", sid)
    assert compact_line["task"] == "fix-login-42"
    assert (prompt_line["session"], prompt_line["task"]) == (sid, "fix-login-42")


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_a_new_startup_on_the_panel_clears_the_task_that_compaction_kept(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent, panel_id="term-3")
    sid1 = p.start()
    p.set(".task-current", "fix-login-42")
    p.hook("SessionStart", source="compact")
    assert p.get(".task-current").stdout == "fix-login-42\n"

    p.restart()
    sid2 = p.start("startup")
    assert sid2 != sid1
    proc = p.get(".task-current")
    assert proc.returncode == 1 and "no_file" in proc.stderr
    assert not (p.panel_dir / ".task-current").exists()


# --- multi-panel: two panels of one agent -------------------------------------------------------


PANEL_MODES = [pytest.param(False, id="by-payload-session_id"),
               pytest.param(True, id="by-COS_PANEL_ID")]


def _two_panels(repo: Path, agent: str, pinned: bool) -> tuple[Panel, Panel]:
    if pinned:  # two terminals resumed the same client session: only COS_PANEL_ID tells them apart
        native = new_native_id()
        return (Panel(repo, agent, native=native, panel_id="panel-a"),
                Panel(repo, agent, native=native, panel_id="panel-b"))
    return Panel(repo, agent), Panel(repo, agent)


@pytest.mark.slow
@pytest.mark.parametrize("pinned", PANEL_MODES)
@pytest.mark.parametrize("agent", AGENTS)
def test_state_set_in_one_panel_is_not_trusted_by_the_other_panel_of_the_same_agent(
        repo: Path, agent: str, pinned: bool) -> None:
    a, b = _two_panels(repo, agent, pinned)
    sid_a, sid_b = a.start(), b.start()
    assert sid_a != sid_b
    a.set(".task-current", "task-of-a")

    assert a.get(".task-current").stdout == "task-of-a\n"
    proc = b.get(".task-current")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() in ("no_file", "session_mismatch")
    verdict = b.check(".task-current")
    assert verdict["valid"] is False and verdict["reason"] in ("no_file", "session_mismatch")
    assert str(verdict["path"]).startswith(str(b.panel_dir) + os.sep)

    who_a, who_b = a.whoami(), b.whoami()
    assert (who_a["panel_id"], who_a["session_id"], who_a["task"]) == (a.panel, sid_a, "task-of-a")
    assert (who_b["panel_id"], who_b["session_id"], who_b["task"]) == (b.panel, sid_b, None)
    assert state_line(repo / ".coding-os" / agent / ".active-session") == (sid_b, b.panel)
    b.hook("UserPromptSubmit")
    a.hook("UserPromptSubmit")
    b_line, a_line = hooks_log(repo, "-n", "2")
    assert (b_line["session"], b_line["task"]) == (sid_b, None)
    assert (a_line["session"], a_line["task"]) == (sid_a, "task-of-a")


@pytest.mark.slow
@pytest.mark.parametrize("pinned", PANEL_MODES)
@pytest.mark.parametrize("agent", AGENTS)
def test_clear_mints_a_new_session_for_that_panel_while_the_other_panel_keeps_its_own(
        repo: Path, agent: str, pinned: bool) -> None:
    a, b = _two_panels(repo, agent, pinned)
    sid_a, sid_b = a.start(), b.start()
    a.set(".task-current", "task-of-a")
    b.set(".task-current", "task-of-b")

    a.hook("SessionStart", source="clear")
    new_a = a.session()
    assert new_a is not None and SESSION_RE.match(new_a) and new_a not in (sid_a, sid_b)
    assert b.session() == sid_b
    assert a.get(".task-current").returncode == 1
    assert b.get(".task-current").stdout == "task-of-b\n"
    assert (a.whoami()["session_id"], b.whoami()["session_id"]) == (new_a, sid_b)
    assert presence(repo, agent, new_a)["cleared_from"] == sid_a
    assert presence(repo, agent, sid_a)["status"] == "ended"  # kept, resumable
    assert summaries(repo)[sid_a]["reason"] == "clear"
    assert state_line(repo / ".coding-os" / agent / ".active-session") == (new_a, a.panel)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_panels_heartbeat_names_the_session_it_beats_for_after_a_new_session_starts(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent, panel_id="term-5")
    sid1 = p.start()
    sid2 = p.start("clear")
    assert sid2 != sid1
    p.hook("UserPromptSubmit")
    assert state_line(p.panel_dir / "heartbeat")[0] == sid2
    assert p.check("heartbeat")["owner"] == sid2


def test_claude_clear_with_a_new_native_id_starts_a_panel_that_does_not_trust_the_old_markers(
        repo: Path) -> None:
    p = Panel(repo, "claude")
    sid1 = p.start()
    p.set(".task-current", "before-clear")
    old_panel_dir = p.panel_dir

    p.native = new_native_id()  # Claude Code: /clear changes session_id and CLAUDE_CODE_SESSION_ID
    sid2 = p.start("clear")
    assert sid2 != sid1
    proc = p.get(".task-current")
    assert proc.returncode == 1 and "no_file" in proc.stderr
    who = p.whoami()
    assert (who["panel_id"], who["session_id"]) == (p.native, sid2)
    assert state_line(old_panel_dir / "session-id")[0] == sid1
    assert state_line(repo / ".coding-os/claude/.active-session") == (sid2, p.native)
    assert presence(repo, "claude", sid2)["cleared_from"] == sid1  # same process (CLAUDE_PID)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_tmux_pane_id_as_cos_panel_id_names_one_safe_panel_dir_for_hooks_and_shell(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent, panel_id="%3")
    p.hook("SessionStart", source="startup")
    panels = os.listdir(repo / ".coding-os" / agent / "panels")
    assert len(panels) == 1 and re.fullmatch(r"[A-Za-z0-9._-]{1,64}", panels[0])
    who = p.whoami()
    assert who["panel_id"] == panels[0] and who["session_id"] is not None
    p.set(".task-current", "pane-task")
    assert p.get(".task-current").stdout == "pane-task\n"
    assert hooks_log(repo)[0]["panel"] == panels[0]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_subagents_hooks_and_shell_commands_belong_to_the_parent_panel_and_session(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent)
    sid = p.start()
    p.set(".task-current", "parent-task")
    p.hook("UserPromptSubmit")
    # Both clients keep the parent's session_id in a subagent's hook payloads and add agent_id.
    sub_id = f"a{os.urandom(8).hex()}" if agent == "claude" else new_native_id()
    p.hook("SubagentStart", agent_id=sub_id)
    p.hook("PreToolUse", agent_id=sub_id, tool_input={"command": "echo from-subagent"})
    p.hook("PostToolUse", agent_id=sub_id, tool_input={"command": "echo from-subagent"})
    p.hook("SubagentStop", agent_id=sub_id)

    assert os.listdir(repo / ".coding-os" / agent / "panels") == [p.panel]
    assert p.session() == sid
    # A subagent's shell: Claude passes the parent's CLAUDE_CODE_SESSION_ID; Codex sets
    # CODEX_THREAD_ID to the subagent's thread and CODEX_SESSION_ID to the root session.
    sub_env = {**p.env(), **({"CODEX_THREAD_ID": sub_id} if agent == "codex" else {})}
    proc = cos("state", "get", ".task-current", cwd=repo, env=sub_env)
    assert (proc.returncode, proc.stdout) == (0, "parent-task\n"), proc.stderr
    lines = hooks_log(repo)
    assert {line["session"] for line in lines} == {sid}
    subagent_lines = [(line["event"], line.get("agent_id") or line.get("subagent"))
                      for line in lines[2:]]
    assert subagent_lines == [("SubagentStart", sub_id), ("PreToolUse", sub_id),
                              ("PostToolUse", sub_id), ("SubagentStop", sub_id)]


# --- resume -------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_resuming_the_same_native_session_keeps_the_cos_session_and_its_task(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent)
    sid = p.start()
    p.set(".task-current", "long-task")
    p.hook("SessionEnd", reason="other")

    p.hook("SessionStart", source="resume")  # a new process resumes the same native session
    assert p.session() == sid
    assert p.get(".task-current").stdout == "long-task\n"
    assert presence(repo, agent, sid)["last_source"] == "resume"
    assert os.listdir(repo / ".coding-os" / agent / "sessions") == [f"{sid}.json"]


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_resuming_an_unknown_native_session_on_a_pinned_panel_distrusts_the_old_markers(
        repo: Path, agent: str) -> None:
    p = Panel(repo, agent, panel_id="term-2")
    sid1 = p.start()
    p.set(".task-current", "old-task")

    p.restart()  # resumes a session cos never saw (hooks were not installed then)
    p.hook("SessionStart", source="resume")
    sid2 = p.session()
    assert sid2 is not None and sid2 != sid1
    verdict = p.check(".task-current")
    assert (verdict["valid"], verdict["reason"], verdict["owner"]) == (
        False, "session_mismatch", sid1)
    assert p.whoami()["task"] is None
    assert hooks_log(repo)[-1]["linked"] == "1"
