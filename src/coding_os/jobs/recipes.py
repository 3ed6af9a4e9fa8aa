"""Recipes (DESIGN.md §6): a YAML file that seeds a session with a prompt made from templates
and typed parameters, the subset of Goose's recipe format that fits cos.

    title: Fix a failing test
    description: Make one failing test pass without weakening it.
    instructions: You fix tests. Change the code under test, not the test.
    prompt: |
      The test {{ test }} fails with {{ runner }}. Its source:
      {{ source }}
    parameters:
      - {key: test, input_type: string, requirement: required}
      - {key: runner, input_type: select, requirement: optional, default: pytest,
         options: [pytest, unittest]}
      - {key: source, input_type: file, requirement: required}
    settings: {agent: claude, model: sonnet}

`load_recipe` reads and checks a file: a bounded regular file, YAML without aliases, the
templates parse, every parameter is used and every variable is a parameter. `render` checks the
values given for the parameters and renders the prompt: `instructions`, then a blank line,
then `prompt`. `seed_ref` is what a session records of its recipe (`{path, sha256, version,
params, checkpoint}`), `session_seed` reads it back from a session's events log, and
`restore_seed_tree` puts a seed's checkpoint back into a fresh git worktree for
`cos resume --rerun`.

A recipe may come from a cloned repository (DESIGN.md §11): templates run in Jinja's sandbox
with no loader (no `include`, `import` or `extends` reaches a file), an undefined name is an
error, the output is bounded, and a `file` parameter is read only inside the project. The
sandbox bounds what a template may call, not what it may allocate or how long it may loop
(`"%1500000000s"|format("")`, `l.extend(l)` in a loop, two nested loops over a million): so
the templates render in a process of their own, a fork of this one (or a fresh interpreter
when this one runs threads), limited to MAX_RENDER_BYTES of address space beyond what it
inherits and killed after RENDER_SECONDS. A recipe
names no program: its `settings.agent` is `claude` or `codex`; `exec` and `python:` agents come
from the command line only.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from coding_os.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from coding_os.runtime.core import SessionSettings
    from coding_os.state.tiers import Tiers

__all__ = [
    "INPUT_TYPES",
    "REQUIREMENTS",
    "RECIPE_AGENTS",
    "IGNORED_KEYS",
    "MAX_RECIPE_BYTES",
    "MAX_FILE_PARAM_BYTES",
    "MAX_PROMPT_CHARS",
    "MAX_RENDER_BYTES",
    "RENDER_SECONDS",
    "RecipeError",
    "Parameter",
    "Recipe",
    "Rendered",
    "load_recipe",
    "parse_params",
    "render",
    "render_child",
    "seed_ref",
    "valid_seed_ref",
    "file_sha256",
    "restore_seed_tree",
    "session_seed",
    "RESUME_MODES",
    "RecipeRun",
    "prepare_run",
    "foreground_run",
    "plan_rerun",
    "rerun_run",
]

# How `cos resume` runs a recipe session again: its events replayed, or the recipe run anew.
RESUME_MODES = ("replay", "rerun")

INPUT_TYPES = ("string", "number", "boolean", "file", "select")
REQUIREMENTS = ("required", "optional")
RECIPE_AGENTS = ("claude", "codex")
# Top-level keys of Goose's format that cos does not use: read and ignored, so a Goose recipe
# loads. Any other unknown key is refused (a typo such as `promt` must not go unnoticed).
IGNORED_KEYS = ("version", "author", "extensions", "activities", "response", "retry",
                "sub_recipes", "context")
KNOWN_KEYS = ("title", "description", "instructions", "prompt", "parameters", "settings")
# Goose's settings that name its own provider: ignored; `agent` and `model` are cos's.
IGNORED_SETTINGS = ("goose_provider", "goose_model", "temperature")
PARAMETER_KEYS = ("key", "input_type", "requirement", "default", "options", "description")
MAX_RECIPE_BYTES = 1 << 20
MAX_FILE_PARAM_BYTES = 1 << 20
MAX_PROMPT_CHARS = 1 << 20
# What rendering a recipe's templates may take beyond what the process maps already, and how
# long: an ordinary recipe renders in a millisecond and a few MiB.
MAX_RENDER_BYTES = 256 << 20
RENDER_SECONDS = 5.0
MAX_NODES = 10_000
MAX_DEPTH = 32
BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


class RecipeError(InvalidInput):
    """A recipe, or the values given for its parameters, cannot be used (one line; exit 2)."""


@dataclass(frozen=True)
class Parameter:
    """One declared parameter of a recipe."""

    key: str
    input_type: str
    requirement: str
    default: str | None = None
    options: tuple[str, ...] = ()
    description: str | None = None


@dataclass(frozen=True)
class Recipe:
    """A loaded, checked recipe; `path` is absolute and `sha256` is of the file's bytes."""

    path: str
    sha256: str
    version: str | None
    title: str
    description: str | None
    instructions: str | None
    prompt: str | None
    parameters: tuple[Parameter, ...]
    agent: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Rendered:
    """A recipe rendered with values: the prompt text, the parameters as given (a `file` one
    as its path relative to the project) and as typed values."""

    recipe: Recipe
    text: str
    params: dict[str, str]
    values: dict[str, Any] = field(default_factory=dict)


def file_sha256(path: str) -> str:
    """The sha256 (hex) of the recipe file at `path`, read as `load_recipe` reads it.

    Raises:
        RecipeError: it is missing, not a regular file, or too large.
    """
    return hashlib.sha256(_read_recipe_bytes(path)).hexdigest()


def _read_recipe_bytes(path: str) -> bytes:
    from coding_os import durable

    try:
        raw = durable.read_regular(path, MAX_RECIPE_BYTES)
    except InvalidInput as exc:
        raise RecipeError(f"recipe {path}: {exc}") from None
    except OSError as exc:
        raise RecipeError(f"cannot read recipe {path}: {exc.strerror or exc}") from None
    if raw is None:
        raise RecipeError(f"no recipe {path}")
    return raw


def _parse_yaml(text: str, path: str) -> object:
    """The YAML document of a recipe: safe types only, no aliases, bounded nesting and size.
    The events are checked before anything is built."""
    import yaml

    try:
        nodes = depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.AliasEvent):
                raise RecipeError(f"recipe {path} (line {line}): aliases are not allowed")
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    raise RecipeError(f"recipe {path} (line {line}): more than {MAX_NODES} "
                                      "values")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise RecipeError(f"recipe {path} (line {line}): nested more than "
                                      f"{MAX_DEPTH} levels deep")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise RecipeError(f"recipe {path}{where}: not valid YAML") from None


def _text(data: Mapping[str, object], key: str, path: str, *, required: bool = False
          ) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise RecipeError(f"recipe {path}: `{key}` is required")
        return None
    if not isinstance(value, str):
        raise RecipeError(f"recipe {path}: `{key}` must be text, not {type(value).__name__}")
    return value


def _scalar(value: object) -> str:
    """A YAML scalar given for a parameter as the text a user would type for it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parameter(raw: object, number: int, path: str) -> Parameter:
    where = f"recipe {path}: parameter {number + 1}"
    if not isinstance(raw, dict):
        raise RecipeError(f"{where} must be a mapping")
    unknown = sorted(str(k) for k in raw if k not in PARAMETER_KEYS)
    if unknown:
        raise RecipeError(f"{where}: unknown field {unknown[0]!r} "
                          f"(expected {', '.join(PARAMETER_KEYS)})")
    key = raw.get("key")
    if not isinstance(key, str) or not key.isidentifier() or key.startswith("_"):
        raise RecipeError(f"{where}: `key` must be a name (letters, digits, _; not starting "
                          f"with _ or a digit), not {key!r}")
    where = f"recipe {path}: parameter {key!r}"
    input_type = raw.get("input_type", "string")
    if input_type not in INPUT_TYPES:
        raise RecipeError(f"{where}: input_type must be one of {', '.join(INPUT_TYPES)}, "
                          f"not {input_type!r}")
    requirement = raw.get("requirement", "required")
    if requirement not in REQUIREMENTS:
        raise RecipeError(f"{where}: requirement must be required or optional, "
                          f"not {requirement!r}")
    options: tuple[str, ...] = ()
    if input_type == "select":
        raw_options = raw.get("options")
        if (not isinstance(raw_options, list) or not raw_options
                or any(isinstance(o, (dict, list)) or o is None for o in raw_options)):
            raise RecipeError(f"{where}: a select needs `options`, a list of values")
        options = tuple(_scalar(o) for o in raw_options)
    elif raw.get("options") is not None:
        raise RecipeError(f"{where}: `options` is for a select parameter")
    default = raw.get("default")
    if isinstance(default, (dict, list)):
        raise RecipeError(f"{where}: `default` must be a single value")
    default_text = None if default is None else _scalar(default)
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise RecipeError(f"{where}: `description` must be text")
    parameter = Parameter(key=key, input_type=str(input_type), requirement=str(requirement),
                          default=default_text, options=options, description=description)
    if default_text is not None and input_type != "file":
        _typed(parameter, default_text, f"{where}: default")
    return parameter


def load_recipe(path: str) -> Recipe:
    """Read and check the recipe at `path` (relative to the working directory).

    Raises:
        RecipeError: the file is missing, not a regular file, larger than MAX_RECIPE_BYTES, not
            UTF-8, not valid YAML (or holds aliases), not a mapping; a required field is
            missing; a field, a parameter or a setting is malformed or unknown; a template does
            not parse; a parameter is never used or a template uses a name that is no parameter.
    """
    path = os.path.abspath(path)
    raw = _read_recipe_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RecipeError(f"recipe {path}: not UTF-8 text") from None
    data = _parse_yaml(text, path)
    if not isinstance(data, dict):
        raise RecipeError(f"recipe {path}: expected a mapping at the top level")
    unknown = sorted(str(k) for k in data if k not in KNOWN_KEYS + IGNORED_KEYS)
    if unknown:
        raise RecipeError(f"recipe {path}: unknown field {unknown[0]!r} "
                          f"(expected {', '.join(KNOWN_KEYS)})")
    title = _text(data, "title", path, required=True)
    instructions = _text(data, "instructions", path)
    prompt = _text(data, "prompt", path)
    if not (instructions or prompt):
        raise RecipeError(f"recipe {path}: `instructions` or `prompt` is required")
    raw_params = data.get("parameters") or []
    if not isinstance(raw_params, list):
        raise RecipeError(f"recipe {path}: `parameters` must be a list")
    parameters = tuple(_parameter(p, n, path) for n, p in enumerate(raw_params))
    keys = [p.key for p in parameters]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise RecipeError(f"recipe {path}: parameter {twice[0]!r} is declared twice")
    agent, model = _settings(data.get("settings"), path)
    version = data.get("version")
    recipe = Recipe(path=path, sha256=hashlib.sha256(raw).hexdigest(),
                    version=None if version is None else _scalar(version),
                    title=str(title), description=_text(data, "description", path),
                    instructions=instructions, prompt=prompt, parameters=parameters,
                    agent=agent, model=model)
    _check_variables(recipe)
    return recipe


def _settings(raw: object, path: str) -> tuple[str | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        raise RecipeError(f"recipe {path}: `settings` must be a mapping")
    unknown = sorted(str(k) for k in raw if k not in ("agent", "model") + IGNORED_SETTINGS)
    if unknown:
        raise RecipeError(f"recipe {path}: unknown setting {unknown[0]!r} (expected agent, "
                          "model)")
    agent, model = raw.get("agent"), raw.get("model")
    if agent is not None and agent not in RECIPE_AGENTS:
        raise RecipeError(f"recipe {path}: settings.agent must be one of "
                          f"{', '.join(RECIPE_AGENTS)}, not {str(agent)[:80]!r} (exec and "
                          "python agents are named on the command line: --agent)")
    if model is not None and not isinstance(model, str):
        raise RecipeError(f"recipe {path}: settings.model must be text")
    return agent, model


class _Sandbox:
    """Jinja's sandbox with no loader, StrictUndefined, and `*`/`**` bounded so one expression
    cannot build a string larger than the output may be."""

    _environment: Any = None

    @classmethod
    def environment(cls) -> Any:
        if cls._environment is None:
            from jinja2 import StrictUndefined
            from jinja2.exceptions import SecurityError
            from jinja2.sandbox import SandboxedEnvironment

            class Bounded(SandboxedEnvironment):
                intercepted_binops = frozenset(["*", "**"])

                def call_binop(self, context: Any, operator: str, left: Any,
                               right: Any) -> Any:
                    if operator == "**" and isinstance(right, (int, float)) and right > 64:
                        raise SecurityError("an exponent above 64")
                    if operator == "*":
                        for seq, times in ((left, right), (right, left)):
                            if (isinstance(seq, (str, list, tuple)) and isinstance(times, int)
                                    and len(seq) * times > MAX_PROMPT_CHARS):
                                raise SecurityError("a repetition longer than the prompt may "
                                                    "be")
                    return super().call_binop(context, operator, left, right)

            cls._environment = Bounded(undefined=StrictUndefined, autoescape=False,
                                       keep_trailing_newline=True)
        return cls._environment


def _templates(recipe: Recipe) -> list[tuple[str, str]]:
    return [(name, source) for name, source in (("instructions", recipe.instructions),
                                                ("prompt", recipe.prompt)) if source]


def _check_variables(recipe: Recipe) -> None:
    """The templates parse, every parameter is used and every variable is a parameter. Finding
    the variables compiles the templates, and Jinja's compiler folds constants (it runs
    `"%1500000000s"|format("")`): so it is done in the bounded renderer process too."""
    answer = _bounded(recipe.path, {"kind": "variables", "templates": _templates(recipe)})
    used = {str(name) for name in answer.get("used") or ()}
    declared = {p.key for p in recipe.parameters}
    undefined = sorted(used - declared)
    if undefined:
        raise RecipeError(f"recipe {recipe.path}: {{{{ {undefined[0]} }}}} is used but is no "
                          "parameter (declare it under `parameters`)")
    unused = [p.key for p in recipe.parameters if p.key not in used]
    if unused:
        raise RecipeError(f"recipe {recipe.path}: parameter {unused[0]!r} is never used in "
                          "instructions or prompt")


def parse_params(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`K=V` strings (from `--param`) as a mapping.

    Raises:
        RecipeError: a pair without `=`, an empty key, or a key given twice.
    """
    params: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RecipeError(f"--param takes KEY=VALUE, not {pair[:80]!r}")
        if key in params:
            raise RecipeError(f"--param {key} is given twice")
        params[key] = value
    return params


def _typed(parameter: Parameter, value: str, where: str) -> object:
    kind = parameter.input_type
    if kind == "number":
        try:
            return int(value)
        except ValueError:
            pass
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if number != number or number in (float("inf"), float("-inf")):
            raise RecipeError(f"{where}: {value[:80]!r} is not a number")
        return number
    if kind == "boolean":
        flag = BOOLEANS.get(value.strip().lower())
        if flag is None:
            raise RecipeError(f"{where}: {value[:80]!r} is not a boolean "
                              "(true/false, yes/no, 1/0)")
        return flag
    if kind == "select" and value not in parameter.options:
        raise RecipeError(f"{where}: {value[:80]!r} is not one of "
                          f"{', '.join(parameter.options)}")
    return value


def _read_file_param(parameter: Parameter, value: str, cwd: str, project: str
                     ) -> tuple[str, str]:
    """The text of the file a `file` parameter names and its path relative to `project`."""
    from coding_os import durable

    where = f"--param {parameter.key}"
    root = os.path.realpath(project)
    full = os.path.realpath(os.path.join(cwd, value))
    if os.path.commonpath([root, full]) != root:
        raise RecipeError(f"{where}: {value[:200]!r} is outside the project {root}")
    relative = os.path.relpath(full, root)
    if relative.split(os.sep)[0] in (".git", ".coding-os"):
        raise RecipeError(f"{where}: {value[:200]!r} is inside {relative.split(os.sep)[0]}")
    try:
        raw = durable.read_regular(full, MAX_FILE_PARAM_BYTES)
    except InvalidInput as exc:
        raise RecipeError(f"{where}: {exc}") from None
    except OSError as exc:
        raise RecipeError(f"{where}: cannot read {value[:200]!r}: {exc.strerror or exc}") \
            from None
    if raw is None:
        raise RecipeError(f"{where}: no file {value[:200]!r}")
    try:
        return raw.decode("utf-8"), relative
    except UnicodeDecodeError:
        raise RecipeError(f"{where}: {value[:200]!r} is not UTF-8 text") from None


def render(recipe: Recipe, params: Mapping[str, str], *, cwd: str | None = None,
           project: str | None = None) -> Rendered:
    """The prompt of `recipe` with `params` (text as typed on the command line): the rendered
    `instructions`, a blank line, the rendered `prompt`. A `file` parameter is read relative to
    `cwd` (default: here) and must be inside `project` (default: `cwd`). An optional parameter
    given no value and with no default is the empty text. The templates render in a process
    of their own, bounded in memory (MAX_RENDER_BYTES) and time (RENDER_SECONDS).

    Raises:
        RecipeError: an unknown key, a missing required parameter, a value that is not of its
            type (number, boolean, one of a select's options), a file outside the project, not
            a regular file, too large or not UTF-8; a template error while rendering; a prompt
            longer than MAX_PROMPT_CHARS, or holding a lone surrogate; rendering that needs more
            memory or time than its bounds.
    """
    cwd = os.path.abspath(cwd or os.getcwd())
    project = project or cwd
    declared = {p.key: p for p in recipe.parameters}
    unknown = sorted(k for k in params if k not in declared)
    if unknown:
        expected = ", ".join(declared) or "none"
        raise RecipeError(f"--param {unknown[0][:80]}: the recipe has no such parameter "
                          f"(its parameters: {expected})")
    given: dict[str, str] = {}
    values: dict[str, Any] = {}
    for parameter in recipe.parameters:
        value = params.get(parameter.key, parameter.default)
        if value is None:
            if parameter.requirement == "required":
                raise RecipeError(f"--param {parameter.key} is required"
                                  + (f" ({parameter.description})"
                                     if parameter.description else ""))
            values[parameter.key] = ""
            continue
        if parameter.input_type == "file":
            values[parameter.key], given[parameter.key] = _read_file_param(
                parameter, value, cwd, project)
        else:
            values[parameter.key] = _typed(parameter, value, f"--param {parameter.key}")
            given[parameter.key] = value
    parts = _render_bounded(recipe.path, _templates(recipe), values)
    text = "\n\n".join(part.strip("\n") for part in parts)
    if len(text) > MAX_PROMPT_CHARS:
        raise RecipeError(f"recipe {recipe.path}: the prompt is longer than "
                          f"{MAX_PROMPT_CHARS} characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # "\ud800" in a template: no agent can take it
        raise RecipeError(f"recipe {recipe.path}: the prompt holds a lone surrogate "
                          f"(\\u{ord(text[exc.start]):04x}), which is no text") from None
    if not text.strip():
        raise RecipeError(f"recipe {recipe.path}: the prompt is empty with these parameters")
    return Rendered(recipe=recipe, text=text, params=given, values=values)


def _used_names(recipe_path: str, name: str, source: str) -> set[str]:
    """The variables `source` reads that it does not set itself.

    Raises:
        RecipeError: it does not parse, or nests too deeply for Jinja's parser.
    """
    from jinja2 import TemplateSyntaxError, meta

    try:
        return meta.find_undeclared_variables(_Sandbox.environment().parse(source))
    except TemplateSyntaxError as exc:
        raise RecipeError(f"recipe {recipe_path}: {name} (line {exc.lineno}): "
                          f"{exc.message}") from None
    except RecursionError:  # Jinja's parser recurses: ( nested a hundred times is enough
        raise RecipeError(f"recipe {recipe_path}: {name} nests too deeply") from None
    except MemoryError:
        raise RecipeError(f"recipe {recipe_path}: {name} needs more than "
                          f"{MAX_RENDER_BYTES >> 20} MiB of memory to compile") from None


def _render_one(recipe_path: str, name: str, source: str, values: Mapping[str, Any]) -> str:
    """`source` rendered with `values` in the sandbox, its output bounded as it is made."""
    from jinja2 import TemplateError

    pieces: list[str] = []
    size = 0
    try:
        for piece in _Sandbox.environment().from_string(source).generate(**values):
            size += len(piece)
            if size > MAX_PROMPT_CHARS:
                raise RecipeError(f"recipe {recipe_path}: {name} renders longer than "
                                  f"{MAX_PROMPT_CHARS} characters")
            pieces.append(piece)
    except TemplateError as exc:
        message = " ".join(str(exc).split())[:200]
        raise RecipeError(f"recipe {recipe_path}: {name}: {message}") from None
    except MemoryError:
        raise RecipeError(f"recipe {recipe_path}: {name} needs more than "
                          f"{MAX_RENDER_BYTES >> 20} MiB of memory to render") from None
    except RecursionError:
        raise RecipeError(f"recipe {recipe_path}: {name} nests or recurses too deeply") \
            from None
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise RecipeError(f"recipe {recipe_path}: {name}: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]}") from None
    return "".join(pieces)


def _answer(job: Mapping[str, Any]) -> bytes:
    """What a renderer process sends back for `job` (`path`, `templates`, and `kind`: render
    with `values`, or find the `variables`): the rendered templates (`parts`) or the variables
    they read (`used`), or the one line that refuses them (`error`), as ASCII JSON."""
    import json

    answer: dict[str, object]
    try:
        if job["kind"] == "variables":
            answer = {"used": sorted(set().union(*(
                _used_names(job["path"], name, source) for name, source in job["templates"])))}
        else:
            answer = {"parts": [_render_one(job["path"], name, source, job["values"])
                                for name, source in job["templates"]]}
    except RecipeError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - Jinja failing on odd input: said in one line
        answer = {"error": f"recipe {job['path']}: its templates cannot be rendered: "
                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
    return json.dumps(answer).encode("ascii")


def _bound_this_process(seconds: float, memory: int) -> None:
    """Limit the renderer process: `memory` bytes of address space beyond what it maps now,
    and a little more processor time than `seconds` (the wall-clock bound is its parent's; this
    one holds if the parent is gone)."""
    import math
    import resource

    def lower(kind: int, limit: int) -> None:
        soft, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, soft)
        resource.setrlimit(kind, (limit, limit))

    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = None  # no /proc: only the time bound and the output bound hold
    if mapped is not None:
        lower(resource.RLIMIT_AS, mapped + memory)
    lower(resource.RLIMIT_CPU, math.ceil(seconds) + 1)


def render_child() -> None:
    """The renderer process `render` starts when its own process runs threads: reads a job
    (JSON: `path`, `templates`, `values`, `seconds`, `memory`) on stdin, bounds itself, and
    writes its answer on stdout."""
    import json

    job = json.loads(sys.stdin.buffer.read())
    _bound_this_process(job["seconds"], job["memory"])
    _Sandbox.environment()
    sys.stdout.buffer.write(_answer(job))
    sys.stdout.buffer.flush()


def _bounded(path: str, job: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to `job` (see `_answer`) from a process of its own bounded in memory
    (MAX_RENDER_BYTES) and time (RENDER_SECONDS): a fork of this process when it runs no other
    thread (a few milliseconds), else a fresh interpreter (a fork would inherit locks other
    threads hold, and that costs about 60 ms, most of it importing Jinja).

    Raises:
        RecipeError: the templates are refused (its `error`), or the renderer went beyond a
            bound.
    """
    import json
    import threading

    job = {**job, "path": path, "seconds": RENDER_SECONDS, "memory": MAX_RENDER_BYTES}
    deadline = time.monotonic() + RENDER_SECONDS
    if threading.active_count() == 1 and threading.current_thread() is threading.main_thread():
        output, status = _in_fork(job, deadline)
    else:
        output, status = _in_interpreter(job, deadline)
    if status is None or status == -signal.SIGXCPU:
        raise RecipeError(f"recipe {path}: its templates take longer than "
                          f"{RENDER_SECONDS:g} seconds to render")
    try:
        answer = json.loads(output)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        raise RecipeError(answer["error"])
    if status != 0 or not isinstance(answer, dict):
        raise RecipeError(f"recipe {path}: its templates cannot be rendered within "
                          f"{MAX_RENDER_BYTES >> 20} MiB of memory and {RENDER_SECONDS:g} "
                          f"seconds (the renderer ended with status {status})")
    return answer


def _render_bounded(path: str, templates: list[tuple[str, str]],
                    values: Mapping[str, Any]) -> list[str]:
    """The rendered `templates` (as `_render_one`, in the bounded renderer process).

    Raises:
        RecipeError: as `_bounded`.
    """
    answer = _bounded(path, {"kind": "render", "templates": templates, "values": dict(values)})
    return [str(part) for part in answer.get("parts") or ()]


def _in_fork(job: Mapping[str, Any], deadline: float) -> tuple[bytes, int | None]:
    """Run `job` in a fork of this process: its answer and exit status (negative: the signal
    that ended it; None: killed at `deadline`)."""
    import gc

    import json  # noqa: F401 - imported here, once, not in each renderer
    import math  # noqa: F401
    import resource  # noqa: F401

    _Sandbox.environment()  # Jinja imported and set up once, here: each fork has it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the renderer: nothing of the parent's runs here, not even a finaliser
        code = 1
        try:
            gc.disable()
            os.close(read)
            signal.set_wakeup_fd(-1)
            _bound_this_process(job["seconds"], job["memory"])
            answer = memoryview(_answer(job))
            while answer:
                answer = answer[os.write(write, answer):]
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return _collect(pid, read, deadline)


def _collect(pid: int, read: int, deadline: float) -> tuple[bytes, int | None]:
    """Read the renderer `pid`'s answer from `read` until it ends or `deadline` passes (then
    it is killed); its answer and exit status, None when it was killed at the deadline."""
    import select

    chunks: list[bytes] = []
    ended = late = False
    poll = select.poll()
    poll.register(read, select.POLLIN)
    try:
        while not ended:
            left = deadline - time.monotonic()
            if left <= 0:
                late = True
                break
            if poll.poll(left * 1000):
                chunk = os.read(read, 1 << 16)
                chunks.append(chunk)
                ended = not chunk
    finally:  # also when this process is interrupted (Ctrl-C): no renderer outlives it
        os.close(read)
        if not ended:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    return b"".join(chunks), None if late else os.waitstatus_to_exitcode(status)


def _in_interpreter(job: Mapping[str, Any], deadline: float) -> tuple[bytes, int | None]:
    """Run `job` in a fresh interpreter (`render_child`): its answer and exit status (as
    `_in_fork`)."""
    import json
    import subprocess

    path = [entry for entry in sys.path if os.path.isabs(entry)]  # never the current directory
    code = (f"import sys; sys.path[:] = {path!r}; "
            "from coding_os.jobs.recipes import render_child; render_child()")
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", code],
                              input=json.dumps(job).encode("ascii"), capture_output=True,
                              timeout=max(deadline - time.monotonic(), 0.001), check=False)
    except subprocess.TimeoutExpired:
        return b"", None
    except OSError as exc:
        raise RecipeError(f"cannot start the recipe renderer {sys.executable}: "
                          f"{exc.strerror or exc}") from None
    return done.stdout, done.returncode


def seed_ref(recipe_path: str, params: Mapping[str, str], checkpoint: str | None, *,
             sha256: str | None = None, version: str | None = None) -> dict[str, object]:
    """What a session records of the recipe that seeded it: `{path, sha256, version, params,
    checkpoint}` (`path` absolute; `sha256` of the file as read now unless given).

    Raises:
        RecipeError: the file cannot be read (when `sha256` is not given).
    """
    path = os.path.abspath(recipe_path)
    return {"path": path, "sha256": sha256 or file_sha256(path), "version": version,
            "params": dict(params), "checkpoint": checkpoint}


def valid_seed_ref(value: object) -> dict[str, Any] | None:
    """`value` if it has the shape of a seed_ref (as read back from a log), else None."""
    if not isinstance(value, dict):
        return None
    params = value.get("params")
    if (not isinstance(value.get("path"), str) or not os.path.isabs(value["path"])
            or not isinstance(value.get("sha256"), str) or not isinstance(params, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
            or not isinstance(value.get("checkpoint"), (str, type(None)))):
        return None
    return value


def restore_seed_tree(tiers: Tiers, checkpoint: str, project: str,
                      worktree_id: str) -> dict[str, object]:
    """Make a fresh worktree of `project` (daemon.worktrees: `<project>/.coding-os/worktrees/
    <worktree_id>` on branch `cos/<worktree_id>`) holding the tree of `checkpoint`: the
    branch moved to the checkpoint's commit, then every path its snapshot records as different
    from that commit written or deleted. The main checkout is not touched; git runs with hooks
    off. Returns what it did, `worktree` the new worktree's path.

    Raises:
        RecipeError: the checkpoint is not of a git working tree; a symlinked directory on the
            way of a path.
        InvalidId, InvalidInput, Conflict, ForeignState: as `create_worktree`.
        NotFound: an unknown checkpoint. DamagedObject, RestoreError: its bytes are missing or
            damaged (checked before the worktree is made).
        GitError, StateIOError: the worktree cannot be made.
    """
    from coding_os.checkpoints import points
    from coding_os.checkpoints.manifest import (
        layer_list, manifest_paths, read_manifest, resolve)
    from coding_os.checkpoints.restore import fetch, plan_ops
    from coding_os.checkpoints.store import ObjectStore
    from coding_os.jobs.worktrees import create_worktree
    from coding_os.git.command import git
    from coding_os.git.repo import commit_files

    folder = tiers.checkpoints_dir
    record = points.load(folder, checkpoint)
    store = ObjectStore(folder)
    manifest = read_manifest(store, str(record["manifest"]))
    root = str(record["root"])
    layers = {str(layer["dir"]): layer for layer in layer_list(manifest)}
    top = layers.get("")
    if top is None or not top.get("commit"):
        raise RecipeError(f"checkpoint {checkpoint} is of {root}, which is no git working "
                          "tree: --rerun needs one")
    paths = set(manifest_paths(manifest))
    for prefix, layer in layers.items():
        if prefix and layer.get("commit"):  # a nested repository: git leaves it out
            paths.update(f"{prefix}/{p}" for p in commit_files(os.path.join(root, prefix),
                                                             str(layer["commit"])))
    entries = resolve(root, manifest, paths)
    ops = plan_ops([(path, entry, None, prefix) for path, (entry, prefix, _) in entries.items()
                    if entry is None or entry[0] != "s"])
    data = fetch(root, store, ops)  # every byte is at hand before anything is made
    made = create_worktree(project, worktree_id)
    worktree = made.path
    if made.base != top["commit"]:
        git(worktree, "reset", "-q", "--hard", str(top["commit"]))
    written = deleted = 0
    for number, op in enumerate(ops):
        full = _inside(worktree, str(op["path"]))
        if op["op"] == "delete":
            if os.path.lexists(full) and not os.path.isdir(full):
                os.unlink(full)
                deleted += 1
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.unlink(full)
        if op["kind"] == "l":
            os.symlink(data[number].decode("utf-8", "surrogateescape"), full)
        else:
            mode = int(str(op["mode"])) & 0o777 or 0o644
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "wb") as f:
                f.write(data[number])
            os.chmod(full, mode)
        written += 1
    return {"checkpoint": checkpoint, "commit": top["commit"], "root": root,
            "worktree": worktree, "branch": made.branch, "written": written,
            "deleted": deleted}


def _inside(worktree: str, path: str) -> str:
    """The full path of `path` in `worktree`, refusing a symlinked directory on the way
    (DESIGN.md §11: a write never leaves the tree)."""
    here = worktree
    parts = path.split("/")
    for part in parts[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here):
            raise RecipeError(f"{path}: {here} is a symlink; the tree was not restored whole")
    return os.path.join(worktree, *parts)


def session_seed(tiers: Tiers, session: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The seed_ref of a session run from a recipe and the `session_configured` event that
    records it (its `options.seed_ref`), or None for a session with no seed or no events log.

    Raises:
        InvalidId: `session` is not a session id.
    """
    from coding_os.errors import NotFound
    from coding_os.runtime import events, wire

    try:
        for event in events.replay(events.events_path(tiers, session), 0):
            msg = event.get("msg")
            if isinstance(msg, dict) and msg.get("type") == wire.SESSION_CONFIGURED:
                options = msg.get("options")
                seed = valid_seed_ref(options.get("seed_ref")) if isinstance(
                    options, dict) else None
                return None if seed is None else (seed, msg)
    except NotFound:
        return None
    return None


class RecipeRun:
    """A recipe ready to run: the session settings (with `seed_ref` in their options), the
    prompt text, and the seed_ref."""

    def __init__(self, settings: SessionSettings, text: str,
                 seed_ref: dict[str, object]) -> None:
        self.settings = settings
        self.text = text
        self.seed_ref = seed_ref


def prepare_run(recipe: str, params: Mapping[str, str], checkpoint: Callable[[str], str], *,
                agent: str | None = None, model: str | None = None,
                cwd: str | None = None) -> RecipeRun:
    """Load and render `recipe` with `params` (file parameters inside the checkout of `cwd`),
    then take a manual checkpoint of that checkout (`checkpoint(cwd)`: its id, the seed's
    `checkpoint`). `agent` and `model` win over the recipe's `settings`; the agent defaults to
    claude. Nothing is written when the recipe, a value or the agent is refused.

    Raises:
        RecipeError: as `load_recipe` and `render`. InvalidInput: a bad agent.
        GitError, StateIOError: the checkpoint cannot be taken.
    """
    from coding_os.git.repo import checkout_root
    from coding_os.runtime.agents import settings_for

    where = os.path.abspath(cwd or os.getcwd())
    loaded = load_recipe(recipe)
    top = checkout_root(where) or os.path.realpath(where)
    rendered = render(loaded, params, cwd=where, project=top)
    chosen = agent or loaded.agent or "claude"
    settings_for(chosen, where)  # a bad agent is refused before the checkpoint
    seed = seed_ref(loaded.path, rendered.params, checkpoint(where), sha256=loaded.sha256,
                    version=loaded.version)
    settings = settings_for(chosen, where, model=model or loaded.model, seed_ref=seed)
    return RecipeRun(settings, rendered.text, seed)


def foreground_run(prompt: str | None, checkpoint: Callable[[str], str], *,
                   recipe: str | None = None, params: Mapping[str, str] | None = None,
                   agent: str | None = None, model: str | None = None,
                   cwd: str | None = None) -> tuple[SessionSettings, str]:
    """What `cos run` runs: `prompt` with `agent` (default claude), or the prompt `recipe`
    renders with `params` (`prepare_run`: `checkpoint` takes the seed's checkpoint); the
    session settings and the prompt.

    Raises:
        InvalidInput: a bad agent; no prompt and no recipe, both, or params without a recipe.
        RecipeError, GitError, StateIOError: as `prepare_run`.
    """
    from coding_os.runtime.agents import settings_for

    if recipe is None:
        if params:
            raise InvalidInput("--param needs --recipe FILE")
        if not prompt:
            raise InvalidInput("give a PROMPT or --recipe FILE")
        return settings_for(agent or "claude", cwd, model=model), prompt
    if prompt:
        raise InvalidInput("--recipe gives the prompt: give no PROMPT with it")
    seeded = prepare_run(recipe, params or {}, checkpoint, agent=agent, model=model, cwd=cwd)
    return seeded.settings, seeded.text


def plan_rerun(tiers: Tiers, project: str, session: str, *, force: bool = False
               ) -> dict[str, Any]:
    """What `cos resume SESSION --rerun` does, checked and changing nothing: `mode` (rerun),
    the session, its seed, the recipe file as it is now, the agent settings it ran with, and
    the fresh worktree of `project` (worktrees.py: `<project>/.coding-os/worktrees/<id>` on
    branch `cos/<id>`) the rerun will run in.

    Raises:
        InvalidId: not a session id. InvalidInput: the session has no recipe seed, or its seed
            has no checkpoint. RecipeError: the recipe file is gone, is refused by
            `load_recipe`, or changed since the seed (unless `force`).
        InvalidInput: the project is in no git checkout.
    """
    import secrets

    from coding_os.jobs.worktrees import BRANCH_PREFIX, worktrees_dir
    from coding_os.state.identity import validate_session_id

    validate_session_id(session)
    found = session_seed(tiers, session)
    if found is None:
        raise InvalidInput(f"{session} was not started from a recipe: --replay and --rerun "
                           "are for recipe sessions")
    seed, configured = found
    if not seed.get("checkpoint"):
        raise InvalidInput(f"{session}: its seed names no checkpoint to rerun from")
    loaded = load_recipe(str(seed["path"]))
    changed = loaded.sha256 != seed["sha256"]
    if changed and not force:
        raise RecipeError(
            f"recipe {seed['path']} changed since {session} ran it (sha256 "
            f"{str(seed['sha256'])[:12]} then, {loaded.sha256[:12]} now): --force reruns the "
            "file as it is now")
    worktree_id = secrets.token_hex(6)
    worktree = os.path.join(worktrees_dir(project), worktree_id)
    options = configured.get("options")
    return {"mode": "rerun", "session": session, "seed": seed,
            "recipe": {"path": loaded.path, "sha256": loaded.sha256, "changed": changed},
            "settings": {"agent": configured.get("agent"), "model": configured.get("model"),
                         "permission_mode": configured.get("permission_mode"),
                         "options": options if isinstance(options, dict) else {}},
            "project": project, "worktree_id": worktree_id, "worktree": worktree,
            "branch": BRANCH_PREFIX + worktree_id, "checkpoint": seed["checkpoint"]}


def rerun_run(tiers: Tiers, plan: Mapping[str, Any]) -> RecipeRun:
    """Make a `plan_rerun` plan ready to run: the seed's checkpoint restored into the plan's
    fresh worktree, the recipe rendered there with the seed's params, with the session's agent
    settings (a new session whose seed_ref is the original's).

    Raises:
        RecipeError: the checkpoint is of no git tree, the recipe or a value is refused now.
        Conflict: the worktree exists. NotFound, DamagedObject, RestoreError, GitError: the
            tree cannot be restored.
    """
    from coding_os.runtime.core import SessionSettings  # noqa: F811 - at run time

    seed = dict(plan["seed"])
    loaded = load_recipe(str(seed["path"]))
    restored = restore_seed_tree(tiers, str(plan["checkpoint"]), str(plan["project"]),
                                 str(plan["worktree_id"]))
    worktree = str(restored["worktree"])
    rendered = render(loaded, seed["params"], cwd=worktree, project=worktree)
    ran = plan["settings"]
    options = {**ran["options"], "seed_ref": seed}
    settings = SessionSettings(agent=str(ran["agent"]), cwd=worktree, model=ran["model"],
                               permission_mode=ran["permission_mode"], options=options)
    return RecipeRun(settings, rendered.text, seed)
