"""The observations spool (state/observations.py): what a spooled observation keeps."""

from __future__ import annotations

import json
from pathlib import Path

from coding_os.state import observations

KEY = "AKIA" + "Q3EXAMPLE7KEY2ID"  # made up, built at run time


def test_a_secret_in_an_observation_is_redacted_before_it_is_spooled(tmp_path: Path) -> None:
    spool = tmp_path / ".observations.jsonl"
    observations.spool(str(spool), {"event": "PostToolUse", "text": f"aws --key {KEY}",
                                    "data": {"paths": [f"keys/{KEY}.txt"], "ok": True}})
    observations.spool(str(spool), {"event": "Stop", "text": KEY}, redact=False)
    first, second = (json.loads(line) for line in spool.read_text(encoding="utf-8").splitlines())
    assert KEY not in json.dumps(first)
    assert first["text"] == "aws --key [REDACTED:aws_access_key_id]"
    assert first["data"] == {"paths": ["keys/[REDACTED:aws_access_key_id].txt"], "ok": True}
    assert second["text"] == KEY  # the caller redacted already, or the project turned it off
