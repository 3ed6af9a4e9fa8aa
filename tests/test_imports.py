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
    ("errors", "jsonwire", "clock", "durable", "config", "redact", "digest", "log"),
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
