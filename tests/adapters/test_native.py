"""Sessions written by the real Claude Code and Codex CLIs import with the right ids and links.

The pinned clients (tests/e2e/clients) run offline against the scripted model server of the e2e
harness: a Claude Code session that delegates to a subagent, is resumed to compact and is then
forked; a Codex thread that spawns a subagent, compacts, and is resumed. Each import is checked
against what the client itself reported (its session id, the cwd it ran in), and re-imports
after a resume must read only what the client appended.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coding_os.adapters.claude.transcripts import scan_claude
from coding_os.adapters.codex.rollouts import scan_codex
from coding_os.adapters import native
from coding_os.adapters.native import ImportState, NativeSession
from tests.e2e.harness import (
    CLIENTS_DIR,
    claude_transcript,
    clients_installed,
    codex_rollout,
    run_claude,
    run_codex,
)
from tests.e2e.model_server import ModelServer, Step, Text, ToolCall


pytestmark = pytest.mark.e2e

MARKER = "SCRIPTED-SUBAGENT"
FIRST_PROMPT = "Say hello to coding-os"
PINNED = json.loads((CLIENTS_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]


def require_clients() -> None:
    """Skip when the pinned clients are not installed, except under CI=true, where that fails."""
    if clients_installed():
        return
    message = "the real clients are not installed (npm ci --prefix tests/e2e/clients)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def succeeded(result: Any) -> Any:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def opens_during(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the importers open from now on."""
    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(native, "open", counting_open, raising=False)
    return opened


@dataclass
class Run:
    """A scratch project, its private HOME, and the imports made as the client wrote."""

    project: Path
    home: Path
    native_id: str = ""
    fork_id: str = ""
    imports: list[tuple[list[NativeSession], ImportState]] = field(default_factory=list)
    # A full import (no state) made at the same moment as each incremental one.
    fresh: list[list[NativeSession]] = field(default_factory=list)
    appended: dict[str, int] = field(default_factory=dict)


def scratch(root: Path) -> Run:
    project = (root / "project").resolve()
    project.mkdir(parents=True)
    (project / "hello.txt").write_text("hello\n", encoding="utf-8")
    home = root / "home"
    home.mkdir()
    return Run(project=project, home=home)


# -- Claude Code ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """A session with a subagent, imported; resumed with /compact, imported; forked, imported."""
    require_clients()
    run = scratch(tmp_path_factory.mktemp("claude-native"))
    main: list[Step] = [
        ToolCall("Bash", {"command": "echo main > main.txt", "description": "write"}),
        ToolCall("Agent", {"description": "Scripted subagent", "prompt": f"{MARKER}: sub.txt",
                           "run_in_background": False}),
        Text("All done."),
    ]
    sub: list[Step] = [ToolCall("Bash", {"command": "echo sub > sub.txt", "description": "s"}),
                       Text("Sub done.")]
    claude_dir = run.home / ".claude"
    with ModelServer({"": main, MARKER: sub}) as server:
        first = succeeded(run_claude(run.project, FIRST_PROMPT, server, run.home))
        run.native_id = json.loads(first.stdout)["session_id"]
        run.imports.append(scan_claude(claude_dir))
        run.fresh.append(scan_claude(claude_dir)[0])
        transcript = claude_transcript(run.home, run.project, run.native_id)
        size = transcript.stat().st_size
        succeeded(run_claude(run.project, "/compact", server, run.home,
                             extra_args=("--resume", run.native_id)))
        run.appended[str(transcript)] = transcript.stat().st_size - size
        run.imports.append(scan_claude(claude_dir, run.imports[-1][1]))
        run.fresh.append(scan_claude(claude_dir)[0])
        fork = succeeded(run_claude(run.project, "Branch off here", server, run.home,
                                    extra_args=("--resume", run.native_id, "--fork-session")))
        run.fork_id = json.loads(fork.stdout)["session_id"]
        run.imports.append(scan_claude(claude_dir, run.imports[-1][1]))
        run.fresh.append(scan_claude(claude_dir)[0])
    yield run


def test_a_real_claude_session_imports_with_its_id_cwd_prompt_and_subagent(claude: Run) -> None:
    sessions, state = claude.imports[0]
    (session,) = sessions
    assert session.native_id == claude.native_id
    assert session.path == str(claude_transcript(claude.home, claude.project, claude.native_id))
    assert session.cwd == str(claude.project)
    assert session.first_prompt == FIRST_PROMPT
    assert session.cli_version == PINNED["@anthropic-ai/claude-code"]
    assert session.user_messages == 1 and session.assistant_messages == 3
    assert session.tokens.total > 0 and session.tokens.output > 0
    (subagent,) = session.subagents
    assert (subagent.layout, subagent.parent, subagent.agent_type) == (
        "nested", claude.native_id, "general-purpose")
    assert subagent.first_prompt == f"{MARKER}: sub.txt"
    assert Path(subagent.path).parent.name == "subagents"
    assert subagent.path in session.paths
    assert subagent.tokens.total > 0
    assert state.report is not None and state.report.orphan_subagents == []
    assert state.report.unreadable == [] and state.report.malformed_lines == 0


def test_a_resumed_claude_session_is_read_from_where_the_last_import_stopped(
    claude: Run,
) -> None:
    sessions, state = claude.imports[1]
    (session,) = sessions
    assert session.native_id == claude.native_id
    assert session.compactions == 1
    # /compact is a command, not a prompt: the last prompt is still the first one.
    assert (session.first_prompt, session.last_prompt) == (FIRST_PROMPT, FIRST_PROMPT)
    assert state.report is not None
    (path, grown), = claude.appended.items()
    assert state.report.files_opened == 1 and state.report.bytes_read == grown
    assert state.report.files_unchanged == state.report.files_seen - 1
    assert sessions == claude.fresh[1]


def test_a_forked_claude_session_is_linked_to_the_session_it_copies(claude: Run) -> None:
    sessions, _ = claude.imports[2]
    found = {s.native_id: s for s in sessions}
    assert sorted(found) == sorted([claude.native_id, claude.fork_id])
    fork, original = found[claude.fork_id], found[claude.native_id]
    assert fork.continues == claude.native_id and fork.copied_entries > 0
    assert original.continued_by == (claude.fork_id,)
    # The session was compacted before the fork: Claude Code copies the conversation from the
    # compaction on (its boundary, the summary, what followed), so the first prompt the copy
    # holds is the new one.
    assert fork.last_prompt == "Branch off here" and fork.compactions == 1
    assert sessions == claude.fresh[2]
    assert fork.cwd == str(claude.project)
    assert fork.subagents == ()  # the subagent stays its original session's
    assert len(original.subagents) == 1


def test_an_unchanged_claude_directory_is_not_opened_again(
    claude: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions, state = claude.imports[-1]
    opened = opens_during(monkeypatch)
    again, _ = scan_claude(claude.home / ".claude", ImportState.loads(state.dumps()))
    assert opened == [] and again == sessions


# -- Codex ----------------------------------------------------------------------------------------


def wait_for_agent(body: dict[str, Any]) -> ToolCall:
    """Codex's wait_agent call for the agent the last spawn_agent call returned."""
    outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
    agent_id = json.loads(outputs[-1]["output"])["agent_id"]
    # Reported as a huge context, so that Codex compacts before its next request.
    return ToolCall("wait_agent", {"targets": [agent_id], "timeout_ms": 30000},
                    namespace="multi_agent_v1", input_tokens=200_000)


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """A thread with a subagent and a compaction, imported; then resumed, and imported again."""
    require_clients()
    run = scratch(tmp_path_factory.mktemp("codex-native"))
    main: list[Step] = [
        ToolCall("exec_command", {"cmd": "printenv CODEX_THREAD_ID > thread.txt"}),
        ToolCall("spawn_agent", {"message": f"{MARKER}: write sub.txt"},
                 namespace="multi_agent_v1"),
        wait_for_agent,
        Text("All done."),
    ]
    sub: list[Step] = [ToolCall("exec_command", {"cmd": "echo sub > sub.txt"}),
                       Text("Sub done.")]
    codex_home = run.home / ".codex"
    config = "model_auto_compact_token_limit = 100000"
    with ModelServer({"": main, MARKER: sub}) as server:
        succeeded(run_codex(run.project, FIRST_PROMPT, server, run.home, config_toml=config))
        run.native_id = (run.project / "thread.txt").read_text(encoding="utf-8").strip()
        run.imports.append(scan_codex(codex_home))
        run.fresh.append(scan_codex(codex_home)[0])
        rollout = codex_rollout(codex_home, run.native_id)
        size = rollout.stat().st_size
        succeeded(run_codex(run.project, "One more thing", server, run.home,
                            extra_args=("resume", run.native_id), config_toml=config))
        run.appended[str(rollout)] = rollout.stat().st_size - size
        run.imports.append(scan_codex(codex_home, run.imports[-1][1]))
        run.fresh.append(scan_codex(codex_home)[0])
    yield run


def test_a_real_codex_thread_imports_with_its_id_cwd_prompt_and_subagent(codex: Run) -> None:
    sessions, state = codex.imports[0]
    (session,) = sessions
    assert session.native_id == codex.native_id
    assert session.path == str(codex_rollout(codex.home / ".codex", codex.native_id))
    assert session.cwd == str(codex.project)
    assert session.first_prompt == FIRST_PROMPT
    assert session.cli_version == PINNED["@openai/codex"]
    assert session.user_messages == 1
    assert session.compactions == 1
    assert session.tokens.total > 200_000  # the cumulative total, past the big request
    (subagent,) = session.subagents
    assert (subagent.layout, subagent.parent) == ("thread", codex.native_id)
    assert subagent.first_prompt == f"{MARKER}: write sub.txt"
    assert subagent.agent_id != codex.native_id and subagent.path in session.paths
    assert state.report is not None and state.report.orphan_subagents == []
    assert state.report.unreadable == [] and state.report.malformed_lines == 0


def test_a_resumed_codex_thread_is_read_from_where_the_last_import_stopped(codex: Run) -> None:
    sessions, state = codex.imports[1]
    (session,) = sessions
    assert session.native_id == codex.native_id
    assert (session.first_prompt, session.last_prompt) == (FIRST_PROMPT, "One more thing")
    assert session.user_messages == 2
    assert state.report is not None
    (path, grown), = codex.appended.items()
    assert (state.report.files_opened, state.report.bytes_read) == (1, grown)
    assert state.report.files_unchanged == 1  # the subagent's rollout
    assert sessions == codex.fresh[1]


def test_the_first_lines_session_id_is_read_from_a_regular_file_only(tmp_path: Path) -> None:
    log = tmp_path / "agent-1.jsonl"
    log.write_bytes(b'{"sessionId": "s-1", "type": "user"}\n{"sessionId": "s-2"}\n')
    assert native.first_session_id(str(log)) == "s-1"
    (tmp_path / "link.jsonl").symlink_to(log)
    os.mkfifo(tmp_path / "fifo.jsonl")  # read without blocking: no writer ever opens it
    (tmp_path / "torn.jsonl").write_bytes(b'{"sessionId": "s-')
    (tmp_path / "none.jsonl").write_bytes(b'{"sessionId": 7}\n')
    for name in ("link.jsonl", "fifo.jsonl", "torn.jsonl", "none.jsonl", "missing.jsonl"):
        assert native.first_session_id(str(tmp_path / name)) is None, name
