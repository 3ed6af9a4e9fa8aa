"""The one line that says what a tool call did (adapters/tool_calls.py), for the tools of each
agent as their logs and cos's engine record them."""

from __future__ import annotations

import json

import pytest

from coding_os.adapters.tool_calls import LINE_MAX, first_line, shown_input, summarize

PATCH = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** Add File: notes.md\n" \
        "+hi\n*** End Patch\n"


@pytest.mark.parametrize(("tool", "tool_input", "line"), [
    # Claude Code
    ("Bash", {"command": "npm test -- --watch=false\n&& echo done",
              "description": "Run the tests"}, "$ npm test -- --watch=false"),
    ("Edit", {"file_path": "/w/src/app.py", "old_string": "a", "new_string": "b"},
     "/w/src/app.py"),
    ("Read", {"file_path": "/w/README.md", "offset": 10}, "/w/README.md"),
    ("Write", {"file_path": "/w/new.txt", "content": "x" * 10_000}, "/w/new.txt"),
    ("NotebookEdit", {"notebook_path": "/w/a.ipynb", "new_source": "x"}, "/w/a.ipynb"),
    ("Grep", {"pattern": "def main", "path": "src"}, "def main in src"),
    ("Glob", {"pattern": "**/*.py"}, "**/*.py"),
    ("WebFetch", {"url": "https://example.com/a", "prompt": "sum it up"},
     "https://example.com/a"),
    ("Task", {"description": "Find the flaky test", "prompt": "long\ntext"},
     "Find the flaky test"),
    ("TodoWrite", {"todos": [{"content": "a"}, {"content": "b"}]}, "2 to-dos"),
    # Codex: its logs, its hooks and cos's engine
    ("shell", {"command": ["bash", "-lc", "cargo build --release"], "workdir": "/w"},
     "$ cargo build --release"),
    ("shell", {"command": ["git", "status", "--short"]}, "$ git status --short"),
    ("exec_command", json.dumps({"cmd": "pytest -q", "yield_time_ms": 1000}), "$ pytest -q"),
    ("apply_patch", PATCH, "src/app.py, notes.md"),
    ("apply_patch", {"command": PATCH}, "src/app.py, notes.md"),
    ("commandExecution", {"command": "make lint", "cwd": "/w"}, "$ make lint"),
    ("fileChange", {"changes": [{"path": "a.py", "kind": "update"}, {"path": "b.py"}]},
     "a.py, b.py"),
    ("webSearch", {"query": "htmx sse reconnect"}, "htmx sse reconnect"),
    # Gemini CLI
    ("run_shell_command", {"command": "ls -la", "description": "list"}, "$ ls -la"),
    ("read_file", {"absolute_path": "/w/pyproject.toml"}, "/w/pyproject.toml"),
    ("read_many_files", {"paths": ["a.md", "b.md"]}, "a.md, b.md"),
    # Anything else: its first text
    ("mcp:docs/lookup", {"topic": "starlette static files"}, "starlette static files"),
    ("unknown", {"n": 3}, ""),
    ("unknown", None, ""),
])
def test_a_call_is_summed_up_by_what_its_input_names(tool: str, tool_input: object,
                                                     line: str) -> None:
    assert summarize(tool, tool_input) == line


def test_a_long_line_is_cut_between_words_never_inside_one() -> None:
    secret = "sk-" + "a" * 60
    line = summarize("Bash", {"command": "echo " + "word " * 30 + secret})
    assert len(line) <= LINE_MAX and line.endswith("…") and "sk-" not in line
    assert summarize("Read", {"file_path": "/" + "d" * 300}).startswith("/ddd")
    assert first_line("\n\n  first   line \nsecond") == "first line"


def test_an_input_shown_whole_is_its_json_indented_or_its_text_as_it_is() -> None:
    assert shown_input('{"command": "ls", "n": [1]}') == \
        '{\n  "command": "ls",\n  "n": [\n    1\n  ]\n}'
    assert shown_input('{"cut": "short…') == '{"cut": "short…'  # the export's limit cut it
    assert shown_input("*** Begin Patch") == "*** Begin Patch"
