"""Taking a checkpoint (checkpoints/take.py): one killed once its objects are in their temporary
files, before the flush that puts them in place, leaves no record, and the next one works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cos, create, killed_create, rewind_ok


@pytest.mark.slow
def test_a_checkpoint_killed_before_its_flush_leaves_no_record_and_the_next_one_works(
        project: Path) -> None:
    killed_create(project)
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    ids = [c["id"] for c in (listed if isinstance(listed, list) else listed["checkpoints"])]
    record = create(project)
    (project / "new0.txt").write_text("changed\n")
    rewind_ok(project, str(record["id"]), "--code")
    assert (project / "new0.txt").read_text() == "new content 0\n"
    assert str(record["id"]) not in ids
