"""The `cos` command line (interfaces/cli.py), run as a whole process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers import assistant, cos, on_terminal, one_line_failure, user, write_jsonl

SESSION = "e5c0e5c0-0000-4000-8000-000000000013"
# What a transcript may carry: an OSC window title, a clear screen, a cursor move, a bell, and the
# one-character CSI of C1 (U+009B).
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[H\x9b31m"


def crafted_session(home: Path, cwd: Path) -> None:
    """A Claude Code transcript whose title, prompt and answer hold terminal escapes."""
    prompt = f"deploy {ESCAPES} marmoset"
    entries = [user("u1", None, prompt, 0, SESSION),
               assistant("a1", "u1", "msg_1", "req_1", 1, SESSION),
               {"type": "custom-title", "sessionId": SESSION, "customTitle": f"title {ESCAPES}"}]
    entries[1]["message"]["content"] = [{"type": "text", "text": f"done {ESCAPES} marmoset"}]
    for entry in entries:
        entry["cwd"] = str(cwd)
    key = "".join(c if c.isalnum() else "-" for c in str(cwd))
    write_jsonl(home / ".claude" / "projects" / key / f"{SESSION}.jsonl", entries)


def test_text_from_a_transcript_reaches_a_terminal_with_its_control_characters_visible(
        repo: Path, isolated_env: Path) -> None:
    crafted_session(isolated_env, repo)
    for args in (("sessions",), ("sessions", "show", SESSION), ("search", "marmoset"),
                 ("export", SESSION), ("export", SESSION, "--format", "html")):
        code, received = on_terminal(*args, cwd=repo)
        assert code == 0, (args, received)
        assert b"\x1b" not in received and b"\x07" not in received, (args, received)
        text = received.decode("utf-8")
        assert not any(0x80 <= ord(c) < 0xA0 for c in text), (args, text)
        assert "^[]0;pwned^G" in text and "M-^[31m" in text, (args, text)


def test_export_to_a_pipe_or_a_file_shows_control_characters_and_json_keeps_them(
        repo: Path, isolated_env: Path) -> None:
    crafted_session(isolated_env, repo)
    piped = cos("export", SESSION, cwd=repo)
    assert piped.returncode == 0 and "\x1b" not in piped.stdout
    assert "done ^[]0;pwned^G^[[2J^[[HM-^[31m marmoset" in piped.stdout
    assert cos("export", SESSION, "-o", str(repo / "out.md"), cwd=repo).returncode == 0
    assert "\x1b" not in (repo / "out.md").read_text(encoding="utf-8")
    exported = cos("export", SESSION, "--format", "json", cwd=repo).stdout
    assert "\x1b" not in exported and "\x9b" not in exported
    answers = [t["text"] for t in json.loads(exported)["turns"] if t["role"] == "assistant"]
    assert answers == [f"done {ESCAPES} marmoset"]
    listed = cos("sessions", "--json", cwd=repo).stdout
    assert "\x9b" not in listed and json.loads(listed)[0]["title"] == f"title {ESCAPES}"


def test_an_argument_or_stdin_that_is_not_utf8_is_one_line_exit_2_and_starts_nothing(
        project: Path) -> None:
    from tests.helpers import COS, one_line_failure

    def run(*args: bytes, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([COS.encode(), *args], cwd=project, input=stdin,
                              capture_output=True, timeout=60)
        return subprocess.CompletedProcess(done.args, done.returncode,
                                           done.stdout.decode("utf-8", "replace"),
                                           done.stderr.decode("utf-8", "replace"))

    refused = run(b"bg", b"--exec", b"echo caf\xe9", b"--isolation", b"none")
    assert "'echo caf\\xe9' is not UTF-8 text" in one_line_failure(refused, 2)
    for args in ([b"bg", b"caf\xe9"], [b"bg", b"--name", b"caf\xe9", b"hello"],
                 [b"bg", b"--recipe", b"r.yaml", b"--param", b"k=caf\xe9"],
                 [b"run", b"--agent", b"exec", b"echo caf\xe9"], [b"reply", b"j", b"caf\xe9"]):
        assert "is not UTF-8 text" in one_line_failure(run(*args), 2)
    assert "on stdin is not UTF-8" in one_line_failure(run(b"bg", b"-", stdin=b"caf\xe9"), 2)
    jobs = Path(os.environ["HOME"]) / ".coding-os" / "jobs"
    assert not jobs.exists() or list(jobs.iterdir()) == []
    assert json.loads(cos("sessions", "--json", cwd=project).stdout) == []


# The commands that only read, each as a user types it.
READ_ONLY = (("sessions",), ("sessions", "--scope", "all"), ("sessions", "--json"),
             ("sessions", "show", "a6dc7b35"), ("export", "a6dc7b35"), ("checkpoints",),
             ("checkpoints", "--session", "a6dc7b35"), ("observations",), ("hooks-log",),
             ("tasks",), ("work-log",), ("search", "marmoset"))


def test_read_only_commands_outside_any_project_say_so_in_one_line_and_create_nothing(
        tmp_path: Path, isolated_env: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for args in READ_ONLY:
        line = one_line_failure(cos(*args, cwd=plain), 1)
        assert line == (f"cos: no project here: {plain} is in no git repository and under no "
                        ".coding-os/ (cd into a project, or cos init makes one here)"), args
    assert list(plain.iterdir()) == []
    assert not (isolated_env / ".coding-os").exists()
