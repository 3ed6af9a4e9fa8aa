"""`Project`, the context of every function of `coding_os.api`: nothing is resolved when it is
made, and each part is worked out once, when first asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_os.api.project import Project
from coding_os.errors import Misroute


def test_a_project_resolves_nothing_until_its_caller_is_asked_for(isolated_env: Path) -> None:
    at_the_hub = Project(cwd=str(isolated_env))  # HOME: its state dir would be the global hub
    assert at_the_hub.env is None and at_the_hub.cwd == str(isolated_env)
    with pytest.raises(Misroute):
        at_the_hub.caller
    assert not (isolated_env / ".coding-os").exists()


def test_the_caller_and_the_configuration_are_worked_out_once(project: Path) -> None:
    (project / ".coding-os.yaml").write_text("cleanup_period_days: 9\n", encoding="utf-8")
    here = Project({"COS_AGENT": "claude", "HOME": str(project.parent / "home")}, str(project))
    assert here.caller is here.caller and here.caller.agent == "claude"
    assert here.root == str(project) and here.tiers.state_dir == str(project / ".coding-os")
    assert here.config is here.config and here.period_days == 9
    (project / ".coding-os.yaml").write_text("cleanup_period_days: 3\n", encoding="utf-8")
    assert here.period_days == 9  # read once: one call sees one configuration
    assert Project(cwd=str(project)).period_days == 3


def test_the_environment_given_is_the_callers_and_none_is_this_process(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COS_HOST", "here-host")
    assert Project(cwd=str(project)).host == "here-host"
    assert Project({"COS_HOST": "given-host"}, str(project)).host == "given-host"
    claude, codex = Project({"HOME": "/h", "CODEX_HOME": "/c"}, str(project)).native_dirs
    assert (claude, codex) == ("/h/.claude", "/c")
