"""The scripted resume (`cos resume ID|-c --json`, run without click) and the lookups' freshness
check (a lookup loads no importer when no log changed since the last import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coding_os import api
from coding_os.sessions import freshness, index
from coding_os.state.tiers import Tiers
from tests.helpers import HERE, NATIVE_IDS, claude_session, conversation, write_jsonl
from tests.helpers import cos_in as run
from tests.helpers import cos_json_in as data


Project = tuple[Path, dict[str, str]]
IMPORTERS = ("coding_os.adapters.claude.transcripts", "coding_os.adapters.codex.rollouts")


def in_process(checkout: Project, code: str) -> dict[str, object]:
    """Run `code` in a fresh interpreter in the project; it prints one JSON object."""
    repo, env = checkout
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert isinstance(result, dict)
    return result


LOOKUP = f"""
import json, sys
from coding_os import api
report = api.resume_session({HERE!r})
print(json.dumps({{"loaded": [m for m in {IMPORTERS!r} if m in sys.modules],
                  "messages": report.session["messages"], "path": report.path}}))
"""


def test_the_scripted_form_prints_what_the_click_command_prints(checkout: Project,
                                                                isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, checkout[0])
    data(checkout, "import")
    for args in ((HERE,), ("--continue",), ("-c",)):
        fast = run(checkout, "resume", *args, "--json")  # the scripted form: no click
        full = run(checkout, "resume", *args, "--json", "--dry-run")  # click: --json wins
        assert fast.returncode == full.returncode == 0, (fast.stderr, full.stderr)
        assert json.loads(fast.stdout) == json.loads(full.stdout)
        assert fast.stdout == full.stdout


@pytest.mark.parametrize("args", [("aaaaaaaa-0000-0000-0000-00000000dead",), ("../etc",),
                                  ("two words",)])
def test_the_scripted_form_fails_as_the_click_command_fails(checkout: Project,
                                                            args: tuple[str, ...]) -> None:
    fast = run(checkout, "resume", *args, "--json")
    full = run(checkout, "resume", *args, "--json", "--dry-run")
    assert fast.returncode == full.returncode != 0
    assert fast.stderr == full.stderr and fast.stderr.count("\n") == 1
    assert fast.stderr.startswith("cos: ") and "Traceback" not in fast.stderr
    assert fast.stdout == full.stdout == ""


def test_other_forms_still_go_through_the_documented_cli(checkout: Project) -> None:
    help_text = run(checkout, "resume", "--json", "--help")
    assert help_text.returncode == 0 and "Usage: cos resume" in help_text.stdout
    both = run(checkout, "resume", "x", "-c", "--json")  # two ways to find it: a usage error
    assert both.returncode == 2 and both.stderr.count("\n") == 1


def test_an_unchanged_lookup_loads_no_importer_and_a_changed_log_is_imported(
        checkout: Project, isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, checkout[0])
    first = in_process(checkout, LOOKUP)
    assert first["path"] == "native_import" and sorted(first["loaded"]) == sorted(IMPORTERS)
    quiet = in_process(checkout, LOOKUP)
    assert quiet["path"] == "index" and quiet["loaded"] == []
    assert quiet["messages"] == first["messages"]
    # One more turn appended by Claude Code: the next lookup imports it.
    log = next((isolated_env / ".claude" / "projects").rglob(f"{HERE}.jsonl"))
    leaf = json.loads(log.read_text(encoding="utf-8").splitlines()[-1])["uuid"]
    write_jsonl(log, conversation(HERE, 1, start=30, prefix="more-", parent=leaf), mode="a")
    changed = in_process(checkout, LOOKUP)
    assert sorted(changed["loaded"]) == sorted(IMPORTERS)
    assert isinstance(changed["messages"], int) and isinstance(first["messages"], int)
    assert changed["messages"] > first["messages"]


def test_a_new_cos_transcript_makes_the_next_lookup_import(checkout: Project) -> None:
    repo, env = checkout
    data(checkout, "import")
    caller = {**os.environ, **env}
    sid = api.create_session("claude", title="made after the import", env=caller, cwd=str(repo))
    listed = data(checkout, "sessions", "--scope", "all")
    assert isinstance(listed, list) and sid in [row["id"] for row in listed]


def test_a_rebuild_killed_after_emptying_the_index_is_not_taken_as_up_to_date(
        checkout: Project) -> None:
    repo, env = checkout
    data(checkout, "import")
    tiers = Tiers(str(repo / ".coding-os"))
    assert (repo / ".coding-os" / freshness.FINGERPRINT_FILE).exists()
    caller = {**os.environ, **env}

    class Killed(Exception):
        pass

    def die_after_clearing(message: str) -> None:
        if message.startswith("scanning"):
            raise Killed(message)

    from coding_os.storage import open_storage

    storage = open_storage(tiers.database, env=caller)
    try:
        with pytest.raises(Killed):
            claude_dir, codex_dir = str(Path(caller["HOME"]) / ".claude"), env["CODEX_HOME"]
            index.rebuild(storage, tiers, claude_dir, codex_dir, progress=die_after_clearing)
        assert storage.index_rows(limit=1) == []
    finally:
        storage.close()
    assert not (repo / ".coding-os" / freshness.FINGERPRINT_FILE).exists()
    listed = data(checkout, "sessions", "--scope", "all")
    assert isinstance(listed, list) and set(row["id"] for row in listed) == NATIVE_IDS
