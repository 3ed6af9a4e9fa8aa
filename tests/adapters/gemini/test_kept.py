"""A Gemini session file kept between imports: the line `kept.line` writes reads back as the
very session a scan read (every fixture file the real Gemini CLI wrote), its texts redacted
when asked, and a line cut short, changed or of another form is never read as one."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_os.adapters.gemini import kept
from coding_os.adapters.gemini.sessions import scan_gemini

HOME = Path(__file__).resolve().parent / "fixtures" / "gemini-home"
SECRET = "ghp_" + "a1B2" * 9  # a GitHub token's shape (redact.py)


def test_every_fixture_file_kept_reads_back_as_the_session_read_from_it() -> None:
    files = scan_gemini(HOME).files
    assert len(files) >= 7  # every .jsonl of the fixtures, the subagent's among them
    assert any(known.parent for known in files.values())
    for path, known in files.items():
        assert kept.from_line(kept.line(known, path, redacting=False)) == (path, known)


def test_a_kept_line_holds_a_secret_a_prompt_held_only_when_not_redacting() -> None:
    path, known = next(iter(scan_gemini(HOME).files.items()))
    session = dataclasses.replace(known.session, first_prompt=f"use {SECRET} to push",
                                  metadata={**known.session.metadata, "summary": SECRET})
    known = dataclasses.replace(known, session=session)
    plain = kept.line(known, path, redacting=False)
    redacted = kept.line(known, path, redacting=True)
    assert SECRET.encode() in plain and SECRET.encode() not in redacted
    back = kept.from_line(redacted)
    assert back is not None and back[1].session.first_prompt == \
        "use [REDACTED:github_token] to push"
    assert back[1].session.native_id == known.session.native_id  # only the texts change


def test_a_kept_line_cut_short_changed_or_not_one_is_not_read() -> None:
    path, known = next(iter(scan_gemini(HOME).files.items()))
    line = kept.line(known, path, redacting=False)
    changed = line.replace(b'"jsonl"', b'"jsonX"', 1)
    assert changed != line
    for bad in (line[:-1], line[:40], changed, b"", b"00000000 []", b"not a line at all",
                b"%08x [1,2]" % __import__("zlib").crc32(b"[1,2]")):
        assert kept.from_line(bad) is None


def test_a_scan_given_the_files_it_read_reads_again_only_a_file_that_changed_or_moved(
        tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    shutil.copytree(HOME, home)
    first = scan_gemini(home)
    assert first.unchanged == 0 and first.bytes_read > 0
    again = scan_gemini(home, first.files)
    sessions = [*first.sessions, *first.orphans]
    legacy = {path for session in sessions + [s for m in sessions for s in m.subagents]
              for path in session.paths if path.endswith(".json")}  # before 0.39: not kept
    assert legacy and again.unchanged == len(first.files)
    assert again.bytes_read == sum(Path(path).stat().st_size for path in legacy)
    assert again.sessions == first.sessions and again.orphans == first.orphans
    # A session goes on: its file grows, and only it is read again.
    grown = next(Path(path) for path, known in first.files.items()
                 if known.parent is None and known.session.messages)
    with grown.open("a", encoding="utf-8") as f:
        f.write('{"$rewindTo":"no such message"}\n')  # every message rewound
    after = scan_gemini(home, again.files)
    assert after.unchanged == len(first.files) - 1
    assert after.sessions == scan_gemini(home).sessions  # as a scan of every file finds them
    changed = after.files[str(grown)].session
    assert changed.messages == 0 and changed.rewinds == 1
    # A project moved to another path: the files of its folder are read again.
    (home / "projects.json").write_text('{"projects": {"/elsewhere": "project"}}',
                                        encoding="utf-8")
    moved = scan_gemini(home, after.files)
    assert moved.unchanged < after.unchanged
    assert {known.session.project for known in moved.files.values()
            if "/tmp/project/" in known.session.path} == {"/elsewhere"}


_LINES = [line for path in sorted(HOME.rglob("*.jsonl"))
          for line in path.read_bytes().splitlines(keepends=True)]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["append", "cut", "remove", "restore", "touch"]),
                          st.integers(0, 10 ** 6)), min_size=1, max_size=8))
def test_a_scan_given_the_files_it_read_finds_what_a_scan_of_every_file_finds(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]) -> None:
    home = tmp_path_factory.mktemp("gemini") / ".gemini"
    shutil.copytree(HOME, home)
    files = sorted(path.relative_to(home) for path in home.rglob("*.jsonl"))
    known = scan_gemini(home).files
    clock = time.time_ns()
    for number, (step, pick) in enumerate(steps):
        path = home / files[pick % len(files)]
        if step == "append":  # a record of any fixture file, whole or cut off
            line = _LINES[pick % len(_LINES)]
            with path.open("ab") as f:
                f.write(line if pick % 3 else line[:len(line) // 2])
        elif step == "cut" and path.exists():
            data = path.read_bytes()
            path.write_bytes(data[:pick % (len(data) + 1)])
        elif step == "remove":
            path.unlink(missing_ok=True)
        elif step == "restore":
            shutil.copyfile(HOME / files[pick % len(files)], path)
        if path.exists():  # time goes on between steps, as between a user's imports
            os.utime(path, ns=(clock + number * 10 ** 9,) * 2)
        found = scan_gemini(home, known)
        everything = scan_gemini(home)
        assert (found.sessions, found.orphans, found.problems) == \
            (everything.sessions, everything.orphans, everything.problems)
        known = found.files
