"""Codex's hook trust (adapters/codex/hook_trust.py): the keys and hashes are those the real
Codex 0.169.0 reports for the same hooks.json (`codex app-server`, `hooks/list`: `key`,
`currentHash`), and the trust read from a user's config is what Codex makes of it. The whole
thing, with `cos init` and a plain `codex exec`, is in tests/e2e/test_doctor_real.py."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from coding_os.adapters.codex.hook_trust import (
    hook_status,
    hooks_of,
    hooks_turned_off,
    project_trust,
    project_trust_lines,
    toml_string,
    trust_table,
)
from coding_os.errors import InvalidInput

PATH = "/tmp/doctor-w/v/.codex/hooks.json"

# Two hooks.json files and what Codex 0.169.0's `hooks/list` answered for them.
HOOKS: dict[str, Any] = {"hooks": {
    "PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo pre", "timeout": 30},
                                      {"type": "command", "command": "echo second"}]},
        {"hooks": [{"type": "command", "command": "echo no matcher", "async": True,
                    "statusMessage": "checking é"}]}],
    "UserPromptSubmit": [{"matcher": "ignored", "hooks": [
        {"type": "command", "command": "echo prompt", "timeout": 0}]}],
    "Stop": [{"hooks": [{"type": "command", "command": 'echo "quoted" \\\\ back'}]}],
}}
CODEX_SAYS = {
    "pre_tool_use:0:0": "sha256:212223e3659b01a4a264d8f8f0c73bef2c80234f1dc3bab0020a825b516e04a1",
    "pre_tool_use:0:1": "sha256:721356b002dc7d741970d2910dca7efc55e4259f7d4923c3ccc9b473f9f2e5b8",
    "pre_tool_use:1:0": "sha256:7d2b6bcd1ad70550f648e6de8063a5007e41615bca1f1cbf99f796c6d586a3b5",
    "user_prompt_submit:0:0":
        "sha256:6354e353d7fcd69511c85dfa2c90964395e6e4bbd2a4df6147b7b1d1502bab26",
    "stop:0:0": "sha256:bc018308a93cfa71fb4b72925e222611702dca6bf622f53fea1c581234095a51",
}
SESSION_END: dict[str, Any] = {"hooks": {"SessionEnd": [
    {"hooks": [{"type": "command", "command": "echo end", "timeout": timeout}]}
    for timeout in (2, 0, 3, 30)] + [{"hooks": [{"type": "command", "command": "echo end"}]}]}}
CODEX_SAYS_SESSION_END = {  # its timeout is cut to 1..3 s (1 when unset)
    "session_end:0:0": "sha256:85e7109a134d04c31e6eeecff6aeab21f09bd16bfd00470621e87cb5f09023ea",
    "session_end:1:0": "sha256:45850818ac37352c413a1b5998816007fb7be904214afb35e02f4b66d14c787a",
    "session_end:2:0": "sha256:84be7971dba2dbb128add226e0537c753853bf675df8efb85a5dcbb611374b4f",
    "session_end:3:0": "sha256:84be7971dba2dbb128add226e0537c753853bf675df8efb85a5dcbb611374b4f",
    "session_end:4:0": "sha256:45850818ac37352c413a1b5998816007fb7be904214afb35e02f4b66d14c787a",
}


@pytest.mark.parametrize(("settings", "codex_says"), [(HOOKS, CODEX_SAYS),
                                                      (SESSION_END, CODEX_SAYS_SESSION_END)])
def test_every_hook_gets_the_key_and_hash_codex_gives_it(settings: dict[str, Any],
                                                         codex_says: dict[str, str]) -> None:
    found = {hook.key: hook.hash for hook in hooks_of(PATH, settings)}
    assert found == {f"{PATH}:{place}": digest for place, digest in codex_says.items()}


def test_handlers_codex_does_not_run_as_commands_have_no_hash() -> None:
    settings = {"hooks": {"PreToolUse": [{"hooks": [
        {"type": "prompt", "prompt": "x"}, {"type": "command", "command": "  "},
        {"type": "command", "command": "x", "timeout": "30"}, "not a handler"]}],
        "NotAnEvent": [{"hooks": [{"type": "command", "command": "x"}]}]}}
    assert hooks_of(PATH, settings) == []


def config(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


def test_a_hook_is_trusted_only_by_its_current_hash_and_not_when_turned_off() -> None:
    hook = hooks_of(PATH, HOOKS)[0]
    other = hooks_of(PATH, HOOKS)[1]
    assert hook_status({}, hook) == "untrusted"
    trusted = config(trust_table(hook))
    assert hook_status(trusted, hook) == "trusted"
    assert hook_status(trusted, other) == "untrusted"
    assert hook_status(config(trust_table(hook).replace(hook.hash, other.hash)), hook) == \
        "modified"
    assert hook_status(config(trust_table(hook) + "enabled = false\n"), hook) == "disabled"


def test_project_trust_is_read_for_the_directory_then_the_main_repository() -> None:
    lines = project_trust_lines("/work/p")
    assert project_trust(config(lines), "/work/p") == "trusted"
    assert project_trust(config(lines), "/work/other") is None
    assert project_trust(config(lines), "/work/p-worktree", main_repository="/work/p") == "trusted"
    assert project_trust(config('[projects."/work/p"]\ntrust_level = "untrusted"\n'),
                         "/work/p") == "untrusted"
    assert hooks_turned_off(config("[features]\nhooks = false\n"))
    assert not hooks_turned_off(config("[features]\nhooks = true\n"))


@pytest.mark.parametrize("name", ['/p/with "quotes"', "/p/back\\slash", "/p/tab\there",
                                  "/p/del\x7fhere", "/p/ünïcode ✓", "/p/\U0001f600"])
def test_toml_strings_round_trip_whatever_the_path(name: str) -> None:
    assert tomllib.loads(f"key = {toml_string(name)}\n")["key"] == name
    assert project_trust(config(project_trust_lines(name)), name) == "trusted"


def test_a_path_that_is_not_utf8_cannot_be_written_in_toml() -> None:
    with pytest.raises(InvalidInput):
        toml_string("/p/\udcff")
