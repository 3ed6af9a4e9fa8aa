"""Gemini CLI's project registry as cos writes it (coding_os.adapters.gemini.projects): the slug
Gemini CLI 0.61 would take, registered as it registers one, under its lock."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from coding_os.adapters.gemini.projects import find_slug, register, slugify
from coding_os.adapters.gemini.sessions import read_projects
from coding_os.errors import InvalidInput


def test_a_slug_is_the_folder_name_as_gemini_cli_makes_it() -> None:
    assert slugify("My Project_2") == "my-project-2"
    assert slugify("--Ünïcode  dir--") == "n-code-dir"
    assert slugify("日本") == "project"


def test_a_new_project_claims_its_slug_once_and_the_importer_reads_it_back(
        tmp_path: Path) -> None:
    gemini = tmp_path / ".gemini"
    project = "/srv/bob/work/My Proj"
    assert (find_slug(str(gemini), project).name, gemini.exists()) == ("my-proj", False)
    slug = register(str(gemini), project)
    assert (slug.name, slug.registered) == ("my-proj", False)
    registry = gemini / "projects.json"
    assert json.loads(registry.read_text(encoding="utf-8")) == {"projects": {project: "my-proj"}}
    for base in ("tmp", "history"):
        assert (gemini / base / "my-proj" / ".project_root").read_text(encoding="utf-8") == project
    before = registry.read_bytes()
    again = register(str(gemini), project)
    assert (again.name, again.registered) == ("my-proj", True)
    assert registry.read_bytes() == before
    assert not (gemini / "projects.json.lock").exists()
    assert read_projects(str(gemini)) == {"my-proj": project}


def test_a_slug_another_project_holds_is_skipped_and_the_others_entries_are_kept(
        tmp_path: Path) -> None:
    gemini = tmp_path / ".gemini"
    (gemini / "tmp" / "proj-1").mkdir(parents=True)
    (gemini / "tmp" / "proj-1" / ".project_root").write_text("/b/proj", encoding="utf-8")
    gemini.joinpath("projects.json").write_text(
        json.dumps({"projects": {"/a/proj": "proj"}}), encoding="utf-8")
    assert register(str(gemini), "/c/proj").name == "proj-2"
    assert json.loads((gemini / "projects.json").read_text(encoding="utf-8")) == {
        "projects": {"/a/proj": "proj", "/c/proj": "proj-2"}}
    # A folder a project owns (Gemini CLI made it, the registry lost it) is taken back.
    assert register(str(gemini), "/b/proj").name == "proj-1"


def test_a_registry_that_is_not_one_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    gemini = tmp_path / ".gemini"
    gemini.mkdir()
    (gemini / "projects.json").write_text('{"projects": {"/a": "Not A Slug"}}', encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a Gemini CLI project registry"):
        register(str(gemini), "/a")
    assert (gemini / "projects.json").read_text(encoding="utf-8") == \
        '{"projects": {"/a": "Not A Slug"}}'
    assert sorted(p.name for p in gemini.iterdir()) == ["projects.json"]


def test_a_stale_lock_gemini_cli_left_behind_is_taken_over(tmp_path: Path) -> None:
    gemini = tmp_path / ".gemini"
    lock = gemini / "projects.json.lock"
    lock.mkdir(parents=True)
    old = time.time() - 60
    os.utime(lock, (old, old))
    assert register(str(gemini), "/a/proj").name == "proj"
    assert not lock.exists()
