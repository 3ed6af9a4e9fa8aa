"""`coding_os.api` is one package of modules by concept, re-exported whole: every public name of
every module of it is in `api.__all__` and is the same object as `coding_os.api`'s."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from coding_os import api


def api_modules() -> list[ModuleType]:
    return [importlib.import_module(f"coding_os.api.{info.name}")
            for info in pkgutil.iter_modules(api.__path__)]


def defined_names(module: ModuleType) -> set[str]:
    """The public names a module defines itself: its functions, classes and constants."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in names if not name.startswith("_") and name != "TYPE_CHECKING"}


def test_every_public_name_of_every_api_module_is_exported_by_the_package() -> None:
    modules = api_modules()
    assert {m.__name__.rpartition(".")[2] for m in modules} >= {
        "project", "state", "sessions", "checkpoints", "brain", "jobs", "runs", "hosts"}
    exported: list[str] = []
    for module in modules:
        missing = defined_names(module) - set(module.__all__)
        assert not missing, f"{module.__name__} leaves {sorted(missing)} out of its __all__"
        for name in module.__all__:
            assert getattr(api, name) is getattr(module, name), f"{module.__name__}.{name}"
        exported.extend(module.__all__)
    assert sorted(api.__all__) == sorted(exported)
    assert len(set(api.__all__)) == len(api.__all__)  # no name in two modules


def test_a_star_import_gives_every_name_of_the_facade() -> None:
    names: dict[str, object] = {}
    exec("from coding_os.api import *", names)
    assert set(api.__all__) <= set(names)
