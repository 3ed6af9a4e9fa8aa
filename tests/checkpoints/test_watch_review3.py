"""The third review of the daemon's file watcher and of jsonwire's C encoder, `_commit_names` in
a subdirectory root and the asker's git environment: each test is a bug it found (a watcher-fed
snapshot that differed from a whole scan, or an output that changed) and proves it closed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os.daemon import server
from coding_os.checkpoints import take
from coding_os.checkpoints.settings import Settings
from coding_os.state.tiers import Tiers
from tests.checkpoints.conftest import commit_all
from tests.checkpoints.test_watch import (  # noqa: F401
    daemon_env,
    running,
    start_daemon_ignoring,
    same,
    stored,
    watched_scenario,
    whole,
)
from tests.conftest import git


def _create(tiers: Tiers, root: str, **kwargs: object) -> dict[str, object]:
    return take.create(tiers, root, session=None, **kwargs)  # type: ignore[arg-type]


# -- the asker's git environment ------------------------------------------------------------------


def test_a_variable_the_asker_lacks_is_not_taken_from_the_daemon(
        project: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch,
        daemon_env: dict[str, str]) -> None:
    start_daemon_ignoring(daemon_env, isolated_env, "build/")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")  # the asker's git reads ~/.gitconfig: nothing
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _create(tiers, root)
    (project / "build" / "out.txt").write_text("two\n")
    record = _create(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


# -- git attributes -------------------------------------------------------------------------------


def test_a_changed_gitattributes_makes_the_checkpoint_look_again(
        project: Path, running: dict[str, object]) -> None:
    (project / "a.txt").write_bytes(b"A\n")
    commit_all(project, "a")
    git(project, "config", "filter.up.clean", "tr a-z A-Z")  # as git-lfs's filter, say
    (project / ".gitattributes").write_text("a.txt filter=up\n")
    (project / "a.txt").write_bytes(b"a\n")  # the same as HEAD once cleaned: not modified
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _create(tiers, root)
    (project / ".gitattributes").unlink()  # now a.txt differs from HEAD
    record = _create(tiers, root)
    assert record["scan"] == "full"  # how files are read changed: all of it is looked at
    same(stored(tiers, record), whole(tiers, root))


# -- a file force-added in an ignored directory, the asker's token not matching -------------------


def test_a_force_added_file_is_watched_after_a_checkpoint_under_other_settings(
        project: Path, running: dict[str, object]) -> None:
    (project / ".gitignore").write_text("build/\n")
    commit_all(project, "ignore")
    (project / "build").mkdir()
    (project / "build" / "keep.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _create(tiers, root)  # the watch leaves build/ unwatched
    git(project, "add", "-f", "build/keep.txt")
    other = Settings({"checkpoints": {"max_file_bytes": "1MiB"}})
    assert _create(tiers, root, settings=other)["scan"] == "full"  # the base is not used
    (project / "build" / "keep.txt").write_text("two\n")
    record = _create(tiers, root, settings=other)
    same(stored(tiers, record), whole(tiers, root))


def test_a_directory_no_longer_ignored_is_watched_after_a_checkpoint_under_other_settings(
        project: Path, running: dict[str, object]) -> None:
    (project / ".gitignore").write_text("build/\n")
    commit_all(project, "ignore")
    (project / "build").mkdir()
    (project / "build" / "out.txt").write_text("one\n")
    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    _create(tiers, root)  # the watch leaves build/ unwatched
    (project / ".gitignore").write_text("")
    other = Settings({"checkpoints": {"max_file_bytes": "1MiB"}})
    assert _create(tiers, root, settings=other)["scan"] == "full"
    (project / "build" / "out.txt").write_text("two\n")
    record = _create(tiers, root, settings=other)
    same(stored(tiers, record), whole(tiers, root))


# -- an overflowed queue --------------------------------------------------------------------------


def test_a_directory_made_while_the_queue_overflowed_is_watched_afterwards(
        project: Path, running: dict[str, object]) -> None:
    import signal

    tiers = Tiers(str(project / ".coding-os"))
    root = str(project)
    (project / "many").mkdir()
    _create(tiers, root)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    pid = int(str(running["pid"]))
    os.kill(pid, signal.SIGSTOP)
    try:
        for number in range(limit // 2 + 10):  # two events each: create and modify
            (project / "many" / f"f{number}").write_bytes(b"x")
        (project / "late").mkdir()  # its event is dropped
        (project / "late" / "a.txt").write_text("one\n")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _create(tiers, root)["scan"] == "full"
    (project / "late" / "a.txt").write_text("two\n")
    record = _create(tiers, root)
    same(stored(tiers, record), whole(tiers, root))


# -- jsonwire.dumps on the C encoder: keys that are not strings ----------------------------------


def test_a_transcript_field_with_a_number_key_is_refused(tmp_path: Path) -> None:
    from coding_os.errors import InvalidInput
    from coding_os.sessions import transcript

    tiers = Tiers(str(tmp_path / ".coding-os"))
    session = transcript.create(tiers, "claude", project="/abs/root", worktree="/abs/root",
                                branch="main")
    with pytest.raises(InvalidInput, match="not JSON"):
        transcript.append(tiers, session, "user", {"text": "hi", "turn": 1, "x": {1: "a"}})


def test_dumps_never_writes_a_duplicate_key() -> None:
    import json

    from coding_os import jsonwire

    try:
        text = jsonwire.dumps({"1": "string key", 1: "number key"})
    except TypeError:
        return
    assert len(json.loads(text)) == 2


def test_the_config_cache_gives_the_parsed_config(tmp_path: Path) -> None:
    from coding_os.config import load_config, load_config_cached

    project = tmp_path / "p"
    state = project / ".coding-os"
    state.mkdir(parents=True)
    (project / ".coding-os.yaml").write_text("state:\n  horizons:\n    1: 8h\n")
    parsed = load_config(str(project))
    assert load_config_cached(str(project), str(state)) == parsed  # the parse, cache written
    assert load_config_cached(str(project), str(state)) == parsed  # from the cache


def test_dumps_keeps_what_the_python_encoder_wrote() -> None:
    """For everything cos writes (string keys), the C encoder gives the Python encoder's bytes:
    bool and IntEnum values, float reprs, lone surrogates, tuples, str subclasses."""
    import enum

    from coding_os import jsonwire

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    value = {"b": [True, False, None], "e": Level.HIGH, "f": [0.1, 1e22, -0.0, 1.5e-7],
             "s": "\ud800x\u00e9\n", "t": ("a", 1), Name("k"): Name("v"), "big": 2 ** 70}
    assert jsonwire.dumps(value) == (
        '{"b":[true,false,null],"e":3,"f":[0.1,1e+22,-0.0,1.5e-07],'
        '"s":"\\ud800x\\u00e9\\n","t":["a",1],"k":"v","big":1180591620717411303424}')
    with pytest.raises(ValueError):
        jsonwire.dumps({"x": float("nan")})
    with pytest.raises(TypeError):
        jsonwire.dumps({"x": b"bytes"})


# -- a root below its repository's top: the property of test_watch.py ---------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.checkpoints.test_property import apply, content_st, path_st, target_st  # noqa: E402

sub_op_st = st.one_of(
    st.tuples(st.just("write"), path_st, content_st, st.booleans()),
    st.tuples(st.just("delete"), path_st),
    st.tuples(st.just("rename"), path_st, path_st),
    st.tuples(st.just("chmod"), path_st),
    st.tuples(st.just("symlink"), path_st, target_st),
    st.tuples(st.just("ignore"), st.sampled_from(["a/", "b", "*.o", ""])),
    st.tuples(st.just("top-ignore"), st.sampled_from(["sub/a/", "b", ""])),
    st.tuples(st.just("top-write"), st.sampled_from(["t", "sub2/x"])),
    st.tuples(st.just("commit"), st.just("")),
    st.tuples(st.sampled_from(["stage", "unstage"]), st.just("")),
    st.tuples(st.just("rewind"), st.integers(min_value=0, max_value=20)),
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(initial=st.lists(st.tuples(st.just("write"), path_st, content_st, st.booleans()),
                        max_size=6),
       batches=st.lists(st.lists(sub_op_st, min_size=1, max_size=4), min_size=1, max_size=5))
def test_in_a_subdirectory_root_a_snapshot_fed_by_the_watcher_is_the_whole_scan(
        running: dict[str, object], initial: list[tuple], batches: list[list[tuple]]  # type: ignore[type-arg]
) -> None:
    watched_scenario(initial, batches, below="sub")
