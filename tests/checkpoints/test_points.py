"""A checkpoint found by what a user types (checkpoints/points.py `resolve`): `cos checkpoints`
shows a header and short ids, and `cos rewind`, `cos rewind --summarize-…` take them, the whole
id or a start of it; an ambiguous one lists its candidates (exit 5)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import cos, one_line_failure


def two_checkpoints(repo: Path) -> tuple[list[str], list[list[str]]]:
    ids = []
    for text in ("one\n", "two\n"):
        (repo / "a.txt").write_text(text, encoding="utf-8")
        taken = cos("checkpoint", "create", "--json", cwd=repo)
        assert taken.returncode == 0, taken.stderr
        ids.append(taken.stdout.split('"id": "')[1].split('"')[0])
    listed = cos("checkpoints", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    return ids, [line.split() for line in listed.stdout.splitlines()]


def test_the_checkpoints_table_has_a_header_and_short_ids_rewind_takes(repo: Path) -> None:
    ids, (header, *rows) = two_checkpoints(repo)
    assert header == ["ID", "TIME", "MODE", "TRIGGER", "TURN", "CHANGED", "SESSION", "PROMPT"]
    assert [row[0] for row in rows] == [ids[1][-len(rows[0][0]):], ids[0][-len(rows[1][0]):]]
    assert all(8 <= len(row[0]) <= 12 for row in rows)
    dry = cos("rewind", rows[1][0], "--code", "--dry-run", "--json", cwd=repo)
    assert dry.returncode == 0 and f'"checkpoint": "{ids[0]}"' in dry.stdout, dry.stderr
    assert (repo / "a.txt").read_text(encoding="utf-8") == "two\n"  # a dry run writes nothing
    rewound = cos("rewind", rows[1][0], "--code", cwd=repo)  # the plain form's fast path
    assert rewound.returncode == 0, rewound.stderr
    assert (repo / "a.txt").read_text(encoding="utf-8") == "one\n"
    preview = cos("rewind", ids[1][:-3], "--code", "--dry-run", "--json", cwd=repo)
    assert preview.returncode == 0 and f'"checkpoint": "{ids[1]}"' in preview.stdout


def test_an_ambiguous_checkpoint_key_lists_the_candidates_and_exits_5(repo: Path) -> None:
    ids, _ = two_checkpoints(repo)
    for args in (("rewind", "cp-2", "--code"), ("rewind", "cp-2", "--code", "--dry-run")):
        refused = cos(*args, cwd=repo)
        assert refused.returncode == 5, refused.stderr
        first, *candidates = refused.stderr.splitlines()
        assert first == "cos: 'cp-2' names 2 checkpoints; give more of the id:"
        assert sorted(line.strip() for line in candidates) == sorted(ids)
    assert (repo / "a.txt").read_text(encoding="utf-8") == "two\n"


def test_a_key_no_checkpoint_has_is_not_found_and_a_bad_one_is_refused(repo: Path) -> None:
    two_checkpoints(repo)
    assert one_line_failure(cos("rewind", "ffff-ffff", "--code", cwd=repo), 1) \
        == "cos: no checkpoint ffff-ffff"
    assert "not a checkpoint id" in one_line_failure(
        cos("rewind", "../x", "--code", cwd=repo), 2)
    assert "not a checkpoint id" in one_line_failure(
        cos("rewind", "cp", "--code", cwd=repo), 2)
