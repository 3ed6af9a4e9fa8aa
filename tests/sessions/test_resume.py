"""coding_os.sessions.resume: finding a session to resume, where it runs, the restore report and
the handover command (the whole-process paths are in tests/sessions/test_resume_cli.py)."""

from __future__ import annotations

import json
import os

from pathlib import Path

import pytest

from coding_os import api
from coding_os.errors import Ambiguous, CrossProject, InvalidId, InvalidInput, NotFound
from coding_os.sessions import index, resume, transcript
from coding_os.sessions.index import RefreshReport
from coding_os.sessions.resume import Found, Handover, ResumeScope
from coding_os.state.tiers import Tiers
from coding_os.storage.base import IndexRow, Storage

ROOT = "/abs/root"


def scope(current: set[str] | None = None) -> ResumeScope:
    return ResumeScope(here=ROOT, repo=[ROOT, "/abs/wt"], current=current or set())


def row(id: str, cwd: str | None = ROOT, last_active: str = "2026-01-01T00:00:00.000Z",
        kind: str = "claude", name: str | None = None, project: str | None = None) -> IndexRow:
    return IndexRow(id=id, agent="claude", kind=kind, native_id=id if kind != "cos" else None,
                    cwd=cwd, worktree=cwd, project=project or cwd, last_active=last_active,
                    name=name)


def no_refresh() -> RefreshReport:
    return RefreshReport()


@pytest.mark.parametrize("key", ["", "../x", "a/../b", "a/..", "/etc", "\\x", "a\\b", "..",
                                 ".", " .. ", "a\x00b", "a\nb", "x" * 201])
def test_a_key_that_could_name_a_path_or_hide_a_character_is_refused(key: str) -> None:
    with pytest.raises(InvalidId):
        resume.validate_key(key)


@pytest.mark.parametrize("key", ["CI/CD", "a/b", "front/back/end", "v1.2/..x", "a./b"])
def test_a_slash_inside_a_key_is_a_name_and_not_refused(key: str) -> None:
    assert resume.validate_key(key) == key


def test_a_nul_in_the_id_is_refused_before_the_database_is_opened(tmp_path: Path) -> None:
    with pytest.raises(InvalidId):
        api.resume_session("ses\x00x", env={"HOME": str(tmp_path)}, cwd=str(tmp_path))
    assert not (tmp_path / ".coding-os").exists()


@pytest.mark.parametrize("pr,number", [("12", "12"), ("#12", "12"), (" 012 ", "12"),
                                       ("https://github.com/o/r/pull/12", "12"),
                                       ("https://github.com/o/r/pull/12/files#x", "12"),
                                       ("https://gitlab.com/o/r/-/merge_requests/3", "3")])
def test_a_pull_request_is_a_number_or_its_url(pr: str, number: str) -> None:
    assert resume.pr_number(pr) == number


@pytest.mark.parametrize("pr", ["", "abc", "https://github.com/o/r/issues/12", "1e3", "-1"])
def test_anything_else_is_not_a_pull_request(pr: str) -> None:
    with pytest.raises(InvalidInput):
        resume.pr_number(pr)


def test_a_session_of_this_checkout_runs_where_it_ran_without_a_note(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    where = ResumeScope(here=str(tmp_path), repo=[str(tmp_path)])
    assert resume.place(row("a", cwd=str(tmp_path / "sub")), where) == (str(tmp_path / "sub"),
                                                                        None)


def test_a_session_of_another_worktree_runs_there_with_a_note(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    where = ResumeScope(here=ROOT, repo=[ROOT, str(worktree)])
    cwd, note = resume.place(row("a", cwd=str(worktree), project=ROOT), where)
    assert cwd == str(worktree) and note is not None and "another worktree" in note


def test_a_session_whose_worktree_is_gone_runs_in_the_project_with_a_note(
        tmp_path: Path) -> None:
    where = ResumeScope(here=str(tmp_path), repo=[str(tmp_path)])
    gone = row("a", cwd=str(tmp_path / "gone"), project=str(tmp_path))
    cwd, note = resume.place(gone, where)
    assert cwd == str(tmp_path) and note is not None and "is gone" in note


def test_a_directory_that_leads_out_of_the_repository_never_becomes_the_agents_cwd(
        tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    where = ResumeScope(here=str(root), repo=[str(root)])
    for cwd in (f"{root}/../outside", str(outside)):  # a row of this project says it ran there
        assert resume.place(row("a", cwd=cwd, project=str(root)), where) == (
            str(root), f"the session's directory {outside} is not in a checkout of this "
                       f"repository: resume in {root}")
    with pytest.raises(CrossProject):  # not this project's row at all
        resume.place(row("a", cwd=f"{root}/../outside", project=f"{root}/../outside"), where)


def test_a_native_id_that_could_be_an_option_is_never_handed_to_the_agent() -> None:
    for kind in ("claude", "codex"):
        planted = row("ok", kind=kind)
        planted.native_id = "--dangerously-skip-permissions"
        handover, why = resume.resume_handover(planted, "/d")
        assert handover is None and why is not None and "session id" in why
        assert resume.fork_handover(planted, "/d") is None


def test_a_session_of_another_project_is_refused_with_the_command_to_run() -> None:
    with pytest.raises(CrossProject) as caught:
        resume.place(row("abc", cwd="/other place"), scope())
    assert str(caught.value) == "cd '/other place' && cos resume abc"
    assert caught.value.exit_code == 4


def test_handovers_name_each_agents_own_resume_and_fork() -> None:
    claude, codex, cos = row("c1"), row("x1", kind="codex"), row("ses-x", kind="cos")
    assert resume.resume_handover(claude, "/d") == (Handover(["claude", "--resume", "c1"], "/d"),
                                                    None)
    assert resume.resume_handover(codex, "/d")[0] == Handover(["codex", "resume", "x1"], "/d")
    none, why = resume.resume_handover(cos, "/d")
    assert none is None and why is not None and "cos-native" in why
    assert resume.fork_handover(claude, "/d") == Handover(
        ["claude", "--resume", "c1", "--fork-session"], "/d")
    assert resume.fork_handover(codex, "/d") == Handover(["codex", "fork", "x1"], "/d")
    assert resume.fork_handover(cos, "/d") is None
    assert Handover(["claude", "--resume", "c1"], "/a b").command() == \
        "cd '/a b' && claude --resume c1"


def test_continue_skips_the_callers_own_sessions_and_other_checkouts(storage: Storage,
                                                                     tiers: Tiers) -> None:
    storage.upsert_index_rows([row("old", last_active="2026-01-01T00:00:00.000Z"),
                               row("mine", last_active="2026-01-03T00:00:00.000Z"),
                               row("away", cwd="/elsewhere", last_active="2026-01-04T00:00:00Z")])
    found = resume.find_for_resume(storage, tiers, scope({"mine"}), no_refresh, latest=True)
    assert (found.row.id, found.path) == ("old", "index")
    assert resume.find_for_resume(storage, tiers, scope(), no_refresh,
                                  latest=True).row.id == "mine"


def test_a_name_shared_by_sessions_of_this_repo_is_ambiguous(storage: Storage,
                                                             tiers: Tiers) -> None:
    storage.upsert_index_rows([row("a"), row("b"), row("c", cwd="/elsewhere")])
    for session in ("a", "b", "c"):
        storage.set_name(session, "topic")
    with pytest.raises(Ambiguous) as caught:
        resume.find_for_resume(storage, tiers, scope(), no_refresh, key="topic")
    assert "a" in str(caught.value) and "b" in str(caught.value)
    assert "c" not in str(caught.value).split(":")[1]  # this repository's sessions come first
    storage.set_name("b", "other")
    assert resume.find_for_resume(storage, tiers, scope(), no_refresh, key="topic").row.id == "a"


def test_a_miss_imports_once_then_reads_the_transcript_and_repairs_the_index(
        storage: Storage, tiers: Tiers, session: str) -> None:
    calls: list[int] = []

    def refresh() -> RefreshReport:
        calls.append(1)
        return RefreshReport()  # an import that sees nothing new (its state says unchanged)

    found = resume.find_for_resume(storage, tiers, scope(), refresh, key=session)
    assert (found.row.id, found.path, len(calls)) == (session, "direct_scan", 1)
    assert any("repaired from its transcript" in note for note in found.rebuilt)
    assert storage.index_row(session) is not None
    with pytest.raises(NotFound):
        resume.find_for_resume(storage, tiers, scope(), refresh,
                               key="ses-claude-20260101-000000-abcd")


def test_exactly_one_way_to_find_the_session_is_required(storage: Storage, tiers: Tiers) -> None:
    with pytest.raises(InvalidInput):
        resume.find_for_resume(storage, tiers, scope(), no_refresh)
    with pytest.raises(InvalidInput):
        resume.find_for_resume(storage, tiers, scope(), no_refresh, key="a", latest=True)


def test_the_restore_report_counts_entries_and_compacts_without_a_full_parse(
        tiers: Tiers, session: str) -> None:
    for turn in range(1, 4):
        transcript.append(tiers, session, "user", {"text": '"type":"compact"', "turn": turn})
    transcript.mark_compact(tiers, session, "short", 1, 2)
    transcript.append(tiers, session, "summary", {"text": "s", "from_seq": 1, "to_seq": 3})
    path = transcript.transcript_path(tiers, session)
    indexed, _ = index.cos_row(path)
    assert indexed is not None
    report = resume.restore_report(Found(indexed, "index"), ResumeScope(here=ROOT, repo=[ROOT]),
                                   tiers)
    assert (report.restored["entries"], report.restored["compacts"],
            report.restored["summaries"]) == (6, 1, 1)
    data = report.to_dict()
    assert data["handover"] is None and data["cwd"] == ROOT and data["path"] == "index"


def test_compacts_are_counted_across_block_boundaries(tiers: Tiers, session: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    transcript.append(tiers, session, "user", {"text": "x", "turn": 1})
    for _ in range(5):
        transcript.mark_compact(tiers, session, "c" * 37, 1, 1)
    path = transcript.transcript_path(tiers, session)
    whole = resume._count_types(path, ("compact",))
    assert whole == {"compact": 5}
    os.unlink(path + ".counts")  # count again from the start, in 7-byte blocks
    assert resume._count_types(path, ("compact",), block=7) == whole
    # Appended entries are counted from where the cached count stopped.
    cached_size = json.loads(Path(path + ".counts").read_text())["size"]
    transcript.mark_compact(tiers, session, "d" * 11, 1, 1)
    assert resume._count_types(path, ("compact",)) == {"compact": 6}
    assert json.loads(Path(path + ".counts").read_text())["size"] > cached_size

