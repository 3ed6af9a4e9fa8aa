"""The project's configuration (config.py): the parse of `.coding-os.yaml` and its cache in
the state dir give the same config."""

from __future__ import annotations

from pathlib import Path


def test_the_config_cache_gives_the_parsed_config(tmp_path: Path) -> None:
    from coding_os.config import load_config, load_config_cached

    project = tmp_path / "p"
    state = project / ".coding-os"
    state.mkdir(parents=True)
    (project / ".coding-os.yaml").write_text("state:\n  horizons:\n    1: 8h\n")
    parsed = load_config(str(project))
    assert load_config_cached(str(project), str(state)) == parsed  # the parse, cache written
    assert load_config_cached(str(project), str(state)) == parsed  # from the cache
