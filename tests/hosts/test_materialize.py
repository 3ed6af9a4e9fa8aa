"""Materialising another host's session here (coding_os.hosts.materialize): paths mapped from
its host's root to this one's with every other byte kept, files written whole or not at all, a
local file that differs refused; read back from a real SQLite storage holding the replica."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from coding_os.errors import Conflict, CrossProject, InvalidId, InvalidInput, NotFound
from coding_os.hosts.materialize import (
    Materialized,
    file_action,
    host_roots,
    map_lines,
    map_path,
    materialize,
    read_mapped,
    read_replica,
    roots_for,
)
from coding_os.state.tiers import Tiers
from coding_os.storage.base import IndexRow, ReplicaSource, StorageError
from coding_os.storage.sqlite import SQLiteStorage

A = "/home/ann/src/proj"
B = "/srv/bob/work/proj"
NATIVE = "0a1b2c3d-0000-4000-8000-000000000001"


def claude_line(cwd: str, text: str = "hi", **extra: object) -> bytes:
    entry = {"type": "user", "cwd": cwd, "sessionId": NATIVE,
             "message": {"role": "user", "content": text}, **extra}
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def stored(storage: SQLiteStorage, lines: list[bytes], *, stream: str = "native",
           agent: str = "claude", session: str = NATIVE, path: str | None = None) -> ReplicaSource:
    source = ReplicaSource(session=session, stream=stream, host="a", agent=agent,
                           path=path or f"/home/ann/.claude/projects/x/{session}.jsonl",
                           project_key="git:" + "1" * 40, root=A)
    storage.add_replica_lines(source, list(enumerate(lines, start=1)))
    found = storage.replica_source(session, stream)
    assert found is not None
    return found


def claude_row(cwd: str = A + "/pkg") -> IndexRow:
    return IndexRow(id=NATIVE, agent="claude", kind="claude", native_id=NATIVE, project=A,
                    worktree=A, cwd=cwd, host="a", created="2026-11-30T10:00:00Z")


# -- paths ----------------------------------------------------------------------------------------


def test_a_path_is_mapped_only_when_it_is_the_root_or_under_it() -> None:
    assert map_path(A, A, B) == B
    assert map_path(A + "/pkg/x", A, B) == B + "/pkg/x"
    assert map_path(A + "2/pkg", A, B) == A + "2/pkg"  # a sibling that shares the prefix
    assert map_path("/elsewhere", A, B) == "/elsewhere"
    assert map_path(None, A, B) is None
    assert map_path(A, None, B) == A


def test_cwd_fields_under_the_root_are_mapped_and_every_other_byte_kept() -> None:
    lines = [claude_line(A), claude_line(A + "/pkg", text=f"look in {A}/pkg"),
             claude_line(A + "2"), claude_line("/tmp/other"),
             b'{"type":"x","cwd": "' + A.encode() + b'/sub","n":1.50e-7}']
    out = map_lines(lines, ("cwd",), A, B).split(b"\n")
    assert out[-1] == b""
    assert json.loads(out[0])["cwd"] == B
    second = json.loads(out[1])
    assert second["cwd"] == B + "/pkg"
    assert second["message"]["content"] == f"look in {A}/pkg"  # text is not a cwd field
    assert out[2] == lines[2] and out[3] == lines[3]
    assert out[4] == b'{"type":"x","cwd": "' + B.encode() + b'/sub","n":1.50e-7}'
    assert out[1] == lines[1].replace(b'"cwd":"' + A.encode(), b'"cwd":"' + B.encode())


def test_a_line_that_is_not_a_json_object_is_kept_as_it_is() -> None:
    torn = claude_line(A)[:-5]
    out = map_lines([claude_line(A), torn], ("cwd",), A, B)
    assert out.split(b"\n")[1] == torn
    assert json.loads(out.split(b"\n")[0])["cwd"] == B


def test_a_cwd_quoted_inside_a_string_is_not_a_field() -> None:
    inner = json.dumps({"cwd": A})
    line = json.dumps({"type": "tool", "output": inner}, separators=(",", ":")).encode()
    assert map_lines([line], ("cwd",), A, B) == line + b"\n"


def test_non_ascii_roots_are_mapped_in_either_spelling() -> None:
    old, new = "/home/zoé/proj", "/srv/ñ/proj"
    raw = json.dumps({"cwd": old}, ensure_ascii=False).encode()
    escaped = json.dumps({"cwd": old + "/x"}).encode()
    out = map_lines([raw, escaped], ("cwd",), old, new).split(b"\n")
    assert json.loads(out[0])["cwd"] == new and json.loads(out[1])["cwd"] == new + "/x"
    assert b"\\u00f1" in out[1] and "ñ".encode() in out[0]


def test_cos_transcript_fields_project_and_worktree_are_mapped() -> None:
    meta = (b'{"v":1,"seq":0,"type":"session_meta","project":"' + A.encode()
            + b'","worktree":"' + A.encode() + b'/wt","title":"' + A.encode() + b'"}')
    out = json.loads(map_lines([meta], ("cwd", "project", "worktree"), A, B))
    assert out["project"] == B and out["worktree"] == B + "/wt" and out["title"] == A


# -- what is on disk ------------------------------------------------------------------------------


def test_a_local_file_is_written_extended_left_or_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    data = b"one\ntwo\n"
    assert file_action(str(path), data) == "write"
    path.write_bytes(data)
    assert file_action(str(path), data) == "unchanged"
    path.write_bytes(b"one\n")
    assert file_action(str(path), data) == "extend"
    path.write_bytes(b"one\ntw")  # not at a line's end: not a prefix of whole lines
    with pytest.raises(Conflict):
        file_action(str(path), data)
    path.write_bytes(data + b"three\n")
    assert file_action(str(path), data) == "kept"
    path.write_bytes(b"other\n")
    with pytest.raises(Conflict):
        file_action(str(path), data)


def test_a_path_taken_by_a_directory_or_a_fifo_is_refused_without_blocking(
        tmp_path: Path) -> None:
    import os

    (tmp_path / "dir.jsonl").mkdir()
    os.mkfifo(tmp_path / "fifo.jsonl")
    for name in ("dir.jsonl", "fifo.jsonl"):
        with pytest.raises(NotFound):
            file_action(str(tmp_path / name), b"x\n")


# -- from the storage -----------------------------------------------------------------------------


def test_a_claude_session_is_written_under_this_hosts_munged_cwd(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    lines = [claude_line(A + "/pkg", text=f"turn {i}") for i in range(5)]
    source = stored(storage, lines)
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    done = materialize(storage, claude_row(), [source], source_root=A, root=B, cwd=B + "/pkg",
                       tiers=Tiers(str(tmp_path / "state")), claude_dir=str(claude),
                       codex_dir=str(codex), gemini_dir=str(tmp_path / "gemini"), batch=2)
    path = claude / "projects" / "-srv-bob-work-proj-pkg" / f"{NATIVE}.jsonl"
    assert [(f.path, f.stream, f.lines, f.action) for f in done.files] == [
        (str(path), "native", 5, "written")]
    written = path.read_bytes().split(b"\n")[:-1]
    assert [json.loads(x)["cwd"] for x in written] == [B + "/pkg"] * 5
    assert [json.loads(x)["message"]["content"] for x in written] == [f"turn {i}"
                                                                      for i in range(5)]
    again = materialize(storage, claude_row(), [source], source_root=A, root=B, cwd=B + "/pkg",
                        tiers=Tiers(str(tmp_path / "state")), claude_dir=str(claude),
                        codex_dir=str(codex), gemini_dir=str(tmp_path / "gemini"))
    assert again.files[0].action == "unchanged"


def test_a_dry_run_writes_nothing(storage: SQLiteStorage, tmp_path: Path) -> None:
    source = stored(storage, [claude_line(A)])
    done = materialize(storage, claude_row(A), [source], source_root=A, root=B, cwd=B,
                       tiers=Tiers(str(tmp_path / "state")), claude_dir=str(tmp_path / "c"),
                       codex_dir=str(tmp_path / "x"),
                       gemini_dir=str(tmp_path / "gemini"), write=False)
    assert done.files[0].action == "would write"
    assert not (tmp_path / "c").exists()


def test_a_codex_rollout_keeps_its_relative_path(storage: SQLiteStorage, tmp_path: Path) -> None:
    native = "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
    name = f"rollout-2026-11-30T10-00-00-{native}.jsonl"
    meta = json.dumps({"type": "session_meta", "payload": {"id": native, "cwd": A}}).encode()
    turn = json.dumps({"type": "turn_context", "payload": {"cwd": A + "/pkg"}}).encode()
    source = stored(storage, [meta, turn], agent="codex", session=native,
                    path=f"/home/ann/.codex/sessions/2026/11/30/{name}")
    row = IndexRow(id=native, agent="codex", kind="codex", native_id=native, cwd=A, host="a")
    done = materialize(storage, row, [source], source_root=A, root=B, cwd=B,
                       tiers=Tiers(str(tmp_path / "state")), claude_dir=str(tmp_path / "c"),
                       codex_dir=str(tmp_path / "codex"), gemini_dir=str(tmp_path / "gemini"))
    path = tmp_path / "codex" / "sessions" / "2026" / "11" / "30" / name
    assert done.files[0].path == str(path)
    lines = [json.loads(x) for x in path.read_bytes().splitlines()]
    assert lines[0]["payload"]["cwd"] == B and lines[1]["payload"]["cwd"] == B + "/pkg"


def test_a_gemini_session_of_another_host_is_written_under_the_slug_gemini_registers_here(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    native = "aa78fc04-dbe6-4180-b260-710d72261fc2"
    meta = json.dumps({"sessionId": native, "projectHash": "0" * 64, "kind": "main"}).encode()
    name = f"session-2026-12-06T08-07-{native[:8]}.jsonl"
    source = stored(storage, [meta, b'{"$set":{"messages":[]}}'], agent="gemini",
                    session=native, path=f"/home/ann/.gemini/tmp/proj/chats/{name}")
    row = IndexRow(id=native, agent="gemini", kind="gemini", native_id=native, cwd=A, host="a")
    gemini = tmp_path / "gemini"
    other = gemini / "tmp" / "proj"  # another project's folder of the same name here
    other.mkdir(parents=True)
    (other / ".project_root").write_text("/elsewhere/proj", encoding="utf-8")
    tiers = Tiers(str(tmp_path / "state"))
    preview = materialize(storage, row, [source], source_root=A, root=B, cwd=B, tiers=tiers,
                          claude_dir=str(tmp_path / "c"), codex_dir=str(tmp_path / "codex"),
                          gemini_dir=str(gemini), write=False)
    target = gemini / "tmp" / "proj-1" / "chats" / name
    assert [(f.path, f.action) for f in preview.files] == [(str(target), "would write")]
    assert not (gemini / "projects.json").exists()  # a dry run writes nothing
    done = materialize(storage, row, [source], source_root=A, root=B, cwd=B, tiers=tiers,
                       claude_dir=str(tmp_path / "c"), codex_dir=str(tmp_path / "codex"),
                       gemini_dir=str(gemini))
    assert [(f.path, f.action) for f in done.files] == [(str(target), "written")]
    assert target.read_bytes() == meta + b'\n{"$set":{"messages":[]}}\n'
    registry = json.loads((gemini / "projects.json").read_text(encoding="utf-8"))
    assert registry == {"projects": {B: "proj-1"}}
    for base in ("tmp", "history"):
        assert (gemini / base / "proj-1" / ".project_root").read_text(encoding="utf-8") == B
    assert (other / ".project_root").read_text(encoding="utf-8") == "/elsewhere/proj"


def test_a_gemini_registry_that_is_not_one_refuses_the_session_and_nothing_is_written(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    native = "aa78fc04-dbe6-4180-b260-710d72261fc2"
    meta = json.dumps({"sessionId": native, "projectHash": "0" * 64, "kind": "main"}).encode()
    source = stored(storage, [meta], agent="gemini", session=native,
                    path=f"/home/ann/.gemini/tmp/proj/chats/session-2026-12-06T08-07-"
                         f"{native[:8]}.jsonl")
    row = IndexRow(id=native, agent="gemini", kind="gemini", native_id=native, cwd=A, host="a")
    gemini = tmp_path / "gemini"
    gemini.mkdir()
    (gemini / "projects.json").write_text('{"projects": ["not", "a", "map"]}', encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a Gemini CLI project registry"):
        materialize(storage, row, [source], source_root=A, root=B, cwd=B,
                    tiers=Tiers(str(tmp_path / "state")), claude_dir=str(tmp_path / "c"),
                    codex_dir=str(tmp_path / "codex"), gemini_dir=str(gemini))
    assert sorted(p.name for p in gemini.iterdir()) == ["projects.json"]


def test_a_conflicting_local_file_stops_everything_before_anything_is_written(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    sid = "ses-claude-20261130-100000-abcd"
    meta = (b'{"v":1,"seq":0,"ts":"2026-11-30T10:00:00Z","type":"session_meta","session":"'
            + sid.encode() + b'","project":"' + A.encode() + b'"}')
    transcript = stored(storage, [meta], stream="transcript", session=sid)
    events = stored(storage, [b'{"seq":1,"cwd":"' + A.encode() + b'"}'], stream="events",
                    session=sid)
    tiers = Tiers(str(tmp_path / "state"))
    target = Path(tiers.transcript_path("claude", sid))
    target.parent.mkdir(parents=True)
    target.write_bytes(b"something else\n")
    row = IndexRow(id=sid, agent="claude", kind="cos", project=A, cwd=A, host="a")
    with pytest.raises(Conflict):
        materialize(storage, row, [transcript, events], source_root=A, root=B, cwd=B,
                    tiers=tiers, claude_dir=str(tmp_path / "c"), codex_dir=str(tmp_path / "x"),
                    gemini_dir=str(tmp_path / "gemini"))
    assert not Path(tiers.events_path("claude", sid)).exists()  # checked first, written after
    assert target.read_bytes() == b"something else\n"
    target.unlink()
    done = materialize(storage, row, [transcript, events], source_root=A, root=B, cwd=B,
                       tiers=tiers, claude_dir=str(tmp_path / "c"), codex_dir=str(tmp_path / "x"),
                       gemini_dir=str(tmp_path / "gemini"))
    assert [f.stream for f in done.files] == ["events", "transcript"]
    assert json.loads(target.read_bytes())["project"] == B


def test_a_replica_missing_a_line_is_refused(storage: SQLiteStorage) -> None:
    source = stored(storage, [claude_line(A)])
    source.lines = 3  # the source claims more than is stored
    with pytest.raises(StorageError):
        read_replica(storage, source)


def test_a_replica_read_in_several_batches_is_the_file_mapped_whole(
        storage: SQLiteStorage) -> None:
    lines = [claude_line(A + "/pkg", text=str(i)) for i in range(7)]
    source = stored(storage, lines)
    assert read_mapped(storage, source, A, B, batch=2) == (map_lines(lines, ("cwd",), A, B), 7)
    source.lines = 9  # two lines the storage does not have: found missing by the reader thread
    with pytest.raises(StorageError):
        read_mapped(storage, source, A, B, batch=2)


def test_nothing_replicated_is_not_found(storage: SQLiteStorage, tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        materialize(storage, claude_row(), [], source_root=A, root=B, cwd=B,
                    tiers=Tiers(str(tmp_path)), claude_dir=str(tmp_path / "c"),
                    codex_dir=str(tmp_path / "x"), gemini_dir=str(tmp_path / "gemini"))


def test_a_native_id_that_cannot_name_a_file_is_refused(storage: SQLiteStorage,
                                                        tmp_path: Path) -> None:
    source = stored(storage, [claude_line(A)])
    row = claude_row()
    row.native_id = "../../etc/passwd"
    with pytest.raises(InvalidId):
        materialize(storage, row, [source], source_root=A, root=B, cwd=B,
                    tiers=Tiers(str(tmp_path)), claude_dir=str(tmp_path / "c"),
                    codex_dir=str(tmp_path / "x"), gemini_dir=str(tmp_path / "gemini"))
    assert not (tmp_path / "c").exists()


def test_a_subagent_stream_naming_a_file_claude_code_would_not_write_is_refused(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    main = stored(storage, [claude_line(A)])
    for name in ("../../escape.jsonl", f"{NATIVE}/../agent-x.jsonl",
                 "other/subagents/agent-x.jsonl", "agent-x.meta.json"):
        sub = stored(storage, [claude_line(A)], stream=f"subagent:{name}")
        with pytest.raises(InvalidId):
            materialize(storage, claude_row(), [main, sub], source_root=A, root=B, cwd=B,
                        tiers=Tiers(str(tmp_path)), claude_dir=str(tmp_path / "c"),
                        codex_dir=str(tmp_path / "x"), gemini_dir=str(tmp_path / "gemini"))
        storage.remove_replica(NATIVE, f"subagent:{name}")
    assert not (tmp_path / "c").exists() and not (tmp_path / "escape.jsonl").exists()


GEMINI_NATIVE = "bc799a31-3bc5-47fe-81d0-7617d8169e3c"
GEMINI_AGENT = "0456292b-6ccc-424b-8356-a37725bc09d9"


def gemini_sources(storage: SQLiteStorage, subagent: str) -> tuple[IndexRow, ReplicaSource,
                                                                   ReplicaSource]:
    """A Gemini session of host a (its row, its main file's replica) and the replica of a
    subagent file stored under the name `subagent`."""
    name = f"session-2026-12-06T08-07-{GEMINI_NATIVE[:8]}.jsonl"
    main = stored(storage, [json.dumps({"sessionId": GEMINI_NATIVE, "kind": "main"}).encode()],
                  agent="gemini", session=GEMINI_NATIVE,
                  path=f"/home/ann/.gemini/tmp/proj/chats/{name}")
    agent = stored(storage, [json.dumps({"sessionId": GEMINI_AGENT, "kind": "subagent",
                                         "directories": [A]}).encode(), b'{"id":"m1"}'],
                   stream=f"subagent:{subagent}", agent="gemini", session=GEMINI_NATIVE,
                   path=f"/home/ann/.gemini/tmp/proj/chats/{subagent}")
    row = IndexRow(id=GEMINI_NATIVE, agent="gemini", kind="gemini", native_id=GEMINI_NATIVE,
                   cwd=A, host="a")
    return row, main, agent


def materialize_gemini(storage: SQLiteStorage, row: IndexRow, sources: list[ReplicaSource],
                       tmp_path: Path) -> Materialized:
    """`materialize` of a Gemini session from A into B's checkout, under tmp_path/gemini."""
    return materialize(storage, row, sources, source_root=A, root=B, cwd=B,
                       tiers=Tiers(str(tmp_path / "state")), claude_dir=str(tmp_path / "c"),
                       codex_dir=str(tmp_path / "codex"), gemini_dir=str(tmp_path / "gemini"))


def test_a_gemini_sessions_subagent_is_written_in_the_sessions_folder_beside_it(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    name = f"{GEMINI_NATIVE}/{GEMINI_AGENT}.jsonl"
    row, main, agent = gemini_sources(storage, name)
    gemini = tmp_path / "gemini"
    done = materialize_gemini(storage, row, [main, agent], tmp_path)
    chats = gemini / "tmp" / "proj" / "chats"
    assert [(f.path, f.stream, f.action) for f in done.files] == [
        (str(chats / name), f"subagent:{name}", "written"),
        (str(chats / f"session-2026-12-06T08-07-{GEMINI_NATIVE[:8]}.jsonl"), "native",
         "written")]
    assert (chats / name).read_bytes() == b"".join(line + b"\n" for line in
                                                   read_replica(storage, agent))
    again = materialize_gemini(storage, row, [main, agent], tmp_path)
    assert [f.action for f in again.files] == ["unchanged", "unchanged"]
    (chats / name).write_bytes(b"another subagent's\n")
    with pytest.raises(Conflict):
        materialize_gemini(storage, row, [main, agent], tmp_path)
    assert (chats / name).read_bytes() == b"another subagent's\n"


def test_a_gemini_session_goes_with_its_subagent_under_the_slug_gemini_registered_meanwhile(
        storage: SQLiteStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.adapters.gemini import projects

    register = projects.register

    def registered_by_gemini_first(gemini_dir: str, project: str) -> projects.Slug:
        # Gemini CLI maps the project to a slug of its own between the plan and the writes.
        registry = Path(gemini_dir) / "projects.json"
        registry.parent.mkdir(parents=True, exist_ok=True)
        registry.write_text(json.dumps({"projects": {project: "proj-9"}}), encoding="utf-8")
        return register(gemini_dir, project)

    monkeypatch.setattr(projects, "register", registered_by_gemini_first)
    name = f"{GEMINI_NATIVE}/{GEMINI_AGENT}.jsonl"
    row, main, agent = gemini_sources(storage, name)
    gemini = tmp_path / "gemini"
    done = materialize_gemini(storage, row, [main, agent], tmp_path)
    chats = gemini / "tmp" / "proj-9" / "chats"
    assert [(Path(f.path).relative_to(chats).as_posix(), f.action) for f in done.files] == [
        (name, "written"), (f"session-2026-12-06T08-07-{GEMINI_NATIVE[:8]}.jsonl", "written")]
    assert (chats / name).is_file() and not (gemini / "tmp" / "proj").exists()


def test_a_gemini_subagent_stream_naming_a_file_outside_the_sessions_folder_is_refused(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    other = "aa78fc04-dbe6-4180-b260-710d72261fc2"
    for name in ("../x.jsonl", f"{GEMINI_NATIVE}/../x.jsonl", f"/tmp/{GEMINI_NATIVE}/x.jsonl",
                 f"{other}/{GEMINI_AGENT}.jsonl", f"{GEMINI_AGENT}.jsonl",
                 f"{GEMINI_NATIVE}/sub/{GEMINI_AGENT}.jsonl", f"{GEMINI_NATIVE}/..",
                 f"{GEMINI_NATIVE}/.jsonl", f"{GEMINI_NATIVE}/{GEMINI_AGENT}.json"):
        row, main, agent = gemini_sources(storage, name)
        with pytest.raises(InvalidId):
            materialize_gemini(storage, row, [main, agent], tmp_path)
        storage.remove_replica(GEMINI_NATIVE, f"subagent:{name}")
    assert not (tmp_path / "gemini").exists() and not (tmp_path / "x.jsonl").exists()


def test_a_repository_this_host_has_not_checked_out_is_another_project(
        storage: SQLiteStorage) -> None:
    source = stored(storage, [claude_line(A)])
    with pytest.raises(CrossProject) as refused:
        roots_for(storage, claude_row(), [source], "b", B, lambda: ["git:" + "2" * 40])
    assert f"on a: cd {A}/pkg && cos resume {NATIVE}" in str(refused.value)
    storage.set_project_host("git:" + "1" * 40, "b", "/srv/bob/other-checkout")
    with pytest.raises(CrossProject) as elsewhere:
        roots_for(storage, claude_row(), [source], "b", B, lambda: ["git:" + "2" * 40])
    assert str(elsewhere.value) == f"cd /srv/bob/other-checkout/pkg && cos resume {NATIVE}"
    assert roots_for(storage, claude_row(), [source], "b", B, lambda: ["git:" + "1" * 40]) == (A, B)


@pytest.mark.parametrize("cwd", [A + "/../outside", "/etc", A + "/link/inside"],
                         ids=["dot-dot", "elsewhere", "symlink-out"])
def test_a_cwd_that_leads_out_of_this_checkout_is_refused_and_nothing_written(
        storage: SQLiteStorage, tmp_path: Path, cwd: str) -> None:
    from coding_os.hosts.materialize import restore_report_elsewhere
    from coding_os.sessions.resume import Found, ResumeScope

    here = tmp_path / "b"
    here.mkdir()
    (tmp_path / "outside" / "inside").mkdir(parents=True)
    (here / "link").symlink_to(tmp_path / "outside")  # a repository may hold such a symlink
    source = stored(storage, [claude_line(cwd)])
    storage.set_project_host(str(source.project_key), "b", str(here))
    claude = tmp_path / "claude"
    with pytest.raises(InvalidInput) as refused:
        restore_report_elsewhere(
            storage, Found(claude_row(cwd), "index"), ResumeScope(str(here), [str(here)]),
            Tiers(str(here / ".coding-os")), local_host="b", local_root=str(here),
            local_keys=lambda: [], claude_dir=str(claude), codex_dir=str(tmp_path / "codex"),
            gemini_dir=str(tmp_path / "gemini"))
    message = str(refused.value)
    assert "not inside this checkout" in message and "\n" not in message
    assert refused.value.exit_code == 2
    assert not claude.exists()  # no file written, no agent to run anywhere


def test_a_path_inside_this_checkout_is_kept_normalised(tmp_path: Path) -> None:
    from coding_os.hosts.materialize import inside_checkout

    here = tmp_path / "b"
    (here / "pkg").mkdir(parents=True)
    mapped = replace(claude_row(f"{here}/pkg/./sub/.."), project=f"{here}/", worktree=str(here))
    kept = inside_checkout(mapped, claude_row(), str(here))
    assert (kept.project, kept.worktree, kept.cwd) == (str(here), str(here), str(here / "pkg"))


def test_this_hosts_checkout_known_to_the_storage_needs_no_git(storage: SQLiteStorage) -> None:
    source = stored(storage, [claude_line(A)])
    storage.set_project_host("git:" + "1" * 40, "b", B)

    def no_keys() -> list[str]:
        raise AssertionError("the repository's identity was asked for")

    assert roots_for(storage, claude_row(), [source], "b", B, no_keys) == (A, B)


def test_the_mapped_file_is_the_same_whether_or_not_a_line_is_torn() -> None:
    lines = [claude_line(A + "/pkg", text=str(i)) for i in range(4)]
    whole = map_lines(lines, ("cwd",), A, B).split(b"\n")
    torn = map_lines([*lines, claude_line(A)[:-3]], ("cwd",), A, B).split(b"\n")
    assert torn[:4] == whole[:4] and torn[4] == claude_line(A)[:-3]


def test_lines_of_several_hosts_are_each_mapped_from_their_hosts_root() -> None:
    c = "/opt/carol/proj"
    nested = A + "/inner"  # another host's checkout under A's path: matched whole
    lines = [claude_line(A + "/pkg"), claude_line(B), claude_line(nested + "/x"),
             claude_line(c + "/y"), claude_line("/elsewhere")]
    out = map_lines(lines, ("cwd",), [A, B, nested], c).split(b"\n")[:-1]
    assert [json.loads(x)["cwd"] for x in out] == [c + "/pkg", c, c + "/x", c + "/y",
                                                   "/elsewhere"]
    assert map_path(B + "/z", [A, B], c) == c + "/z"
    assert map_path(nested + "/x", [A, nested], c) == c + "/x"
    assert map_path("/elsewhere", [A, B], c) == "/elsewhere"


def test_a_session_written_on_two_hosts_is_materialised_on_a_third_with_its_paths(
        storage: SQLiteStorage, tmp_path: Path) -> None:
    c = str(tmp_path / "carol" / "proj")
    source = stored(storage, [claude_line(A + "/pkg", "on a"), claude_line(B + "/pkg", "on b")])
    storage.set_project_host("git:" + "1" * 40, "a", A)
    storage.set_project_host("git:" + "1" * 40, "b", B)
    roots = host_roots(storage, claude_row(), [source], A)
    assert roots == sorted([A, B])
    claude = tmp_path / "claude"
    done = materialize(storage, claude_row(), [source], source_root=A, root=c, cwd=c + "/pkg",
                       tiers=Tiers(str(tmp_path / "state")), claude_dir=str(claude),
                       codex_dir=str(tmp_path / "codex"),
                       gemini_dir=str(tmp_path / "gemini"), roots=roots)
    written = Path(done.files[0].path).read_bytes()
    assert [json.loads(x)["cwd"] for x in written.splitlines()] == [c + "/pkg"] * 2
    assert (done.files[0].size, done.files[0].last) == (len(written),
                                                         written.index(b"\n") + 1)
