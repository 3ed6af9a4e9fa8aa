"""The import state on disk: the stat record read alone, each aggregate read back only when its
file or session is assembled again, and a pack that cannot be trusted never trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_os.adapters.codex.rollouts import scan_codex
from coding_os.adapters.native import AggregateLost
from coding_os.sessions import importstate
from tests.helpers import COMPACTED, GEMINI_FIXTURES, ROLLOUTS, TRUNCATED, copy_codex_fixtures

GEMINI_HOME = GEMINI_FIXTURES / "gemini-home"


def imported(codex_home: Path, state_dir: Path) -> None:
    """Every fixture rollout read and kept in `state_dir`."""
    with importstate.load(str(state_dir)) as kept:
        _, state = scan_codex(codex_home, kept.state)
        importstate.save(str(state_dir), state, {"host": "h"}, kept)


def pack_of(state_dir: Path) -> Path:
    record = json.loads((state_dir / importstate.STATE_FILE).read_text(encoding="utf-8"))
    return state_dir / record["pack"]


def test_an_unchanged_state_reads_no_aggregate_and_a_changed_rollout_only_its_own(
        tmp_path: Path) -> None:
    codex_home, state_dir = copy_codex_fixtures(tmp_path / "codex"), tmp_path / "state"
    imported(codex_home, state_dir)
    with importstate.load(str(state_dir)) as kept:
        assert kept.extras == {"host": "h"} and len(kept.state.files) == len(ROLLOUTS)
        sessions, _ = scan_codex(codex_home, kept.state, changed_only=True)
        assert (sessions, kept.read_back) == ([], [])
    path = next(codex_home.glob(f"sessions/**/rollout-*-{TRUNCATED}.jsonl"))
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"timestamp":"2026-02-23T13:30:00.000Z","type":"event_msg","payload":'
                     '{"type":"user_message","message":"and then?"}}\n')
    with importstate.load(str(state_dir)) as kept:
        sessions, _ = scan_codex(codex_home, kept.state, changed_only=True)
        assert [s.native_id for s in sessions] == [TRUNCATED]
        assert kept.read_back == [str(path)]
    assert sessions[0] == next(s for s in scan_codex(codex_home)[0] if s.native_id == TRUNCATED)


def test_a_save_appends_what_changed_and_writes_the_pack_anew_once_garbage_outgrows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codex_home, state_dir = copy_codex_fixtures(tmp_path / "codex"), tmp_path / "state"
    monkeypatch.setattr(importstate, "_GARBAGE_MIN", 0)  # the fixtures' aggregates are small
    imported(codex_home, state_dir)
    first = pack_of(state_dir)
    sizes = [first.stat().st_size]
    path = next(codex_home.glob(f"sessions/**/rollout-*-{COMPACTED}.jsonl"))  # the largest
    while pack_of(state_dir) == first:
        assert len(sizes) < 4, sizes  # its old aggregates outweigh the live ones by then
        with path.open("a", encoding="utf-8") as handle:
            handle.write("{}\n")
        imported(codex_home, state_dir)
        if pack_of(state_dir) == first:
            sizes.append(first.stat().st_size)
    assert sizes == sorted(sizes) and len(sizes) > 1  # appended while garbage was the lesser
    assert not first.exists() and pack_of(state_dir).stat().st_size < sizes[-1]
    with importstate.load(str(state_dir)) as kept:
        assert scan_codex(codex_home, kept.state)[0] == scan_codex(codex_home)[0]


def test_a_pack_removed_under_a_reader_is_still_read_and_the_next_save_starts_another(
        tmp_path: Path) -> None:
    codex_home, state_dir = copy_codex_fixtures(tmp_path / "codex"), tmp_path / "state"
    imported(codex_home, state_dir)
    with importstate.load(str(state_dir)) as kept:
        pack_of(state_dir).unlink()  # as another process writing a new pack does
        sessions, state = scan_codex(codex_home, kept.state)
        assert sessions == scan_codex(codex_home)[0]
        importstate.save(str(state_dir), state, {}, kept)
    with importstate.load(str(state_dir)) as kept:
        assert scan_codex(codex_home, kept.state)[0] == sessions


def test_a_record_whose_pack_is_gone_or_changed_is_not_trusted(tmp_path: Path) -> None:
    codex_home, state_dir = copy_codex_fixtures(tmp_path / "codex"), tmp_path / "state"
    imported(codex_home, state_dir)
    pack = pack_of(state_dir)
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 1
    pack.write_bytes(bytes(data))
    with importstate.load(str(state_dir)) as kept:
        with pytest.raises(AggregateLost):
            for record in kept.state.files.values():
                record.aggregate
    os.unlink(pack)
    with importstate.load(str(state_dir)) as kept:
        assert kept.extras == {"host": "h"} and kept.state.files == {}  # every file read again


def test_a_text_with_a_lone_surrogate_is_kept_and_read_back(tmp_path: Path) -> None:
    codex_home, state_dir = tmp_path / "codex", tmp_path / "state"
    day = codex_home / "sessions" / "2026" / "04" / "01"
    day.mkdir(parents=True)
    thread = "0000000c-0000-7000-8000-000000000000"
    (day / f"rollout-2026-04-01T09-00-00-{thread}.jsonl").write_text(
        '{"timestamp":"2026-04-01T09:00:00.000Z","type":"session_meta","payload":{"id":"'
        + thread + '","cwd":"/w/\\ud800"}}\n'
        '{"timestamp":"2026-04-01T09:00:01.000Z","type":"event_msg","payload":'
        '{"type":"user_message","message":"half \\udc00 a pair"}}\n', encoding="utf-8")
    imported(codex_home, state_dir)
    with importstate.load(str(state_dir)) as kept:
        (session,) = scan_codex(codex_home, kept.state)[0]
    assert (session.cwd, session.first_prompt) == ("/w/\ud800", "half \udc00 a pair")


def test_gemini_files_kept_with_other_redaction_or_another_form_are_all_read_again(
        tmp_path: Path) -> None:
    from coding_os.adapters.gemini.sessions import scan_gemini

    files = scan_gemini(GEMINI_HOME).files
    importstate.save_gemini(str(tmp_path), files, importstate.KeptGemini(), redacting=True)
    kept_path = tmp_path / importstate.GEMINI_FILE
    written = kept_path.stat().st_mtime_ns
    loaded = importstate.load_gemini(str(tmp_path), redacting=True)
    assert loaded.files == files
    assert json.loads(kept_path.read_bytes().split(b"\n", 1)[0])["redacted"] is True
    importstate.save_gemini(str(tmp_path), dict(loaded.files), loaded, redacting=True)
    assert kept_path.stat().st_mtime_ns == written  # the same files: not written again
    assert importstate.load_gemini(str(tmp_path), redacting=False).files == {}
    header, rest = kept_path.read_bytes().split(b"\n", 1)
    kept_path.write_bytes(header.replace(b"gemini-kept/", b"gemini-kept/0") + b"\n" + rest)
    assert importstate.load_gemini(str(tmp_path), redacting=True).files == {}
    kept_path.unlink()
    kept_path.symlink_to(tmp_path / "elsewhere")
    assert importstate.load_gemini(str(tmp_path), redacting=True).files == {}
