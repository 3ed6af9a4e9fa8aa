"""Secrets of known shapes are redacted (redact.py): every shape of a corpus of real-looking
keys, wherever it stands in a text, and ordinary text is left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_os import redact
from coding_os.redact import first_secret

# Made-up keys of each shape, built at run time so this file holds none verbatim: (shape, the
# text as it is written, the part that must never survive).
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
PEM_BODY = "MIIEowIBAAKCAQEAv3Xq" + "9bT0aZlJk2nWq8mG4c"
CORPUS: list[tuple[str, str, str]] = [
    ("private_key", "-----BEGIN " + "RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA "
     "PRIVATE KEY-----", PEM_BODY),
    ("private_key", "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "\n-----END "
     "OPENSSH PRIVATE KEY-----", PEM_BODY),
    ("private_key", "-----BEGIN " + "PRIVATE KEY-----\n" + PEM_BODY, PEM_BODY),  # cut short
    ("aws_access_key_id", "AKIA" + "Q3EXAMPLE7KEY2ID", "Q3EXAMPLE7KEY2ID"),
    ("aws_access_key_id", "ASIA" + "Y7N2EXAMPLE3QWER", "Y7N2EXAMPLE3QWER"),
    ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY=" + AWS_SECRET, AWS_SECRET),
    ("aws_secret_access_key", "aws_secret_access_key = " + AWS_SECRET, AWS_SECRET),
    ("aws_secret_access_key", '"SecretAccessKey": "' + AWS_SECRET + '"', AWS_SECRET),
    ("aws_secret_access_key", "aws configure set aws_secret_access_key " + AWS_SECRET,
     AWS_SECRET),
    ("github_token", "ghp" + "_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "a1B2c3D4e5F6g7H8i9J0"),
    ("github_token", "gho" + "_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa9", "Zy9Xw8Vu7Ts6Rq5Po4Nm"),
    ("github_token", "ghs" + "_0123456789abcdefABCDEF0123456789abcd", "0123456789abcdefABCD"),
    ("github_fine_grained_token", "github" + "_pat_11ABCDEFG0" + "123456789_abcdefghijklmnopq",
     "123456789_abcdefghij"),
    ("gitlab_token", "glpat" + "-xY7zQ2wE9rT4uI1oP6aS", "xY7zQ2wE9rT4uI1oP6aS"),
    ("slack_token", "xox" + "b-123456789012-abcdefABCDEF", "123456789012-abcdef"),
    ("slack_token", "xox" + "p-2222222222-3333333333-AbCdEf", "2222222222-3333333333"),
    ("slack_webhook", "https://hooks.slack.com/services/" + "T0ABCDEF/B0GHIJKL/xYz123AbC456dEf",
     "T0ABCDEF/B0GHIJKL/xYz123AbC456dEf"),
    ("anthropic_api_key", "sk-" + "ant-api03-Qw3rTy7uIoP1aSdFgHjKl9zXcVbNm2", "Qw3rTy7uIoP1aSdF"),
    ("openai_api_key", "sk-" + "proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz1bCd4fGh7j", "Ab3dEf6hIj9lMn2p"),
    ("openai_api_key", "sk-" + "T3BlbkFJ9aB8cD7eF6gH5iJ4kL3mN2oP1qR0s", "T3BlbkFJ9aB8cD7e"),
    ("google_api_key", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "SyA1b2C3d4E5f6G7h8I9"),
    ("stripe_live_key", "sk" + "_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zd"),
    ("stripe_live_key", "rk" + "_live_51HqLyjWDarjtT1zdp7dcXy", "51HqLyjWDarjtT1zdp7d"),
    ("stripe_test_key", "sk" + "_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zd"),
    ("npm_token", "npm" + "_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "a1B2c3D4e5F6g7H8i9J0"),
    ("pypi_token", "pypi-" + "AgEIcHlwaS5vcmc" + "CJDk2YzBlYjA0LTExMWEtNDVhNi05MWI4LWJj"
     "ZmQ5ZTM1YWE4OQ", "CJDk2YzBlYjA0LTExMWEt"),
    ("huggingface_token", "hf" + "_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "AbCdEfGhIjKlMnOpQrSt"),
    ("sendgrid_api_key", "SG." + "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc"
     "-1s5cr", "TwL2iGABf9DHoTf-09kq"),
    ("jwt", "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     "dozjgNryP4J3jVmNHl0w5N"),
    ("authorization", "Authorization: Bearer " + "qW3eR5tY7uI9oP1aS2dF", "qW3eR5tY7uI9oP1aS2dF"),
    ("authorization", "authorization: basic " + "dXNlcjpodW50ZXIyMjI=", "dXNlcjpodW50ZXIyMjI"),
    ("authorization", "Bearer " + "9f8e7d6c5b4a39281706f5e4", "9f8e7d6c5b4a39281706f5e4"),
    ("url_password", "postgres://app:" + "Pa55w0rdXyz" + "@db.internal:5432/app", "Pa55w0rdXyz"),
    ("secret_assignment", "export OPENAI_API_KEY=" + "q1w2e3r4t5y6", "q1w2e3r4t5y6"),
    ("secret_assignment", "DEPLOY_TOKEN=" + "Zx8Cv7Bn6Mm5", "Zx8Cv7Bn6Mm5"),
    ("secret_assignment", "APP_SECRET='" + "an old secret 42'", "an old secret 42"),
    ("secret_assignment", "PASSWORD=" + "hunter2hunter2", "hunter2hunter2"),
    ("secret_assignment", "DB_PASSWORD: " + "s3cr3tValue", "s3cr3tValue"),
    ("secret_assignment", 'api_key = "' + "abcd1234efgh" + '"', "abcd1234efgh"),
    ("secret_assignment", '{"password": "' + "Tr0ub4dor&3" + '"}', "Tr0ub4dor&3"),
    ("secret_assignment", "mysql --password " + "Qq9Ww8Ee7" + " -u root", "Qq9Ww8Ee7"),
]
BLOCKING_CORPUS = [item for item in CORPUS if item[0] in redact.BLOCKING]

# Ordinary prose about keys and tokens: words, some of them the shapes' trigger words.
WORDS = ("key", "keys", "token", "tokens", "sk", "sk-learn", "password", "passwords", "secret",
         "secrets", "api", "aws", "bearer", "basic", "auth", "authorization", "private", "the",
         "is", "a", "rotate", "file", "value", "export", "git", "commit", "monkey", "passport",
         "keyboard", "eyes", "ghost", "slack", "hooks", "live", "test", "npm", "hf", "AKIA",
         "ASIA", "Bearer", "BEGIN", "KEY", "TOKEN", "PASSWORD", "SECRET", "gh", "pat", "xo")
prose = st.lists(st.one_of(st.sampled_from(WORDS), st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True)),
                 max_size=40).flatmap(
    lambda words: st.lists(st.sampled_from((" ", ", ", ". ", "\n", " - ", "? ", "! ")),
                           min_size=len(words), max_size=len(words)).map(
        lambda seps: "".join(w + s for w, s in zip(words, seps))))
SEPARATORS = (" ", "\n", "\t", "'", '"', "(", ")", ",", ";", "`", "<", ">")


@pytest.mark.parametrize("shape,text,core", CORPUS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CORPUS)])
def test_every_shape_of_the_corpus_is_redacted_with_its_marker(shape: str, text: str,
                                                               core: str) -> None:
    out = redact.redact(f"run this: {text} now")
    assert core not in out
    assert f"[REDACTED:{shape}]" in out
    assert out.startswith("run this: ") and out.rstrip().endswith("now") or shape == "private_key"
    assert redact.redact(out) == out


def test_an_assignment_keeps_its_name_and_loses_its_value() -> None:
    out = redact.redact("export AWS_SECRET_ACCESS_KEY=" + AWS_SECRET + " && aws s3 ls")
    assert out == "export AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key] && aws s3 ls"
    assert redact.redact("curl -H 'Authorization: Bearer abcdefgh12345678' x") == \
        "curl -H 'Authorization: Bearer [REDACTED:authorization]' x"


@pytest.mark.parametrize("text", [
    "curl -H 'Authorization: Bearer $TOKEN' https://example.com",
    "export GITHUB_TOKEN=$(gh auth token)", "API_KEY=${API_KEY:-}",
    "if password == 'x':", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----",
    "git log 0123456789abcdef0123456789abcdef01234567", "ssh://git@github.com:22/org/repo.git",
    "the secret: always test first", "sk-learn-is-not-a-key-but-a-very-long-hyphenated-name",
    "task-current desk-lamp AKIAshort ghp_short", "max_tokens: 100",
])
def test_references_and_lookalikes_are_left_alone(text: str) -> None:
    assert redact.redact(text) == text
    assert first_secret([text], blocking_only=False) is None


@settings(max_examples=300)
@given(prose)
def test_ordinary_prose_about_keys_and_tokens_is_untouched(text: str) -> None:
    assert redact.redact(text) is text


@settings(max_examples=300)
@given(st.text())
def test_redaction_is_idempotent_and_leaves_no_secret_behind(text: str) -> None:
    once = redact.redact(text)
    assert redact.redact(once) == once
    assert first_secret([once], blocking_only=False) is None


@settings(max_examples=300)
@given(st.sampled_from(CORPUS), st.text(max_size=200), st.text(max_size=200),
       st.sampled_from(SEPARATORS), st.sampled_from(SEPARATORS))
def test_a_secret_anywhere_in_a_text_never_survives_redaction(
        item: tuple[str, str, str], before: str, after: str, left: str, right: str) -> None:
    _, secret, core = item
    out = redact.redact(before + left + secret + right + after)
    assert core not in out


TRIGGERS = sorted({trigger for _, triggers, _, _ in redact.SHAPES for trigger in triggers})


@settings(max_examples=300)
@given(st.lists(st.sampled_from(TRIGGERS) | st.text(alphabet="AKISghp_sk-:/.?xyY", max_size=8),
                max_size=6))
def test_the_trigger_search_finds_a_text_with_any_trigger_and_no_other(pieces: list[str]) -> None:
    text = "".join(piece.lstrip("?") for piece in pieces)
    exact, blind = redact._triggers()
    found = exact.search(text) is not None or blind.search(text.lower()) is not None
    assert found == any(trigger[1:] in text.lower() if trigger[0] == "?" else trigger in text
                        for trigger in TRIGGERS)


def test_values_are_redacted_through_mappings_and_lists_and_kept_when_clean() -> None:
    token = CORPUS[9][1]
    record = {"text": f"use {token}", "data": {"paths": ["a", token], "ok": True, "n": 3}}
    out = redact.redact_value(record)
    assert token not in repr(out) and "[REDACTED:github_token]" in repr(out)
    assert out["data"]["ok"] is True and out["data"]["n"] == 3  # type: ignore[index]
    clean = {"text": "nothing here", "data": {"paths": ["a"]}}
    assert redact.redact_value(clean) is clean


def test_the_gate_shapes_are_those_recognised_by_their_value() -> None:
    for shape, text, _ in BLOCKING_CORPUS:
        assert first_secret(["x", f"value = {text}"]) == shape
    assert first_secret(["PASSWORD=hunter2hunter2"]) is None
    assert first_secret(["PASSWORD=hunter2hunter2"], blocking_only=False) == "secret_assignment"


def test_redact_false_in_the_configuration_turns_it_off(repo: Path) -> None:
    state_dir = repo / ".coding-os"
    state_dir.mkdir()
    assert redact.configured(str(state_dir))
    (repo / ".coding-os.yaml").write_text("redact: false\n", encoding="utf-8")
    assert not redact.configured(str(state_dir))
    (repo / ".coding-os.yaml").write_text("redact: [\n", encoding="utf-8")
    assert redact.configured(str(state_dir))  # unreadable: redact


def test_a_text_without_a_trigger_imports_no_regular_expressions() -> None:
    import subprocess
    import sys

    probe = (f"import sys; sys.path.insert(0, {str(Path(redact.__file__).parents[1])!r}); "
             "from coding_os.redact import redact; "
             "redact('ls -la && make test'); print('re' in sys.modules)")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True,
                          text=True)
    assert proc.stdout.strip() == "False", proc.stderr
