"""Summaries of a real Claude Code and Codex session that the agent resumes as its own.

Each client runs three prompts in a scratch git repository where `cos init --agent <client>`
installed the hooks (they take a checkpoint at each prompt). `cos rewind <checkpoint of prompt
2> --summarize-up-to` writes a new native session (a Claude Code transcript with a
`compact_boundary` and an `isCompactSummary` entry; a Codex rollout with a `compacted` item).
The agent then resumes that new session with a fourth prompt: it runs without error, and the
model request holds the summary (of prompt 1) and then prompts 2 and 3 with their answers, in
order, then the fourth. The original log is byte-identical, and the new session is listed in the
index, forked from the original.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import claude_transcript, codex_rollout, run_claude, run_codex
from tests.e2e.model_server import ModelServer, Text
from tests.helpers import CosProject, new_project, require_clients, succeeded

pytestmark = pytest.mark.e2e

PROMPTS = ["first: make a plan alpha", "second: do step bravo", "third: do step charlie"]
FOURTH = "fourth: and now delta"


@dataclass
class Summarised:
    cp: CosProject
    original: Path
    original_bytes: bytes = b""
    report: dict[str, Any] = field(default_factory=dict)
    resumed: str = ""
    request: list[str] = field(default_factory=list)  # the resumed turn's texts, in order
    listed: dict[str, Any] = field(default_factory=dict)
    written: bytes = b""  # the new log as cos wrote it, before the agent resumed it


def _texts(agent: str, body: dict[str, Any]) -> list[str]:
    found = []
    items = body["messages"] if agent == "claude" else body["input"]
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found.extend(str(block.get("text", "")) for block in content
                         if isinstance(block, dict))
    return found


def run(root: Path, agent: str) -> Summarised:
    cp = new_project(root, agent)
    script = [Text("answered")]
    with ModelServer(script) as server:
        native = ""
        for prompt in PROMPTS:
            extra = () if not native else (("--resume", native) if agent == "claude"
                                            else ("resume", native))
            if agent == "claude":
                result = succeeded(run_claude(cp.project, prompt, server, cp.home,
                                              extra_args=extra))
                native = native or json.loads(result.stdout)["session_id"]
            else:
                succeeded(run_codex(cp.project, prompt, server, cp.home, extra_args=extra))
                native = native or (cp.state / agent / ".active-session").read_text().split()[1]
        original = (claude_transcript(cp.home, cp.project, native) if agent == "claude"
                    else codex_rollout(cp.home / ".codex", native))
        run_ = Summarised(cp, original, original.read_bytes())
        session = (cp.state / agent / ".active-session").read_text().split()[0]
        listed = cp.cos("checkpoints", "--session", session, "--json")
        assert listed.returncode == 0, listed.stderr
        prompts = [row for row in reversed(json.loads(listed.stdout))
                   if row["trigger"] == "prompt"]
        assert len(prompts) == 3, prompts
        done = cp.cos("rewind", prompts[1]["id"], "--summarize-up-to", "--json")
        assert done.returncode == 0, done.stderr
        run_.report = json.loads(done.stdout)
        new_id = run_.report["written"]["native_id"]
        run_.written = Path(run_.report["written"]["path"]).read_bytes()
        start = len(server.requests)
        if agent == "claude":
            resumed = run_claude(cp.project, FOURTH, server, cp.home,
                                 extra_args=("--resume", new_id))
        else:
            resumed = run_codex(cp.project, FOURTH, server, cp.home,
                                extra_args=("resume", new_id))
        succeeded(resumed)
        run_.resumed = resumed.stdout
        turns = [r for r in server.requests[start:] if r.body and r.body.get("tools")]
        run_.request = _texts(agent, turns[0].body)
    shown = cp.cos("sessions", "show", new_id, "--json")
    assert shown.returncode == 0, shown.stderr
    run_.listed = json.loads(shown.stdout)
    return run_


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Summarised]:
    require_clients()
    yield run(tmp_path_factory.mktemp("sum-claude"), "claude")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Summarised]:
    require_clients()
    yield run(tmp_path_factory.mktemp("sum-codex"), "codex")


def _positions(texts: list[str], needles: list[str]) -> list[int]:
    found = []
    for needle in needles:
        hits = [i for i, text in enumerate(texts) if needle in text]
        assert hits, f"{needle!r} is not in the request: {[t[:80] for t in texts]}"
        found.append(hits[0])
    return found


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_the_resumed_summary_sends_the_summary_then_the_kept_prompts_in_order(
        agent: str, request: pytest.FixtureRequest) -> None:
    done: Summarised = request.getfixturevalue(agent)
    texts = done.request
    summary = next(i for i, text in enumerate(texts) if "Summary of" in text
                   and PROMPTS[0] in text)
    kept = _positions(texts, [PROMPTS[1], PROMPTS[2], FOURTH])
    assert summary < kept[0] < kept[1] < kept[2]
    # The first prompt is in the summary only: its own message was not sent.
    assert [t for t in texts if PROMPTS[0] in t and "Summary of" not in t] == []


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_the_original_log_is_untouched_and_the_new_one_is_linked(
        agent: str, request: pytest.FixtureRequest) -> None:
    done: Summarised = request.getfixturevalue(agent)
    assert done.original.read_bytes() == done.original_bytes
    written = done.report["written"]
    assert written["forked_from"] == done.original.name.removesuffix(".jsonl")[-36:]
    assert written["linked"] is True
    assert done.listed["native_id"] == written["native_id"]
    if agent == "codex":  # its session_meta names the thread it was forked from
        assert done.listed["forked_from"] is not None
    assert done.report["handover"] == {
        "command": f"{'claude --resume' if agent == 'claude' else 'codex resume'} "
                   f"{written['native_id']}",
        "cwd": str(done.cp.project)}


def test_the_claude_transcript_has_the_shape_of_its_own_compact(claude: Summarised) -> None:
    entries = [json.loads(line) for line in claude.written.splitlines()]
    boundary, summary = entries[0], entries[1]
    assert (boundary["type"], boundary["subtype"], boundary["parentUuid"]) == (
        "system", "compact_boundary", None)
    assert summary["isCompactSummary"] is True and summary["parentUuid"] == boundary["uuid"]
    for parent, child in zip(entries, entries[1:]):
        assert child["parentUuid"] == parent["uuid"]
    assert {e["sessionId"] for e in entries} == {claude.report["written"]["native_id"]}
    original = {json.loads(line).get("uuid") for line in claude.original_bytes.splitlines()}
    assert all(e["uuid"] in original for e in entries[2:])  # kept entries keep their uuids


def test_the_codex_rollout_holds_a_compacted_item(codex: Summarised) -> None:
    lines = [json.loads(line) for line in codex.written.splitlines()]
    meta = lines[0]["payload"]
    assert meta["id"] == codex.report["written"]["native_id"]
    assert meta["forked_from_id"] == codex.report["written"]["forked_from"]
    compacted = [line for line in lines if line["type"] == "compacted"]
    assert len(compacted) == 1 and PROMPTS[0] in compacted[0]["payload"]["message"]
