"""Policy gates (`gates:` in `.coding-os.yaml`), through the library entry the PreToolUse hook uses."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from coding_os import api
from coding_os.hooks import gates, context, events
from coding_os.state import hookslog
from tests.helpers import hook_env


# Secrets of the shapes the gate knows, built at run time so this file holds none verbatim.
AWS_KEY = "AKIA" + "Q3EXAMPLE7KEY2ID"
GITHUB_TOKEN = "ghp" + "_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PRIVATE_KEY = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow...\n"
OPENAI_KEY = "sk-" + "proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7j"
STRIPE_KEY = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
SLACK_TOKEN = "xox" + "b-123456789012-abcdefABCDEF"
GOOGLE_KEY = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"


def configure(repo: Path, yaml: str) -> None:
    (repo / ".coding-os.yaml").write_text(yaml, encoding="utf-8")


def start(repo: Path, home: Path, native: str = "n1") -> None:
    events.handle("SessionStart", {"session_id": native, "source": "startup"},
                     env=hook_env(home), cwd=str(repo))


def pre(repo: Path, home: Path, tool: str, tool_input: object,
        native: str = "n1") -> context.HookResult:
    payload = {"session_id": native, "hook_event_name": "PreToolUse", "cwd": str(repo),
               "tool_name": tool, "tool_input": tool_input}
    return events.handle("PreToolUse", payload, env=hook_env(home), cwd=str(repo))


def last_log(repo: Path) -> dict[str, str | None]:
    text = (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
    line = hookslog.parse_line(text.splitlines()[-1])
    assert line is not None
    return line


def reason(result: context.HookResult) -> str:
    assert result.output is not None
    specific = result.output["hookSpecificOutput"]
    assert isinstance(specific, dict) and specific["permissionDecision"] == "deny"
    text = specific["permissionDecisionReason"]
    assert isinstance(text, str) and "\n" not in text
    assert result.exit_code == 2 and result.message == text
    return text


def allowed(result: context.HookResult) -> bool:
    return result.exit_code == 0 and "permissionDecision" not in str(result.output)


def warning(result: context.HookResult) -> str:
    assert result.exit_code == 0 and result.output is not None
    specific = result.output["hookSpecificOutput"]
    assert isinstance(specific, dict)
    text = specific["additionalContext"]
    assert isinstance(text, str) and "\n" not in text
    assert result.output["systemMessage"] == text
    return text


def set_task(repo: Path, home: Path, panel: str = "n1", value: str = "TASK-1") -> None:
    api.state_set(".task-current", value, env=hook_env(home, COS_PANEL_ID=panel), cwd=str(repo))


# -- off by default --------------------------------------------------------------------------------


def test_without_a_gates_section_nothing_is_blocked_and_nothing_is_logged_about_gates(
        repo: Path, isolated_env: Path) -> None:
    start(repo, isolated_env)
    for tool, tool_input in (("Write", {"file_path": str(repo / ".env"), "content": AWS_KEY}),
                             ("Bash", {"command": f"echo {GITHUB_TOKEN} > .env"})):
        result = pre(repo, isolated_env, tool, tool_input)
        assert allowed(result) and result.output is None
        assert "gates" not in last_log(repo)


def test_gates_set_to_false_or_empty_block_nothing(repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  require_task_for_edits: false\n  block_secrets: false\n")
    start(repo, isolated_env)
    assert allowed(pre(repo, isolated_env, "Write", {"file_path": "a.txt", "content": AWS_KEY}))


# -- require_task_for_edits ----------------------------------------------------------------------


def test_require_task_blocks_an_edit_tool_until_this_session_sets_a_current_task(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  require_task_for_edits: true\n")
    start(repo, isolated_env)
    write = {"file_path": str(repo / "a.txt"), "content": "x\n"}
    text = reason(pre(repo, isolated_env, "Write", write))
    assert "require_task_for_edits" in text and "cos state set .task-current" in text
    line = last_log(repo)
    assert line["gates"] == "require_task_for_edits:block"
    assert line["blocked_by"] == "require_task_for_edits" and line["task_check"] == "no_file"
    assert "checkpoint" not in line  # a refused call takes no checkpoint
    set_task(repo, isolated_env)
    assert allowed(pre(repo, isolated_env, "Write", write))
    assert last_log(repo)["gates"] == "require_task_for_edits:allow"


def test_require_task_leaves_shell_and_read_tools_alone(repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  require_task_for_edits: true\n")
    start(repo, isolated_env)
    assert allowed(pre(repo, isolated_env, "Bash", {"command": "echo hi > a.txt"}))
    assert last_log(repo)["gates"] == "require_task_for_edits:n/a"
    assert allowed(pre(repo, isolated_env, "Read", {"file_path": str(repo / "README.md")}))


@pytest.mark.parametrize("tool,tool_input", [
    ("Edit", {"file_path": "a.txt", "old_string": "a", "new_string": "b"}),
    ("MultiEdit", {"file_path": "a.txt", "edits": [{"old_string": "a", "new_string": "b"}]}),
    ("NotebookEdit", {"notebook_path": "n.ipynb", "new_source": "x"}),
    ("apply_patch", {"command": "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"}),
])
def test_require_task_covers_every_edit_tool(repo: Path, isolated_env: Path, tool: str,
                                             tool_input: dict[str, object]) -> None:
    configure(repo, "gates:\n  require_task_for_edits: true\n")
    start(repo, isolated_env)
    assert "require_task_for_edits" in reason(pre(repo, isolated_env, tool, tool_input))


def test_require_task_blocks_with_session_mismatch_when_the_task_belongs_to_another_session(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  require_task_for_edits: true\n")
    start(repo, isolated_env)
    set_task(repo, isolated_env)
    # The same panel starts over (/clear-like startup): the marker of the old session stays
    # on disk but is no longer this session's.
    task_file = repo / ".coding-os" / "claude" / "panels" / "n1" / ".task-current"
    old = task_file.read_bytes()
    start(repo, isolated_env)
    task_file.write_bytes(old)
    text = reason(pre(repo, isolated_env, "Edit", {"file_path": "a.txt", "old_string": "a",
                                                   "new_string": "b"}))
    assert "session mismatch" in text
    assert last_log(repo)["task_check"] == "session_mismatch"


def test_require_task_blocks_a_stale_task(repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  require_task_for_edits: true\nstate:\n  horizons:\n"
                    "    .task-current: 1m\n")
    start(repo, isolated_env)
    set_task(repo, isolated_env)
    task_file = repo / ".coding-os" / "claude" / "panels" / "n1" / ".task-current"
    past = time.time() - 3600
    os.utime(task_file, (past, past))
    assert "older than its horizon" in reason(pre(repo, isolated_env, "Write",
                                                  {"file_path": "a.txt", "content": "x"}))


# -- protect_paths -------------------------------------------------------------------------------


PROTECT = "gates:\n  protect_paths: ['secrets/**', '.env', 'config/*.pem']\n"


@pytest.mark.parametrize("tool,tool_input", [
    ("Write", {"file_path": "{repo}/.env", "content": "A=1\n"}),
    ("Write", {"file_path": "{repo}/sub/dir/.env", "content": "A=1\n"}),
    ("Edit", {"file_path": "{repo}/secrets/db/password.txt", "old_string": "a",
              "new_string": "b"}),
    ("MultiEdit", {"file_path": "secrets/x", "edits": []}),
    ("NotebookEdit", {"notebook_path": "{repo}/config/server.pem", "new_source": "x"}),
    ("apply_patch", {"command": "*** Begin Patch\n*** Update File: src/a.py\n@@\n-a\n+b\n"
                                "*** Update File: secrets/key.txt\n@@\n-a\n+b\n*** End Patch\n"}),
    ("apply_patch", {"command": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: .env\n"
                                "*** End Patch\n"}),
    ("Bash", {"command": "echo A=1 > .env"}),
    ("Bash", {"command": "echo A=1 >> {repo}/.env"}),
    ("Bash", {"command": "rm -rf secrets"}),
    ("Bash", {"command": "ls && rm -f secrets/old.txt"}),
    ("Bash", {"command": "mv notes.txt secrets/notes.txt"}),
    ("Bash", {"command": "cat x | tee -a .env"}),
    ("Bash", {"command": "sed -i 's/a/b/' config/server.pem"}),
    ("Bash", {"command": "truncate -s 0 .env"}),
    ("Bash", {"command": "chmod 600 secrets/key"}),
    ("Bash", {"command": "dd if=/dev/zero of=secrets/blob bs=1 count=1"}),
    ("Bash", {"command": "touch ./secrets/new"}),
])
@pytest.mark.slow
def test_protect_paths_blocks_writes_to_protected_paths(repo: Path, isolated_env: Path, tool: str,
                                                        tool_input: dict[str, object]) -> None:
    configure(repo, PROTECT)
    start(repo, isolated_env)
    filled = {k: v.replace("{repo}", str(repo)) if isinstance(v, str) else v
              for k, v in tool_input.items()}
    text = reason(pre(repo, isolated_env, tool, filled))
    assert "protect_paths" in text and "protected glob" in text
    line = last_log(repo)
    assert line["blocked_by"] == "protect_paths" and line["protected"] in (
        "secrets/**", ".env", "config/*.pem")


@pytest.mark.parametrize("tool,tool_input", [
    ("Write", {"file_path": "{repo}/env.txt", "content": "A=1\n"}),
    ("Write", {"file_path": "{repo}/secrets.md", "content": "x"}),
    ("Edit", {"file_path": "{repo}/docs/secrets/readme.md", "old_string": "a", "new_string": "b"}),
    ("Write", {"file_path": "{repo}/sub/config/server.pem", "content": "x"}),
    ("Bash", {"command": "cat .env"}),
    ("Bash", {"command": "grep -r password secrets/ > found.txt"}),
    ("Bash", {"command": "ls secrets; echo done > out.txt"}),
    ("Read", {"file_path": "{repo}/.env"}),
])
def test_protect_paths_allows_reads_and_other_paths(repo: Path, isolated_env: Path, tool: str,
                                                    tool_input: dict[str, object]) -> None:
    configure(repo, PROTECT)
    start(repo, isolated_env)
    filled = {k: v.replace("{repo}", str(repo)) if isinstance(v, str) else v
              for k, v in tool_input.items()}
    assert allowed(pre(repo, isolated_env, tool, filled))


def test_protect_paths_sees_through_a_symlink_to_a_protected_file(repo: Path,
                                                                  isolated_env: Path) -> None:
    configure(repo, PROTECT)
    (repo / "secrets").mkdir()
    (repo / "secrets" / "key").write_text("k", encoding="utf-8")
    (repo / "innocent.txt").symlink_to(repo / "secrets" / "key")
    start(repo, isolated_env)
    assert "protect_paths" in reason(pre(repo, isolated_env, "Write",
                                         {"file_path": str(repo / "innocent.txt"),
                                          "content": "x"}))


def test_protect_paths_sees_through_a_symlink_to_a_protected_name_outside_the_project(
        repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    configure(repo, PROTECT)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / ".env").write_text("TOKEN=1\n", encoding="utf-8")
    (repo / "cfg").symlink_to(outside / ".env")
    start(repo, isolated_env)
    assert "protect_paths" in reason(pre(repo, isolated_env, "Write",
                                         {"file_path": str(repo / "cfg"), "content": "x"}))


def test_protect_paths_accepts_the_mapping_form(repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  protect_paths:\n    paths: [.env]\n    strict: true\n")
    start(repo, isolated_env)
    assert "protect_paths" in reason(pre(repo, isolated_env, "Write",
                                         {"file_path": ".env", "content": "x"}))
    assert allowed(pre(repo, isolated_env, "Write", {"file_path": "b.txt", "content": "x"}))


# Shell commands and whether they write `.env`: bash itself is asked too (below), so the table
# cannot be wrong about the shell.
SHELL_WRITES = [
    ("echo x 1<>.env", True),
    ("echo x <>.env", True),
    ("exec 3<>.env", True),
    ("echo x >|.env", True),
    ("echo x 1>|.env", True),
    ("echo x &>.env", True),
    ("echo x &>>.env", True),
    ("echo x >>.env", True),
    ("echo x 2>.env", True),
    ("echo x 2>>.env", True),
    ("echo x 10>.env", True),
    ("echo x {fd}>.env", True),
    ("echo x >&.env", True),
    ("echo x >& .env", True),
    ("echo x;>.env", True),
    ("true&&>.env", True),
    ("echo x|>.env", True),
    ("(>.env)", True),
    ("echo x | cat >.env", True),
    ("echo a#b >.env", True),
    ("echo $'a\\'b' >.env", True),
    ("echo x >$'\\x2eenv'", True),
    ("echo x >'.env'", True),
    ("echo x > .e\"nv\"", True),
    ("echo x > \\.env", True),
    ("echo x > .env # it's", True),
    ("echo `>.env`", True),
    ("echo \"$(echo x >.env)\"", True),
    ("tee >(cat >.env) </dev/null", True),
    ("cat <.env", False),
    ("cat 0<.env", False),
    ("cat <<<.env", False),
    ("echo x 2>&1", False),
    ("echo x >&2", False),
    ("echo x 3>&-", False),
    ("echo '>' .env", False),
    ("echo x # >.env", False),
    ("echo .env > out.txt", False),
    ("tee out.txt <.env", False),
]


@pytest.mark.slow
@pytest.mark.parametrize("command,writes", SHELL_WRITES)
def test_protect_paths_blocks_every_redirect_that_writes_and_no_read(
        repo: Path, isolated_env: Path, tmp_path: Path, command: str, writes: bool) -> None:
    import subprocess

    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    subprocess.run(["bash", "-c", command], cwd=sandbox, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=30)
    assert (sandbox / ".env").exists() == writes, "the table is wrong about bash"
    configure(repo, PROTECT)
    start(repo, isolated_env)
    result = pre(repo, isolated_env, "Bash", {"command": command})
    if writes:
        assert "protect_paths" in reason(result)
    else:
        assert allowed(result)


# -- block_secrets -------------------------------------------------------------------------------


@pytest.mark.parametrize("tool,make_input,pattern", [
    ("Write", lambda s: {"file_path": "config.py", "content": f"KEY = '{s}'\n"}, AWS_KEY),
    ("Edit", lambda s: {"file_path": "a.py", "old_string": "x", "new_string": f"t = '{s}'"},
     GITHUB_TOKEN),
    ("MultiEdit", lambda s: {"file_path": "a.py", "edits": [
        {"old_string": "a", "new_string": "fine"}, {"old_string": "b", "new_string": s}]},
     PRIVATE_KEY),
    ("NotebookEdit", lambda s: {"notebook_path": "n.ipynb", "new_source": f"key = '{s}'"},
     OPENAI_KEY),
    ("apply_patch", lambda s: {"command": f"*** Begin Patch\n*** Add File: k.py\n+K = '{s}'\n"
                                          "*** End Patch\n"}, STRIPE_KEY),
    ("Bash", lambda s: {"command": f"curl -H 'Authorization: Bearer {s}' https://x"},
     SLACK_TOKEN),
    ("Bash", lambda s: {"command": f"echo {s} >> .env"}, GOOGLE_KEY),
])
def test_block_secrets_blocks_the_write_and_never_repeats_the_secret(
        repo: Path, isolated_env: Path, tool: str,
        make_input: Callable[[str], dict[str, object]], pattern: str) -> None:
    configure(repo, "gates:\n  block_secrets: true\n")
    start(repo, isolated_env)
    tool_input = make_input(pattern)
    result = pre(repo, isolated_env, tool, tool_input)
    text = reason(result)
    assert "block_secrets" in text and "contains a secret (pattern " in text
    secret_core = pattern.strip().split("\n")[0][-16:]
    assert secret_core not in text and secret_core not in str(result.output)
    log_text = (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
    assert secret_core not in log_text
    line = last_log(repo)
    assert line["blocked_by"] == "block_secrets" and line["secret"]
    assert line["input"] is None or line["input"].startswith("[redacted: ")
    for path in (repo / ".coding-os").rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".log", ".json"):
            assert secret_core not in path.read_text(encoding="utf-8", errors="replace"), path


def test_block_secrets_allows_ordinary_code_and_secret_looking_words(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  block_secrets: true\n")
    start(repo, isolated_env)
    for content in ("import os\nKEY = os.environ['AWS_ACCESS_KEY_ID']\n",
                    "sk-learn-is-not-a-key-but-a-very-long-hyphenated-name-here",
                    "task-current desk-lamp AKIAshort ghp_short",
                    "-----BEGIN PUBLIC KEY-----\n"):
        assert allowed(pre(repo, isolated_env, "Write", {"file_path": "a.py", "content": content}))
    assert last_log(repo)["gates"] == "block_secrets:allow"


def test_block_secrets_ignores_removed_patch_lines(repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  block_secrets: true\n")
    start(repo, isolated_env)
    patch = f"*** Begin Patch\n*** Update File: a.py\n@@\n-K = '{AWS_KEY}'\n+K = os.environ['K']\n" \
            "*** End Patch\n"
    assert allowed(pre(repo, isolated_env, "apply_patch", {"command": patch}))


def test_every_secret_pattern_compiles_and_matches_its_own_example() -> None:
    examples = {"aws_access_key_id": AWS_KEY, "github_token": GITHUB_TOKEN,
                "private_key": PRIVATE_KEY, "openai_api_key": OPENAI_KEY,
                "stripe_live_key": STRIPE_KEY, "slack_token": SLACK_TOKEN,
                "google_api_key": GOOGLE_KEY,
                "anthropic_api_key": "sk-" + "ant-api03-" + "x" * 30}
    for name, example in examples.items():
        assert gates._secret_kind([f"value = {example}"]) == name


# -- broken gates: fail open, unless strict ----------------------------------------------------


def test_a_bad_glob_fails_open_with_a_one_line_warning_to_the_agent(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  protect_paths: ['secrets/[abc']\n")
    start(repo, isolated_env)
    result = pre(repo, isolated_env, "Write", {"file_path": "secrets/a", "content": "x"})
    text = warning(result)
    assert "protect_paths" in text and "allowed" in text and "secrets/[abc" in text
    line = last_log(repo)
    assert line["gates"] == "protect_paths:failed-open" and line["gate_error_protect_paths"]


def test_a_strict_gate_with_a_bad_glob_blocks_saying_it_could_not_check(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  protect_paths: {paths: ['secrets/[abc'], strict: true}\n")
    start(repo, isolated_env)
    text = reason(pre(repo, isolated_env, "Write", {"file_path": "b.txt", "content": "x"}))
    assert "could not check" in text and "strict" in text
    assert last_log(repo)["gates"] == "protect_paths:failed-closed"


@pytest.mark.parametrize("yaml,expected", [
    ("gates:\n  require_task_for_edits: 'yes'\n", "gates.require_task_for_edits: expected"),
    ("gates:\n  block_secrets: {enabled: 1}\n", "gates.block_secrets.enabled"),
    ("gates:\n  protect_paths: true\n", "gates.protect_paths: expected a list of globs"),
    ("gates:\n  protect_paths: [3]\n", "every glob must be a non-empty string"),
    ("gates:\n  block_secrets: {enabled: true, colour: red}\n", "unknown setting 'colour'"),
])
def test_bad_config_values_fail_open_with_a_clear_warning_and_no_traceback(
        repo: Path, isolated_env: Path, yaml: str, expected: str) -> None:
    configure(repo, yaml)
    start(repo, isolated_env)
    result = pre(repo, isolated_env, "Write", {"file_path": "a.txt", "content": "x"})
    text = warning(result)
    assert expected in text and "Traceback" not in text


def test_a_gates_section_that_is_not_a_mapping_or_names_an_unknown_gate_warns(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates: [block_secrets]\n")
    start(repo, isolated_env)
    assert "expected a mapping" in warning(pre(repo, isolated_env, "Bash", {"command": "ls"}))
    configure(repo, "gates:\n  protect_path: [.env]\n")
    text = warning(pre(repo, isolated_env, "Write", {"file_path": ".env", "content": "x"}))
    assert "unknown gate 'protect_path'" in text
    assert last_log(repo)["gate_config_error"]


def test_unreadable_yaml_with_gates_fails_open_with_a_warning(repo: Path,
                                                              isolated_env: Path) -> None:
    start(repo, isolated_env)
    configure(repo, "gates:\n  block_secrets: [true\n")
    text = warning(pre(repo, isolated_env, "Write", {"file_path": "a", "content": AWS_KEY}))
    assert "gates could not be read" in text
    assert last_log(repo)["gates"] == "failed-open"


def test_an_exception_inside_a_gate_fails_open_unless_strict(
        repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> str | None:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(gates._CHECKS, "require_task_for_edits", broken)
    configure(repo, "gates:\n  require_task_for_edits: true\n")
    start(repo, isolated_env)
    write = {"file_path": "a.txt", "content": "x"}
    assert "RuntimeError: disk on fire" in warning(pre(repo, isolated_env, "Write", write))
    assert last_log(repo)["gates"] == "require_task_for_edits:failed-open"
    configure(repo, "gates:\n  require_task_for_edits: {strict: true}\n")
    assert "could not check" in reason(pre(repo, isolated_env, "Write", write))


def test_an_unreadable_task_file_fails_a_strict_gate_closed(
        repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.errors import StateIOError
    from coding_os.state import statefile

    configure(repo, "gates:\n  require_task_for_edits: {enabled: true, strict: true}\n")
    start(repo, isolated_env)

    def unreadable(*args: object, **kwargs: object) -> object:
        raise StateIOError("cannot read .task-current: permission denied")

    monkeypatch.setattr(statefile, "check_state", unreadable)
    text = reason(pre(repo, isolated_env, "Write", {"file_path": "a.txt", "content": "x"}))
    assert "could not check" in text and "cannot read .task-current" in text


def test_a_broken_secret_check_keeps_the_call_input_out_of_the_log(
        repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> str | None:
        raise ValueError("bug")

    monkeypatch.setitem(gates._CHECKS, "block_secrets", broken)
    configure(repo, "gates:\n  block_secrets: true\n")
    start(repo, isolated_env)
    warning(pre(repo, isolated_env, "Bash", {"command": f"echo {AWS_KEY}"}))
    assert AWS_KEY not in (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")


def test_a_gate_warning_keeps_the_mcp_attribution_of_the_same_call(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, "gates:\n  protect_path: [.env]\n")  # a typo: warned on every call
    start(repo, isolated_env)
    result = pre(repo, isolated_env, "mcp__cos__cos_task_list", {"status": "todo"})
    assert "unknown gate 'protect_path'" in warning(result)
    assert result.output is not None
    specific = result.output["hookSpecificOutput"]
    assert isinstance(specific, dict) and "agent_session" in specific["updatedInput"]


def test_the_shell_check_errs_on_the_side_of_blocking_a_copy_of_a_protected_file(
        repo: Path, isolated_env: Path) -> None:
    configure(repo, PROTECT)
    start(repo, isolated_env)
    # Documented in docs/gates.md: `cp` is a writing command and names `.env`.
    assert "protect_paths" in reason(pre(repo, isolated_env, "Bash", {"command": "cp .env bak"}))


def test_a_strict_setting_that_is_not_a_boolean_counts_as_strict(repo: Path,
                                                                 isolated_env: Path) -> None:
    configure(repo, "gates:\n  block_secrets: {strict: 'yes'}\n")
    start(repo, isolated_env)
    text = reason(pre(repo, isolated_env, "Write", {"file_path": "a.txt", "content": "x"}))
    assert "gates.block_secrets.strict" in text


def test_cos_hook_blocks_with_deny_json_on_stdout_the_reason_on_stderr_and_exit_2(
        repo: Path) -> None:
    from tests.helpers import fire

    configure(repo, "gates:\n  protect_paths: [.env]\n")
    assert fire("SessionStart", {"session_id": "n1", "source": "startup"}, cwd=repo).returncode == 0
    proc = fire("PreToolUse", {"session_id": "n1", "tool_name": "Write",
                               "tool_input": {"file_path": str(repo / ".env"), "content": "x"}},
                cwd=repo)
    assert proc.returncode == 2
    decision = json.loads(proc.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert proc.stderr.strip() == decision["permissionDecisionReason"]
    assert proc.stderr.startswith("Blocked by coding-os gate protect_paths:")
    allowed_proc = fire("PreToolUse", {"session_id": "n1", "tool_name": "Write",
                                       "tool_input": {"file_path": str(repo / "a"),
                                                      "content": "x"}}, cwd=repo)
    assert (allowed_proc.returncode, allowed_proc.stdout, allowed_proc.stderr) == (0, "", "")


def test_block_secrets_blocks_an_aws_secret_access_key_and_logs_no_part_of_it(
        repo: Path, isolated_env: Path) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # made up, built at run time
    configure(repo, "gates:\n  block_secrets: true\n")
    start(repo, isolated_env)
    for tool, tool_input in (
            ("Write", {"file_path": "creds", "content": f"aws_secret_access_key = {secret}\n"}),
            ("Bash", {"command": f"export AWS_SECRET_ACCESS_KEY={secret}"})):
        text = reason(pre(repo, isolated_env, tool, tool_input))
        assert "pattern aws_secret_access_key" in text
    assert secret[:20] not in (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
