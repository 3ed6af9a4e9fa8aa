"""Property: for random trees and random edit sequences, rewinding to ANY checkpoint taken along
the way reproduces that tree exactly — paths, bytes, symlink targets, executable bits — in a git
repository and in a plain directory (in process, through coding_os.checkpoints)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
import pytest

from coding_os.daemon.client import ask_watcher
from coding_os.checkpoints.take import create
from coding_os.checkpoints.rewind import rewind_code
from coding_os.state.tiers import Tiers
from tests.helpers import apply, content_st, path_st, target_st, tree


write_st = st.tuples(st.just("write"), path_st, content_st, st.booleans())
op_st = st.one_of(
    write_st,
    st.tuples(st.just("delete"), path_st),
    st.tuples(st.just("rename"), path_st, path_st),
    st.tuples(st.just("chmod"), path_st),
    st.tuples(st.just("symlink"), path_st, target_st),
    st.tuples(st.just("mkdir"), path_st),
)


def _git(root: str, *args: str) -> None:
    subprocess.run(["git", "-C", root, *args], check=True, capture_output=True)


def run_scenario(initial: list[tuple], edits: list[tuple], use_git: bool,  # type: ignore[type-arg]
                 order: list[int], same_shape: bool = False) -> None:
    base = tempfile.mkdtemp(prefix="cp-prop-")
    try:
        root = os.path.realpath(os.path.join(base, "tree"))
        os.mkdir(root)
        tiers = Tiers(os.path.join(base, "state"))
        for op in initial:
            apply(root, op)
        if use_git:
            _git(root, "init", "-q", "-b", "main")
            _git(root, "add", "-A")
            _git(root, "commit", "-q", "--allow-empty", "-m", "initial")
        expected: list[tuple[str, dict]] = []  # type: ignore[type-arg]
        for op in [("chmod", "a")] + edits:  # a first checkpoint of the tree as it starts
            apply(root, op, same_shape)
            record = create(tiers, root, session=None, watcher=ask_watcher)
            expected.append((str(record["id"]), tree(root)))
        for number in order:
            checkpoint, wanted = expected[number % len(expected)]
            rewind_code(tiers, root, checkpoint, watcher=ask_watcher)
            assert tree(root) == wanted, (checkpoint, number)
        assert not os.path.exists(os.path.join(tiers.state_dir, "checkpoints", "journal.json"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


scenario = dict(
    initial=st.lists(st.one_of(write_st, st.tuples(st.just("symlink"), path_st, target_st)),
                     max_size=8),
    edits=st.lists(op_st, min_size=1, max_size=8),
    order=st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=4),
)
QUICK = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Edit sequences that keep every path a file or a directory throughout: these pass today.


@pytest.mark.slow
@QUICK
@given(**scenario)
def test_rewinding_a_git_repository_to_any_checkpoint_reproduces_its_tree(
        initial: list[tuple], edits: list[tuple], order: list[int]) -> None:  # type: ignore[type-arg]
    run_scenario(initial, edits, True, order, same_shape=True)


@pytest.mark.slow
@QUICK
@given(**scenario)
def test_rewinding_a_plain_directory_to_any_checkpoint_reproduces_its_tree(
        initial: list[tuple], edits: list[tuple], order: list[int]) -> None:  # type: ignore[type-arg]
    run_scenario(initial, edits, False, order, same_shape=True)


# The full edit set: a file replaced by a directory and back, empty directories. The explicit
# examples are the smallest cases of those shapes.


@pytest.mark.slow
@QUICK
@given(**scenario)
@example(initial=[("write", "a/b", b"", False)], edits=[("write", "a", b"", False)], order=[0])
@example(initial=[("write", "b", b"", False)], edits=[("mkdir", "b/a")], order=[0])
def test_rewinding_a_git_repository_whose_files_became_directories_and_back_reproduces_its_tree(
        initial: list[tuple], edits: list[tuple], order: list[int]) -> None:  # type: ignore[type-arg]
    run_scenario(initial, edits, True, order)


@pytest.mark.slow
@QUICK
@given(**scenario)
@example(initial=[("write", "a/b", b"", False)], edits=[("write", "a", b"", False)], order=[0])
@example(initial=[("write", "b", b"", False)], edits=[("mkdir", "b/a")], order=[0])
def test_rewinding_a_plain_directory_whose_files_became_directories_and_back_reproduces_its_tree(
        initial: list[tuple], edits: list[tuple], order: list[int]) -> None:  # type: ignore[type-arg]
    run_scenario(initial, edits, False, order)
