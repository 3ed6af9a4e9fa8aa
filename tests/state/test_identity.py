"""Identity (DESIGN.md §3.3): agent, panel and session ids."""

from __future__ import annotations

import pytest

from coding_os.errors import InvalidId
from coding_os.state.identity import (
    agent_of_session,
    detect_agent,
    is_session_id,
    mint_session_id,
    panel_identity,
    sanitize_panel_id,
    validate_agent,
)


def test_cos_agent_wins_over_runtime_markers() -> None:
    assert detect_agent({"COS_AGENT": "codex", "CLAUDECODE": "1"}) == "codex"


@pytest.mark.parametrize("env,agent", [
    ({"CLAUDECODE": "1"}, "claude"),
    ({"CODEX_THREAD_ID": "t"}, "codex"),
    ({}, "shell"),
])
def test_runtime_markers_name_the_agent(env: dict[str, str], agent: str) -> None:
    assert detect_agent(env) == agent


def test_an_agent_inside_another_is_refused_rather_than_guessed() -> None:
    # Codex started from Claude Code's Bash tool: its shell inherits Claude's variables too.
    with pytest.raises(InvalidId, match="COS_AGENT"):
        detect_agent({"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "c1", "CODEX_THREAD_ID": "x1"})


def test_the_panel_comes_from_the_calling_agents_own_variables() -> None:
    env = {"CLAUDE_CODE_SESSION_ID": "claude-one", "CODEX_SESSION_ID": "codex-one"}
    assert panel_identity(env, None, "codex") == ("codex-one", "adapter_env")
    assert panel_identity(env, None, "claude") == ("claude-one", "adapter_env")


def test_panel_sources_in_order() -> None:
    env = {"COS_PANEL_ID": "tab-3", "CLAUDE_CODE_SESSION_ID": "c"}
    assert panel_identity(env, "payload-id", "claude") == ("tab-3", "env")
    assert panel_identity({"CLAUDE_CODE_SESSION_ID": "c"}, "payload-id", "claude") == \
        ("payload-id", "payload")
    panel, source = panel_identity({}, None, "claude")
    assert source == "ppid" and panel.startswith("ppid-") and len(panel) == 13


@pytest.mark.parametrize("raw", ["..", ".", "../x", "a/b", "x\x00y", "é", "-rf", "a" * 10_000, ""])
def test_sanitised_panel_ids_are_safe_and_distinct(raw: str) -> None:
    panel = sanitize_panel_id(raw)
    assert 0 < len(panel) <= 64 and panel not in (".", "..") and not panel.startswith((".", "-"))
    assert set(panel) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    assert sanitize_panel_id(raw + "x") != panel


def test_minted_session_ids_match_the_contract_regex() -> None:
    import re

    session = mint_session_id("claude", 1_700_000_000)
    assert re.fullmatch(r"ses-[a-z][a-z0-9_-]{0,31}-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}", session)
    assert session.startswith("ses-claude-20231114-221320-")
    assert is_session_id(session) and not is_session_id(session + "0")
    assert not is_session_id("ses-Claude-20231114-221320-abcd")


def test_agent_names_with_a_hyphen_make_session_ids_that_name_that_agent() -> None:
    session = mint_session_id(validate_agent("claude-sdk"), 1_700_000_000)
    assert session.startswith("ses-claude-sdk-20231114-221320-")
    assert is_session_id(session) and agent_of_session(session) == "claude-sdk"
    assert agent_of_session("ses-openai-agents-20231114-221320-abcd") == "openai-agents"
