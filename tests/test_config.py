"""The project's configuration (config.py): the parse of `.coding-os.yaml` and its cache in
the state dir give the same config."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_config_cache_gives_the_parsed_config(tmp_path: Path) -> None:
    from coding_os.config import load_config, load_config_cached

    project = tmp_path / "p"
    state = project / ".coding-os"
    state.mkdir(parents=True)
    (project / ".coding-os.yaml").write_text("state:\n  horizons:\n    1: 8h\n")
    parsed = load_config(str(project))
    assert load_config_cached(str(project), str(state)) == parsed  # the parse, cache written
    assert load_config_cached(str(project), str(state)) == parsed  # from the cache


# -- bounded input (DESIGN.md §11): a repository's .coding-os.yaml is data from elsewhere --------


def alias_bomb() -> str:
    """A few hundred bytes of YAML whose aliases stand for 9**9 strings ("billion laughs")."""
    names = "abcdefghi"
    lines = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    for up, down in zip(names[1:], names):
        lines.append(f"{up}: &{up} [{','.join(['*' + down] * 9)}]")
    return "\n".join(lines) + "\n"


def test_a_config_with_aliases_is_refused_before_anything_expands_them(tmp_path: Path) -> None:
    import pytest

    from coding_os.config import load_config, load_config_cached
    from coding_os.errors import InvalidInput

    (tmp_path / ".coding-os.yaml").write_text(alias_bomb(), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"line 2\).*alias"):
        load_config(str(tmp_path))
    (tmp_path / ".coding-os").mkdir()
    with pytest.raises(InvalidInput, match="alias"):
        load_config_cached(str(tmp_path), str(tmp_path / ".coding-os"))
    # One alias is refused as well: a configuration never needs one.
    (tmp_path / ".coding-os.yaml").write_text("a: &x 1\nb: *x\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="alias"):
        load_config(str(tmp_path))


@pytest.mark.slow
def test_a_config_nested_too_deeply_or_too_large_is_one_clear_error(tmp_path: Path) -> None:
    import pytest

    from coding_os.config import MAX_CONFIG_BYTES, load_config
    from coding_os.errors import InvalidInput

    config = tmp_path / ".coding-os.yaml"
    config.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="nested"):
        load_config(str(tmp_path))
    config.write_text("a: [" + "x," * 20_000 + "x]\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="values"):
        load_config(str(tmp_path))
    config.write_text("# " + "x" * MAX_CONFIG_BYTES + "\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="larger than"):
        load_config(str(tmp_path))


def test_a_config_that_is_not_a_regular_file_is_refused_unread(tmp_path: Path) -> None:
    import os

    import pytest

    from coding_os.config import load_config
    from coding_os.errors import InvalidInput

    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text("gates:\n  block_secrets: true\n", encoding="utf-8")
    project = tmp_path / "p"
    project.mkdir()
    for target in ("/dev/zero", str(elsewhere)):
        os.symlink(target, project / ".coding-os.yaml")
        with pytest.raises(InvalidInput, match="not a regular file"):
            load_config(str(project))
        os.unlink(project / ".coding-os.yaml")
    os.mkfifo(project / ".coding-os.yaml")  # nobody writes it: reading it would wait forever
    with pytest.raises(InvalidInput, match="not a regular file"):
        load_config(str(project))


def test_an_ordinary_config_with_an_unused_anchor_still_loads(tmp_path: Path) -> None:
    from coding_os.config import load_config

    (tmp_path / ".coding-os.yaml").write_text(
        "checkpoints: &cp\n  auto: false\ngates:\n  protect_paths: ['.env', 'secrets/**']\n",
        encoding="utf-8")
    assert load_config(str(tmp_path)) == {"checkpoints": {"auto": False},
                                          "gates": {"protect_paths": [".env", "secrets/**"]}}
