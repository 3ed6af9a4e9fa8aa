"""brain.attribution: which session a brain write is filed under, in the documented order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os.brain.attribution import attribute
from coding_os.state.caller import Caller
from coding_os.state.identity import mint_session_id
from coding_os.state.statefile import write_state
from coding_os.state.tiers import Tiers
from tests.helpers import start_panel


def caller(project: Path, **env: str) -> tuple[Caller, dict[str, str]]:
    environ = {"COS_AGENT": "claude", **env}
    return Caller(environ, str(project)), environ


def set_active(tiers: Tiers, agent: str = "claude") -> str:
    session = mint_session_id(agent)
    write_state(os.path.join(tiers.agent_dir(agent), ".active-session"), session, "-")
    return session


def test_an_injected_session_wins_over_every_other_source(project: Path, tiers: Tiers) -> None:
    start_panel(tiers, "p1")
    set_active(tiers)
    injected = mint_session_id("claude")
    who = attribute(*_args(project, injected, COS_PANEL_ID="p1"))
    assert (who.session, who.source, who.rejected) == (injected, "injected", None)


def test_the_panel_session_is_used_when_nothing_was_injected(project: Path, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    set_active(tiers)
    who = attribute(*_args(project, None, COS_PANEL_ID="p1"))
    assert (who.session, who.source) == (session, "panel")


def test_the_agents_own_session_variable_names_the_panel_too(project: Path,
                                                              tiers: Tiers) -> None:
    session = start_panel(tiers, "native-uuid-1")
    set_active(tiers)
    who = attribute(*_args(project, None, CLAUDE_CODE_SESSION_ID="native-uuid-1"))
    assert (who.session, who.source) == (session, "panel")


def test_the_active_session_is_used_when_the_panel_has_none(project: Path, tiers: Tiers) -> None:
    active = set_active(tiers)
    who = attribute(*_args(project, None, COS_PANEL_ID="p-without-session"))
    assert (who.session, who.source) == (active, "active-session")


def test_a_panel_guessed_from_the_parent_pid_is_never_trusted(project: Path,
                                                               tiers: Tiers) -> None:
    active = set_active(tiers)
    call, env = caller(project)
    assert call.panel_source == "ppid"
    start_panel(tiers, call.panel)  # even a session file in that guessed panel is not used
    assert attribute(call, None, env).source == "active-session"
    assert attribute(call, None, env).session == active


def test_a_synthetic_session_is_the_last_resort_and_names_the_agent_and_pid(
        project: Path) -> None:
    who = attribute(*_args(project, None, COS_PANEL_ID="p1"))
    assert (who.session, who.source) == (f"ses-claude-mcp-{os.getpid()}", "synthetic")


def test_the_command_line_gets_no_session_instead_of_a_synthetic_one(project: Path) -> None:
    call, env = caller(project, COS_PANEL_ID="p1")
    who = attribute(call, None, env, synthetic=None)
    assert (who.session, who.source) == (None, "cli")


@pytest.mark.parametrize("bad", ["not-a-session", "ses-claude-20261129", "../../etc/passwd",
                                 "ses-claude-20261129-100000-aaaa\n", 42, ["x"], {"a": 1}])
def test_an_invalid_injected_session_is_rejected_noted_and_the_next_source_used(
        project: Path, tiers: Tiers, bad: object) -> None:
    session = start_panel(tiers, "p1")
    who = attribute(*_args(project, bad, COS_PANEL_ID="p1"))
    assert (who.session, who.source) == (session, "panel")
    assert who.rejected is not None and len(who.rejected) <= 80
    assert who.to_dict()["rejected_agent_session"] == who.rejected


def test_a_huge_injected_value_is_noted_cut_short(project: Path) -> None:
    who = attribute(*_args(project, "x" * 100_000, COS_PANEL_ID="p1"))
    assert who.source == "synthetic" and who.rejected == "x" * 80


def test_an_empty_injected_value_is_noted_and_the_panel_session_used(project: Path,
                                                                     tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    who = attribute(*_args(project, "", COS_PANEL_ID="p1"))
    assert (who.session, who.source, who.rejected) == (session, "panel", "''")


def test_a_clean_attribution_reports_only_its_session_and_source(project: Path,
                                                                 tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    who = attribute(*_args(project, None, COS_PANEL_ID="p1"))
    assert who.to_dict() == {"session": session, "attributed_by": "panel"}


def test_a_torn_active_session_file_is_not_trusted(project: Path, tiers: Tiers) -> None:
    path = Path(tiers.agent_dir("claude")) / ".active-session"
    path.parent.mkdir(parents=True)
    path.write_bytes(mint_session_id("claude").encode() + b" -")  # no final newline
    assert attribute(*_args(project, None, COS_PANEL_ID="p1")).source == "synthetic"


def _args(project: Path, injected: object, **env: str) -> tuple[Caller, object, dict[str, str]]:
    call, environ = caller(project, **env)
    return call, injected, environ


def test_another_agents_session_is_not_taken_as_injected(project: Path, tiers: Tiers) -> None:
    """The hook injects its own panel's session, one of the server's agent; a Codex id sent to
    Claude Code's server came from elsewhere (the model) and is not trusted."""
    session = start_panel(tiers, "p1")
    other = mint_session_id("codex")
    who = attribute(*_args(project, other, COS_PANEL_ID="p1"))
    assert (who.session, who.source, who.rejected) == (session, "panel", other)
