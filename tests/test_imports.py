"""The house rules of DESIGN.md §2, read from the source: no module takes a `_private` name
from another, no import circle between modules (imports inside functions count), and no
package imports from a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "src" / "coding_os"

# DESIGN.md §2, bottom up: a module may import its own layer and those below it.
LAYERS = (
    ("errors", "jsonwire", "jsonbulk", "clock", "durable", "config", "redact", "digest",
     "log", "frozen"),
    ("storage", "git"),
    ("state", "adapters"),
    ("sessions", "checkpoints", "brain", "hosts"),
    ("runtime",),
    ("hooks", "jobs", "daemon", "integrations"),
    ("install", "launcher", "doctor", "trust", "api"),
    ("interfaces",),
)
# Entry points above every layer.
TOP = ("__init__", "__main__")


class Imports:
    """The modules of a package and, for each, the modules it imports (anywhere in it, but
    behind `if TYPE_CHECKING:`) and the private names it takes from others."""

    def __init__(self, root: Path, package: str) -> None:
        self.package = package
        self.modules: dict[str, Path] = {}
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            self.modules[".".join([package, *parts])] = path
        self.edges: dict[str, set[str]] = {name: set() for name in self.modules}
        self.private: list[str] = []
        for name, path in self.modules.items():
            self._read(name, path)

    def _owner(self, dotted: str) -> str | None:
        while dotted and dotted not in self.modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def _read(self, name: str, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._edge(name, alias.name)
                continue
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in self.modules:
                    self._edge(name, full)
                    continue
                target = self._edge(name, base)
                if target is not None and target != name and alias.name.startswith("_") \
                        and not alias.name.startswith("__"):
                    self.private.append(f"{name} takes {alias.name} from {target}")

    def _edge(self, name: str, dotted: str) -> str | None:
        if not (dotted == self.package or dotted.startswith(self.package + ".")):
            return None
        target = self._owner(dotted)
        if target is not None and target != name:
            self.edges[name].add(target)
        return target

    def circles(self) -> list[list[str]]:
        """Each set of modules that import each other, directly or around (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []

        def visit(node: str) -> None:
            index[node] = low[node] = len(index)
            stack.append(node)
            on_stack.add(node)
            for other in sorted(self.edges[node]):
                if other not in index:
                    visit(other)
                    low[node] = min(low[node], low[other])
                elif other in on_stack:
                    low[node] = min(low[node], index[other])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

        for node in sorted(self.edges):
            if node not in index:
                visit(node)
        return found

    def upward(self) -> list[str]:
        """Imports of a module from a package of a layer above its own."""
        def layer(module: str) -> int | None:
            head = module.split(".")[1] if "." in module else "__init__"
            if head in TOP:
                return None
            for number, names in enumerate(LAYERS):
                if head in names:
                    return number
            raise AssertionError(f"{module} belongs to no layer of DESIGN.md §2")

        wrong = []
        for module, targets in sorted(self.edges.items()):
            own = layer(module)
            for target in sorted(targets):
                theirs = layer(target)
                if own is not None and theirs is not None and theirs > own:
                    wrong.append(f"{module} (layer {own}) imports {target} (layer {theirs})")
        return wrong


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, but those under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) \
                    and child.test.id == "TYPE_CHECKING":
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child)

    walk(tree)
    return found


@pytest.fixture(scope="module")
def imports() -> Imports:
    return Imports(SOURCE, "coding_os")


def test_no_module_takes_a_private_name_from_another(imports: Imports) -> None:
    assert imports.private == []


def test_no_modules_import_each_other_even_from_inside_a_function(imports: Imports) -> None:
    assert imports.circles() == []


def test_no_package_imports_from_a_layer_above_its_own(imports: Imports) -> None:
    assert imports.upward() == []


def test_the_checks_find_a_circle_a_private_name_and_an_upward_import(tmp_path: Path) -> None:
    package = tmp_path / "coding_os"
    (package / "state").mkdir(parents=True)
    (package / "hooks").mkdir()
    for init in (package, package / "state", package / "hooks"):
        (init / "__init__.py").write_text("", encoding="utf-8")
    (package / "state" / "a.py").write_text(
        "def f():\n    from coding_os.state import b\n", encoding="utf-8")
    (package / "state" / "b.py").write_text(
        "from coding_os.state.a import f\nfrom coding_os.hooks.c import _helper\n",
        encoding="utf-8")
    (package / "hooks" / "c.py").write_text(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from coding_os.state.a import f\n"
        "def _helper():\n    pass\n", encoding="utf-8")
    made_up = Imports(package, "coding_os")
    assert made_up.circles() == [["coding_os.state.a", "coding_os.state.b"]]
    assert made_up.private == ["coding_os.state.b takes _helper from coding_os.hooks.c"]
    assert made_up.upward() == ["coding_os.state.b (layer 2) imports coding_os.hooks.c (layer 5)"]


# --- the protocol's names (issue 26, item 4) --------------------------------------------------
# No event or op name of §7 is written as a string outside runtime/wire.py, which defines them,
# and the code that reads an agent's own wire, where the same words name the agent's things.
# A name with an underscore (tool_call, user_input…) is refused anywhere. One that is a plain
# word (error, native, resume, fork…) is refused where it names an event or op: as the "type"
# of a dict, compared with a type read (`x["type"]`, `x.get("type")`, `x.type`, or a name
# given one), or as the type handed to a function whose first parameter is typed as one of
# wire's type names (EventLog.append, BackendEvent, the core's _record…).

WIRE_TYPE_NAMES = ("EventType", "BackendEventType", "OpType")
# Files (or folders, ending in "/") that may write some of the names, and which.
WIRE_EXEMPT: dict[str, frozenset[str] | None] = {
    # The definition.
    "runtime/wire.py": None,
    # The agents' own formats: Claude Code's transcripts (tool_use/tool_result blocks), Codex's
    # rollouts (event_msg task_started), Gemini's chats (tool calls).
    "adapters/claude/": None,
    "adapters/codex/": None,
    "adapters/gemini/": None,
    # Claude Code's stream-json: a user message's tool_result content blocks.
    "runtime/backends/claude.py": frozenset({"tool_result"}),
    # ACP's session/update kinds: the agent's tool_call.
    "runtime/backends/acp.py": frozenset({"tool_call"}),
    # The transcript's entry types of §4.1 (and the turns shown from them) share two names;
    # sessions/transcript.py's ENTRY_FIELDS is their table. Claude Code's blocks as above.
    "sessions/transcript.py": frozenset({"tool_call", "tool_result"}),
    "sessions/export.py": frozenset({"tool_call", "tool_result"}),
    "sessions/summaries.py": frozenset({"tool_call", "tool_result"}),
    "sessions/sidechains.py": frozenset({"tool_call", "tool_result"}),
    "integrations/openai_agents.py": frozenset({"tool_call", "tool_result"}),
    # A Codex rollout's event_msg of type task_started (the turn's start in Codex's own log).
    "sessions/conversation.py": frozenset({"task_started"}),
}


def _is_type_read(node: ast.AST, typed_names: set[str]) -> bool:
    """`x["type"]`, `x.get("type"…)`, `x.type`, or a name given one of those."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "type"
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and bool(node.args) and isinstance(node.args[0], ast.Constant) \
            and node.args[0].value == "type"
    if isinstance(node, ast.Attribute):
        return node.attr == "type"
    return isinstance(node, ast.Name) and node.id in typed_names


def _constants(node: ast.AST) -> list[ast.Constant]:
    """A string constant, or those of a tuple, list or set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [element for element in node.elts
                if isinstance(element, ast.Constant) and isinstance(element.value, str)]
    return []


def _annotation_names(node: ast.AST | None) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))} if node is not None else set()


def wire_typed_callables(trees: dict[str, ast.Module]) -> dict[str, int]:
    """The functions and classes whose first parameter (or field) is typed as one of wire's
    type names: name -> the position of that parameter among the call's arguments."""
    found: dict[str, int] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = node.args.posonlyargs + node.args.args
                if params and params[0].arg in ("self", "cls"):
                    params = params[1:]
                if params and _annotation_names(params[0].annotation) & set(WIRE_TYPE_NAMES):
                    found[node.name] = 0
            elif isinstance(node, ast.ClassDef):
                fields = [s for s in node.body if isinstance(s, ast.AnnAssign)]
                if fields and _annotation_names(fields[0].annotation) & set(WIRE_TYPE_NAMES):
                    found[node.name] = 0
    return found


def wire_names_written(root: Path, names: set[str],
                       exempt: dict[str, frozenset[str] | None]) -> list[str]:
    """Every string constant in the modules under `root` that is one of the protocol's `names`
    where it names an event or op (see above), but those `exempt` allows: "path:line: name"."""
    trees = {path.relative_to(root).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
             for path in sorted(root.rglob("*.py"))}
    callables = wire_typed_callables(trees)
    found: set[tuple[str, int, str]] = set()
    for relative, tree in trees.items():
        allowed: frozenset[str] = frozenset()
        for place, which in exempt.items():
            if relative == place or (place.endswith("/") and relative.startswith(place)):
                allowed = frozenset(names) if which is None else allowed | which
        typed_names = {target.id for node in ast.walk(tree)
                       if isinstance(node, (ast.Assign, ast.NamedExpr))
                       and _is_type_read(node.value, set())
                       for target in (node.targets if isinstance(node, ast.Assign)
                                      else [node.target])
                       if isinstance(target, ast.Name)}
        flagged: list[ast.Constant] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and "_" in node.value:
                flagged.append(node)  # a name with an underscore: anywhere
            elif isinstance(node, ast.Dict):
                flagged += [value for key, value in zip(node.keys, node.values)
                            if isinstance(key, ast.Constant) and key.value == "type"
                            for value in _constants(value)]
            elif isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_type_read(side, typed_names) for side in sides):
                    flagged += [c for side in sides for c in _constants(side)]
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else \
                    func.attr if isinstance(func, ast.Attribute) else None
                if called in callables and len(node.args) > callables[called]:
                    flagged += _constants(node.args[callables[called]])
        for constant in flagged:
            if constant.value in names and constant.value not in allowed:
                found.add((relative, constant.lineno, constant.value))
    return [f"{relative}:{line}: {name}" for relative, line, name in sorted(found)]


def test_no_event_or_op_name_is_a_string_outside_the_wire_and_the_agents_own_formats() -> None:
    from coding_os.runtime import wire

    names = set(wire.EVENT_TYPES) | set(wire.OP_TYPES)
    assert wire_names_written(SOURCE, names, WIRE_EXEMPT) == []


def test_the_wire_rule_finds_names_where_they_name_an_event_or_op_and_nowhere_else(
        tmp_path: Path) -> None:
    package = tmp_path / "coding_os"
    (package / "adapters" / "claude").mkdir(parents=True)
    (package / "adapters" / "claude" / "blocks.py").write_text(
        'KIND = "tool_result"\n', encoding="utf-8")
    (package / "sessions").mkdir()
    (package / "sessions" / "entries.py").write_text(
        'ROLES = ("tool_call", "error")\nOTHER = "task_started"\n', encoding="utf-8")
    (package / "ui.py").write_text(
        "from coding_os.runtime.wire import EventType\n"
        "def emit(kind: EventType, fields: dict) -> None: ...\n"
        "def show(msg: dict, source: str, log: dict) -> None:\n"
        '    if msg["type"] == "native":\n'
        "        return\n"
        '    kind = msg.get("type")\n'
        '    if kind in ("resume", "other"):\n'
        "        return\n"
        '    emit("fork", {})\n'
        '    send({"type": "interrupt", "error": "not an op"})\n'
        '    calls = [m for m in [msg] if m.type != "agent_message"]\n'
        '    if source == "resume" or log["native"]:\n'
        '        argv = ["codex", "fork", "error"]\n',
        encoding="utf-8")
    names = {"tool_call", "tool_result", "task_started", "agent_message", "error", "native",
             "resume", "fork", "interrupt"}
    exempt: dict[str, frozenset[str] | None] = {
        "adapters/claude/": None, "sessions/entries.py": frozenset({"tool_call"})}
    assert wire_names_written(package, names, exempt) == [
        "sessions/entries.py:2: task_started",
        "ui.py:4: native",
        "ui.py:7: resume",
        "ui.py:9: fork",
        "ui.py:10: interrupt",
        "ui.py:11: agent_message",
    ]


# --- coding_os.api (issue 26, item 1) ----------------------------------------------------------
# Every function of the facade is a `Project` and one call into a layer (DESIGN.md §2: no domain
# logic of its own): at most API_STATEMENTS statements, its docstring and its imports not
# counted (a lambda is an expression: a call's argument), and no loop and no try, which are a
# layer's work. `__init__` may only keep its arguments.

API_STATEMENTS = 6


def facade_functions(source: Path) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method of `coding_os.api` (a module or a package) under `source`."""
    files = [source / "api.py"] if (source / "api.py").exists() else []
    files += sorted((source / "api").rglob("*.py")) if (source / "api").is_dir() else []
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{path.relative_to(source)}:{node.lineno} {node.name}", node))
    return found


def statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The statements of `function`, nested ones included, but its docstring and imports."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return [node for part in body for node in ast.walk(part)
            if isinstance(node, ast.stmt) and not isinstance(node, (ast.Import, ast.ImportFrom))]


def keeps_its_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An `__init__` whose statements only set attributes of `self`."""
    return function.name == "__init__" and all(
        isinstance(node, (ast.Assign, ast.AnnAssign))
        and all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == "self"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
        for node in statements(function))


def logic_in_the_facade(source: Path) -> list[str]:
    """The functions of the facade too long for a `Project` and one call, or with a loop or a
    try."""
    found = []
    for where, function in facade_functions(source):
        body = statements(function)
        if len(body) > API_STATEMENTS and not keeps_its_arguments(function):
            found.append(f"{where}: {len(body)} statements")
        kinds = sorted({type(node).__name__ for node in body
                        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.Try))})
        if kinds:
            found.append(f"{where}: {', '.join(kinds)}")
    return found


def test_every_function_of_the_api_is_a_project_and_one_call_into_a_layer() -> None:
    assert facade_functions(SOURCE)
    assert logic_in_the_facade(SOURCE) == []


def test_the_facade_check_counts_nested_statements_but_not_docstrings_imports_or_kept_arguments(
        tmp_path: Path) -> None:
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "a.py").write_text(
        'def thin(x):\n    """Doc."""\n    import os\n    from os import path\n'
        '    p = Project(x)\n    return call(p, lambda: [y for y in x])\n'
        "def long(x):\n    if x:\n        a = 1\n        b = 2\n    else:\n        c = 3\n"
        "    d = 4\n    e = 5\n    return a\n"
        "def looping(x):\n    for y in x:\n        pass\n"
        "class P:\n    def __init__(self, a, b, c, d, e, f, g):\n"
        + "".join(f"        self.{n} = {n}\n" for n in "abcdefg")
        + "    def busy(self):\n" + "".join(f"        self.{n} = 1\n" for n in "abcdefg"),
        encoding="utf-8")
    assert logic_in_the_facade(tmp_path) == [
        "api/a.py:7 long: 7 statements", "api/a.py:16 looping: For",
        "api/a.py:28 busy: 7 statements"]
