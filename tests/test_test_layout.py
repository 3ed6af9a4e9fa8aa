"""The suite's own layout, read from its source: no test imports a conftest.py (what tests share
is in tests/helpers.py), the `storage` fixture is defined once, the shared fixtures' path is built
in tests/helpers.py alone, and the markers are registered, each used (`slow` among them)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def suite_sources() -> list[Path]:
    """Every Python file of tests/, not the real clients' packages."""
    return sorted(path for path in TESTS.rglob("*.py") if "node_modules" not in path.parts)


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(tree: ast.Module) -> list[str]:
    """Each module an import statement names, `from . import x` as `.x`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.append(base)
            found += [f"{base}.{alias.name}" if node.module else f"{base}{alias.name}"
                      for alias in node.names]
    return found


def fixtures_named(tree: ast.Module, name: str) -> int:
    """How many functions called `name` the module decorates with pytest.fixture."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target) in ("pytest.fixture", "fixture"):
                    count += 1
    return count


def pytest_options() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        options = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    assert isinstance(options, dict)
    return options


def registered_markers() -> set[str]:
    markers = pytest_options()["markers"]
    assert isinstance(markers, list)
    return {str(line).split(":", 1)[0].strip() for line in markers}


def test_no_test_imports_a_conftest() -> None:
    offenders = [f"{path.relative_to(ROOT)}: {module}"
                 for path in suite_sources() for module in imported_modules(parsed(path))
                 if module.split(".")[-1] == "conftest"]
    assert offenders == []


def test_the_storage_fixture_is_defined_once_in_the_top_conftest() -> None:
    where = {str(path.relative_to(ROOT)): n for path in suite_sources()
             if (n := fixtures_named(parsed(path), "storage"))}
    assert where == {"tests/conftest.py": 1}


def test_the_shared_fixtures_path_is_built_in_the_helpers_alone() -> None:
    built = re.compile(r"""["']shared["']\s*/\s*["']fixtures["']""")
    where = [str(path.relative_to(ROOT)) for path in suite_sources()
             if built.search(path.read_text(encoding="utf-8"))]
    assert where == ["tests/helpers.py"]


def test_slow_is_registered_and_markers_must_be() -> None:
    assert "slow" in registered_markers()
    addopts = pytest_options()["addopts"]
    assert isinstance(addopts, str) and "--strict-markers" in addopts.split()


def test_every_registered_marker_is_used_by_some_test() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in suite_sources()
                     if path.name.startswith("test_"))
    unused = sorted(name for name in registered_markers()
                    if not re.search(rf"\bpytest\.mark\.{name}\b", text))
    assert unused == []


def test_make_test_fast_leaves_out_the_slow_tests_and_make_test_runs_them() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = {m.group(1): m.group(2) for m in
               re.finditer(r"^([\w-]+):[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.MULTILINE)}
    assert '-m "not slow and not e2e"' in targets["test-fast"]
    [run_all] = [line for line in targets["test"].splitlines() if "$(PYTEST)" in line]
    assert "-m \"" not in run_all  # every test, the slow ones and e2e among them
