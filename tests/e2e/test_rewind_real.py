"""`cos rewind --both` of a real Claude Code and a real Codex session (scripted model): the code by
cos, the conversation through the agent's own mechanism, then the handover run as a user would.

Each client runs three prompts in a scratch git repository with `cos init`'s hooks; the second
prompt's turn deletes a file with a shell `rm` and edits another with the agent's edit tool. The
test rewinds both halves to the second prompt's checkpoint, runs the handover with a fourth
prompt and checks what the model was sent, the tree, the original session and the exports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (BIN_DIR, Tree, codex_env, run_claude, run_codex, tree_differences,
                               tree_state, write_codex_config)
from tests.e2e.model_server import ModelServer, Step, Text, ToolCall, codex_patch
from tests.helpers import CosProject, require_clients, succeeded

pytestmark = pytest.mark.e2e

PROMPTS = ["P1 read the notes", "P2 tidy the project", "P3 say what changed", "P4 start over"]
EDIT_OLD, EDIT_NEW = "bravo", "BRAVO (edited)"
PROMPT_SHAPE = re.compile(r"P[0-9] ")  # what the test types; the clients add other text


def _first_word(text: str) -> str:
    return text.split()[0] if text.split() else ""


def _last_prompt(body: dict[str, Any]) -> str:
    prompts = user_prompts(body)
    return prompts[-1] if prompts else ""


def user_prompts(body: dict[str, Any]) -> list[str]:
    """The prompts a model request carries, in order (what the user typed, not the context the
    clients add nor tool results)."""
    found = []
    if "messages" in body:  # Anthropic
        for message in body["messages"]:
            if message.get("role") != "user":
                continue
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks:
                text = block.get("text", "") if block.get("type") == "text" else ""
                if PROMPT_SHAPE.match(text):
                    found.append(text)
    else:  # Responses
        for item in body.get("input", []):
            if item.get("type") == "message" and item.get("role") == "user":
                for part in item.get("content", []):
                    text = part.get("text", "")
                    if PROMPT_SHAPE.match(text):
                        found.append(text)
    return found


def answers_of(body: dict[str, Any]) -> list[str]:
    """The assistant texts a model request carries, in order."""
    found = []
    if "messages" in body:
        for message in body["messages"]:
            if message.get("role") == "assistant" and isinstance(message["content"], list):
                found += [b["text"] for b in message["content"] if b.get("type") == "text"]
    else:
        for item in body.get("input", []):
            if item.get("type") == "message" and item.get("role") == "assistant":
                found += [p.get("text", "") for p in item.get("content", [])]
    return [text for text in found if text.startswith("answer to ")]


def answer(body: dict[str, Any]) -> Text:
    return Text(f"answer to {_first_word(_last_prompt(body))}")


def work_or_answer(first: ToolCall) -> Step:
    """The second prompt's first tool call; any other prompt gets its answer."""
    def step(body: dict[str, Any]) -> ToolCall | Text:
        return first if _last_prompt(body).startswith("P2 ") else answer(body)
    return step


def claude_script(project: Path) -> list[Step]:
    edit = str(project / "edit.txt")
    return [
        work_or_answer(ToolCall("Bash", {"command": "rm gone.txt", "description": "Delete"})),
        ToolCall("Read", {"file_path": edit}),
        ToolCall("Edit", {"file_path": edit, "old_string": EDIT_OLD, "new_string": EDIT_NEW}),
        answer,
    ]


def codex_script(project: Path) -> list[Step]:
    patch = codex_patch(str(project / "edit.txt"), EDIT_OLD, EDIT_NEW)
    return [
        work_or_answer(ToolCall("exec_command", {"cmd": "rm gone.txt"})),
        ToolCall("apply_patch", {"input": patch}, freeform=True),
        answer,
    ]


@dataclass
class Rewound:
    cp: CosProject
    server: ModelServer
    session: str = ""
    before_p2: Tree = field(default_factory=dict)
    after_p3: Tree = field(default_factory=dict)
    checkpoint: dict[str, Any] = field(default_factory=dict)
    dry_run: dict[str, Any] = field(default_factory=dict)
    resumed: dict[str, Any] = field(default_factory=dict)
    untouched: dict[str, bool] = field(default_factory=dict)
    rewind: dict[str, Any] = field(default_factory=dict)
    after_rewind: Tree = field(default_factory=dict)
    p4_request: dict[str, Any] = field(default_factory=dict)
    after_p4: Tree = field(default_factory=dict)
    original_request: dict[str, Any] = field(default_factory=dict)
    active_after_p4: list[str] = field(default_factory=list)
    rewound_row: dict[str, Any] = field(default_factory=dict)
    exports: dict[str, str] = field(default_factory=dict)
    refused: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    refused_trees: dict[str, Tree] = field(default_factory=dict)

    def cos_json(self, *args: str, env: dict[str, str] | None = None) -> Any:
        proc = self.cp.cos(*args, "--json", env={**self.env, **(env or {})})
        assert proc.returncode == 0, f"cos {' '.join(args)}: {proc.stderr}"
        return json.loads(proc.stdout)

    @property
    def env(self) -> dict[str, str]:
        # The user's shell: the agents on PATH (the handover and the app-server run them).
        extra = {"PATH": f"{BIN_DIR}:{os.environ['PATH']}"}
        if self.cp.agent == "codex":
            extra["CODEX_HOME"] = str(self.cp.home / ".codex")
        return extra

    def last_turn_request(self) -> dict[str, Any]:
        with_tools = [r for r in self.server.requests
                      if r.body and r.body.get("tools") and r.answer.startswith("step")]
        return dict(with_tools[-1].body)


def new_project(root: Path, agent: str) -> CosProject:
    project = (root / "project").resolve()
    project.mkdir(parents=True)
    home = root / "home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True, capture_output=True)
    (project / "edit.txt").write_text(f"alpha\n{EDIT_OLD}\n", encoding="utf-8")
    (project / "gone.txt").write_text("deleted by the second prompt\n", encoding="utf-8")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for argv in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "initial"]):
        subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True)
    cp = CosProject(agent=agent, project=project, home=home)
    succeeded(cp.cos("init", "--agent", agent))
    return cp


def run_agent(run: Rewound, prompt: str, extra: tuple[str, ...] = ()) -> None:
    cp = run.cp
    if cp.agent == "claude":
        cp.results.append(succeeded(run_claude(cp.project, prompt, run.server, cp.home,
                                               extra_args=extra)))
    else:
        cp.results.append(succeeded(run_codex(cp.project, prompt, run.server, cp.home,
                                              extra_args=extra)))


def resume_args(agent: str, native: str) -> tuple[str, ...]:
    return ("--resume", native) if agent == "claude" else ("resume", native)


def rewind_session(root: Path, agent: str) -> Rewound:
    cp = new_project(root, agent)
    script = claude_script(cp.project) if agent == "claude" else codex_script(cp.project)
    with ModelServer(script) as server:
        if agent == "codex":
            write_codex_config(cp.home / ".codex", server)
        run = Rewound(cp=cp, server=server)
        active = cp.state / agent / ".active-session"
        run_agent(run, PROMPTS[0])
        run.session, cp.native_id = active.read_text(encoding="utf-8").split()
        run.before_p2 = tree_state(cp.project)
        for prompt in PROMPTS[1:3]:
            run_agent(run, prompt, resume_args(agent, cp.native_id))
        run.after_p3 = tree_state(cp.project)
        rows = run.cos_json("checkpoints", "--session", run.session)
        run.checkpoint = next(row for row in rows if row["trigger"] == "prompt"
                              and row["turn"] == 2)
        target = run.checkpoint["id"]
        run.dry_run = run.cos_json("rewind", target, "--both", "--dry-run")
        run.rewind = run.cos_json("rewind", target, "--both")
        run.after_rewind = tree_state(cp.project)
        handover = run.rewind["conversation"]["handover"]
        assert handover["cwd"] == str(cp.project)
        run.resumed = run.cos_json("resume", run.rewind["conversation"]["rewound_session"],
                                   "--dry-run")
        run_agent(run, PROMPTS[3], tuple(handover["argv"][1:]))
        run.p4_request = run.last_turn_request()
        run.after_p4 = tree_state(cp.project)
        run.active_after_p4 = active.read_text(encoding="utf-8").split()
        rewound = run.rewind["conversation"]["rewound_session"]
        run.rewound_row = run.cos_json("sessions", "show", rewound)
        run.exports = {
            session: succeeded(cp.cos("export", session, "--format", "md", env=run.env)).stdout
            for session in (run.session, rewound)}
        # Refusals, each leaving the tree as it is.
        fork_checkpoints = run.cos_json("checkpoints", "--session", rewound)
        other = next(row["id"] for row in fork_checkpoints if row["trigger"] == "prompt")
        panel = {"COS_AGENT": agent,
                 ("CLAUDE_CODE_SESSION_ID" if agent == "claude" else "CODEX_THREAD_ID"):
                     cp.native_id}
        for name, args, env in (
                ("other session", (other, "--both"), {**run.env, **panel}),
                ("not a checkpoint id", ("cp-nope", "--both"), run.env)):
            before = tree_state(cp.project)
            run.refused[name] = cp.cos("rewind", *args, env=env)
            run.refused_trees[name] = before
        if agent == "codex":  # a rollout the app-server cannot load: nothing is restored
            rollout = Path(run.checkpoint["native"]["transcript"])
            kept = rollout.read_bytes()
            lines = kept.split(b"\n")
            rollout.write_bytes(b"\n".join([b'{"type": "session_meta", "payload": {}}',
                                            *lines[1:]]))
            try:
                before = tree_state(cp.project)
                run.refused["unloadable thread"] = cp.cos("rewind", target, "--both",
                                                          env=run.env)
                run.untouched["unloadable thread"] = tree_state(cp.project) == before
            finally:
                rollout.write_bytes(kept)
        # The original session still resumes with all three prompts.
        run_agent(run, "P5 " + "again", resume_args(agent, cp.native_id))
        run.original_request = run.last_turn_request()
    return run


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rewound]:
    require_clients()
    yield rewind_session(tmp_path_factory.mktemp("rw-claude"), "claude")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rewound]:
    require_clients()
    yield rewind_session(tmp_path_factory.mktemp("rw-codex"), "codex")


@pytest.fixture(params=["claude", "codex"])
def run(request: pytest.FixtureRequest) -> Rewound:
    result: Rewound = request.getfixturevalue(request.param)
    return result


def test_the_second_prompts_checkpoint_records_the_agents_own_point(run: Rewound) -> None:
    native = run.checkpoint["native"]
    assert native["agent"] == run.cp.agent and native["native_id"] == run.cp.native_id
    assert os.path.isfile(native["transcript"])
    if run.cp.agent == "claude":
        assert native["uuid"] and native["prompt_id"]
    else:
        assert native["turn_id"]


def test_rewind_both_restores_the_tree_as_it_was_before_the_second_prompt(run: Rewound) -> None:
    assert tree_differences(run.before_p2, run.after_p3) != []  # the turn did change it
    assert run.rewind["code"]["applied"] is True
    assert tree_differences(run.before_p2, run.after_rewind) == []
    assert tree_differences(run.before_p2, run.after_p4) == []


def test_the_dry_run_names_the_handover_and_changes_nothing(run: Rewound) -> None:
    conversation = run.dry_run["conversation"]
    assert conversation["applied"] is False and conversation["available"] is True
    assert conversation["handover"]["cwd"] == str(run.cp.project)


def test_the_handover_sends_the_model_the_first_prompt_and_the_fourth_only(
        run: Rewound) -> None:
    assert user_prompts(run.p4_request) == [PROMPTS[0], PROMPTS[3]]
    assert answers_of(run.p4_request) == ["answer to P1"]


def test_cos_resume_of_the_rewound_session_runs_the_handover(run: Rewound) -> None:
    handover = run.rewind["conversation"]["handover"]
    assert run.resumed["handover"]["argv"] == handover["argv"]
    assert run.resumed["handover"]["cwd"] == handover["cwd"]


def test_the_original_session_still_resumes_with_all_three_prompts(run: Rewound) -> None:
    assert user_prompts(run.original_request) == [*PROMPTS[:3], "P5 again"]


def test_the_rewound_conversation_is_a_new_session_linked_to_the_original(run: Rewound) -> None:
    conversation = run.rewind["conversation"]
    rewound = conversation["rewound_session"]
    assert rewound != run.session
    # Filed by cos in the index: the cos session it was forked from, and where.
    assert run.rewound_row["forked_from"] == run.session
    assert run.rewound_row["fork_point"]["checkpoint"] == run.checkpoint["id"]
    presence = json.loads((run.cp.state / run.cp.agent / "sessions" / f"{rewound}.json")
                          .read_text(encoding="utf-8"))
    assert presence["forked_from"] == run.session
    assert presence["fork_point"]["checkpoint"] == run.checkpoint["id"]
    assert run.rewound_row["native_id"] == conversation["new_native_id"]
    # The hooks of the handover's run bound that session, not a new one.
    assert run.active_after_p4 == [rewound, conversation["new_native_id"]]


def test_each_export_shows_its_own_conversation(run: Rewound) -> None:
    original = run.exports[run.session]
    rewound = run.exports[run.rewind["conversation"]["rewound_session"]]
    for prompt in PROMPTS[:3]:
        assert prompt in original
    assert PROMPTS[3] not in original
    assert PROMPTS[3] in rewound
    assert PROMPTS[1] not in rewound and PROMPTS[2] not in rewound


def test_the_rewound_export_holds_the_kept_first_prompt(run: Rewound) -> None:
    # Codex 0.169 writes a fork as a rollout whose `history_base` points into the parent's
    # rollout: the export follows it.
    rewound = run.exports[run.rewind["conversation"]["rewound_session"]]
    assert rewound.index(PROMPTS[0]) < rewound.index(PROMPTS[3])


def test_a_thread_the_app_server_cannot_load_is_refused_with_nothing_restored(
        codex: Rewound) -> None:
    proc = codex.refused["unloadable thread"]
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert codex.untouched["unloadable thread"]


def test_a_checkpoint_of_another_session_is_refused_in_one_line_with_the_tree_untouched(
        run: Rewound) -> None:
    for name, exit_code in (("other session", 2), ("not a checkpoint id", 2)):
        proc = run.refused[name]
        assert proc.returncode == exit_code, (name, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "not of this panel's session" in run.refused["other session"].stderr
