"""A transcript cos's summariser wrote (adapters/claude/compact.py) stays linked to the session it
summarises: the importer finds the session holding the compact boundary's logical parent (or,
when the boundary names none, the one sharing its kept entries) and sets `forked_from`, so a
later import keeps the link the rewind filed in the index. And a session carries what its tree
has beside the live chain: its branch count and warnings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coding_os.adapters.claude.compact import compacted_entries, write_transcript
from coding_os.adapters.claude.transcripts import project_key, scan_claude
from coding_os.adapters.claude.tree import read_tree

TREES = Path(__file__).resolve().parent / "fixtures" / "claude_trees"
ORIGINAL = "9d5d1580-9251-4b4c-890c-2c3c1ce1b6d9"  # before.jsonl (SOURCES.md there)
SUMMARY = "5a5a5a5a-0000-4000-8000-000000000001"


def lay_out(claude_dir: Path, cwd: str = "/tmp/ftrees/run/proj") -> Path:
    """The real three-prompt transcript in its project folder (its cwd rewritten to `cwd`)."""
    folder = claude_dir / "projects" / project_key(cwd)
    folder.mkdir(parents=True)
    text = (TREES / "before.jsonl").read_text(encoding="utf-8")
    (folder / f"{ORIGINAL}.jsonl").write_text(text.replace("/tmp/ftrees/run/proj", cwd),
                                              encoding="utf-8")
    return folder


def summarise(folder: Path, direction: str) -> dict[str, Any]:
    """A summary transcript of the original's live chain, split before its second prompt."""
    with open(folder / f"{ORIGINAL}.jsonl", encoding="utf-8") as handle:
        entries = [json.loads(line) for line in handle if line.strip()]
    chain = read_tree(entries).live
    split = next(i for i, e in enumerate(chain) if e.get("type") == "user"
                 and "prompt two" in json.dumps(e.get("message")))
    made = compacted_entries(chain, split, direction, "what happened", "2026-12-02T05:00:00.000Z",
                             SUMMARY)
    write_transcript(str(folder), made)
    return made.entries[0]


@pytest.mark.parametrize("direction", ["up-to", "from"])
def test_a_summary_transcript_is_forked_from_the_session_it_summarises(
        tmp_path: Path, direction: str) -> None:
    folder = lay_out(tmp_path)
    boundary = summarise(folder, direction)
    assert boundary["subtype"] == "compact_boundary"
    sessions = {s.native_id: s for s in scan_claude(tmp_path)[0]}
    assert sessions[SUMMARY].forked_from == ORIGINAL
    assert sessions[SUMMARY].continues is None
    assert sessions[ORIGINAL].forked_from is None


def test_a_summary_whose_original_is_gone_has_no_link(tmp_path: Path) -> None:
    folder = lay_out(tmp_path)
    summarise(folder, "up-to")
    (folder / f"{ORIGINAL}.jsonl").unlink()
    (summary,) = scan_claude(tmp_path)[0]
    assert (summary.native_id, summary.forked_from) == (SUMMARY, None)


def test_a_later_import_keeps_the_summary_forked_from_its_original(
        repo: Path, isolated_env: Path) -> None:
    from tests.helpers import cos

    folder = lay_out(isolated_env / ".claude", cwd=str(repo))
    first = json.loads(cos("sessions", "--json", cwd=repo).stdout)
    assert [row["native_id"] for row in first] == [ORIGINAL]
    summarise(folder, "up-to")
    rows = {row["native_id"]: row for row in json.loads(
        cos("sessions", "--json", cwd=repo).stdout)}
    assert rows[SUMMARY]["forked_from"] == ORIGINAL
    rebuilt = cos("index", "rebuild", cwd=repo)  # built again from the logs alone
    assert rebuilt.returncode == 0, rebuilt.stderr
    rows = {row["native_id"]: row for row in json.loads(
        cos("sessions", "--json", cwd=repo).stdout)}
    assert rows[SUMMARY]["forked_from"] == ORIGINAL


def test_a_session_carries_its_branch_count_and_tree_warnings(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / project_key("/tmp/ftrees/run/proj")
    folder.mkdir(parents=True)
    (folder / f"{ORIGINAL}.jsonl").write_bytes((TREES / "resume_at.jsonl").read_bytes())
    (session,) = scan_claude(tmp_path)[0]
    assert (session.branches, session.tree_warnings) == (1, ())
    assert session.to_dict()["branches"] == 1 and session.to_dict()["tree_warnings"] == []
    # A line lost from the middle breaks the chain: the warning comes with the session.
    lines = (TREES / "before.jsonl").read_text(encoding="utf-8").splitlines()
    cut = next(i for i, text in enumerate(lines)
               if json.loads(text).get("type") == "assistant")
    (folder / f"{ORIGINAL}.jsonl").write_text("\n".join(lines[:cut] + lines[cut + 1:]) + "\n",
                                              encoding="utf-8")
    (broken,) = scan_claude(tmp_path)[0]
    assert len(broken.tree_warnings) == 1
