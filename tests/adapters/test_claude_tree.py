"""A Claude Code transcript read as a tree: the live chain, the branches beside it, the live leaf
read from the file's end, broken chains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_os.adapters.claude.tree import (
    branches,
    first_prompt,
    leaf_uuid,
    live_chain,
    read_tree,
)
from tests.helpers import assistant, user, write_jsonl

S = "ses-tree"


def uuids(chain: list[Any]) -> list[str]:
    return [entry["uuid"] for entry in chain]


def linear(turns: int) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    parent = None
    for turn in range(turns):
        entries.append(user(f"u{turn}", parent, f"prompt {turn}", 2 * turn, S))
        entries.append(assistant(f"a{turn}", f"u{turn}", f"m{turn}", f"r{turn}", 2 * turn + 1, S))
        parent = f"a{turn}"
    return entries


def resumed_at(entries: list[dict[str, Any]], at: str, prefix: str, turns: int,
               start: int = 100) -> list[dict[str, Any]]:
    """What `claude --resume ID --resume-session-at AT` appends: a new chain from `at`."""
    out = list(entries)
    parent = at
    for turn in range(turns):
        out.append(user(f"{prefix}u{turn}", parent, f"{prefix} prompt {turn}", start + 2 * turn, S))
        out.append(assistant(f"{prefix}a{turn}", f"{prefix}u{turn}", f"{prefix}m{turn}",
                             f"{prefix}r{turn}", start + 2 * turn + 1, S))
        parent = f"{prefix}a{turn}"
    return out


def test_a_linear_transcript_is_all_live_with_no_branches() -> None:
    entries = linear(3)
    assert uuids(live_chain(entries)) == ["u0", "a0", "u1", "a1", "u2", "a2"]
    assert branches(entries) == []


def test_after_a_resume_at_the_live_chain_drops_the_later_turns_and_they_are_a_branch() -> None:
    entries = resumed_at(linear(3), "a0", "x", 1)
    tree = read_tree(entries)
    assert uuids(tree.live) == ["u0", "a0", "xu0", "xa0"]
    assert tree.leaf == "xa0" and tree.warnings == []
    [branch] = tree.branches()
    assert (branch.number, branch.tip, branch.fork_point) == (1, "a2", "a0")
    assert (branch.length, branch.messages, branch.first_prompt) == (4, 4, "prompt 1")
    chain, broken = tree.chain(branch.tip)
    assert uuids(chain) == ["u0", "a0", "u1", "a1", "u2", "a2"] and broken is None


def test_branches_are_numbered_by_when_their_tips_were_written() -> None:
    entries = resumed_at(resumed_at(linear(2), "a0", "x", 1), "a0", "y", 2, start=200)
    assert uuids(live_chain(entries)) == ["u0", "a0", "yu0", "ya0", "yu1", "ya1"]
    assert [(b.number, b.tip, b.first_prompt) for b in branches(entries)] == [
        (1, "a1", "prompt 1"), (2, "xa0", "x prompt 0")]


def test_bookkeeping_written_after_the_last_message_is_not_the_live_leaf() -> None:
    entries = resumed_at(linear(2), "a0", "x", 1)
    entries += [
        {"type": "summary", "summary": "a title", "leafUuid": "a1"},
        {"type": "file-history-snapshot", "messageId": "a1", "snapshot": {}},
        {"type": "system", "content": "a line with no uuid"},
        {"type": "last-prompt", "lastPrompt": "prompt 1"},
        {"type": "attachment", "uuid": "att", "parentUuid": "a1",
         "attachment": {"type": "hook_success"}},
    ]
    tree = read_tree(entries)
    assert tree.leaf == "xa0"
    assert uuids(tree.live) == ["u0", "a0", "xu0", "xa0"]
    # The attachment hangs off the old branch; it does not make a tip of its own.
    assert [b.tip for b in tree.branches()] == ["a1"]


def test_a_compaction_keeps_the_history_it_continues_in_the_live_chain() -> None:
    entries = linear(2)
    entries.append({"type": "system", "subtype": "compact_boundary", "uuid": "cb",
                    "parentUuid": None, "logicalParentUuid": "a1", "isSidechain": False})
    entries.append(user("sum", "cb", "This session is being continued…", 10, S,
                        isCompactSummary=True))
    entries.append(user("u9", "sum", "after the compaction", 11, S))
    assert uuids(live_chain(entries)) == ["u0", "a0", "u1", "a1", "cb", "sum", "u9"]
    assert branches(entries) == []


def test_a_compaction_whose_history_is_in_another_file_is_a_root_not_a_break() -> None:
    entries = [{"type": "system", "subtype": "compact_boundary", "uuid": "cb",
                "parentUuid": None, "logicalParentUuid": "elsewhere"},
               user("u0", "cb", "go on", 1, S)]
    tree = read_tree(entries)
    assert uuids(tree.live) == ["cb", "u0"] and tree.warnings == []


def test_inline_sidechains_are_not_part_of_the_tree() -> None:
    entries = linear(1)
    entries.append(user("s0", None, "subagent task", 5, S, isSidechain=True))
    entries.append(assistant("s1", "s0", "ms", "rs", 6, S, isSidechain=True))
    tree = read_tree(entries)
    assert uuids(tree.live) == ["u0", "a0"] and tree.branches() == []


def test_a_chain_pointing_at_a_missing_parent_gives_the_longest_chain_and_a_warning() -> None:
    entries = linear(3)
    entries.append(user("stray", "gone", "a line edited by hand", 50, S))
    tree = read_tree(entries)
    assert uuids(tree.live) == ["u0", "a0", "u1", "a1", "u2", "a2"]
    [warning] = tree.warnings
    assert "broken chain" in warning and "gone" in warning and "stray" in warning
    assert "\n" not in warning


def test_a_lost_line_in_the_middle_keeps_the_longer_side() -> None:
    entries = [e for e in linear(4) if e["uuid"] != "u1"]
    tree = read_tree(entries)
    # u0 a0 | (u1 lost) | a1 u2 a2 u3 a3: the part after the loss is longer.
    assert uuids(tree.live) == ["a1", "u2", "a2", "u3", "a3"]
    assert len(tree.warnings) == 1 and "u1" in tree.warnings[0]


def test_a_parent_cycle_is_a_broken_chain_not_a_hang() -> None:
    entries = [user("p", "q", "one", 1, S), assistant("q", "p", "m", "r", 2, S)]
    tree = read_tree(entries)
    assert len(tree.warnings) == 1 and "broken chain" in tree.warnings[0]
    assert len(tree.live) == 2


def test_first_prompt_skips_tool_results_and_takes_a_command_when_nothing_was_typed() -> None:
    result = user("t", None, [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}], 1,
                  S, toolUseResult={})
    command = user("c", None, "<command-name>/review</command-name><command-args>a</command-args>",
                   2, S)
    assert first_prompt([result, command]) == "/review a"
    assert first_prompt([result, command, user("p", None, "typed", 3, S)]) == "typed"


# -- the live leaf from the file's end ------------------------------------------------------------


def test_leaf_uuid_is_the_live_leaf_of_a_resumed_at_transcript(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    entries = resumed_at(linear(3), "a0", "x", 1)
    entries.append({"type": "system", "subtype": "turn_duration", "uuid": "sys",
                    "parentUuid": "xa0"})
    write_jsonl(path, entries)
    assert leaf_uuid(path) == read_tree(entries).leaf == "xa0"


def test_leaf_uuid_reads_back_past_a_long_tail_of_bookkeeping(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    padding = [{"type": "file-history-snapshot", "messageId": f"n{i}", "snapshot": {
        "blob": "x" * 1000}} for i in range(300)]
    big = user("u1", "a0", "y" * 200_000, 5, S)
    write_jsonl(path, linear(1) + [big] + padding)
    assert leaf_uuid(path) == "u1"


def test_leaf_uuid_skips_a_torn_last_line_and_answers_none_without_messages(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl(path, linear(2))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(user("late", "a1", "half", 9, S))[:40])
    assert leaf_uuid(path) == "a1"
    empty = tmp_path / "e.jsonl"
    write_jsonl(empty, [{"type": "summary", "summary": "s", "leafUuid": "x"}])
    assert leaf_uuid(empty) is None
    assert leaf_uuid(tmp_path / "missing.jsonl") is None


# -- random trees ---------------------------------------------------------------------------------


@st.composite
def random_trees(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    """A transcript grown as Claude Code grows one: each new turn continues the live leaf, or
    (a rewind, a resume-at) an earlier assistant entry; bookkeeping lines fall in between.
    Returns the entries and the expected live chain's uuids."""
    entries: list[dict[str, Any]] = []
    parent_of: dict[str, str | None] = {}
    assistants: list[str] = []
    leaf: str | None = None
    for turn in range(draw(st.integers(1, 12))):
        if assistants and draw(st.booleans()):
            leaf = draw(st.sampled_from(assistants))
        u, a = f"u{turn}", f"a{turn}"
        entries.append(user(u, leaf, f"prompt {turn}", 2 * turn, S))
        if draw(st.booleans()):
            entries.append({"type": "file-history-snapshot", "messageId": u, "snapshot": {}})
        entries.append(assistant(a, u, f"m{turn}", f"r{turn}", 2 * turn + 1, S))
        if draw(st.booleans()):
            entries.append({"type": "attachment", "uuid": f"h{turn}", "parentUuid": a,
                            "attachment": {"type": "hook_success"}})
        parent_of[u], parent_of[a] = leaf, u
        assistants.append(a)
        leaf = a
    expected: list[str] = []
    node: str | None = leaf
    while node is not None:
        expected.append(node)
        node = parent_of[node]
    return entries, expected[::-1]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(random_trees())
def test_random_trees_have_exactly_their_live_chain(
    case: tuple[list[dict[str, Any]], list[str]],
) -> None:
    entries, expected = case
    tree = read_tree(entries)
    assert uuids([e for e in tree.live if e["type"] in ("user", "assistant")]) == expected
    assert tree.warnings == []
    # Every message is on the live chain or on exactly the branches that hold it.
    on_branches = set()
    for branch in tree.branches():
        chain, broken = tree.chain(branch.tip)
        assert broken is None and chain[-1]["uuid"] == branch.tip
        on_branches |= set(uuids(chain))
    messages = {e["uuid"] for e in entries if e["type"] in ("user", "assistant")}
    assert messages <= on_branches | set(expected)


# -- transcripts the real Claude Code wrote (fixtures/claude_trees/SOURCES.md) --------------------

TREES = Path(__file__).resolve().parent / "fixtures" / "claude_trees"
A1 = "2269ae4c-f3b8-4f99-98d5-98972647ba36"


def real(name: str) -> list[dict[str, Any]]:
    with open(TREES / name, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def prompts(chain: list[Any]) -> list[str]:
    from coding_os.adapters.claude.tree import classify_user_entry

    found = [classify_user_entry(e) for e in chain if e.get("type") == "user"]
    return [text for what, text in found if what == "prompt"]


def test_real_transcripts_have_the_live_chains_their_sources_give() -> None:
    expected = {
        "before.jsonl": (16, "0dafa0cc-e64e-4d83-bc46-1b05feaa0ce6",
                         ["prompt one", "prompt two", "prompt three"]),
        "fork.jsonl": (13, "d2a0886f-829e-41d5-ab3a-847ac4345868",
                       ["prompt one", "prompt four, forked"]),
        "resume_at.jsonl": (13, "701bc289-419b-41e6-a225-ffeebca30138",
                            ["prompt one", "prompt four, in place"]),
    }
    for name, (length, leaf, typed) in expected.items():
        tree = read_tree(real(name))
        assert (len(tree.live), tree.leaf, prompts(tree.live)) == (length, leaf, typed), name
        assert tree.warnings == [] and leaf_uuid(TREES / name) == leaf, name
        assert A1 in uuids(tree.live), name


def test_a_real_resume_at_leaves_the_dropped_turns_as_one_branch() -> None:
    [branch] = branches(real("resume_at.jsonl"))
    assert (branch.tip, branch.fork_point, branch.length, branch.first_prompt) == (
        "0dafa0cc-e64e-4d83-bc46-1b05feaa0ce6", A1, 5, "prompt two")
    assert branches(real("fork.jsonl")) == [] and branches(real("before.jsonl")) == []
