"""A repository is untrusted input (DESIGN.md §11): each test builds a crafted repository,
clones it, runs ordinary commands and checks that nothing outside the project changed, nothing
ran, nothing secret was stored, and that each command gave one line and its documented exit
code."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cos, cos_json, crafted_clone, fire, git, tree_state

NATIVE = "c7c7c7c7-0000-0000-0000-000000000001"


def one_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The one line a refused command printed on stderr, after checking its exit code."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def outside(tmp_path: Path) -> Path:
    """A directory outside the project, with a user's files in it."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / ".bashrc").write_text("original bashrc\n", encoding="utf-8")
    (place / "precious.txt").write_text("precious\n", encoding="utf-8")
    (place / "backups" / "20200101").mkdir(parents=True)
    (place / "backups" / "20200101" / "db.dump").write_text("backup data\n", encoding="utf-8")
    return place


# -- the state dir is cos's own ------------------------------------------------------------------


def test_a_committed_restore_journal_is_never_replayed(tmp_path: Path) -> None:
    place = outside(tmp_path)
    before = tree_state(place)
    checkpoint = "cp-20250101-000000-000-abcd"
    victim_staging = tmp_path / "victim" / ".coding-os" / "checkpoints" / "staging"
    journal = {"id": checkpoint, "before": checkpoint, "layout": 2,
               "before_record": {"id": checkpoint, "root": str(place)}, "root": str(place),
               "staging": str(victim_staging),
               "ops": [{"op": "delete", "path": "precious.txt"},
                       {"op": "write", "path": ".bashrc", "kind": "f", "mode": "100644"}]}
    clone = crafted_clone(tmp_path, {
        ".coding-os/checkpoints/journal.json": json.dumps(journal),
        f".coding-os/checkpoints/staging/{checkpoint}.1": "echo PWNED-by-cloned-repo\n"})
    for args in (("where",), ("sessions",), ("checkpoints",)):
        proc = cos(*args, cwd=clone)
        assert proc.returncode in (0, 8), proc.stderr
        assert "Traceback" not in proc.stderr
    fire("SessionStart", {"session_id": NATIVE, "source": "startup"}, cwd=clone)
    fire("UserPromptSubmit", {"session_id": NATIVE, "prompt": "hello"}, cwd=clone)
    assert tree_state(place) == before  # nothing deleted, nothing written outside
    assert "COS_STATE_FOREIGN" in one_line(cos("sessions", cwd=clone), 8)
    # `cos init` sets the clone's state dir aside, unread, and starts a fresh one.
    proc = cos("init", "--agent", "claude", cwd=clone)
    assert proc.returncode == 0, proc.stderr
    assert "moved aside, unread" in proc.stdout
    aside = [p for p in clone.iterdir() if p.name.startswith(".coding-os.foreign-")]
    assert len(aside) == 1 and (aside[0] / "checkpoints" / "journal.json").is_file()
    assert not (clone / ".coding-os" / "checkpoints" / "journal.json").exists()
    assert cos("sessions", cwd=clone).returncode == 0
    assert tree_state(place) == before


def test_a_journal_naming_a_tree_outside_the_project_is_set_aside_unapplied(
        project: Path, tmp_path: Path) -> None:
    # The same journal in this user's own state dir (a `git pull` can bring files into it).
    place = outside(tmp_path)
    before = tree_state(place)
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    checkpoint = "cp-20250101-000000-000-abcd"
    folder = project / ".coding-os" / "checkpoints"
    (folder / "staging").mkdir(parents=True, exist_ok=True)
    (folder / "staging" / f"{checkpoint}.1").write_text("PWNED\n", encoding="utf-8")
    (folder / "journal.json").write_text(json.dumps({
        "id": checkpoint, "before": checkpoint, "layout": 2,
        "before_record": {"id": checkpoint, "root": str(place)}, "root": str(place),
        "staging": str(folder / "staging"),
        "ops": [{"op": "delete", "path": "precious.txt"}]}), encoding="utf-8")
    proc = cos("checkpoints", cwd=project)
    # The command goes on; the journal is reported in one line and set aside.
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "outside this state dir's project" in proc.stderr.splitlines()[0]
    assert tree_state(place) == before
    assert not (folder / "journal.json").exists()  # moved aside, so it never blocks again
    assert list(folder.glob("journal.failed-*.json"))


def test_a_committed_install_manifest_is_never_merged_nor_undone_outside(
        tmp_path: Path) -> None:
    place = tmp_path / "outside"
    place.mkdir()
    (place / "sshd_like.conf").write_text("line-one\nPermitRootLogin no\nline-three\n",
                                          encoding="utf-8")
    (place / "to_delete").write_text("SECRETCONTENT", encoding="utf-8")
    before = tree_state(place)
    manifest = {"version": 1,
                "installations": [{"agent": "codex", "file": str(place / "none.json"),
                                   "entries": []}],
                "mcp": [{"agent": "codex", "file": str(place / "to_delete"),
                         "block": "SECRETCONTENT", "created_file": True}],
                "git_exclude": {"file": str(place / "sshd_like.conf"),
                                "line": "PermitRootLogin no"}}
    clone = crafted_clone(tmp_path, {".coding-os/installed-manifest.json": json.dumps(manifest)})
    assert cos("init", "--agent", "claude", cwd=clone).returncode == 0
    proc = cos("uninstall", cwd=clone)
    assert proc.returncode == 0, proc.stderr
    assert tree_state(place) == before


def test_a_manifest_naming_files_outside_the_project_is_refused_by_uninstall(
        project: Path, tmp_path: Path) -> None:
    place = tmp_path / "outside"
    place.mkdir()
    (place / "to_delete").write_text("keep me", encoding="utf-8")
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    manifest_path = project / ".coding-os" / "installed-manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["mcp"] = [{"agent": "codex", "file": str(place / "to_delete"),
                        "created_file": True}]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    line = one_line(cos("uninstall", cwd=project), 2)
    assert "not a file of" in line and str(place / "to_delete") in line
    assert (place / "to_delete").read_text(encoding="utf-8") == "keep me"


def test_a_committed_trash_symlink_never_lets_gc_delete_outside(tmp_path: Path) -> None:
    place = outside(tmp_path)
    before = tree_state(place)
    clone = crafted_clone(tmp_path, {".coding-os/.keep": ""},
                          links={".coding-os/trash": str(place / "backups")})
    assert "holds a symlink (trash)" in one_line(cos("gc", cwd=clone), 8)
    assert cos("init", "--agent", "claude", cwd=clone).returncode == 0
    proc = cos("gc", cwd=clone)
    assert proc.returncode == 0, proc.stderr
    assert tree_state(place) == before


@pytest.mark.parametrize("link", ["checkpoints", "claude"])
def test_committed_symlinks_in_the_state_dir_are_refused_and_doctor_says_so(
        tmp_path: Path, link: str) -> None:
    place = tmp_path / "outside"
    (place / link).mkdir(parents=True)
    clone = crafted_clone(tmp_path, {"src.txt": "project source\n"},
                          links={f".coding-os/{link}": str(place / link)})
    (clone / "notes.txt").write_text("uncommitted work\n", encoding="utf-8")
    for event, payload in (("SessionStart", {"source": "startup"}),
                           ("UserPromptSubmit", {"prompt": "hi"})):
        proc = fire(event, {"session_id": NATIVE, **payload}, cwd=clone)
        assert f"holds a symlink ({link})" in one_line(proc, 8)
    assert list((place / link).iterdir()) == []  # nothing of the tree, nothing of a session
    proc = cos("doctor", "--json", cwd=clone)
    assert proc.returncode == 6
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["state_dir"]["status"] == "fail"
    assert "not this user's" in checks["state_dir"]["detail"]


def test_a_symlinked_hooks_log_fails_no_hook_and_doctor_reports_it(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.log"
    target.write_text("", encoding="utf-8")
    clone = crafted_clone(tmp_path, {".coding-os/.keep": ""},
                          links={".coding-os/.hooks.log": str(target)})
    proc = fire("SessionStart", {"session_id": NATIVE, "source": "startup"}, cwd=clone)
    assert "COS_STATE_FOREIGN" in one_line(proc, 8)
    assert target.read_text(encoding="utf-8") == ""
    checks = {c["name"]: c for c in json.loads(cos("doctor", "--json", cwd=clone).stdout)["checks"]}
    assert checks["state_dir"]["status"] == "fail"


def test_files_cos_writes_are_private_also_when_the_repository_made_them_first(
        tmp_path: Path) -> None:
    clone = crafted_clone(tmp_path, {".coding-os/.hooks.log": "",
                                     ".coding-os/.observations.jsonl": ""})
    assert cos("init", "--agent", "claude", cwd=clone).returncode == 0
    fire("SessionStart", {"session_id": NATIVE, "source": "startup"}, cwd=clone)
    fire("PostToolUse", {"session_id": NATIVE, "tool_name": "Bash",
                         "tool_input": {"command": "ls"}, "tool_response": {}}, cwd=clone)
    state = clone / ".coding-os"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for name in (".hooks.log", ".observations.jsonl"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name


def test_a_file_cos_appends_to_is_made_private_again_when_its_mode_was_widened(
        project: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    fire("SessionStart", {"session_id": NATIVE, "source": "startup"}, cwd=project)
    log = project / ".coding-os" / ".hooks.log"
    log.chmod(0o644)
    (project / ".coding-os").chmod(0o755)
    fire("PostToolUse", {"session_id": NATIVE, "tool_name": "Bash",
                         "tool_input": {"command": "ls"}, "tool_response": {}}, cwd=project)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE((project / ".coding-os").stat().st_mode) == 0o700


def test_a_committed_claude_dir_symlink_never_takes_hooks_into_the_global_settings(
        tmp_path: Path, isolated_env: Path) -> None:
    settings = isolated_env / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme":"dark"}', encoding="utf-8")
    clone = crafted_clone(tmp_path, {}, links={".claude": str(isolated_env / ".claude")})
    line = one_line(cos("init", "--agent", "claude", cwd=clone), 2)
    assert "is a symlink" in line
    assert settings.read_text(encoding="utf-8") == '{"theme":"dark"}'


# -- the state dirs of this user, before and after registration ---------------------------------


def test_a_state_dir_made_before_registration_is_adopted_once_with_a_note(
        project: Path) -> None:
    # What an older cos left: a private state dir with a hooks log, not registered.
    state = project / ".coding-os"
    state.mkdir(mode=0o700)
    (state / ".hooks.log").write_text("ts=2026-01-01T00:00:00.000Z agent=claude\n",
                                      encoding="utf-8")
    first = cos("sessions", cwd=project)
    assert first.returncode == 0, first.stderr
    assert "registered the state dir" in first.stderr and str(state) in first.stderr
    second = cos("sessions", cwd=project)
    assert second.returncode == 0 and "registered" not in second.stderr
    assert (state / ".state-id").is_file() and (state / ".gitignore").read_text(
        encoding="utf-8").splitlines()[-1] == "*"


def test_a_cloned_state_dir_stays_foreign_whatever_its_modes(tmp_path: Path) -> None:
    clone = crafted_clone(tmp_path, {".coding-os/.hooks.log": "ts=x\n"})
    (clone / ".coding-os").chmod(0o700)  # as a clone under umask 077 makes it
    line = one_line(cos("sessions", cwd=clone), 8)
    assert "git tracks files in it" in line
    assert not (clone / ".coding-os" / ".state-id").exists()


def test_a_state_dir_copied_from_another_user_or_machine_is_foreign(
        project: Path, tmp_path: Path) -> None:
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    other = tmp_path / "copy"
    shutil.copytree(project, other, symlinks=True)
    git(other, "status")  # a working copy of its own
    line = one_line(cos("sessions", cwd=other), 8)
    assert "not made for this user" in line


def test_cos_where_says_the_state_dir_is_foreign_and_reads_nothing(tmp_path: Path) -> None:
    clone = crafted_clone(tmp_path, {".coding-os/.agent": "codex"})
    found = cos_json("where", cwd=clone)
    assert isinstance(found, dict) and found["state_dir_status"] == "foreign"
    assert "git tracks files in it" in str(found["foreign_reason"])
    proc = cos("where", cwd=clone)
    assert proc.returncode == 0 and "not this user's state dir" in proc.stderr
    assert "COS_STATE_FOREIGN" in one_line(cos("whoami", cwd=clone), 8)


# -- commands need consent -----------------------------------------------------------------------


def summarize_setup(tmp_path: Path, proof: Path) -> tuple[Path, str]:
    """A clone whose `.coding-os.yaml` names a summariser that leaves `proof`, with a
    checkpoint of a Claude Code session to summarise around."""
    clone = crafted_clone(tmp_path, {".coding-os.yaml":
                                     f'summarizer:\n  command: sh -c "id > {proof}; echo s"\n'})
    assert cos("init", "--agent", "claude", cwd=clone).returncode == 0
    home = Path(os.environ["HOME"])
    munged = "".join(c if c.isalnum() else "-" for c in str(clone))
    transcript = home / ".claude" / "projects" / munged / f"{NATIVE}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(json.dumps({
        "type": "user", "message": {"role": "user", "content": "hello"}, "uuid": "u1",
        "parentUuid": None, "sessionId": NATIVE, "timestamp": "2020-01-01T00:00:00.000Z",
        "cwd": str(clone)}) + "\n", encoding="utf-8")
    fire("SessionStart", {"session_id": NATIVE, "source": "startup",
                          "transcript_path": str(transcript)}, cwd=clone)
    fire("UserPromptSubmit", {"session_id": NATIVE, "prompt": "please edit"}, cwd=clone)
    listed = cos_json("checkpoints", cwd=clone)
    assert isinstance(listed, list) and listed
    return clone, str(listed[0]["id"])


def test_a_summarizer_command_from_the_repository_runs_only_after_cos_trust(
        tmp_path: Path) -> None:
    proof = tmp_path / "pwned"
    clone, checkpoint = summarize_setup(tmp_path, proof)
    dry = cos("rewind", checkpoint, "--summarize-up-to", "--dry-run", "--json", cwd=clone)
    assert dry.returncode == 0, dry.stderr
    assert not proof.exists()  # --dry-run never runs it
    assert "not run under --dry-run" in json.loads(dry.stdout)["summarizer_note"]
    line = one_line(cos("rewind", checkpoint, "--summarize-up-to", cwd=clone), 9)
    assert "cos trust" in line and not proof.exists()
    trusted = cos_json("trust", cwd=clone)
    assert isinstance(trusted, dict) and trusted["trusted"] is True
    assert cos("rewind", checkpoint, "--summarize-up-to", cwd=clone).returncode == 0
    assert proof.exists()
    proof.unlink()
    # A changed file needs it again; --revoke takes it back.
    with open(clone / ".coding-os.yaml", "a", encoding="utf-8") as f:
        f.write("# changed\n")
    assert one_line(cos("rewind", checkpoint, "--summarize-up-to", cwd=clone), 9)
    assert cos("trust", cwd=clone).returncode == 0
    revoked = cos_json("trust", "--revoke", cwd=clone)
    assert isinstance(revoked, dict) and revoked["was_trusted"] is True
    assert one_line(cos("rewind", checkpoint, "--summarize-up-to", cwd=clone), 9)
    assert not proof.exists()


def test_doctor_runs_no_mcp_server_the_repository_names(tmp_path: Path) -> None:
    proof = tmp_path / "pwned"
    script = (f"#!/usr/bin/env python3\nimport sys\nopen({str(proof)!r}, 'w').write('ran')\n")
    clone = crafted_clone(tmp_path, {
        "tools/cos": script,
        ".mcp.json": json.dumps({"mcpServers": {"cos": {
            "type": "stdio", "command": "/proc/self/cwd/tools/cos", "args": ["mcp"],
            "env": {"PYTHONPATH": "tools"}}}})})
    (clone / "tools" / "cos").chmod(0o755)
    proc = cos("doctor", "--json", cwd=clone)
    assert proc.returncode == 6, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["mcp"]["status"] == "fail"
    assert "doctor does not start it" in checks["mcp"]["detail"]
    assert not proof.exists()


def test_another_local_user_can_read_nothing_cos_keeps(project: Path) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("setpriv as root is needed to act as another user (CI=true)")
        pytest.skip("needs setpriv, run as root, to act as another user")
    assert cos("init", "--agent", "claude", cwd=project).returncode == 0
    fire("SessionStart", {"session_id": NATIVE, "source": "startup"}, cwd=project)
    fire("UserPromptSubmit", {"session_id": NATIVE, "prompt": "deploy the thing"}, cwd=project)
    project.parent.chmod(0o755)  # the way to the project is open; the state dir is not
    os.chmod(project, 0o755)
    state = project / ".coding-os"
    for target in (state / ".hooks.log", state / "coding-os.db", state):
        proc = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                               "cat" if target.is_file() else "ls", str(target)],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, (target, proc)
